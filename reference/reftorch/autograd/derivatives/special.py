"""Derivative rows: special functions."""
from __future__ import annotations

from ._table import _conj, derivative, torch


_TWO_OVER_SQRT_PI = 1.1283791670955126  # 2 / sqrt(pi)
_PI = 3.141592653589793
_SQRT_2PI = 2.5066282746310002


@derivative("erf", "ErfBackward0", saves=("self",))
def _erf(ctx, grad):
    return grad * (_TWO_OVER_SQRT_PI * torch.exp(-ctx.self * ctx.self))


@derivative("erfc", "ErfcBackward0", saves=("self",))
def _erfc(ctx, grad):
    return grad * (-_TWO_OVER_SQRT_PI * torch.exp(-ctx.self * ctx.self))


@derivative("erfinv", "ErfinvBackward0", saves=("result",))
def _erfinv(ctx, grad):
    return grad * (torch.exp(ctx.result * ctx.result) / _TWO_OVER_SQRT_PI)


@derivative("lgamma", "LgammaBackward0", saves=("self",))
def _lgamma(ctx, grad):
    return grad * torch.digamma(ctx.self)


@derivative("digamma", "DigammaBackward0", saves=("self",))
def _digamma(ctx, grad):
    return grad * torch.polygamma(1, ctx.self)


@derivative("polygamma", "PolygammaBackward0", saves=("self", "n"))
def _polygamma(ctx, grad):
    return grad * torch.polygamma(ctx.n + 1, ctx.self)


@derivative("mvlgamma", "MvlgammaBackward0", saves=("self", "p"))
def _mvlgamma(ctx, grad):
    # d/dx sum_j lgamma(x - j/2) = sum_j digamma(x - j/2)
    total = torch.digamma(ctx.self)
    for j in range(1, ctx.p):
        total = total + torch.digamma(ctx.self - j / 2)
    return grad * total


@derivative("i0", "I0Backward0", saves=("self",))
def _i0(ctx, grad):
    return grad * torch.special.i1(ctx.self)


@derivative("special_i0e", "SpecialI0EBackward0", saves=("self", "result"))
def _i0e(ctx, grad):
    return grad * (torch.special.i1e(ctx.self) - torch.sgn(ctx.self) * ctx.result)


@derivative("special_i1", "SpecialI1Backward0", saves=("self", "result"))
def _i1(ctx, grad):
    # i1'(x) = i0(x) - i1(x) / x, with the limit 1/2 at x = 0.
    x = ctx.self
    return grad * torch.where(x == 0, 0.5, torch.i0(x) - ctx.result / x)


@derivative("special_i1e", "SpecialI1EBackward0", saves=("self", "result"))
def _i1e(ctx, grad):
    x = ctx.self
    slope = torch.special.i0e(x) - ctx.result * (torch.sgn(x) + 1 / x)
    return grad * torch.where(x == 0, 0.5, slope)


@derivative("sinc", "SincBackward0", saves=("self",))
def _sinc(ctx, grad):
    # (pi x cos(pi x) - sin(pi x)) / (pi x^2), and 0 at x = 0.
    x = ctx.self
    pi_x = _PI * x
    slope = (pi_x * torch.cos(pi_x) - torch.sin(pi_x)) / (pi_x * x)
    return grad * _conj(torch.where(x == 0, 0.0, slope))


@derivative("special_erfcx", "SpecialErfcxBackward0", saves=("self", "result"))
def _erfcx(ctx, grad):
    return grad * (2 * ctx.self * ctx.result - _TWO_OVER_SQRT_PI)


@derivative("special_ndtri", "SpecialNdtriBackward0", saves=("result",))
def _ndtri(ctx, grad):
    return grad * (_SQRT_2PI * torch.exp(ctx.result * ctx.result * 0.5))


@derivative("special_log_ndtr", "SpecialLogNdtrBackward0", saves=("self", "result"))
def _log_ndtr(ctx, grad):
    x = ctx.self
    return grad * (torch.exp(-(ctx.result + x * x * 0.5)) / _SQRT_2PI)


@derivative("special_entr", "SpecialEntrBackward0", saves=("self",))
def _entr(ctx, grad):
    return grad * -(1 + torch.log(ctx.self))


@derivative("special_xlog1py", "SpecialXlog1PyBackward0", inputs=("self", "other"),
            saves=("self", "other"))
def _xlog1py(ctx, grad):
    x, y = ctx.self, ctx.other
    needs = ctx.needs_input_grad
    grad_self = grad_other = None
    if needs[0]:
        # log1p(other), taken as 0 where self == 0 and other <= -1 (PyTorch's convention).
        grad_self = torch.special.xlog1py(grad, y)
        if hasattr(x, "_shape"):
            grad_self = torch.where((x == 0) & (y <= -1), 0.0, grad_self)
    if needs[1]:
        grad_other = grad * x / (y + 1)
    return grad_self, grad_other
