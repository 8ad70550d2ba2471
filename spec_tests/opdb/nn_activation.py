"""Op-database entries: neural-network ops (activations, deterministic dropout, distances),
called through their torch.nn.functional spellings (see core.py for the entry format).

Random forms (rrelu in training, dropout with 0 < p < 1 in training, gumbel_softmax) are
compared seed for seed in test_nn_activation.py instead.
"""
from __future__ import annotations

from . import COMPLEX, FLOATING, INTEGRAL
from .core import DTypeArg, OpInfo, Sample, tensor

FLOATS = FLOATING
REAL = INTEGRAL + FLOATING


def _f(name):
    return lambda m, *a, **k: getattr(m.nn.functional, name)(*a, **k)


def _module_of(x):
    import reftorch
    import torch
    return reftorch if isinstance(x, reftorch.Tensor) else torch


def _inplace(name):
    """The `inplace=True` form: writes into x (its module found from the tensor's type)."""
    def call(x, *a, **k):
        return getattr(_module_of(x).nn.functional, name)(x, *a, inplace=True, **k)
    return call


def _unary(*variants, errors=()):
    """Shapes (0-dim, empty, non-contiguous) for op(x, **kw), cycling through `variants`."""
    variants = variants or ({},)

    def samples(dtype, rng):
        plan = [((3, 4), "contiguous"), ((), "contiguous"), ((0,), "contiguous"),
                ((2, 0, 3), "contiguous"), ((3, 4), "transposed"), ((2, 5), "strided"),
                ((2, 3, 4), "contiguous")]
        for i, (shape, layout) in enumerate(plan):
            kw = variants[i % len(variants)]
            yield Sample((tensor(shape, dtype, rng, layout),), dict(kw), f"{shape} {layout} {kw}")
        for kw in variants[len(plan):]:
            yield Sample((tensor((4, 3), dtype, rng),), dict(kw), f"extra {kw}")
        for args, kw, label in errors:
            yield Sample((tensor((3, 4), dtype, rng),) + args, dict(kw), label)
    return samples


# ops whose functional form takes inplace=True (checked through OpInfo.inplace_call)
WITH_INPLACE = {"relu", "relu6", "hardtanh", "elu", "selu", "celu", "leaky_relu", "hardsigmoid",
                "hardswish", "silu", "mish"}


def _entry(name, *variants, dtypes=FLOATS, errors=(), call=None, **kw):
    inplace_call = _inplace(name) if name in WITH_INPLACE else None
    return OpInfo(name=name, call=call or _f(name), samples=_unary(*variants, errors=errors),
                  dtypes=dtypes, inplace_call=inplace_call, **kw)


def _along_dim(dtype, rng):
    """softmax / log_softmax / softmin: dims (negative too), dtype=, 0-dim, empty, errors."""
    yield Sample((tensor((3, 4), dtype, rng), 1), {}, "dim=1")
    yield Sample((tensor((3, 4), dtype, rng, "transposed"), 0), {}, "transposed dim=0")
    yield Sample((tensor((2, 3, 4), dtype, rng, "strided"), -1), {}, "strided dim=-1")
    yield Sample((tensor((2, 3, 4), dtype, rng), -2), {"dtype": DTypeArg("float64")},
                 "dtype=float64")
    yield Sample((tensor((), dtype, rng), 0), {}, "0-dim")
    yield Sample((tensor((0, 3), dtype, rng), 0), {}, "empty dim")
    yield Sample((tensor((2, 0), dtype, rng), 0), {}, "empty other")
    yield Sample((tensor((3, 4), dtype, rng), 2), {}, "dim out of range")


def _glu(dtype, rng):
    yield Sample((tensor((3, 4), dtype, rng),), {}, "default dim")
    yield Sample((tensor((4, 3), dtype, rng, "transposed"), 0), {}, "transposed dim=0")
    yield Sample((tensor((2, 6, 2), dtype, rng, "strided"), 1), {}, "strided dim=1")
    yield Sample((tensor((0, 2), dtype, rng),), {}, "empty")
    yield Sample((tensor((3, 3), dtype, rng), 1), {}, "odd size")
    yield Sample((tensor((), dtype, rng),), {}, "0-dim")
    yield Sample((tensor((2, 4), dtype, rng), 2), {}, "dim out of range")


