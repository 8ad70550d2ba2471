"""torch.fft: discrete Fourier transforms of complex (and real) tensors.

`reftorch.fft` is both this module and, when called, the legacy function of PyTorch 0.4-1.7:
`reftorch.fft(input, signal_ndim, normalized=False)` on the real-pair layout. In PyTorch the
module replaced the function (1.8); keeping both lets old code run (with a
DeprecationWarning) while `reftorch.fft.fft(x)` etc. behave like modern PyTorch. The module's
class is swapped for a ModuleType subclass whose __call__ is the legacy function (end of
file); reftorch/__init__.py imports this module as `fft`.

Every function here resolves its arguments (n/s, dim, norm, dtype) and calls one of the
three transform ops in reftorch/_ops/spectral.py; sizes are adjusted with narrow/cat first,
so gradients flow through those parts too.
"""
from __future__ import annotations

import sys
import types

import numpy as np

from . import _dtype as D
from ._ops import spectral as _S
from ._ops.creation import _finish
from ._shape import wrap_dim
from ._tensor import Tensor

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fftn", "ifftn", "rfftn", "irfftn",
           "hfftn", "ihfftn", "fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2", "fftfreq",
           "rfftfreq", "fftshift", "ifftshift"]

_FLIPPED = {None: "forward", "backward": "forward", "forward": "backward", "ortho": "ortho"}


def _flipped(norm):
    """The norm= that puts the scaling on the other direction (hfft is irfft turned round)."""
    _normalization(norm, True)  # rejects unknown modes
    return _FLIPPED[norm]


def _normalization(norm, forward):
    """The scale of a transform in direction `forward` under torch.fft's `norm=`."""
    if norm is None or norm == "backward":
        return "none" if forward else "n"
    if norm == "forward":
        return "n" if forward else "none"
    if norm == "ortho":
        return "sqrt_n"
    raise RuntimeError(f"Invalid normalization mode: \"{norm}\"")


def _promote(input, name, require_real=False):
    """Integer and bool inputs become the default float dtype; half types are unsupported."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    if input.dtype.is_complex:
        if require_real:
            raise RuntimeError(f"{name} expects a real input tensor, but got "
                               f"{input.dtype.scalar_name}")
        return input
    if input.dtype in (D.float16, D.bfloat16):
        raise RuntimeError(f"Unsupported dtype {input.dtype.scalar_name}")
    if not input.dtype.is_floating_point:
        return input.to(D.get_default_dtype())
    return input


def _to_complex(input):
    return input if input.is_complex() else input.to(D._REAL_TO_COMPLEX[input.dtype])


def _check_size(n):
    if n < 1:
        raise RuntimeError(f"Invalid number of data points ({n}) specified")
    return n


def _write(result, out):
    return result if out is None else _S.structured.write_out(out, result)


def _resolve(input, s, dim, name):
    """(dims, sizes) of an n-dimensional transform, following torch.fft's rules for s/dim."""
    ndim = input.ndim
    if dim is not None:
        dims = [wrap_dim(d, ndim) for d in ((dim,) if isinstance(dim, int) else dim)]
        if len(set(dims)) != len(dims):
            raise RuntimeError("FFT dims must be unique")
        if s is not None and len(s) != len(dims):
            raise RuntimeError("When given, dim and shape arguments must have the same length")
    elif s is not None:
        if len(s) > ndim:
            raise RuntimeError(f"Got shape with {len(s)} values but input tensor only has "
                               f"{ndim} dimensions.")
        dims = list(range(ndim - len(s), ndim))
    else:
        dims = list(range(ndim))
    if s is None:
        sizes = [input.shape[d] for d in dims]
    else:
        sizes = [input.shape[d] if size == -1 else int(size) for d, size in zip(dims, s)]
    return dims, sizes


def _resized(input, dims, sizes):
    for d, size in zip(dims, sizes):
        input = _S.resize_dim(input, d, _check_size(size))
    return input


