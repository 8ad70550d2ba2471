"""Spectral ops: discrete Fourier transforms, the short-time Fourier transform, windows.

Three structured ops do every transform, on complex tensors, as ATen does:
  _fft_c2c  complex -> complex over `dim` (forward or inverse exponent),
  _fft_r2c  real -> complex (forward exponent; `onesided` keeps the non-redundant half of the
            last transformed dim),
  _fft_c2r  one-sided complex -> real (inverse exponent; the length of the last dim is a
            parameter because the half spectrum does not determine it).
Each scales its result by 1, 1/sqrt(n) or 1/n (`normalization` "none", "sqrt_n", "n", n the
product of the transformed sizes) independently of the direction, so the adjoint of every
transform is another one with the same normalization (see autograd/derivatives/spectral.py).

The legacy functions of PyTorch 0.4-1.7 (`torch.fft(input, signal_ndim)`, ifft, rfft, irfft)
work on the real-pair layout: a complex number is a last dim of size 2. They run as one op,
`_fft_with_size` (ATen's name for it at the time), which converts the pair to complex, runs
one of the three kernels above and converts back. Modern PyTorch removed them (torch.fft is
now a module); here they keep their documented behaviour and warn with DeprecationWarning.

`stft` and `istft` are compositions (pad, unfold, mul, fft, overlap-add), so their gradients
come from their parts. NumPy's pocketfft is the engine: it computes in double precision and
results are rounded back to the input's precision.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor
from . import structured
from .creation import _finish

__all__ = ["ifft", "rfft", "irfft", "stft", "istft", "bartlett_window", "blackman_window",
           "hamming_window", "hann_window"]
# `fft` is not in __all__: reftorch.fft is the torch.fft module, which is also callable as the
# legacy function (see reftorch/fft.py).

FFT_DTYPES = frozenset({D.float32, D.float64, D.complex64, D.complex128})
NORMALIZATIONS = ("none", "sqrt_n", "n")


def _reftorch():
    import reftorch
    return reftorch


# --- NumPy kernels ----------------------------------------------------------------------------

def _numpy_norm(normalization, forward):
    """NumPy's `norm=` that scales a transform in direction `forward` by `normalization`."""
    if normalization == "sqrt_n":
        return "ortho"
    # NumPy names the direction that carries the 1/n: "backward" = the inverse one.
    scaled_direction_is_inverse = (normalization == "n") != forward
    return "backward" if scaled_direction_is_inverse else "forward"


def _complex_of(real_dtype):
    return np.complex64 if real_dtype == np.float32 else np.complex128


def _real_of(complex_dtype):
    return np.float32 if complex_dtype == np.complex64 else np.float64


def _c2c_kernel(a, dim, normalization, forward):
    if not dim:
        return a.copy()
    transform = np.fft.fftn if forward else np.fft.ifftn
    z = transform(a.astype(np.complex128), axes=dim, norm=_numpy_norm(normalization, forward))
    return z.astype(a.dtype)


def _r2c_kernel(a, dim, normalization, onesided):
    result_dtype = _complex_of(a.dtype)
    if not dim:
        return a.astype(result_dtype)
    transform = np.fft.rfftn if onesided else np.fft.fftn
    z = transform(a.astype(np.float64), axes=dim, norm=_numpy_norm(normalization, True))
    return z.astype(result_dtype)


def _c2r_kernel(a, dim, normalization, last_dim_size):
    sizes = [a.shape[d] for d in dim[:-1]] + [last_dim_size]
    x = np.fft.irfftn(a.astype(np.complex128), s=sizes, axes=dim,
                      norm=_numpy_norm(normalization, False))
    return x.astype(_real_of(a.dtype))


def _pair_to_complex(a):
    return a[..., 0] + 1j * a[..., 1].astype(_complex_of(a.dtype))


def _complex_to_pair(z, real_dtype):
    return np.stack([z.real, z.imag], axis=-1).astype(real_dtype)


