"""Vision layers and functions against PyTorch: interpolate (every mode, align_corners,
size/scale_factor, 1-D/2-D/3-D), grid_sample/affine_grid (every mode and padding), pixel and
channel shuffles, the Upsample modules, and the errors PyTorch raises."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import reftorch

torch = pytest.importorskip("torch")

TOL = {"float64": 1e-10, "float32": 2e-5}


def _pair(array, dtype="float64", requires_grad=True):
    r = reftorch.tensor(array, dtype=getattr(reftorch, dtype)).requires_grad_(requires_grad)
    t = torch.tensor(array, dtype=getattr(torch, dtype)).requires_grad_(requires_grad)
    return r, t


def _close(ours, theirs, dtype="float64"):
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(),
                               rtol=TOL[dtype], atol=TOL[dtype])


def _forward_backward(fn_ours, fn_theirs, arrays, dtype, seed=0, compare_grads=True):
    """Run both, compare values, grad_fn names and the gradients of every input."""
    pairs = [_pair(a, dtype) for a in arrays]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = fn_ours(*[p[0] for p in pairs])
        out_t = fn_theirs(*[p[1] for p in pairs])
    assert out.dtype == getattr(reftorch, dtype)
    assert tuple(out.shape) == tuple(out_t.shape)
    _close(out, out_t, dtype)
    assert type(out.grad_fn).__name__ == type(out_t.grad_fn).__name__
    grad = np.random.default_rng(seed).standard_normal(tuple(out_t.shape))
    out.backward(reftorch.tensor(grad, dtype=out.dtype))
    out_t.backward(torch.tensor(grad, dtype=out_t.dtype))
    for ours, theirs in pairs:
        if compare_grads:
            _close(ours.grad, theirs.grad, dtype)
        else:   # torch's own gradient is wrong here: check ours by finite differences
            assert reftorch.autograd.gradcheck(fn_ours, (ours.detach().double()
                                                         .requires_grad_(),))


# --- interpolate ---------------------------------------------------------------------------

SHAPES = {1: (2, 3, 7), 2: (2, 2, 5, 7), 3: (1, 2, 3, 5, 4)}
MODES = {1: ["nearest", "nearest-exact", "linear", "area"],
         2: ["nearest", "nearest-exact", "bilinear", "bicubic", "area"],
         3: ["nearest", "nearest-exact", "trilinear", "area"]}
SIZES = {1: [9, 4], 2: [(9, 4), (3, 11)], 3: [(5, 3, 7)]}
SCALES = {1: [1.7, 0.6], 2: [(2.0, 1.3), 0.55], 3: [(1.5, 0.7, 2.2)]}
INTERP_CASES = [(n, mode, ac, kind, value)
                for n in (1, 2, 3) for mode in MODES[n]
                for ac in ([None] if mode in ("nearest", "nearest-exact", "area")
                           else [False, True])
                for kind, value in ([("size", s) for s in SIZES[n]]
                                    + [("scale_factor", s) for s in SCALES[n]]
                                    + [("recompute", s) for s in SCALES[n][:1]])]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("n,mode,align_corners,kind,value", INTERP_CASES)
def test_interpolate_matches_torch(n, mode, align_corners, kind, value, dtype):
    x = np.random.default_rng(1).standard_normal(SHAPES[n])
    kwargs = {"mode": mode, "align_corners": align_corners}
    if kind == "size":
        kwargs["size"] = value
    else:
        kwargs["scale_factor"] = value
        kwargs["recompute_scale_factor"] = True if kind == "recompute" else None
    # PyTorch 2.x's upsample_nearest3d backward ignores an explicit scale_factor (it maps
    # with in/out while its forward uses 1/scale), so its gradient is not the forward's
    # adjoint; ours is (checked by gradcheck instead).
    torch_grad_ok = not (n == 3 and mode == "nearest" and kind == "scale_factor")
    _forward_backward(lambda a: reftorch.nn.functional.interpolate(a, **kwargs),
                      lambda a: torch.nn.functional.interpolate(a, **kwargs), [x], dtype,
                      compare_grads=torch_grad_ok)


def test_interpolate_half_precision_and_uint8_nearest():
    x = np.random.default_rng(2).standard_normal((1, 2, 4, 5))
    for dtype in ("bfloat16", "float16"):
        r = reftorch.tensor(x, dtype=getattr(reftorch, dtype))
        t = torch.tensor(x, dtype=getattr(torch, dtype))
        ours = reftorch.nn.functional.interpolate(r, size=(7, 3), mode="bilinear")
        theirs = torch.nn.functional.interpolate(t, size=(7, 3), mode="bilinear")
        assert ours.dtype == getattr(reftorch, dtype)
        np.testing.assert_allclose(ours.float().numpy(), theirs.float().numpy(), atol=2e-2)
    u = (np.arange(20) * 7 % 256).reshape(1, 1, 4, 5)
    ours = reftorch.nn.functional.interpolate(reftorch.tensor(u, dtype=reftorch.uint8),
                                              scale_factor=1.6)
    theirs = torch.nn.functional.interpolate(torch.tensor(u, dtype=torch.uint8),
                                             scale_factor=1.6)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_interpolate_double_backward_is_the_forward_again():
    x = reftorch.randn(1, 1, 3, 4, dtype=reftorch.float64, requires_grad=True)
    assert reftorch.autograd.gradgradcheck(
        lambda a: reftorch.nn.functional.interpolate(a, size=(5, 6), mode="bilinear"), (x,))


INTERP_ERRORS = [
    ((2, 1, 4), {"size": 5, "mode": "bilinear"}),
    ((1, 1, 4, 4), {"size": 5, "mode": "linear"}),
    ((1, 1, 4, 4, 4), {"size": 5, "mode": "bilinear"}),
    ((1, 4), {"size": 5, "mode": "nearest"}),
    ((1, 1, 4, 4), {"size": 5, "mode": "nearest", "align_corners": True}),
    ((1, 1, 4, 4), {"size": 5, "scale_factor": 2.0}),
    ((1, 1, 4, 4), {}),
    ((1, 1, 4, 4), {"size": (5, 5, 5)}),
    ((1, 1, 4, 4), {"scale_factor": (2.0,)}),
    ((1, 1, 4, 4), {"size": 5, "recompute_scale_factor": True}),
    ((1, 1, 4, 4), {"size": 5, "mode": "bogus"}),
    ((1, 1, 4), {"size": 5, "mode": "linear", "antialias": True}),
    ((1, 1, 4, 4), {"size": (5, 0), "mode": "bilinear"}),
]


@pytest.mark.parametrize("shape,kwargs", INTERP_ERRORS)
def test_interpolate_errors_match_torch(shape, kwargs):
    with pytest.raises(Exception) as theirs:
        torch.nn.functional.interpolate(torch.zeros(shape), **kwargs)
    with pytest.raises(type(theirs.value)):
        reftorch.nn.functional.interpolate(reftorch.zeros(shape), **kwargs)


def test_interpolate_antialias_is_refused_clearly():
    with pytest.raises(NotImplementedError, match="antialias"):
        reftorch.nn.functional.interpolate(reftorch.zeros(1, 1, 4, 4), size=2,
                                           mode="bilinear", antialias=True)


# --- Upsample modules ----------------------------------------------------------------------

UPSAMPLE_MODULES = [
    ("Upsample", {"scale_factor": 2}, (1, 2, 3, 4)),
    ("Upsample", {"size": (5, 3), "mode": "bilinear"}, (1, 2, 3, 4)),
    ("Upsample", {"scale_factor": (1.5, 2.0), "mode": "bicubic", "align_corners": True},
     (1, 2, 3, 4)),
    ("Upsample", {"scale_factor": 1.5, "mode": "trilinear", "recompute_scale_factor": True},
     (1, 1, 3, 4, 3)),
    ("UpsamplingNearest2d", {"scale_factor": 3}, (2, 1, 3, 2)),
    ("UpsamplingBilinear2d", {"size": 5}, (2, 1, 3, 2)),
]


@pytest.mark.parametrize("name,kwargs,shape", UPSAMPLE_MODULES)
def test_upsample_modules(name, kwargs, shape):
    ours, theirs = getattr(reftorch.nn, name)(**kwargs), getattr(torch.nn, name)(**kwargs)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == []
    x = np.random.default_rng(3).standard_normal(shape)
    _forward_backward(ours, theirs, [x], "float64")


# --- grid_sample and affine_grid -----------------------------------------------------------

GRID_CASES = [(n, mode, padding, ac)
              for n in (2, 3) for mode in ("bilinear", "nearest", "bicubic")
              for padding in ("zeros", "border", "reflection") for ac in (False, True)
              if not (n == 3 and mode == "bicubic")]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("n,mode,padding,align_corners", GRID_CASES)
def test_grid_sample_matches_torch(n, mode, padding, align_corners, dtype):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 4, 5) if n == 2 else (2, 2, 3, 4, 5))
    grid = rng.uniform(-1.4, 1.4, (2, 3, 4, 2) if n == 2 else (2, 2, 3, 3, 3))
    kwargs = {"mode": mode, "padding_mode": padding, "align_corners": align_corners}
    _forward_backward(lambda a, g: reftorch.nn.functional.grid_sample(a, g, **kwargs),
                      lambda a, g: torch.nn.functional.grid_sample(a, g, **kwargs),
                      [x, grid], dtype)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("size", [(2, 3, 4, 5), (2, 1, 3, 1), (2, 3, 4, 5, 3)])
def test_affine_grid_matches_torch(size, align_corners):
    k = len(size) - 2
    theta = np.random.default_rng(5).standard_normal((2, k, k + 1))
    for dtype in ("float64", "float32"):
        _forward_backward(
            lambda t: reftorch.nn.functional.affine_grid(t, size, align_corners=align_corners),
            lambda t: torch.nn.functional.affine_grid(t, size, align_corners=align_corners),
            [theta], dtype)


def test_affine_grid_then_grid_sample_round_trip():
    # the identity transform resamples an image onto itself
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 2, 4, 6))
    theta = np.array([[[1.0, 0, 0], [0, 1.0, 0]]])
    F = reftorch.nn.functional
    grid = F.affine_grid(reftorch.tensor(theta), (1, 2, 4, 6), align_corners=False)
    out = F.grid_sample(reftorch.tensor(x), grid, align_corners=False)
    np.testing.assert_allclose(out.numpy(), x, atol=1e-12)


GRID_ERRORS = [
    ((1, 1, 3, 3), (1, 2, 2, 2), {"mode": "area"}),
    ((1, 1, 3, 3), (1, 2, 2, 2), {"padding_mode": "wrap"}),
    ((1, 1, 3, 3), (2, 2, 2, 2), {}),
    ((1, 1, 3, 3), (1, 2, 2, 3), {}),
    ((1, 1, 3, 3, 3), (1, 2, 2, 2, 3), {"mode": "bicubic"}),
    ((1, 3, 3), (1, 2, 2), {}),
]


@pytest.mark.parametrize("shape,grid_shape,kwargs", GRID_ERRORS)
def test_grid_sample_errors_match_torch(shape, grid_shape, kwargs):
    with pytest.raises(Exception) as theirs:
        torch.nn.functional.grid_sample(torch.zeros(shape), torch.zeros(grid_shape),
                                        align_corners=False, **kwargs)
    with pytest.raises(type(theirs.value)):
        reftorch.nn.functional.grid_sample(reftorch.zeros(shape), reftorch.zeros(grid_shape),
                                           align_corners=False, **kwargs)
    with pytest.raises(RuntimeError):   # mixed dtypes
        reftorch.nn.functional.grid_sample(reftorch.zeros(1, 1, 3, 3),
                                           reftorch.zeros(1, 2, 2, 2, dtype=reftorch.float64),
                                           align_corners=False)


@pytest.mark.parametrize("theta_shape,size", [((2, 2, 3), (2, 3, 4)), ((2, 3, 3), (2, 1, 3, 3)),
                                              ((2, 2, 3), (2, 1, 0, 3)),
                                              ((2, 3, 4), (2, 1, 3, 3))])
def test_affine_grid_errors_match_torch(theta_shape, size):
    with pytest.raises(Exception) as theirs:
        torch.nn.functional.affine_grid(torch.zeros(theta_shape), size, align_corners=False)
    with pytest.raises(type(theirs.value)):
        reftorch.nn.functional.affine_grid(reftorch.zeros(theta_shape), size,
                                           align_corners=False)
    with pytest.raises(ValueError):
        reftorch.nn.functional.affine_grid(reftorch.zeros(2, 2, 3, dtype=reftorch.int64),
                                           (2, 1, 3, 3), align_corners=False)


def test_align_corners_none_warns_like_torch():
    with pytest.warns(UserWarning, match="align_corners"):
        reftorch.nn.functional.grid_sample(reftorch.zeros(1, 1, 2, 2), reftorch.zeros(1, 1, 1, 2))


# --- pixel / channel shuffles ---------------------------------------------------------------

SHUFFLES = [
    ("PixelShuffle", (2,), (2, 8, 3, 2)),
    ("PixelShuffle", (3,), (9, 1, 2)),
    ("PixelShuffle", (2,), (2, 1, 4, 2, 3)),
    ("PixelUnshuffle", (2,), (2, 2, 4, 6)),
    ("PixelUnshuffle", (3,), (1, 3, 6)),
    ("ChannelShuffle", (2,), (2, 6, 3)),
    ("ChannelShuffle", (3,), (1, 6, 2, 2)),
]


@pytest.mark.parametrize("name,args,shape", SHUFFLES)
def test_shuffle_modules(name, args, shape):
    ours, theirs = getattr(reftorch.nn, name)(*args), getattr(torch.nn, name)(*args)
    assert repr(ours) == repr(theirs)
    x = np.random.default_rng(7).standard_normal(shape)
    _forward_backward(ours, theirs, [x], "float64")


def test_torch_level_shuffles_and_integer_dtypes():
    x = np.arange(2 * 8 * 2 * 4).reshape(2, 8, 2, 4)
    for fn, arg in (("pixel_shuffle", 2), ("pixel_unshuffle", 2), ("channel_shuffle", 4)):
        ours = getattr(reftorch, fn)(reftorch.tensor(x), arg)
        theirs = getattr(torch, fn)(torch.tensor(x), arg)
        assert ours.dtype == reftorch.int64
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.parametrize("fn,shape,arg", [
    ("pixel_shuffle", (1, 5, 2, 2), 2), ("pixel_shuffle", (4, 2), 2),
    ("pixel_shuffle", (1, 4, 2, 2), 0), ("pixel_unshuffle", (1, 1, 3, 4), 2),
    ("pixel_unshuffle", (1, 1, 4, 3), 2), ("pixel_unshuffle", (1, 1, 4, 4), -1),
    ("channel_shuffle", (1, 5, 2), 2), ("channel_shuffle", (1, 4, 2), 0),
    ("channel_shuffle", (4, 2), 2)])
def test_shuffle_errors_match_torch(fn, shape, arg):
    with pytest.raises(Exception) as theirs:
        getattr(torch.nn.functional, fn)(torch.zeros(shape), arg)
    with pytest.raises(type(theirs.value)):
        getattr(reftorch.nn.functional, fn)(reftorch.zeros(shape), arg)


def test_deprecated_upsample_aliases():
    x = np.random.default_rng(8).standard_normal((1, 1, 3, 3))
    for name, kwargs in (("upsample", {"scale_factor": 2, "mode": "bilinear"}),
                         ("upsample_nearest", {"size": 5}),
                         ("upsample_bilinear", {"size": 4})):
        with pytest.warns(UserWarning):
            ours = getattr(reftorch.nn.functional, name)(reftorch.tensor(x), **kwargs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = getattr(torch.nn.functional, name)(torch.tensor(x), **kwargs)
        _close(ours, theirs)