# --- n-dimensional transforms ----------------------------------------------------------------

def _c2c_or_r2c(input, s, dim, norm, forward, name):
    input = _promote(input, name)
    dims, sizes = _resolve(input, s, dim, name)
    input = _resized(input, dims, sizes)
    normalization = _normalization(norm, forward)
    if input.is_complex():
        return _S.fft_c2c(input, dims, normalization, forward)
    result = _S.fft_r2c(input, dims, normalization, onesided=False)
    # A real signal's inverse transform is the conjugate of its forward one (same scale).
    return result if forward else result.conj()


def fftn(input, s=None, dim=None, norm=None, *, out=None):
    """N-dimensional DFT over `dim` (all dims by default), each resized to `s`."""
    return _write(_c2c_or_r2c(input, s, dim, norm, True, "fftn"), out)


def ifftn(input, s=None, dim=None, norm=None, *, out=None):
    """N-dimensional inverse DFT (divided by n with the default norm="backward")."""
    return _write(_c2c_or_r2c(input, s, dim, norm, False, "ifftn"), out)


def rfftn(input, s=None, dim=None, norm=None, *, out=None):
    """DFT of a real signal; the last transformed dim keeps bins 0 .. n//2 only."""
    return _write(_rfftn(input, s, dim, norm, "rfftn"), out)


def _rfftn(input, s, dim, norm, name):
    input = _promote(input, name, require_real=True)
    dims, sizes = _resolve(input, s, dim, name)
    if not dims:
        raise RuntimeError(f"{name} must transform at least one axis")
    input = _resized(input, dims, sizes)
    return _S.fft_r2c(input, dims, _normalization(norm, True), onesided=True)


def irfftn(input, s=None, dim=None, norm=None, *, out=None):
    """Inverse of rfftn: a real signal whose last dim has s[-1] (default 2*(m-1)) samples."""
    return _write(_irfftn(input, s, dim, norm, "irfftn"), out)