def _fft_with_size_kernel(a, signal_ndim, complex_input, complex_output, inverse,
                          normalization, onesided, output_sizes):
    """The legacy transform on real pairs: the last `signal_ndim` dims (before the pair)."""
    dims = tuple(range(-signal_ndim, 0))
    if complex_input and complex_output:
        z = _c2c_kernel(_pair_to_complex(a), dims, normalization, not inverse)
    elif complex_output:
        z = _r2c_kernel(a, dims, normalization, onesided)
    else:
        # irfft: the transform reads the first n//2 + 1 bins of the last dim only.
        z = _pair_to_complex(a)[..., :output_sizes[-1] // 2 + 1]
        return _c2r_kernel(z, dims, normalization, output_sizes[-1]).astype(a.dtype)
    return _complex_to_pair(z, a.dtype)


_PARAMS = {"dim": (), "normalization": "none"}
FFT_C2C = structured.declare("_fft_c2c", _c2c_kernel, family="other",
                             params={**_PARAMS, "forward": True},
                             dtypes={D.complex64, D.complex128})
FFT_R2C = structured.declare("_fft_r2c", _r2c_kernel, family="other",
                             params={**_PARAMS, "onesided": True},
                             dtypes={D.float32, D.float64})
FFT_C2R = structured.declare("_fft_c2r", _c2r_kernel, family="other",
                             params={**_PARAMS, "last_dim_size": 1},
                             dtypes={D.complex64, D.complex128})
FFT_WITH_SIZE = structured.declare(
    "_fft_with_size", _fft_with_size_kernel, family="other",
    params={"signal_ndim": 1, "complex_input": True, "complex_output": True, "inverse": False,
            "normalization": "none", "onesided": True, "output_sizes": ()},
    dtypes={D.float32, D.float64})


# --- the three transforms on complex tensors (used by reftorch.fft and the derivatives) ----

def fft_c2c(input, dim, normalization, forward):
    return structured.run(FFT_C2C, (input,), {"dim": tuple(dim), "normalization": normalization,
                                              "forward": bool(forward)})


def fft_r2c(input, dim, normalization, onesided):
    return structured.run(FFT_R2C, (input,), {"dim": tuple(dim), "normalization": normalization,
                                              "onesided": bool(onesided)})


def fft_c2r(input, dim, normalization, last_dim_size):
    return structured.run(FFT_C2R, (input,), {"dim": tuple(dim), "normalization": normalization,
                                              "last_dim_size": int(last_dim_size)})


def fft_with_size(input, signal_ndim, complex_input, complex_output, inverse, normalization,
                  onesided, output_sizes):
    return structured.run(FFT_WITH_SIZE, (input,), {
        "signal_ndim": signal_ndim, "complex_input": complex_input,
        "complex_output": complex_output, "inverse": inverse, "normalization": normalization,
        "onesided": onesided, "output_sizes": tuple(output_sizes)})


# --- helpers shared with the derivative rows ---------------------------------------------

def pad_with_zeros(t, dim, size):
    """`t` extended with zeros along `dim` to `size` (differentiable: a cat)."""
    missing = size - t.shape[dim]
    if missing <= 0:
        return t
    shape = list(t.shape)
    shape[dim] = missing
    zeros = _reftorch().zeros(shape, dtype=t.dtype, device=t.device)
    return _reftorch().cat([t, zeros], dim)


def resize_dim(t, dim, size):
    """`t` cut or zero-padded along `dim` to `size` (what torch.fft's n= and s= do)."""
    if t.shape[dim] >= size:
        return t.narrow(dim, 0, size) if t.shape[dim] > size else t
    return pad_with_zeros(t, dim, size)


def double_mirrored_bins(t, dim, last_dim_size):
    """Multiply the half-spectrum bins 1 .. (n-1)//2 of `dim` by 2.

    A one-sided spectrum stands for a full one in which those bins appear twice (as
    themselves and as their conjugates), so the gradient of c2r with respect to them counts
    twice; bin 0 and, for even n, the Nyquist bin appear once."""
    bins = t.shape[dim]
    factors = np.ones(bins)
    factors[1:(last_dim_size - 1) // 2 + 1] = 2
    shape = [1] * t.ndim
    shape[dim] = bins
    real_dtype = D._COMPLEX_TO_REAL.get(t.dtype, t.dtype)
    scale = _reftorch().tensor(factors.reshape(shape), dtype=real_dtype, device=t.device)
    return t * scale


# --- legacy functions on the real-pair layout ---------------------------------------------

def _legacy_warning(name, modern):
    warnings.warn(f"torch.{name}(input, signal_ndim, ...) is deprecated and was removed from "
                  f"PyTorch; use {modern} instead (torch.view_as_real / "
                  f"torch.view_as_complex convert between complex tensors and the real-pair "
                  f"layout).", DeprecationWarning, stacklevel=3)


def _check_legacy(input, signal_ndim, complex_input):
    if not isinstance(input, Tensor):
        raise TypeError(f"fft(): argument 'input' must be Tensor, not {type(input).__name__}")
    if isinstance(signal_ndim, bool) or not isinstance(signal_ndim, (int, np.integer)):
        raise TypeError(f"fft(): argument 'signal_ndim' must be int, not "
                        f"{type(signal_ndim).__name__}")
    if not 1 <= signal_ndim <= 3:
        raise RuntimeError(f"Expected signal_ndim to be 1, 2, or 3, but got "
                           f"signal_ndim={signal_ndim}")
    if input.dtype not in (D.float32, D.float64):
        raise RuntimeError(f"Expected an input tensor of floating types, but got "
                           f"input={input.dtype}")
    needed = signal_ndim + (1 if complex_input else 0)
    if input.ndim < needed:
        raise RuntimeError(f"Expected an input tensor of at least {needed} dimensions, but "
                           f"got input of shape {list(input.shape)}")
    if complex_input and input.shape[-1] != 2:
        raise RuntimeError(f"Expected an input tensor with a last dimension of size 2 "
                           f"representing real + imaginary components, but got input of "
                           f"shape {list(input.shape)}")
    end = input.ndim - (1 if complex_input else 0)
    sizes = tuple(input.shape[end - signal_ndim:end])
    if 0 in sizes:
        raise RuntimeError(f"Expected signal sizes to be positive, but got signal size "
                           f"{list(sizes)}")
    return int(signal_ndim), sizes


def legacy_fft(input, signal_ndim, normalized=False):
    """Complex-to-complex DFT of the last `signal_ndim` dims of a real-pair tensor (..., 2)."""
    _legacy_warning("fft", "torch.view_as_real(torch.fft.fftn(torch.view_as_complex(input), "
                           "dim=<signal dims>, norm='ortho' if normalized else 'backward'))")
    signal_ndim, _ = _check_legacy(input, signal_ndim, complex_input=True)
    return fft_with_size(input, signal_ndim, True, True, False,
                         "sqrt_n" if normalized else "none", False, ())


def ifft(input, signal_ndim, normalized=False):
    """Inverse complex-to-complex DFT (divides by n, or by sqrt(n) when normalized)."""
    _legacy_warning("ifft", "torch.view_as_real(torch.fft.ifftn(torch.view_as_complex(input), "
                            "dim=<signal dims>, norm='ortho' if normalized else 'backward'))")
    signal_ndim, _ = _check_legacy(input, signal_ndim, complex_input=True)
    return fft_with_size(input, signal_ndim, True, True, True,
                         "sqrt_n" if normalized else "n", False, ())


def rfft(input, signal_ndim, normalized=False, onesided=True):
    """Real-to-complex DFT; `onesided` keeps bins 0 .. n//2 of the last signal dim."""
    _legacy_warning("rfft", "torch.view_as_real(torch.fft.rfftn(input, dim=<signal dims>, "
                            "norm='ortho' if normalized else 'backward')) (torch.fft.fftn "
                            "for onesided=False)")
    signal_ndim, _ = _check_legacy(input, signal_ndim, complex_input=False)
    return fft_with_size(input, signal_ndim, False, True, False,
                         "sqrt_n" if normalized else "none", bool(onesided), ())


def irfft(input, signal_ndim, normalized=False, onesided=True, signal_sizes=None):
    """Complex-to-real inverse DFT; `signal_sizes` gives the output's signal shape."""
    _legacy_warning("irfft", "torch.fft.irfftn(torch.view_as_complex(input), "
                             "s=signal_sizes, dim=<signal dims>, norm='ortho' if normalized "
                             "else 'backward')")
    signal_ndim, sizes = _check_legacy(input, signal_ndim, complex_input=True)
    output_sizes = _irfft_output_sizes(sizes, onesided, signal_sizes)
    return fft_with_size(input, signal_ndim, True, False, True,
                         "sqrt_n" if normalized else "n", bool(onesided), output_sizes)


def _irfft_output_sizes(sizes, onesided, signal_sizes):
    """The real signal's sizes: given, or inferred (the last one is 2 * (m - 1) if one-sided)."""
    if signal_sizes is None:
        last = 2 * (sizes[-1] - 1) if onesided else sizes[-1]
        if last <= 0:
            raise RuntimeError(f"Expected the inferred signal size of the last signal "
                               f"dimension to be positive, but got {last} from input signal "
                               f"sizes {list(sizes)}")
        return sizes[:-1] + (last,)
    requested = tuple(int(s) for s in signal_sizes)
    if len(requested) != len(sizes):
        raise RuntimeError(f"Expected signal_sizes to be of length signal_ndim="
                           f"{len(sizes)}, but got signal_sizes={list(requested)}")
    # The input must hold exactly the spectrum of a signal of these sizes.
    expected = sizes[:-1] + ((requested[-1] // 2 + 1) if onesided else requested[-1],)
    if any(s <= 0 for s in requested) or requested[:-1] != sizes[:-1] or \
            sizes[-1] != expected[-1]:
        raise RuntimeError(f"Expected given signal_sizes={list(requested)} to have same shape "
                           f"with input at signal dimension, but got input signal sizes "
                           f"{list(sizes)}")
    return requested


def _legacy_method(function):
    def method(self, signal_ndim, *args, **kwargs):
        return function(self, signal_ndim, *args, **kwargs)
    method.__name__ = function.__name__.replace("legacy_", "")
    method.__doc__ = function.__doc__
    return method


# --- short-time Fourier transform (a composition) ---------------------------------------------

def _pad_signal(x, pad, mode):
    """Pad the last dim of `x` by `pad` on both sides, like torch.nn.functional.pad."""
    torch = _reftorch()
    length = x.shape[-1]
    if pad == 0:
        return x
    if mode == "constant":
        shape = list(x.shape[:-1]) + [pad]
        zeros = torch.zeros(shape, dtype=x.dtype, device=x.device)
        return torch.cat([zeros, x, zeros], -1)
    if mode == "reflect":
        if pad >= length:
            raise RuntimeError(f"Argument #4: Padding size should be less than the "
                               f"corresponding input dimension, but got: padding ({pad}, "
                               f"{pad}) at dimension {x.ndim - 1} of input {list(x.shape)}")
        left = x.narrow(-1, 1, pad).flip([-1])
        right = x.narrow(-1, length - 1 - pad, pad).flip([-1])
        return torch.cat([left, x, right], -1)
    if mode == "replicate":
        if length == 0:
            raise RuntimeError("Expected a non-empty input for replicate padding")
        shape = list(x.shape[:-1]) + [pad]
        left = x.narrow(-1, 0, 1).expand(*shape)
        right = x.narrow(-1, length - 1, 1).expand(*shape)
        return torch.cat([left, x, right], -1)
    if mode == "circular":
        if pad > length:
            raise RuntimeError("Padding value causes wrapping around more than once.")
        return torch.cat([x.narrow(-1, length - pad, pad), x, x.narrow(-1, 0, pad)], -1)
    raise NotImplementedError(f"Unrecognised padding mode {mode}")


def _check_window(window, win_length, name):
    if window is None:
        return
    if window.ndim != 1 or window.shape[0] != win_length:
        raise RuntimeError(f"{name}: expected a 1D window tensor of size equal to "
                           f"win_length={win_length}, but got window with size "
                           f"{list(window.shape)}")


def _full_window(window, win_length, n_fft, dtype, device):
    """The window padded with zeros on both sides to n_fft (None: a rectangle)."""
    torch = _reftorch()
    if window is None:
        if win_length == n_fft:
            return None
        window = torch.ones(win_length, dtype=dtype, device=device)
    left = (n_fft - win_length) // 2
    if left == 0 and win_length == n_fft:
        return window
    zeros = torch.zeros(n_fft, dtype=window.dtype, device=window.device)
    return torch.cat([zeros[:left], window, zeros[left + win_length:]])


def _real_pair(z):
    """A complex tensor as the real-pair layout (..., 2): what view_as_real shows."""
    return _reftorch().stack([z.real, z.imag], -1)


def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,
         pad_mode="reflect", normalized=False, onesided=None, return_complex=None,
         align_to_window=None):
    """Short-time Fourier transform of a 1-D signal or a 2-D batch of signals.

    Result (B?, n_freq, n_frames): complex when `return_complex` is true; the real-pair
    layout (B?, n_freq, n_frames, 2) when it is false. For real input and window,
    return_complex=None gives the documented (PyTorch 0.4-1.7) real-pair result with a
    DeprecationWarning; modern PyTorch raises there instead.
    """
    torch = _reftorch()
    if not isinstance(input, Tensor):
        raise TypeError(f"stft(): argument 'input' must be Tensor, not "
                        f"{type(input).__name__}")
    if input.dtype not in FFT_DTYPES:
        raise RuntimeError(f"stft: expected a tensor of floating point or complex values, "
                           f"got {input.dtype}")
    if window is not None and window.dtype not in FFT_DTYPES:
        raise RuntimeError(f"stft: expected a window of floating point or complex values, "
                           f"got {window.dtype}")
    is_complex = input.is_complex() or (window is not None and window.is_complex())
    if return_complex is None:
        if not is_complex:
            warnings.warn("stft without return_complex is deprecated: the real-pair result "
                          "(..., 2) is the legacy (PyTorch < 1.8) format. Pass "
                          "return_complex=True and use torch.view_as_real on the result to "
                          "get this layout.", DeprecationWarning, stacklevel=2)
        return_complex = is_complex
    if align_to_window:
        if center:
            raise RuntimeError("stft: align_to_window should only be set when center = false")
    if onesided is None:
        onesided = not is_complex
    elif onesided and is_complex:
        raise RuntimeError("Cannot have onesided output if window or input is complex")
    if input.ndim not in (1, 2) and not (center and input.ndim == 0):
        raise RuntimeError(f"stft: expected a 1D or 2D tensor, but got {input.ndim}D tensor")
    x = input
    if center:
        x = _pad_signal(x if x.ndim else x.reshape(1), n_fft // 2, pad_mode)
    hop_length = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    length = x.shape[-1]
    if n_fft <= 0 or n_fft > length:
        raise RuntimeError(f"stft: expected 0 < n_fft <= {length}, but got n_fft={n_fft}")
    if hop_length <= 0:
        raise RuntimeError(f"stft: expected hop_length > 0, but got hop_length={hop_length}")
    if not 0 < win_length <= n_fft:
        raise RuntimeError(f"stft: expected 0 < win_length <= n_fft, but got "
                           f"win_length={win_length}")
    _check_window(window, win_length, "stft")
    if align_to_window and win_length < n_fft:
        # Frame t's window (not its n_fft samples) starts at t * hop_length: zeros around
        # the signal stand under the window's zero padding.
        left = (n_fft - win_length) // 2
        x = torch.cat([x.new_zeros(x.shape[:-1] + (left,)), x,
                       x.new_zeros(x.shape[:-1] + (n_fft - win_length - left,))], -1)
    frames = x.unfold(-1, n_fft, hop_length)             # (B?, n_frames, n_fft)
    full = _full_window(window, win_length, n_fft, input.dtype, input.device)
    if full is not None:
        frames = frames * full
    normalization = "sqrt_n" if normalized else "none"
    if frames.is_complex():
        spectrum = fft_c2c(frames, (frames.ndim - 1,), normalization, True)
    else:
        spectrum = fft_r2c(frames, (frames.ndim - 1,), normalization, onesided)
    spectrum = spectrum.transpose(-1, -2)                # (B?, n_freq, n_frames)
    return spectrum if return_complex else _real_pair(spectrum)


def istft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,
          normalized=False, onesided=None, length=None, return_complex=False):
    """Inverse of stft: inverse transforms of the frames, windowed, overlapped and added, and
    divided by the overlapped squared window (least squares estimate)."""
    torch = _reftorch()
    if not isinstance(input, Tensor) or not input.is_complex():
        raise RuntimeError("istft requires a complex-valued input tensor")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"istft: expected a tensor with 2 or 3 dimensions of complex "
                           f"values, but got {input.ndim}D")
    hop_length = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    n_freq, n_frames = input.shape[-2], input.shape[-1]
    if onesided is None:
        onesided = n_freq != n_fft
    expected_freq = n_fft // 2 + 1 if onesided else n_fft
    if n_freq != expected_freq:
        raise RuntimeError(f"istft: expected the frequency dimension (3rd to the last) of the "
                           f"input tensor to match n_fft / 2 + 1 when onesided=True, but got "
                           f"{n_freq}" if onesided else
                           f"istft: expected the frequency dimension (3rd to the last) of the "
                           f"input tensor to match n_fft when onesided=False, but got {n_freq}")
    if not 0 < hop_length <= win_length:
        raise RuntimeError("istft: expected 0 < hop_length <= win_length")
    if not 0 < win_length <= n_fft:
        raise RuntimeError("istft: expected 0 < win_length <= n_fft")
    _check_window(window, win_length, "istft")
    if onesided and return_complex:
        raise RuntimeError("cannot have onesided output if window or input is complex")
    full = _full_window(window, win_length, n_fft, D._COMPLEX_TO_REAL[input.dtype],
                        input.device)
    normalization = "sqrt_n" if normalized else "n"
    spectra = input.transpose(-1, -2)                     # (B?, n_frames, n_freq)
    last = spectra.ndim - 1
    if onesided:
        frames = fft_c2r(spectra, (last,), normalization, n_fft)
    else:
        frames = fft_c2c(spectra, (last,), normalization, False)
        if not return_complex:
            if window is not None and window.is_complex():
                raise RuntimeError("istft: complex window requires return_complex=True")
            frames = frames.real
    if full is None:
        full = torch.ones(n_fft, dtype=D._COMPLEX_TO_REAL[input.dtype], device=input.device)
    frames = frames * full
    signal = _overlap_add(frames, hop_length)
    # (A copy, not an expanded view: views of views of an expanded tensor would carry their
    # gradient through overlapping storage slots.)
    envelope = _overlap_add((full * full).expand(n_frames, n_fft).contiguous(), hop_length)
    start = n_fft // 2 if center else 0
    total = n_fft + hop_length * (n_frames - 1)
    end = total if length is None and not center else \
        total - n_fft // 2 if length is None else start + length
    end = min(end, total)
    signal = signal.narrow(-1, start, max(end - start, 0))
    envelope = envelope.narrow(-1, start, max(end - start, 0))
    if envelope.numel() and float(envelope.abs().min()) < 1e-11:
        raise RuntimeError("istft: window overlap add min: the window envelope is (nearly) "
                           "zero somewhere; the signal cannot be reconstructed")
    signal = signal / envelope
    if length is not None and signal.shape[-1] < length:
        signal = pad_with_zeros(signal, signal.ndim - 1, length)
    return signal


def _overlap_add(frames, hop):
    """Sum frames (..., n_frames, n_fft) placed `hop` apart: y[t*hop + k] += frames[t, k].

    Frames are cut into chunks of `hop` samples; chunk j of every frame lands in one
    contiguous run of the output starting at j*hop, so a loop over the few chunks (not
    over frames or samples) builds the result from reshapes, pads and adds."""
    torch = _reftorch()
    n_frames, n_fft = frames.shape[-2], frames.shape[-1]
    total = n_fft + hop * (n_frames - 1)
    batch = list(frames.shape[:-2])
    result = None
    for start in range(0, n_fft, hop):
        chunk = frames.narrow(-1, start, min(hop, n_fft - start))
        chunk = pad_with_zeros(chunk, chunk.ndim - 1, hop)          # (..., n_frames, hop)
        run = chunk.reshape(batch + [n_frames * hop])
        pieces = [torch.zeros(batch + [start], dtype=run.dtype, device=run.device), run,
                  torch.zeros(batch + [max(total - start - n_frames * hop, 0)],
                              dtype=run.dtype, device=run.device)]
        placed = torch.cat(pieces, -1).narrow(-1, 0, total)
        result = placed if result is None else result + placed
    return result


# --- window functions ---------------------------------------------------------------------

def _window_values(name, window_length, periodic, dtype, formula):
    """Evaluate `formula(n, N, step, scalar)` the way PyTorch does: in the dtype's compute
    precision (float32 for float32 and half types), rounding to the dtype after every step,
    with each Python-number operand first converted to the dtype."""
    target = dtype.numpy_dtype
    compute = np.float64 if dtype is D.float64 else np.float32

    def step(values):  # one ATen op: compute, then store in the window's dtype
        return np.asarray(values, dtype=compute).astype(target).astype(compute)

    def scalar(value):  # a Python number operand is first converted to the window's dtype
        return np.asarray(value, dtype=np.float64).astype(target).astype(compute)

    if window_length == 0:
        return np.zeros(0, dtype=target)
    if window_length == 1:
        return np.ones(1, dtype=target)
    full = window_length + 1 if periodic else window_length
    n = step(np.arange(full))
    values = formula(n, full, step, scalar)
    return values[:window_length].astype(target)


def _window_function(name, formula, doc, extra=()):
    def public(window_length, periodic=True, *args, dtype=None, layout=None, device=None,
               requires_grad=False, pin_memory=False):
        # alpha and beta (hamming_window) are positional only, as in PyTorch's signature.
        if len(args) > len(extra):
            raise TypeError(f"{name}() takes at most {2 + len(extra)} positional arguments")
        params = dict(zip(extra, args))
        if isinstance(window_length, bool) or not isinstance(window_length,
                                                              (int, np.integer)):
            raise TypeError(f"{name}(): argument 'window_length' must be int, not "
                            f"{type(window_length).__name__}")
        dtype = D.get_default_dtype() if dtype is None else dtype
        if not (dtype.is_floating_point or dtype.is_complex):
            raise RuntimeError(f"{name} expects floating point dtypes, got: {dtype}")
        if window_length < 0:
            raise RuntimeError(f"{name} requires non-negative window_length, got "
                               f"window_length={window_length}")
        if dtype.is_complex and window_length > 1:  # lengths 0 and 1 need no arange
            raise NotImplementedError(f"\"arange_cpu\" not implemented for "
                                      f"'{dtype.scalar_name}'")
        values = _window_values(name, int(window_length), bool(periodic), dtype,
                                lambda n, N, step, c: formula(n, N, step, c, **params))
        return _finish(values, dtype, device, requires_grad)
    public.__name__ = name
    public.__doc__ = doc
    return public


def _hamming_formula(n, N, step, c, alpha=0.54, beta=0.46):
    # w = alpha - beta cos(2 pi n / (N - 1)), in ATen's order of operations.
    w = step(n * c(2 * math.pi / (N - 1)))
    w = step(np.cos(w))
    w = step(w * c(-beta))
    return step(w + c(alpha))


def _blackman_formula(n, N, step, c):
    # w = 0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1))
    w = step(n * c(math.pi / (N - 1)))
    high = step(step(np.cos(step(w * c(4)))) * c(0.08))
    low = step(step(np.cos(step(w * c(2)))) * c(0.5))
    return step(step(high - low) + c(0.42))


def _bartlett_formula(n, N, step, c):
    # w = 2n / (N - 1) on the first half, 2 - 2n / (N - 1) on the second.
    w = step(n * c(2 / (N - 1)))
    first_half = ((N - 1) >> 1) + 1
    w[first_half:] = step(step(w[first_half:] * c(-1)) + c(2))
    return w


hamming_window = _window_function(
    "hamming_window", _hamming_formula,
    "Hamming window alpha - beta cos(2 pi n / (N - 1)); N = window_length + 1 if periodic.",
    extra=("alpha", "beta"))
hann_window = _window_function(
    "hann_window", lambda n, N, step, c: _hamming_formula(n, N, step, c, 0.5, 0.5),
    "Hann window 0.5 - 0.5 cos(2 pi n / (N - 1)); N = window_length + 1 if periodic.")
blackman_window = _window_function(
    "blackman_window", _blackman_formula,
    "Blackman window 0.42 - 0.5 cos(2 pi n / (N-1)) + 0.08 cos(4 pi n / (N-1)).")
bartlett_window = _window_function(
    "bartlett_window", _bartlett_formula,
    "Bartlett (triangular) window 1 - |2n / (N - 1) - 1|; N = window_length + 1 if periodic.")


# --- Tensor methods -----------------------------------------------------------------------

Tensor.fft = _legacy_method(legacy_fft)
Tensor.ifft = _legacy_method(ifft)
Tensor.rfft = _legacy_method(rfft)
Tensor.irfft = _legacy_method(irfft)
Tensor.stft = stft
Tensor.istft = istft