def _prelu(dtype, rng):
    yield Sample((tensor((2, 3, 4), dtype, rng), tensor((3,), dtype, rng)), {}, "per channel")
    yield Sample((tensor((3, 4), dtype, rng, "transposed"), tensor((1,), dtype, rng)), {},
                 "one weight")
    yield Sample((tensor((2, 3), dtype, rng), tensor((), dtype, rng)), {}, "0-dim weight")
    yield Sample((tensor((5,), dtype, rng), tensor((1,), dtype, rng)), {}, "1-d input")
    yield Sample((tensor((), dtype, rng), tensor((1,), dtype, rng)), {}, "0-dim input")
    yield Sample((tensor((2, 3, 2, 2), dtype, rng, "strided"), tensor((3,), dtype, rng)), {},
                 "4-d strided")
    yield Sample((tensor((2, 3), dtype, rng), tensor((2,), dtype, rng)), {}, "count mismatch")
    yield Sample((tensor((2, 3), dtype, rng), tensor((3, 1), dtype, rng)), {}, "2-d weight")


def _dropout(dtype, rng):
    """Deterministic cases only: evaluation mode, p = 0 and p = 1, and bad p."""
    yield Sample((tensor((3, 4), dtype, rng),), {"training": False}, "eval")
    yield Sample((tensor((3, 4), dtype, rng, "transposed"),), {"p": 0.0}, "p=0")
    yield Sample((tensor((2, 3), dtype, rng, "strided"),), {"p": 1.0}, "p=1")
    yield Sample((tensor((), dtype, rng),), {"p": 1.0}, "0-dim p=1")
    yield Sample((tensor((0, 3), dtype, rng),), {"p": 0.5}, "empty")
    yield Sample((tensor((3, 4), dtype, rng),), {"p": 1.5}, "p too large")
    yield Sample((tensor((3, 4), dtype, rng),), {"p": -0.1}, "p negative")


def _feature_dropout(dtype, rng):
    yield Sample((tensor((2, 3, 4), dtype, rng),), {"training": False}, "eval")
    yield Sample((tensor((2, 3, 4), dtype, rng),), {"p": 1.0, "training": True}, "p=1")
    yield Sample((tensor((2, 3, 2), dtype, rng, "strided"),), {"p": 0.0, "training": True},
                 "p=0")
    yield Sample((tensor((2, 3), dtype, rng),), {"p": 2.0}, "bad p")


def _cosine(dtype, rng):
    yield Sample((tensor((3, 4), dtype, rng), tensor((3, 4), dtype, rng)), {}, "dim=1")
    yield Sample((tensor((3, 4), dtype, rng, "transposed"), tensor((3, 4), dtype, rng)),
                 {"dim": 0}, "dim=0 transposed")
    yield Sample((tensor((2, 3, 4), dtype, rng), tensor((4,), dtype, rng)), {"dim": -1},
                 "broadcast dim=-1")
    yield Sample((tensor((2, 5), dtype, rng, "strided"), tensor((2, 5), dtype, rng)),
                 {"eps": 0.5}, "eps")
    yield Sample((tensor((), dtype, rng), tensor((), dtype, rng)), {"dim": 0}, "0-dim")
    yield Sample((tensor((3, 4), dtype, rng), tensor((3, 5), dtype, rng)), {}, "mismatch")
    yield Sample((tensor((3, 4), dtype, rng), tensor((3, 4), dtype, rng)), {"dim": 2},
                 "dim out of range")


