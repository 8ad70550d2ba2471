"""Op-database entries: spectral ops (see core.py for the entry format).

The legacy functions (torch.fft(input, signal_ndim), ifft, rfft, irfft, and stft without
return_complex) are gone from PyTorch 2.x. Their entries call them on reftorch and, on torch,
the documented modern equivalent: view_as_real(torch.fft.fftn(view_as_complex(x), dim=<the
last signal_ndim dims>, norm="ortho" if normalized else "backward")) and so on. The torch side
also checks the documented preconditions of the legacy API (signal_ndim in 1..3, a last dim
of size 2, floating input, signal_sizes consistent with the input) and raises RuntimeError
where PyTorch 1.x did, since the modern functions accept (or reject differently) those inputs.
"""
from __future__ import annotations

import numpy as np

from .core import DTypeArg, OpInfo, Sample, TensorArg, tensor

REAL = ("float32", "float64")
COMPLEX = ("complex64", "complex128")
FFT_DTYPES = ("bool", "int64", "float16", "float32", "float64", "complex64", "complex128")


def _t(shape, dt, rng, layout="contiguous", **kw):
    return tensor(shape, dt, rng, layout, **kw)


def _is_reftorch(module):
    return module.__name__ == "reftorch"


# --- the legacy real-pair functions -------------------------------------------------------

def _check_legacy(torch, x, signal_ndim, complex_input):
    if not 1 <= signal_ndim <= 3:
        raise RuntimeError("signal_ndim must be 1, 2 or 3")
    if x.dtype not in (torch.float32, torch.float64):
        raise RuntimeError("expected a floating input")
    if x.ndim < signal_ndim + complex_input or complex_input and x.shape[-1] != 2:
        raise RuntimeError("expected (batch..., signal..., 2)")
    end = x.ndim - complex_input
    sizes = tuple(x.shape[end - signal_ndim:end])
    if 0 in sizes:
        raise RuntimeError("empty signal")
    return tuple(range(-signal_ndim, 0)), sizes


def _norm(normalized):
    return "ortho" if normalized else "backward"


def _legacy_fft(module, x, signal_ndim, normalized=False, inverse=False):
    if _is_reftorch(module):
        return (module.ifft if inverse else module.fft)(x, signal_ndim, normalized)
    dims, _ = _check_legacy(module, x, signal_ndim, 1)
    transform = module.fft.ifftn if inverse else module.fft.fftn
    z = module.view_as_complex(x.contiguous())
    return module.view_as_real(transform(z, dim=dims, norm=_norm(normalized)))


def _legacy_rfft(module, x, signal_ndim, normalized=False, onesided=True):
    if _is_reftorch(module):
        return module.rfft(x, signal_ndim, normalized, onesided)
    dims, _ = _check_legacy(module, x, signal_ndim, 0)
    transform = module.fft.rfftn if onesided else module.fft.fftn
    return module.view_as_real(transform(x, dim=dims, norm=_norm(normalized)))


def _legacy_irfft(module, x, signal_ndim, normalized=False, onesided=True, signal_sizes=None):
    if _is_reftorch(module):
        return module.irfft(x, signal_ndim, normalized, onesided, signal_sizes)
    dims, sizes = _check_legacy(module, x, signal_ndim, 1)
    if signal_sizes is None:
        signal_sizes = sizes[:-1] + ((2 * (sizes[-1] - 1)) if onesided else sizes[-1],)
    signal_sizes = tuple(signal_sizes)
    half = signal_sizes[-1] // 2 + 1 if onesided else signal_sizes[-1]
    if len(signal_sizes) != signal_ndim or signal_sizes[:-1] != sizes[:-1] or \
            sizes[-1] != half or min(signal_sizes) <= 0:
        raise RuntimeError("signal_sizes do not match the input")
    z = module.view_as_complex(x.contiguous())
    return module.fft.irfftn(z, s=signal_sizes, dim=dims, norm=_norm(normalized))


def _pairs(shape, dt, rng, layout="contiguous"):
    """A real-pair tensor: `shape` complex numbers as a last dim of size 2."""
    return _t(tuple(shape) + (2,), dt, rng, layout)


