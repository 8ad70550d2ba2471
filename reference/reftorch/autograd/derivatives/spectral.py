"""Derivative rows: spectral ops."""
from __future__ import annotations

from ._table import derivative


# Every transform scales by 1, 1/sqrt(n) or 1/n whatever its direction, so the adjoint of a
# transform is the transform in the other direction with the same scale: c2c <-> c2c, and
# r2c <-> c2r with the bookkeeping of the dropped half (zeros for r2c's adjoint; the bins
# that stand for two bins of the full spectrum count twice in c2r's adjoint).

@derivative("_fft_c2c", "FftC2CBackward0", saves=("dim", "normalization", "forward"))
def _fft_c2c(ctx, grad):
    from ..._ops.spectral import fft_c2c
    return fft_c2c(grad, ctx.dim, ctx.normalization, not ctx.forward)


@derivative("_fft_r2c", "FftR2CBackward0", saves=("dim", "normalization", "onesided"))
def _fft_r2c(ctx, grad):
    from ..._ops.spectral import fft_c2c, pad_with_zeros
    if ctx.onesided:
        last = ctx.dim[-1]
        grad = pad_with_zeros(grad, last, ctx.shape(0)[last])
    return fft_c2c(grad, ctx.dim, ctx.normalization, False).real


@derivative("_fft_c2r", "FftC2RBackward0", saves=("dim", "normalization", "last_dim_size"))
def _fft_c2r(ctx, grad):
    from ..._ops.spectral import double_mirrored_bins, fft_r2c
    half = fft_r2c(grad, ctx.dim, ctx.normalization, True)
    return double_mirrored_bins(half, ctx.dim[-1], ctx.last_dim_size)


def _fft_with_size_node(inputs, params):
    if params["complex_input"] and params["complex_output"]:
        return "FftC2CBackward0"
    return "FftR2CBackward0" if params["complex_output"] else "FftC2RBackward0"


@derivative("_fft_with_size", _fft_with_size_node,
            saves=("signal_ndim", "complex_input", "complex_output", "inverse", "normalization",
                   "output_sizes"))
def _fft_with_size(ctx, grad):
    """The legacy real-pair transforms (torch.fft/ifft/rfft/irfft): the same adjoints, with
    the signal's last dim at -2 of a real-pair tensor."""
    from ..._ops.spectral import double_mirrored_bins, fft_with_size, pad_with_zeros
    ndim, norm = ctx.signal_ndim, ctx.normalization
    if ctx.complex_input and ctx.complex_output:
        return fft_with_size(grad, ndim, True, True, not ctx.inverse, norm, False, ())
    if ctx.complex_output:          # rfft
        grad = pad_with_zeros(grad, grad.ndim - 2, ctx.shape(0)[-1])
        return fft_with_size(grad, ndim, True, True, True, norm, False, ()).select(-1, 0)
    half = fft_with_size(grad, ndim, False, True, False, norm, True, ())   # irfft
    half = double_mirrored_bins(half, half.ndim - 2, ctx.output_sizes[-1])
    return pad_with_zeros(half, half.ndim - 2, ctx.shape(0)[-2])
