"""Spectral ops beyond the op database: the torch.fft module/legacy function duality,
deprecation warnings, autograd node names, gradchecks through real views of complex
results, round trips documented by the legacy API, and window identities.

Values of every op are compared with torch in test_oracle_ops.py (opdb/spectral.py).
"""
from __future__ import annotations

import types
import warnings

import numpy as np
import pytest

import reftorch
from reftorch.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")


def _both(array, dtype="float64", requires_grad=False):
    r = reftorch.tensor(array, dtype=getattr(reftorch, dtype), requires_grad=requires_grad)
    t = torch.tensor(array, dtype=getattr(torch, dtype), requires_grad=requires_grad)
    return r, t


def _close(r, t, tol=1e-10):
    a = r.detach()._host_array()
    b = t.detach().resolve_conj().numpy()
    assert a.shape == b.shape and str(r.dtype) == str(t.dtype)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


RNG = np.random.default_rng(1234)


# --- torch.fft: a module that is also the legacy function ---------------------------------

def test_fft_is_the_module_and_the_legacy_function():
    assert isinstance(reftorch.fft, types.ModuleType)
    import reftorch.fft as fft_module
    assert fft_module is reftorch.fft
    for name in ("fft", "ifft", "rfft", "irfft", "fftn", "ifftn", "rfftn", "irfftn", "fft2",
                 "ifft2", "rfft2", "irfft2", "hfft", "ihfft", "fftfreq", "rfftfreq",
                 "fftshift", "ifftshift"):
        assert callable(getattr(reftorch.fft, name)), name
        assert hasattr(torch.fft, name), name
    x = RNG.standard_normal((3, 4, 2))
    r, t = _both(x)
    with pytest.warns(DeprecationWarning):
        legacy = reftorch.fft(r, 1)
    _close(legacy, torch.view_as_real(torch.fft.fft(torch.view_as_complex(t))))
    # The legacy torch-level ifft/rfft/irfft stay plain functions next to the module.
    assert callable(reftorch.ifft) and not isinstance(reftorch.ifft, types.ModuleType)


@pytest.mark.parametrize("call,modern", [
    (lambda x: reftorch.fft(x, 1), "torch.fft.fftn"),
    (lambda x: reftorch.ifft(x, 2), "torch.fft.ifftn"),
    (lambda x: reftorch.rfft(x, 1), "torch.fft.rfftn"),
    (lambda x: reftorch.irfft(x, 1), "torch.fft.irfftn"),
    (lambda x: x.fft(1), "torch.fft.fftn"),
    (lambda x: x.irfft(1), "torch.fft.irfftn"),
])
def test_legacy_functions_warn_naming_the_modern_equivalent(call, modern):
    x = reftorch.tensor(RNG.standard_normal((3, 4, 2)))
    with pytest.warns(DeprecationWarning, match=modern.replace(".", r"\.")):
        call(x)