def _fft_samples(dt, rng):
    yield Sample((_pairs((4,), dt, rng), 1), {}, "1-d")
    yield Sample((_pairs((3, 5), dt, rng), 1), {"normalized": True}, "batched normalized")
    yield Sample((_pairs((2, 3), dt, rng), 2), {}, "2-d")
    yield Sample((_pairs((2, 2, 3), dt, rng), 3, True), {}, "3-d normalized")
    yield Sample((_pairs((2, 3, 4), dt, rng, "transposed"), 2), {}, "transposed batch")
    yield Sample((_pairs((3, 4), dt, rng, "strided"), 1), {}, "strided")
    yield Sample((_pairs((2, 2, 2, 3), dt, rng), 3), {}, "3-d batched")
    yield Sample((_t((3, 4), dt, rng), 1), {}, "error last dim 4")
    yield Sample((_pairs((3, 4), dt, rng), 4), {}, "error signal_ndim 4")
    yield Sample((_pairs((3, 4), dt, rng), 0), {}, "error signal_ndim 0")
    yield Sample((_pairs((4,), dt, rng), 2), {}, "error too few dims")
    yield Sample((_pairs((3, 0), dt, rng), 1), {}, "error empty signal")


def _rfft_samples(dt, rng):
    yield Sample((_t((6,), dt, rng), 1), {}, "1-d even")
    yield Sample((_t((3, 5), dt, rng), 1), {"normalized": True}, "batched odd normalized")
    yield Sample((_t((2, 4), dt, rng), 1, False, False), {}, "two-sided")
    yield Sample((_t((3, 4), dt, rng, "transposed"), 2), {}, "2-d transposed")
    yield Sample((_t((2, 3, 4), dt, rng), 2, True, False), {}, "2-d two-sided normalized")
    yield Sample((_t((2, 3, 5), dt, rng, "strided"), 3), {}, "3-d strided")
    yield Sample((_t((2, 2, 2, 3), dt, rng), 3), {"onesided": False}, "3-d batched two-sided")
    yield Sample((_t((4,), dt, rng), 2), {}, "error too few dims")
    yield Sample((_t((3, 4), dt, rng), 5), {}, "error signal_ndim")
    yield Sample((_t((4, 0), dt, rng), 1), {}, "error empty signal")


def _irfft_samples(dt, rng):
    yield Sample((_pairs((4,), dt, rng), 1), {}, "1-d")
    yield Sample((_pairs((3, 4), dt, rng), 1), {"signal_sizes": (7,)}, "odd signal size")
    yield Sample((_pairs((2, 3), dt, rng), 1, True), {}, "normalized")
    yield Sample((_pairs((2, 5), dt, rng), 1, False, False), {}, "two-sided input")
    yield Sample((_pairs((3, 3), dt, rng, "transposed"), 2), {"signal_sizes": [3, 5]},
                 "2-d signal_sizes transposed")
    yield Sample((_pairs((2, 3, 4), dt, rng, "strided"), 2, True, True), {}, "2-d strided")
    yield Sample((_pairs((2, 2, 3), dt, rng), 3), {"signal_sizes": (2, 2, 4)}, "3-d")
    yield Sample((_pairs((2, 4), dt, rng), 2, False, False, (2, 4)), {}, "2-d two-sided")
    yield Sample((_pairs((3, 4), dt, rng), 1), {"signal_sizes": (9,)}, "error signal_sizes")
    yield Sample((_pairs((3, 4), dt, rng), 1), {"signal_sizes": (6, 6)}, "error sizes length")
    yield Sample((_pairs((3, 1), dt, rng), 1), {}, "error inferred size 0")
    yield Sample((_t((3, 4), dt, rng), 1), {}, "error last dim 4")


# --- stft ---------------------------------------------------------------------------------

def _stft_call(module, x, n_fft, *args, **kwargs):
    """The legacy default (no return_complex, real input) is view_as_real of the modern one."""
    if _is_reftorch(module) or "return_complex" in kwargs or x.is_complex():
        return module.stft(x, n_fft, *args, **kwargs)
    return module.view_as_real(module.stft(x, n_fft, *args, return_complex=True, **kwargs))