def _irfftn(input, s, dim, norm, name):
    input = _to_complex(_promote(input, name))
    dims, sizes = _resolve(input, s, dim, name)
    if not dims:
        raise RuntimeError(f"{name} must transform at least one axis")
    last = sizes[-1] if s is not None and s[-1] != -1 else 2 * (input.shape[dims[-1]] - 1)
    _check_size(last)
    input = _resized(input, dims[:-1], sizes[:-1])
    input = _S.resize_dim(input, dims[-1], last // 2 + 1)
    return _S.fft_c2r(input, dims, _normalization(norm, False), last)


def hfftn(input, s=None, dim=None, norm=None, *, out=None):
    """DFT of a Hermitian-symmetric signal given by its first half: real output.

    It equals irfftn of the conjugate with the scaling direction swapped."""
    return _write(_irfftn(_promote(input, "hfftn").conj(), s, dim, _flipped(norm), "hfftn"),
                  out)


def ihfftn(input, s=None, dim=None, norm=None, *, out=None):
    """Inverse of hfftn: the conjugate of rfftn with the scaling direction swapped."""
    return _write(_rfftn(input, s, dim, _flipped(norm), "ihfftn").conj(), out)


# --- one- and two-dimensional spellings ------------------------------------------------------

def _one_dim(nd_function, name, real_only=False):
    def public(input, n=None, dim=-1, norm=None, *, out=None):
        _promote(input, name, real_only)  # dtype errors come before dim errors
        if input.ndim == 0:
            raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
        return nd_function(input, None if n is None else (n,), (dim,), norm, out=out)
    public.__name__ = name
    public.__doc__ = f"One-dimensional {name} along `dim`, resized to `n` samples.\n\n" + \
        (nd_function.__doc__ or "")
    return public


def _two_dim(nd_function, name):
    def public(input, s=None, dim=(-2, -1), norm=None, *, out=None):
        return nd_function(input, s, dim, norm, out=out)
    public.__name__ = name
    public.__doc__ = f"Two-dimensional {name} over `dim` (the last two by default).\n\n" + \
        (nd_function.__doc__ or "")
    return public


fft = _one_dim(fftn, "fft")
ifft = _one_dim(ifftn, "ifft")
rfft = _one_dim(rfftn, "rfft", real_only=True)
irfft = _one_dim(irfftn, "irfft")
hfft = _one_dim(hfftn, "hfft")
ihfft = _one_dim(ihfftn, "ihfft", real_only=True)
fft2 = _two_dim(fftn, "fft2")
ifft2 = _two_dim(ifftn, "ifft2")
rfft2 = _two_dim(rfftn, "rfft2")
irfft2 = _two_dim(irfftn, "irfft2")
hfft2 = _two_dim(hfftn, "hfft2")
ihfft2 = _two_dim(ihfftn, "ihfft2")


# --- sample frequencies and shifts -----------------------------------------------------------

def _frequencies(name, n, d, count, negative_from, out, dtype, device, requires_grad):
    if out is not None and dtype is None:
        dtype = out.dtype
    dtype = D.get_default_dtype() if dtype is None else dtype
    if not (dtype.is_floating_point or dtype.is_complex):
        raise RuntimeError(f"{name} requires a floating point or complex dtype")
    if dtype.is_complex:  # PyTorch's arange has no complex kernel
        raise NotImplementedError(f"\"arange_cpu\" not implemented for '{dtype.scalar_name}'")
    if count < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {count}: "
                           f"[{count}]")
    compute = np.float64 if dtype is D.float64 else np.float32
    k = np.arange(count, dtype=np.int64)
    if negative_from is not None:
        k[negative_from:] -= n
    # ATen: an arange in the dtype times the scalar 1/(n*d), itself first converted to the
    # dtype (so half types round it); d = 0 gives inf (and nan at 0) as in PyTorch.
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.float64(1.0) / (np.float64(n) * d)
        values = k.astype(compute) * np.asarray(scale).astype(dtype.numpy_dtype).astype(compute)
    if out is not None:
        return _finish(values.astype(dtype.numpy_dtype), None, out=out)
    return _finish(values.astype(dtype.numpy_dtype), dtype, device, requires_grad)


def fftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """Sample frequencies of fft: [0, 1, ..., (n-1)//2, -(n//2), ..., -1] / (d*n)."""
    return _frequencies("fftfreq", n, d, n, (n + 1) // 2, out, dtype, device, requires_grad)


def rfftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """Sample frequencies of rfft: [0, 1, ..., n//2] / (d*n)."""
    half = int(n / 2)  # C++ division (towards zero): rfftfreq(-1) has one element, as in ATen
    return _frequencies("rfftfreq", n, d, half + 1, None, out, dtype, device, requires_grad)


def _shift(input, dim, inverse):
    import reftorch
    dims = list(range(input.ndim)) if dim is None else \
        [dim] if isinstance(dim, int) else list(dim)
    if not dims:
        raise RuntimeError("`shifts` required")
    shifts = [(input.shape[d] + 1) // 2 if inverse else input.shape[d] // 2 for d in
              (wrap_dim(d, input.ndim) for d in dims)]
    return reftorch.roll(input, shifts, dims)


def fftshift(input, dim=None):
    """Move the zero-frequency bin to the centre (roll by n//2 along each dim)."""
    return _shift(input, dim, inverse=False)


def ifftshift(input, dim=None):
    """Inverse of fftshift (roll by -(n//2), i.e. (n+1)//2)."""
    return _shift(input, dim, inverse=True)


# --- the module is also the legacy function torch.fft(input, signal_ndim) --------------------

class _CallableModule(types.ModuleType):
    """reftorch.fft: the torch.fft namespace, callable as the legacy torch.fft function."""

    def __call__(self, input, signal_ndim, normalized=False):
        return _S.legacy_fft(input, signal_ndim, normalized)


sys.modules[__name__].__class__ = _CallableModule