def _pairwise(dtype, rng):
    yield Sample((tensor((3, 4), dtype, rng), tensor((3, 4), dtype, rng)), {}, "p=2")
    yield Sample((tensor((3, 4), dtype, rng, "transposed"), tensor((4,), dtype, rng)),
                 {"p": 1.0, "keepdim": True}, "p=1 broadcast keepdim")
    yield Sample((tensor((2, 5), dtype, rng, "strided"), tensor((2, 5), dtype, rng)),
                 {"p": 3.0, "eps": 0.1}, "p=3 eps")
    yield Sample((tensor((4,), dtype, rng), tensor((4,), dtype, rng)),
                 {"p": float("inf")}, "1-d p=inf")
    yield Sample((tensor((), dtype, rng), tensor((), dtype, rng)), {}, "0-dim")
    yield Sample((tensor((3, 4), dtype, rng), tensor((2, 4), dtype, rng)), {}, "mismatch")


def _pdist(dtype, rng):
    yield Sample((tensor((4, 3), dtype, rng),), {}, "p=2")
    yield Sample((tensor((3, 5), dtype, rng, "transposed"),), {"p": 1}, "p=1 transposed")
    yield Sample((tensor((4, 3), dtype, rng, "strided"),), {"p": 3.5}, "p=3.5")
    yield Sample((tensor((3, 2), dtype, rng),), {"p": float("inf")}, "p=inf")
    yield Sample((tensor((3, 2), dtype, rng),), {"p": 0}, "p=0")
    yield Sample((tensor((3, 2), dtype, rng),), {"p": 0.5}, "p=0.5")
    yield Sample((tensor((1, 3), dtype, rng),), {}, "one row")
    # torch's pdist backward crashes (segfault) on an input without rows: values only
    yield Sample((tensor((0, 3), dtype, rng, requires_grad=False),), {}, "no rows")
    yield Sample((tensor((2, 3, 4), dtype, rng),), {}, "3-d")
    yield Sample((tensor((3, 2), dtype, rng),), {"p": -1}, "negative p")


def _aten(name):
    """The backward op `name`: torch.ops.aten.NAME in torch, the function of that name in
    reftorch._ops.nn_activation (reftorch has no torch.ops namespace)."""
    def call(m, *args, **kwargs):
        import reftorch
        if m is reftorch:
            from reftorch._ops import nn_activation
            return getattr(nn_activation, name)(*args, **kwargs)
        return getattr(m.ops.aten, name)(*args, **kwargs)
    return call


def _backward_pairs(*variants, output_domain=None, errors=(), broadcast=True):
    """(grad_output, self or output) pairs: shapes (0-dim, empty, broadcast), layouts,
    and keyword variants cycled over them. `output_domain` bounds the second operand's values
    (a tanh output lies in (-1, 1), a sigmoid output in (0, 1))."""
    variants = variants or ({},)

    def samples(dtype, rng):
        plan = [((3, 4), (3, 4), "contiguous"), ((), (), "contiguous"),
                ((0,), (0,), "contiguous"), ((3, 4), (3, 4), "transposed"),
                ((2, 5), (2, 5), "strided"), ((2, 3, 4), (2, 3, 4), "contiguous")]
        if broadcast:
            plan += [((2, 3, 4), (4,), "contiguous"), ((4,), (2, 3, 4), "contiguous")]
        for i, (g_shape, x_shape, layout) in enumerate(plan):
            kw = variants[i % len(variants)]
            x_kw = {"domain": output_domain} if output_domain else {}
            yield Sample((tensor(g_shape, dtype, rng, layout),
                          tensor(x_shape, dtype, rng, layout, **x_kw)), dict(kw),
                         f"{g_shape} {x_shape} {layout} {kw}")
        for args, kw, label in errors:
            yield Sample((tensor((3, 4), dtype, rng), tensor((3, 4), dtype, rng)) + args,
                         dict(kw), label)
    return samples