def _window(n, dt, rng):
    """A hann-like positive window (random, so that the gradient with respect to it shows)."""
    values = np.hanning(n + 2)[1:-1] + 0.1 * rng.random(n)
    return TensorArg(values, dt)


def _stft_samples(dt, rng):
    real = dt in REAL
    window_dt = dt if real else {"complex64": "float32", "complex128": "float64"}[dt]
    # Small samples first: the finite-difference gradcheck takes the first three.
    yield Sample((_t((12,), dt, rng), 4), {}, "1-d defaults")
    yield Sample((_t((2, 10), dt, rng), 4), {"hop_length": 3, "normalized": True},
                 "batched hop normalized")
    yield Sample((_t((12,), dt, rng), 6), {"window": _window(4, window_dt, rng),
                                           "win_length": 4, "center": False},
                 "padded window")
    yield Sample((_t((2, 20), dt, rng, "transposed"), 8),
                 {"window": _window(8, window_dt, rng), "pad_mode": "constant"}, "constant pad")
    yield Sample((_t((20,), dt, rng, "strided"), 8, 2), {"pad_mode": "replicate"}, "replicate")
    yield Sample((_t((20,), dt, rng), 8), {"pad_mode": "circular", "onesided": False},
                 "circular two-sided")
    yield Sample((_t((20,), dt, rng), 7, 3), {"win_length": 5}, "odd n_fft")
    yield Sample((_t((2, 16), dt, rng), 8), {"window": _window(6, window_dt, rng),
                                             "win_length": 6, "center": False,
                                             "align_to_window": True}, "align to window")
    yield Sample((_t((20,), dt, rng), 8), {"return_complex": True}, "return_complex")
    if real:
        yield Sample((_t((20,), dt, rng), 8), {"return_complex": False}, "return_complex False")
    yield Sample((_t((2, 3, 20), dt, rng), 8), {}, "error 3-d")
    yield Sample((_t((20,), dt, rng), 0), {}, "error n_fft 0")
    yield Sample((_t((20,), dt, rng), 8), {"hop_length": 0}, "error hop 0")
    yield Sample((_t((20,), dt, rng), 8), {"win_length": 9}, "error win_length")
    yield Sample((_t((20,), dt, rng), 8), {"window": _window(6, window_dt, rng)},
                 "error window size")
    yield Sample((_t((20,), dt, rng), 8), {"pad_mode": "bad"}, "error pad mode")
    yield Sample((_t((6,), dt, rng), 16), {}, "error reflect pad too long")
    yield Sample((_t((6,), dt, rng), 8), {"center": False}, "error n_fft too long")


def _istft_samples(dt, rng):
    real_dt = {"complex64": "float32", "complex128": "float64"}[dt]
    hann = TensorArg(np.hanning(10)[1:-1], real_dt)          # positive everywhere
    yield Sample((_t((5, 6), dt, rng), 8), {"window": hann}, "onesided")
    yield Sample((_t((2, 5, 7), dt, rng), 8, 3), {"window": hann, "normalized": True},
                 "batched hop normalized")
    yield Sample((_t((5, 6), dt, rng), 8), {"window": hann, "length": 20}, "length")
    yield Sample((_t((5, 6), dt, rng), 8), {"window": hann, "length": 30}, "long length")
    yield Sample((_t((8, 5), dt, rng), 8), {"window": hann, "onesided": False,
                                            "return_complex": True}, "two-sided complex")
    yield Sample((_t((5, 6), dt, rng), 8), {"window": hann, "center": False}, "no center")
    yield Sample((_t((5, 6), dt, rng), 8), {}, "rectangular")
    yield Sample((_t((5, 6), dt, rng), 8), {"window": TensorArg(np.hanning(8), real_dt)},
                 "error zero envelope")
    yield Sample((_t((6, 6), dt, rng), 8), {"window": hann}, "error frequency bins")
    yield Sample((_t((5, 6), dt, rng), 8), {"window": hann, "hop_length": 9}, "error hop")


# --- torch.fft module --------------------------------------------------------------------------

def _fft_module_call(name):
    return lambda module, *args, **kwargs: getattr(module.fft, name)(*args, **kwargs)


