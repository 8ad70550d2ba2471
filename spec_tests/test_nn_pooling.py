"""Pooling layers and their functional forms against PyTorch: values, indices, gradients,
reprs, seeded fractional pooling and the errors PyTorch raises."""
from __future__ import annotations

import numpy as np
import pytest

import reftorch

torch = pytest.importorskip("torch")

RTOL = {"float64": 1e-10, "float32": 1e-5}


def _pair(array, dtype="float64", requires_grad=True):
    r = reftorch.tensor(array, dtype=getattr(reftorch, dtype))
    t = torch.tensor(array, dtype=getattr(torch, dtype))
    return r.requires_grad_(requires_grad), t.requires_grad_(requires_grad)


def _close(ours, theirs, dtype="float64"):
    theirs = theirs.detach().numpy()
    np.testing.assert_allclose(ours.detach().numpy(), theirs, rtol=RTOL[dtype],
                               atol=RTOL[dtype], equal_nan=True)


def _build(name, *args, **kwargs):
    return getattr(reftorch.nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)


def _run_both(name, args, kwargs, shape, dtype="float64", seed=0, nan=False):
    """Forward and backward of the module in both libraries; compare everything."""
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(shape)
    if nan:
        values.flat[::7] = np.nan
    ours, theirs = _build(name, *args, **kwargs)
    assert repr(ours) == repr(theirs)
    x, xt = _pair(values, dtype)
    out, out_t = ours(x), theirs(xt)
    if isinstance(out_t, tuple):
        _close(out[0], out_t[0], dtype)
        assert out[1].dtype == reftorch.int64
        np.testing.assert_array_equal(out[1].numpy(), out_t[1].numpy())
        out, out_t = out[0], out_t[0]
    else:
        _close(out, out_t, dtype)
    assert type(out.grad_fn).__name__ == type(out_t.grad_fn).__name__
    if not nan:
        grad = rng.standard_normal(tuple(out_t.shape))
        g, gt = _pair(grad, dtype, requires_grad=False)
        out.backward(g)
        out_t.backward(gt)
        _close(x.grad, xt.grad, dtype)


MAX_CASES = [
    ("MaxPool1d", (3,), {}, (2, 3, 10)),
    ("MaxPool1d", (3, 2, 1), {"dilation": 2, "ceil_mode": True}, (2, 3, 11)),
    ("MaxPool1d", (2,), {"return_indices": True}, (3, 9)),                 # unbatched
    ("MaxPool2d", (3, 2, 1), {}, (2, 3, 7, 8)),
    ("MaxPool2d", ((3, 2), (2, 1), (1, 0)), {"ceil_mode": True}, (2, 2, 8, 7)),
    ("MaxPool2d", (3, 2), {"ceil_mode": True, "return_indices": True}, (1, 2, 6, 6)),
    ("MaxPool2d", (2,), {"dilation": (2, 1), "padding": 1}, (2, 7, 9)),
    ("MaxPool2d", (3, 3, 1), {"ceil_mode": True, "return_indices": True}, (2, 2, 5, 5)),
    ("MaxPool3d", (2,), {"return_indices": True}, (1, 2, 5, 4, 6)),
    ("MaxPool3d", (3, 2, 1), {"ceil_mode": True, "dilation": (1, 2, 1)}, (2, 6, 7, 5)),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,args,kwargs,shape", MAX_CASES)
def test_max_pool_modules(name, args, kwargs, shape, dtype):
    _run_both(name, args, kwargs, shape, dtype)


def test_max_pool_nan_and_ties_pick_indices_like_torch():
    # PyTorch's CPU rule: the first of equal maxima; a later NaN replaces the running max
    values = np.array([[[[1.0, 1.0, np.nan, 2.0], [np.nan, 3.0, 3.0, np.nan],
                         [0.5, 0.5, 0.5, 0.5], [-np.inf, -np.inf, -np.inf, -np.inf]]]])
    for kwargs in ({"kernel_size": 2}, {"kernel_size": 3, "stride": 1, "padding": 1},
                   {"kernel_size": 2, "stride": 1}):
        x, xt = _pair(values, requires_grad=False)
        out, idx = reftorch.nn.functional.max_pool2d(x, return_indices=True, **kwargs)
        out_t, idx_t = torch.nn.functional.max_pool2d(xt, return_indices=True, **kwargs)
        np.testing.assert_array_equal(idx.numpy(), idx_t.numpy())
        _close(out, out_t)
    _run_both("MaxPool2d", (2, 1), {"return_indices": True}, (1, 2, 5, 6), nan=True)


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "float16", "bfloat16"])
def test_max_pool_other_dtypes(dtype):
    rng = np.random.default_rng(1)
    values = rng.integers(0, 50, size=(2, 3, 7, 6)).astype(np.float32)
    r = reftorch.tensor(values).to(getattr(reftorch, dtype))
    t = torch.tensor(values).to(getattr(torch, dtype))
    out, idx = reftorch.nn.functional.max_pool2d(r, 3, 2, 1, return_indices=True)
    out_t, idx_t = torch.nn.functional.max_pool2d(t, 3, 2, 1, return_indices=True)
    assert out.dtype == getattr(reftorch, dtype)
    np.testing.assert_array_equal(out.float().numpy(), out_t.float().numpy())
    np.testing.assert_array_equal(idx.numpy(), idx_t.numpy())