def test_stft_without_return_complex_warns_and_returns_real_pairs():
    signal = RNG.standard_normal(40)
    r, t = _both(signal)
    with pytest.warns(DeprecationWarning, match="return_complex"):
        legacy = reftorch.stft(r, 8)
    _close(legacy, torch.view_as_real(torch.stft(t, 8, return_complex=True)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        modern = reftorch.stft(r, 8, return_complex=True)   # no warning when it is given
    _close(modern, torch.stft(t, 8, return_complex=True))
    _close(r.stft(8, return_complex=True), torch.stft(t, 8, return_complex=True))


# --- documented round trips of the legacy API ---------------------------------------------

def test_legacy_round_trips_recover_the_signal():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        x = reftorch.tensor(RNG.standard_normal((3, 3, 2)))
        for normalized in (False, True):
            back = reftorch.ifft(reftorch.fft(x, 2, normalized), 2, normalized)
            np.testing.assert_allclose(back._host_array(), x._host_array(), atol=1e-12)
        signal = reftorch.tensor(RNG.standard_normal((4, 5)))
        spectrum = reftorch.rfft(signal, 2, onesided=True)
        assert tuple(spectrum.shape) == (4, 3, 2)          # the documented example's shape
        assert tuple(reftorch.rfft(signal, 2, onesided=False).shape) == (4, 5, 2)
        back = reftorch.irfft(spectrum, 2, onesided=True, signal_sizes=signal.shape)
        np.testing.assert_allclose(back._host_array(), signal._host_array(), atol=1e-12)
        # Without signal_sizes the odd length is lost (the documented size mismatch).
        assert tuple(reftorch.irfft(spectrum, 2).shape) == (4, 4)


def test_legacy_batch_dims_and_empty_batch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        x = reftorch.tensor(RNG.standard_normal((3, 3, 5, 5, 2)))
        assert tuple(reftorch.fft(x, 2).shape) == (3, 3, 5, 5, 2)
        empty = reftorch.zeros(0, 4, 2)
        assert tuple(reftorch.fft(empty, 1).shape) == (0, 4, 2)
        assert tuple(reftorch.rfft(reftorch.zeros(0, 4), 1).shape) == (0, 3, 2)


def test_legacy_keeps_float32():
    x = RNG.standard_normal((4, 6, 2))
    r, t = _both(x, "float32")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        result = reftorch.fft(r, 2)
    expected = torch.view_as_real(torch.fft.fft2(torch.view_as_complex(t)))
    assert result.dtype is reftorch.float32
    _close(result, expected, tol=1e-5)


# --- autograd node names ------------------------------------------------------------------

def _node_name(t):
    return type(t.grad_fn).__name__


def test_node_names_match_torch():
    c = RNG.standard_normal(6) + 1j * RNG.standard_normal(6)
    rc, tc = _both(c, "complex128", requires_grad=True)
    rr, tr = _both(RNG.standard_normal(6), requires_grad=True)
    for name, r_in, t_in in (("fft", rc, tc), ("ifftn", rc, tc), ("rfft", rr, tr),
                             ("irfft", rc, tc), ("fft", rr, tr), ("rfft2",
                                                                 rr.reshape(2, 3),
                                                                 tr.reshape(2, 3))):
        r_out = getattr(reftorch.fft, name)(r_in)
        t_out = getattr(torch.fft, name)(t_in)
        assert _node_name(r_out) == _node_name(t_out), name


def test_legacy_node_names_are_the_modern_transform_nodes():
    pairs, _ = _both(RNG.standard_normal((4, 2)), requires_grad=True)
    real, _ = _both(RNG.standard_normal(4), requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        names = [_node_name(reftorch.fft(pairs, 1)), _node_name(reftorch.ifft(pairs, 1)),
                 _node_name(reftorch.rfft(real, 1)), _node_name(reftorch.irfft(pairs, 1))]
    t = torch.randn(4, dtype=torch.float64, requires_grad=True)
    tc = torch.randn(4, dtype=torch.complex128, requires_grad=True)
    expected = [_node_name(torch.fft.fft(tc)), _node_name(torch.fft.ifft(tc)),
                _node_name(torch.fft.rfft(t)), _node_name(torch.fft.irfft(tc))]
    assert names == expected


# --- gradchecks of the complex transforms through real views ------------------------------

def _complex_from(real, imag):
    return real.to(reftorch.complex128) + imag.to(reftorch.complex128) * 1j


def _as_real(z):
    return reftorch.stack([z.real, z.imag], -1) if z.is_complex() else z


@pytest.mark.parametrize("name,kwargs,shape", [
    ("fft", {}, (5,)), ("ifft", {"n": 6, "norm": "ortho"}, (2, 4)),
    ("irfft", {}, (2, 4)), ("irfft", {"n": 5}, (4,)), ("hfft", {"norm": "forward"}, (4,)),
    ("fftn", {"s": (3, 4)}, (2, 3)), ("ifft2", {}, (2, 3)), ("irfftn", {}, (2, 3)),
    ("irfft2", {"s": (2, 5)}, (2, 3)), ("fftshift", {}, (2, 3)),
])
def test_gradcheck_complex_input(name, kwargs, shape):
    real = reftorch.tensor(RNG.standard_normal(shape), requires_grad=True)
    imag = reftorch.tensor(RNG.standard_normal(shape), requires_grad=True)

    def f(re, im):
        return _as_real(getattr(reftorch.fft, name)(_complex_from(re, im), **kwargs))
    assert gradcheck(f, (real, imag), eps=1e-6, atol=1e-5, rtol=1e-3)


@pytest.mark.parametrize("name,kwargs,shape", [
    ("fft", {}, (5,)), ("ifft", {"n": 4}, (2, 3)), ("rfft", {}, (6,)),
    ("rfft", {"n": 7, "norm": "ortho"}, (2, 5)), ("ihfft", {}, (5,)),
    ("rfftn", {}, (2, 4)), ("rfft2", {"s": (3, 3)}, (2, 4)), ("ihfftn", {}, (3, 2)),
])
def test_gradcheck_real_input(name, kwargs, shape):
    x = reftorch.tensor(RNG.standard_normal(shape), requires_grad=True)
    assert gradcheck(lambda t: _as_real(getattr(reftorch.fft, name)(t, **kwargs)), (x,),
                     eps=1e-6, atol=1e-5, rtol=1e-3)


def test_stft_complex_gradcheck_and_istft_gradcheck():
    x = reftorch.tensor(RNG.standard_normal(12), requires_grad=True)
    window = reftorch.tensor(np.hanning(6)[1:-1] + 0.1, requires_grad=True)
    assert gradcheck(lambda s, w: _as_real(reftorch.stft(s, 4, window=w, return_complex=True)),
                     (x, window), eps=1e-6, atol=1e-5, rtol=1e-3)
    real = reftorch.tensor(RNG.standard_normal((3, 4)), requires_grad=True)
    imag = reftorch.tensor(RNG.standard_normal((3, 4)), requires_grad=True)
    assert gradcheck(lambda re, im, w: reftorch.istft(_complex_from(re, im), 4, window=w),
                     (real, imag, window), eps=1e-6, atol=1e-5, rtol=1e-3)


def test_second_derivatives():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pairs = reftorch.tensor(RNG.standard_normal((3, 2)), requires_grad=True)
        real = reftorch.tensor(RNG.standard_normal(5), requires_grad=True)
        assert gradgradcheck(lambda x: reftorch.fft(x, 1, True) ** 2, (pairs,))
        assert gradgradcheck(lambda x: reftorch.rfft(x, 1) ** 2, (real,))
        assert gradgradcheck(lambda x: reftorch.irfft(x, 1, signal_sizes=(5,)) ** 2,
                             (pairs,))
        assert gradgradcheck(lambda x: _as_real(reftorch.fft.rfft(x)) ** 2, (real,))


# --- stft / istft -------------------------------------------------------------------------

def test_istft_inverts_stft_like_torch():
    signal = RNG.standard_normal((2, 64))
    r, t = _both(signal)
    rw, tw = _both(np.hanning(18)[1:-1])
    r_spec = reftorch.stft(r, 16, window=rw, return_complex=True)
    t_spec = torch.stft(t, 16, window=tw, return_complex=True)
    _close(r_spec, t_spec)
    r_back = reftorch.istft(r_spec, 16, window=rw, length=64)
    _close(r_back, torch.istft(t_spec, 16, window=tw, length=64))
    np.testing.assert_allclose(r_back._host_array(), signal, atol=1e-10)


def test_stft_float32_complex_output_dtype():
    r, t = _both(RNG.standard_normal(64), "float32")
    result = reftorch.stft(r, 16, return_complex=True)
    assert result.dtype is reftorch.complex64
    _close(result, torch.stft(t, 16, return_complex=True), tol=1e-4)


# --- torch.fft extras ---------------------------------------------------------------------

def test_out_argument():
    c = RNG.standard_normal((3, 4)) + 1j * RNG.standard_normal((3, 4))
    rc, tc = _both(c, "complex128")
    r_out = reftorch.empty(0, dtype=reftorch.complex128)
    t_out = torch.empty(0, dtype=torch.complex128)
    assert reftorch.fft.fft(rc, out=r_out) is r_out
    torch.fft.fft(tc, out=t_out)
    _close(r_out, t_out)
    r_out = reftorch.empty(0, dtype=reftorch.float64)
    t_out = torch.empty(0, dtype=torch.float64)
    assert reftorch.fft.irfft(rc, out=r_out) is r_out
    torch.fft.irfft(tc, out=t_out)
    _close(r_out, t_out)
    # A complex result cannot be written into a real tensor.
    with pytest.raises(RuntimeError):
        torch.fft.fft(tc, out=t_out)
    with pytest.raises(RuntimeError):
        reftorch.fft.fft(rc, out=r_out)


def test_integer_input_is_promoted_to_the_default_dtype():
    r, t = _both(np.arange(6), "int64")
    _close(reftorch.fft.fft(r), torch.fft.fft(t), tol=1e-5)
    reftorch.set_default_dtype(reftorch.float64)
    torch.set_default_dtype(torch.float64)
    try:
        _close(reftorch.fft.rfft(r), torch.fft.rfft(t))
        _close(reftorch.hann_window(5), torch.hann_window(5))
        _close(reftorch.fft.fftfreq(5), torch.fft.fftfreq(5))
    finally:
        reftorch.set_default_dtype(reftorch.float32)
        torch.set_default_dtype(torch.float32)


# --- windows ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "bartlett_window",
                                  "blackman_window"])
def test_periodic_window_is_the_symmetric_one_truncated(name):
    """The documented identity window(L, periodic=True) == window(L + 1, False)[:-1]."""
    fn = getattr(reftorch, name)
    for length in (2, 5, 8):
        periodic = fn(length, True, dtype=reftorch.float64)._host_array()
        symmetric = fn(length + 1, False, dtype=reftorch.float64)._host_array()[:-1]
        np.testing.assert_array_equal(periodic, symmetric)
    window = fn(6, requires_grad=True)
    assert window.requires_grad and window.is_leaf
    assert fn(6, layout=reftorch.strided).dtype is reftorch.float32