def _one_dim_samples():
    """Samples for fft/ifft/rfft/irfft/hfft/ihfft: n, dim, norm, layouts, errors."""
    def samples(dt, rng):
        yield Sample((_t((8,), dt, rng),), {}, "1-d")
        yield Sample((_t((3, 5), dt, rng),), {"norm": "ortho"}, "odd ortho")
        yield Sample((_t((4, 3), dt, rng, "transposed"), None, 0), {"norm": "forward"},
                     "dim 0 transposed forward")
        yield Sample((_t((2, 6), dt, rng, "strided"), 9), {"norm": "backward"}, "pad n")
        yield Sample((_t((2, 6), dt, rng), 4, -2), {}, "trim n dim -2")
        yield Sample((_t((2, 3, 4), dt, rng),), {"dim": 1, "n": 5}, "3-d middle dim")
        yield Sample((_t((1,), dt, rng),), {}, "size 1")
        yield Sample((_t((4,), dt, rng), 0), {}, "error n 0")
        yield Sample((_t((4,), dt, rng),), {"norm": "bad"}, "error norm")
        yield Sample((_t((4,), dt, rng), None, 1), {}, "error dim")
        yield Sample((_t((), dt, rng),), {}, "error 0-dim")
        yield Sample((_t((2, 0), dt, rng),), {}, "error empty")
    return samples


def _nd_samples(two_dim=False):
    def samples(dt, rng):
        yield Sample((_t((4, 6), dt, rng),), {}, "2-d")
        yield Sample((_t((2, 3, 4), dt, rng, "transposed"),), {"norm": "ortho"},
                     "3-d transposed ortho")
        yield Sample((_t((3, 5), dt, rng, "strided"), (4, 6)), {}, "s pads")
        yield Sample((_t((2, 3, 6), dt, rng), (2, -1)), {"dim": (0, 2), "norm": "forward"},
                     "s with -1 and dim")
        yield Sample((_t((3, 4, 5), dt, rng),), {"s": (3, 4), "dim": (-1, 0)},
                     "dims out of order")
        if not two_dim:
            yield Sample((_t((3, 4), dt, rng),), {"s": (5,)}, "s only")
            yield Sample((_t((2, 3), dt, rng),), {"dim": 1}, "int dim")
            yield Sample((_t((2, 3), dt, rng),), {"dim": (0, 0)}, "error repeated dim")
            yield Sample((_t((3,), dt, rng),), {"s": (2, 2)}, "error s too long")
        yield Sample((_t((3, 4), dt, rng),), {"s": (2, 2), "dim": (0,)}, "error s and dim")
        yield Sample((_t((3, 4), dt, rng),), {"s": (0, 2)}, "error s 0")
    return samples


def _freq_samples(dt, rng):
    yield Sample((8,), {}, "even")
    yield Sample((7, 0.25), {}, "odd d")
    yield Sample((5,), {"d": 2.5, "dtype": DTypeArg("float64")}, "float64")
    yield Sample((6,), {"dtype": DTypeArg("float16")}, "float16")
    yield Sample((1,), {}, "one")
    yield Sample((0,), {}, "zero")
    yield Sample((5,), {"dtype": DTypeArg("int64")}, "error int64")
    yield Sample((-1,), {}, "error negative")


def _shift_samples(dt, rng):
    yield Sample((_t((7,), dt, rng),), {}, "odd 1-d")
    yield Sample((_t((4, 5), dt, rng, "transposed"),), {}, "all dims")
    yield Sample((_t((4, 5), dt, rng),), {"dim": 1}, "int dim")
    yield Sample((_t((2, 3, 4), dt, rng, "strided"),), {"dim": (0, -1)}, "tuple dim")
    yield Sample((_t((), dt, rng),), {}, "error 0-dim")


# --- windows ----------------------------------------------------------------------------------

def _window_samples(extra=False):
    def samples(dt, rng):
        d = DTypeArg(dt)
        for length in (0, 1, 2, 7, 16):
            yield Sample((length,), {"dtype": d}, f"length {length}")
            yield Sample((length, False), {"dtype": d}, f"length {length} symmetric")
        if extra:
            yield Sample((9, True, 0.5), {"dtype": d}, "alpha")
            yield Sample((9, False, 0.6, 0.3), {"dtype": d}, "alpha beta")
            yield Sample((9,), {"alpha": 0.6, "beta": 0.4, "dtype": d}, "keywords")
        yield Sample((-1,), {"dtype": d}, "error negative")
    return samples


