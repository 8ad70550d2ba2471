"""torch.special: the special-function namespace.

Functions implemented in reftorch/_ops/special_pointwise.py are bound here directly; the ones
that are plain aliases of ops living elsewhere (expm1, exp2, log1p, round, logit, xlogy,
softmax, ...) are looked up lazily on the reftorch module, so this namespace never depends on
import order.
"""
from __future__ import annotations

import math

from ._ops import special_pointwise as _S
from ._ops.inplace_meta import resize_output

erf = _S.erf
erfc = _S.erfc
erfinv = _S.erfinv
erfcx = _S.special_erfcx
digamma = psi = _S.digamma
gammaln = _S.lgamma
polygamma = _S.polygamma
multigammaln = _S.mvlgamma
i0 = _S.i0
i0e = _S.special_i0e
i1 = _S.special_i1
i1e = _S.special_i1e
sinc = _S.sinc
entr = _S.special_entr
xlog1py = _S.special_xlog1py
ndtri = _S.special_ndtri
log_ndtr = _S.special_log_ndtr


def ndtr(input, *, out=None):
    """The standard normal CDF, (1 + erf(x / sqrt(2))) / 2: a composition, as in PyTorch."""
    result = (1 + erf(input * (1 / math.sqrt(2)))) * 0.5
    if out is not None:
        return resize_output(out, result.shape).copy_(result)
    return result


# Aliases of ops defined by other modules: resolved on first use.
_ALIASES = {"expit": "sigmoid", "exp2": "exp2", "expm1": "expm1", "log1p": "log1p",
            "round": "round", "logit": "logit", "xlogy": "xlogy", "logsumexp": "logsumexp",
            "softmax": "softmax", "log_softmax": "log_softmax"}


def __getattr__(name):
    if name in _ALIASES:
        import reftorch
        return getattr(reftorch, _ALIASES[name])
    raise AttributeError(f"module 'reftorch.special' has no attribute '{name}'")


__all__ = ["digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "gammaln", "i0", "i0e", "i1",
           "i1e", "log_ndtr", "multigammaln", "ndtr", "ndtri", "polygamma", "psi", "sinc",
           "xlog1py", *_ALIASES]
