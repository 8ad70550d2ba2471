"""Op-database entries for special-function pointwise ops (OpEntry, see __init__.py).

Where an op's domain is narrower than the sample values, the entry's call transforms the
input identically in both libraries (erfinv on x / 10, mvlgamma on |x| + 2).
"""
from __future__ import annotations

from . import OpEntry, _unary


def _module(tensor):
    """The library of a tensor (torch.special.xlog1py has no in-place form: test out=)."""
    import importlib
    return importlib.import_module(type(tensor).__module__.split(".")[0])


def _special(name, **kw):
    """A torch.special function with no Tensor method (no in-place form)."""
    return OpEntry(name=f"special_{name}", call=lambda m, a: getattr(m.special, name)(a),
                   arity=1, **kw)


POINTWISE_SPECIAL = [
    _unary("erf"), _unary("erfc"), _unary("lgamma"), _unary("digamma"), _unary("i0"),
    _unary("sinc"),
    OpEntry(name="erfinv", call=lambda m, a: m.erfinv(a / 10), arity=1,
            inplace=lambda a: a.div_(10).erfinv_()),
    OpEntry(name="polygamma", call=lambda m, a: m.polygamma(1, a), arity=1,
            inplace=lambda a: a.polygamma_(1)),
    OpEntry(name="polygamma", call=lambda m, a: a.polygamma(3), arity=1,
            inplace=lambda a: a.polygamma_(3)),
    OpEntry(name="polygamma", call=lambda m, a: m.polygamma(0, a), arity=1),
    OpEntry(name="mvlgamma", call=lambda m, a: m.mvlgamma(a.abs() + 2, p=3), arity=1,
            inplace=lambda a: a.abs_().add_(2).mvlgamma_(p=3)),
    _special("i0e"), _special("i1"), _special("i1e"), _special("erfcx"), _special("entr"),
    _special("log_ndtr"), _special("ndtr"),
    OpEntry(name="special_ndtri", call=lambda m, a: m.special.ndtri(m.special.ndtr(a / 4)),
            arity=1),
    OpEntry(name="special_xlog1py", call=lambda m, a, b, **k: m.special.xlog1py(a, b, **k),
            inplace=lambda a, b, **k: _module(a).special.xlog1py(
                a, b, out=_module(a).empty(0, dtype=a.dtype), **k),
            scalars=(3, -2.5, True)),
]