def _default_window_samples(dt, rng):
    yield Sample((10,), {}, "default dtype")
    yield Sample((10,), {"requires_grad": True}, "requires_grad")


def _grad_dtypes(name):
    """rfft and ihfft take real input only."""
    return ("float64",) if name.startswith(("rfft", "ihfft")) else ("float64", "complex128")


_WINDOW_DTYPES = ("int64", "bool", "float16", "bfloat16", "float32", "float64", "complex64")

OPS = [
    OpInfo("fft (legacy)", lambda m, *a, **k: _legacy_fft(m, *a, **k), _fft_samples,
           dtypes=REAL),
    OpInfo("ifft (legacy)", lambda m, *a, **k: _legacy_fft(m, *a, inverse=True, **k),
           _fft_samples, dtypes=REAL),
    OpInfo("rfft (legacy)", _legacy_rfft, _rfft_samples, dtypes=REAL),
    OpInfo("irfft (legacy)", _legacy_irfft, _irfft_samples, dtypes=REAL),
    OpInfo("Tensor.rfft (legacy)",
           lambda m, x, *a, **k: x.rfft(*a, **k) if _is_reftorch(m) else _legacy_rfft(m, x, *a,
                                                                                       **k),
           _rfft_samples, dtypes=("float64",), differentiable=False),
    OpInfo("stft", _stft_call, _stft_samples, dtypes=REAL + COMPLEX),
    OpInfo("Tensor.stft", lambda m, x, *a, **k: x.stft(*a, **k) if _is_reftorch(m)
           else _stft_call(m, x, *a, **k), _stft_samples, dtypes=("float32",),
           differentiable=False),
    # istft's inputs are complex: gradients are compared with torch's in complex128, and
    # the real-only finite-difference gradcheck does not apply.
    OpInfo("istft", lambda m, *a, **k: m.istft(*a, **k), _istft_samples, dtypes=COMPLEX,
           grad_dtypes=("complex128",), gradcheck=False),
    # Complex inputs or outputs: gradients are compared with torch's (complex128 too where
    # the op takes complex input); test_spectral.py gradchecks them through real views.
    *(OpInfo(f"fft.{name}", _fft_module_call(name), _one_dim_samples(), dtypes=FFT_DTYPES,
             grad_dtypes=_grad_dtypes(name), gradcheck=False)
      for name in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")),
    *(OpInfo(f"fft.{name}", _fft_module_call(name), _nd_samples(), dtypes=FFT_DTYPES,
             grad_dtypes=_grad_dtypes(name), gradcheck=False)
      for name in ("fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn")),
    *(OpInfo(f"fft.{name}", _fft_module_call(name), _nd_samples(two_dim=True),
             dtypes=("float32", "float64", "complex128"), grad_dtypes=_grad_dtypes(name),
             gradcheck=False)
      for name in ("fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2")),
    *(OpInfo(f"fft.{name}", _fft_module_call(name), _freq_samples, dtypes=("float32",),
             differentiable=False) for name in ("fftfreq", "rfftfreq")),
    *(OpInfo(f"fft.{name}", _fft_module_call(name), _shift_samples,
             dtypes=("int64", "float32", "float64", "complex128"))
      for name in ("fftshift", "ifftshift")),
    *(OpInfo(name, lambda m, *a, name=name, **k: getattr(m, name)(*a, **k),
             _window_samples(extra=name == "hamming_window"), dtypes=_WINDOW_DTYPES,
             differentiable=False)
      for name in ("hann_window", "hamming_window", "bartlett_window", "blackman_window")),
    *(OpInfo(f"{name} defaults", lambda m, *a, name=name, **k: getattr(m, name)(*a, **k),
             _default_window_samples, dtypes=("float32",), differentiable=False)
      for name in ("hann_window", "hamming_window", "bartlett_window", "blackman_window")),
]