AVG_CASES = [
    ("AvgPool1d", (3,), {}, (2, 3, 10)),
    ("AvgPool1d", (4, 3, 2), {"ceil_mode": True, "count_include_pad": False}, (2, 11)),
    ("AvgPool2d", (3, 2, 1), {}, (2, 3, 7, 8)),
    ("AvgPool2d", (3, 2, 1), {"count_include_pad": False, "ceil_mode": True}, (2, 3, 8, 8)),
    ("AvgPool2d", (3, 2, 1), {"ceil_mode": True}, (2, 3, 8, 8)),
    ("AvgPool2d", ((3, 2), (2, 3)), {"ceil_mode": True, "divisor_override": 5}, (1, 2, 8, 9)),
    ("AvgPool2d", (2,), {"padding": 1, "count_include_pad": False}, (3, 5, 5)),
    ("AvgPool3d", (2,), {}, (1, 2, 5, 4, 6)),
    ("AvgPool3d", (3, 2, 1), {"ceil_mode": True, "count_include_pad": False}, (2, 6, 7, 5)),
    ("AvgPool3d", (3, 2, 1), {"ceil_mode": True, "divisor_override": 3}, (2, 6, 7, 5)),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,args,kwargs,shape", AVG_CASES)
def test_avg_pool_modules(name, args, kwargs, shape, dtype):
    _run_both(name, args, kwargs, shape, dtype)


def test_avg_pool_long_and_half():
    values = np.arange(-20, 52).reshape(2, 1, 6, 6)
    for dtype in ("int64", "float16", "bfloat16"):
        r = reftorch.tensor(values).to(getattr(reftorch, dtype))
        t = torch.tensor(values).to(getattr(torch, dtype))
        for kwargs in ({}, {"divisor_override": 3}, {"padding": 1, "ceil_mode": True}):
            out = reftorch.nn.functional.avg_pool2d(r, 3, 2, **kwargs)
            out_t = torch.nn.functional.avg_pool2d(t, 3, 2, **kwargs)
            assert out.dtype == getattr(reftorch, dtype)
            np.testing.assert_allclose(out.float().numpy(), out_t.float().numpy(), rtol=1e-2)


ADAPTIVE_CASES = [
    ("AdaptiveAvgPool1d", (4,), {}, (2, 3, 10)),
    ("AdaptiveAvgPool2d", ((3, 5),), {}, (2, 3, 7, 8)),
    ("AdaptiveAvgPool2d", ((None, 11),), {}, (3, 7, 8)),     # larger than the input
    ("AdaptiveAvgPool3d", (2,), {}, (1, 2, 5, 4, 7)),
    ("AdaptiveMaxPool1d", (4,), {"return_indices": True}, (2, 3, 10)),
    ("AdaptiveMaxPool2d", ((3, 5),), {"return_indices": True}, (2, 3, 7, 8)),
    ("AdaptiveMaxPool2d", ((10, None),), {}, (3, 7, 8)),
    ("AdaptiveMaxPool3d", ((2, 3, 1),), {"return_indices": True}, (1, 2, 5, 4, 7)),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,args,kwargs,shape", ADAPTIVE_CASES)
def test_adaptive_pool_modules(name, args, kwargs, shape, dtype):
    _run_both(name, args, kwargs, shape, dtype)


LP_CASES = [
    ("LPPool1d", (2, 3), {}, (2, 3, 10)),
    ("LPPool1d", (1.5, 3, 2), {"ceil_mode": True}, (2, 3, 10)),
    ("LPPool2d", (2, (3, 2)), {}, (2, 3, 7, 8)),
    ("LPPool2d", (3, 2, 1), {"ceil_mode": True}, (2, 3, 5, 5)),
    ("LPPool2d", (float("inf"), 2), {}, (2, 3, 6, 6)),
    ("LPPool3d", (2, 2), {}, (1, 2, 4, 4, 6)),
]


@pytest.mark.parametrize("name,args,kwargs,shape", LP_CASES)
def test_lp_pool_modules(name, args, kwargs, shape):
    _run_both(name, args, kwargs, shape)


def test_fractional_max_pool_seeded_like_torch():
    rng = np.random.default_rng(3)
    for name, shape, kwargs in (("FractionalMaxPool2d", (2, 3, 11, 9), {"output_size": (5, 4)}),
                                ("FractionalMaxPool2d", (3, 10, 10), {"output_ratio": 0.5}),
                                ("FractionalMaxPool3d", (2, 2, 7, 8, 9),
                                 {"output_size": (3, 4, 5)}),
                                ("FractionalMaxPool3d", (2, 7, 8, 9),
                                 {"output_ratio": (0.5, 0.4, 0.7)})):
        for dtype in ("float64", "float32"):
            values = rng.standard_normal(shape)
            ours, theirs = _build(name, 2, return_indices=True, **kwargs)
            assert repr(ours) == repr(theirs)
            x, xt = _pair(values, dtype)
            reftorch.manual_seed(7)
            torch.manual_seed(7)
            (out, idx), (out_t, idx_t) = ours(x), theirs(xt)
            np.testing.assert_array_equal(idx.numpy(), idx_t.numpy())
            _close(out, out_t, dtype)
            assert type(out.grad_fn).__name__ == type(out_t.grad_fn).__name__
            out.sum().backward()
            out_t.sum().backward()
            _close(x.grad, xt.grad, dtype)
            # the generator advanced the same way
            assert reftorch.rand(()).item() == torch.rand(()).item()


def test_fractional_max_pool_given_samples():
    rng = np.random.default_rng(4)
    samples = rng.uniform(size=(2, 3, 2))
    for dtype in ("float64", "float32", "float16", "bfloat16"):
        values = rng.standard_normal((2, 3, 13, 12)).astype(np.float32)
        r = reftorch.tensor(values).to(getattr(reftorch, dtype))
        t = torch.tensor(values).to(getattr(torch, dtype))
        s = reftorch.tensor(samples.astype(np.float32)).to(getattr(reftorch, dtype))
        st = torch.tensor(samples.astype(np.float32)).to(getattr(torch, dtype))
        out, idx = reftorch.nn.functional.fractional_max_pool2d(
            r, 3, output_size=(6, 7), return_indices=True, _random_samples=s)
        out_t, idx_t = torch.nn.functional.fractional_max_pool2d(
            t, 3, output_size=(6, 7), return_indices=True, _random_samples=st)
        np.testing.assert_array_equal(idx.numpy(), idx_t.numpy())


@pytest.mark.parametrize("n", [1, 2, 3])
def test_max_unpool_inverts_max_pool(n):
    rng = np.random.default_rng(5)
    shape = (2, 3) + (5, 6, 8)[:n]   # pooled windows keep the trailing sizes
    x, xt = _pair(rng.standard_normal(shape))
    pool, pool_t = _build(f"MaxPool{n}d", 2, return_indices=True)
    unpool, unpool_t = _build(f"MaxUnpool{n}d", 2)
    assert repr(unpool) == repr(unpool_t)
    (out, idx), (out_t, idx_t) = pool(x), pool_t(xt)
    for size in (None, shape):
        res = unpool(out, idx, output_size=size)
        res_t = unpool_t(out_t, idx_t, output_size=size)
        _close(res, res_t)
    assert type(res.grad_fn).__name__ == type(res_t.grad_fn).__name__
    g = rng.standard_normal(tuple(res_t.shape))
    res.backward(reftorch.tensor(g))
    res_t.backward(torch.tensor(g))
    _close(x.grad, xt.grad)


def test_double_backward_matches_torch():
    rng = np.random.default_rng(6)
    x, xt = _pair(rng.standard_normal((2, 2, 6, 5)))
    for fn in ("avg_pool2d", "max_pool2d"):
        outs = []
        for module, inp in ((reftorch, x), (torch, xt)):
            y = getattr(module.nn.functional, fn)(inp, 3, 2, 1)
            (g,) = module.autograd.grad((y * y).sum(), inp, create_graph=True)
            (gg,) = module.autograd.grad((g * g).sum(), inp)
            outs.append(gg)
        _close(*outs)


def test_torch_level_names():
    rng = np.random.default_rng(7)
    x, xt = _pair(rng.standard_normal((2, 3, 9)), requires_grad=False)
    for name, args in (("max_pool1d", (3, 2, 1)), ("avg_pool1d", (3, 2, 1, True, False)),
                       ("adaptive_avg_pool1d", (4,)), ("max_pool1d_with_indices", (2,)),
                       ("adaptive_max_pool1d", (4,))):
        out, out_t = getattr(reftorch, name)(x, *args), getattr(torch, name)(xt, *args)
        if isinstance(out_t, tuple):
            np.testing.assert_array_equal(out[1].numpy(), out_t[1].numpy())
            out, out_t = out[0], out_t[0]
        _close(out, out_t)
    x4, xt4 = _pair(rng.standard_normal((2, 3, 6, 6, 5)), requires_grad=False)
    _close(reftorch.max_pool2d(x4[0], 2), torch.max_pool2d(xt4[0], 2))
    _close(reftorch.max_pool3d(x4, 2, 1, 1), torch.max_pool3d(xt4, 2, 1, 1))


ERRORS = [
    ("max_pool2d", lambda m: m.nn.functional.max_pool2d(m.zeros(3, 2, 2), 3)),    # too small
    ("max_pool2d pad", lambda m: m.nn.functional.max_pool2d(m.zeros(1, 1, 5, 5), 3, 1, 2)),
    ("max_pool2d rank", lambda m: m.nn.functional.max_pool2d(m.zeros(5, 5), 2)),
    ("max_pool2d bool", lambda m: m.nn.functional.max_pool2d(m.zeros(1, 5, 5, dtype=m.bool), 2)),
    ("max_pool1d rank", lambda m: m.nn.functional.max_pool1d(m.zeros(1, 1, 5, 5), 2)),
    ("max_pool3d stride 0", lambda m: m.nn.functional.max_pool3d(m.zeros(1, 4, 4, 4), 2, 0)),
    ("avg_pool2d pad", lambda m: m.nn.functional.avg_pool2d(m.zeros(1, 1, 5, 5), 2, 1, 2)),
    ("avg_pool2d int32", lambda m: m.nn.functional.avg_pool2d(m.zeros(1, 4, 4, dtype=m.int32), 2)),
    ("avg_pool1d small", lambda m: m.nn.functional.avg_pool1d(m.zeros(1, 1, 2), 3)),
    ("adaptive rank", lambda m: m.nn.functional.adaptive_avg_pool2d(m.zeros(4, 4), 2)),
    ("adaptive empty", lambda m: m.nn.functional.adaptive_max_pool2d(m.zeros(1, 0, 4), 2)),
    ("adaptive long", lambda m: m.nn.functional.adaptive_avg_pool2d(
        m.zeros(1, 4, 4, dtype=m.int64), 2)),
    ("fractional no size", lambda m: m.nn.functional.fractional_max_pool2d(m.zeros(1, 4, 4), 2)),
    ("fractional too large", lambda m: m.nn.functional.fractional_max_pool2d(
        m.zeros(1, 4, 4), 3, output_size=3)),
    ("fractional ratio", lambda m: m.nn.FractionalMaxPool2d(2, output_ratio=1.5)),
    ("unpool size", lambda m: m.nn.functional.max_unpool2d(
        m.zeros(1, 1, 2, 2), m.zeros(1, 1, 2, 2, dtype=m.int64), 2, output_size=(9, 9))),
    ("unpool index", lambda m: m.nn.functional.max_unpool2d(
        m.zeros(1, 1, 2, 2), m.full((1, 1, 2, 2), 99, dtype=m.int64), 2)),
]


@pytest.mark.parametrize("label,make", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_like_torch(label, make):
    with pytest.raises(Exception) as expected:
        make(torch)
    with pytest.raises(expected.type):
        make(reftorch)


def test_gradcheck_pools():
    rng = np.random.default_rng(8)
    x = reftorch.tensor(rng.standard_normal((1, 2, 5, 4)), requires_grad=True)
    F = reftorch.nn.functional
    samples = reftorch.tensor(rng.uniform(size=(1, 2, 2)))
    for fn in (lambda t: F.max_pool2d(t, 2, 1, 1, ceil_mode=True),
               lambda t: F.avg_pool2d(t, 3, 2, 1, True, False),
               lambda t: F.avg_pool2d(t, 3, 2, 1, True, True, 4),
               lambda t: F.adaptive_avg_pool2d(t, (3, 6)),
               lambda t: F.adaptive_max_pool2d(t, (2, 3)),
               lambda t: F.fractional_max_pool2d(t, 2, output_size=3, _random_samples=samples),
               lambda t: F.lp_pool2d(t.abs() + 0.5, 3, 2),
               lambda t: F.max_unpool2d(*F.max_pool2d(t, 2, return_indices=True), 2)):
        assert reftorch.autograd.gradcheck(fn, (x,))
        assert reftorch.autograd.gradgradcheck(fn, (x,))
    x3 = reftorch.tensor(rng.standard_normal((2, 4, 3, 4)), requires_grad=True)
    for fn in (lambda t: F.max_pool3d(t, 2, 1), lambda t: F.avg_pool3d(t, 2, 1, 1),
               lambda t: F.adaptive_avg_pool3d(t, (3, 2, 5))):
        assert reftorch.autograd.gradcheck(fn, (x3,))