BACKWARD_OPS = [
    OpInfo("tanh_backward", _aten("tanh_backward"), _backward_pairs(output_domain=(-0.99, 0.99)),
           dtypes=FLOATS + COMPLEX, grad_dtypes=("float64", "complex128")),
    OpInfo("sigmoid_backward", _aten("sigmoid_backward"),
           _backward_pairs(output_domain=(0.01, 0.99)), dtypes=FLOATS + COMPLEX,
           grad_dtypes=("float64", "complex128")),
    OpInfo("gelu_backward", _aten("gelu_backward"),
           _backward_pairs({}, {"approximate": "tanh"}, {"approximate": "none"},
                           errors=[((), {"approximate": "x"}, "bad approximate")],
                           broadcast=False),  # torch's oneDNN path fails on broadcasting
           dtypes=FLOATS),
    OpInfo("threshold_backward", _aten("threshold_backward"),
           _backward_pairs({"threshold": 0}, {"threshold": 0.5}, {"threshold": -1}),
           dtypes=REAL),
    # PyTorch raises for a derivative of silu_backward itself: values only
    OpInfo("silu_backward", _aten("silu_backward"), _backward_pairs(), dtypes=FLOATS + COMPLEX,
           differentiable=False),
]


OPS = [
    _entry("relu", dtypes=REAL),
    _entry("relu6", dtypes=REAL),
    _entry("hardtanh", {}, {"min_val": -2.0, "max_val": 0.5}, {"min_val": 0, "max_val": 3},
           dtypes=REAL, errors=[((), {"min_val": 2.0, "max_val": 1.0}, "min > max")]),
    _entry("elu", {}, {"alpha": 0.5}, {"alpha": 2.0}),
    _entry("selu"),
    _entry("celu", {}, {"alpha": 0.5}, {"alpha": 2.0}),
    _entry("leaky_relu", {}, {"negative_slope": 0.2}, {"negative_slope": -0.5}),
    _entry("rrelu", {}, {"lower": 0.2, "upper": 0.4}, call=_f("rrelu")),
    _entry("threshold", {"threshold": 0.5, "value": -2.0}, {"threshold": -1, "value": 3},
           call=lambda m, x, threshold=0.5, value=-2.0: m.nn.functional.threshold(
               x, threshold, value), dtypes=REAL),
    _entry("hardshrink", {}, {"lambd": 1.5}),
    _entry("softshrink", {}, {"lambd": 1.5}, errors=[((), {"lambd": -1.0}, "negative lambd")]),
    _entry("hardsigmoid"),
    _entry("hardswish"),
    _entry("logsigmoid"),
    _entry("gelu", {}, {"approximate": "tanh"}, errors=[((), {"approximate": "x"}, "bad")]),
    _entry("silu"),
    _entry("mish"),
    _entry("softplus", {}, {"beta": 2.0}, {"beta": 0.5, "threshold": 1.0}),
    _entry("softsign"),
    _entry("tanhshrink"),
    OpInfo("softmax", _f("softmax"), _along_dim, dtypes=FLOATS),
    OpInfo("log_softmax", _f("log_softmax"), _along_dim, dtypes=FLOATS),
    OpInfo("softmin", _f("softmin"), _along_dim, dtypes=FLOATS),
    OpInfo("torch.softmax", lambda m, *a, **k: m.softmax(*a, **k), _along_dim, dtypes=FLOATS),
    OpInfo("Tensor.log_softmax", lambda m, x, *a, **k: x.log_softmax(*a, **k), _along_dim,
           dtypes=FLOATS),
    OpInfo("glu", _f("glu"), _glu, dtypes=FLOATS),
    OpInfo("prelu", _f("prelu"), _prelu, dtypes=FLOATS),
    OpInfo("dropout", _f("dropout"), _dropout, dtypes=FLOATS),
    OpInfo("alpha_dropout", _f("alpha_dropout"), _dropout, dtypes=FLOATS),
    OpInfo("dropout2d", _f("dropout2d"), _feature_dropout, dtypes=FLOATS),
    OpInfo("feature_alpha_dropout", _f("feature_alpha_dropout"), _feature_dropout,
           dtypes=FLOATS),
    OpInfo("cosine_similarity", _f("cosine_similarity"), _cosine, dtypes=FLOATS),
    OpInfo("pairwise_distance", _f("pairwise_distance"), _pairwise, dtypes=FLOATS),
    OpInfo("pdist", _f("pdist"), _pdist, dtypes=("float32", "float64")),
    *BACKWARD_OPS,
]
