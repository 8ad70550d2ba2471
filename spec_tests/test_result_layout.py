"""The layout of a new elementwise result against PyTorch's.

reftorch._shape.elementwise_strides is the one rule (PyTorch's TensorIterator allocation):
the reference, the cpu plugin and the cuda plugin all lay out new results by it. Checked
here over random layouts: broadcasts, dims of size 0 and 1 with any stride, gaps, permuted
dims, 1 to 3 operands, and Python numbers both as operands (x * 0.5) and as parameters
(clamp's bounds, pow's exponent).
"""
from __future__ import annotations

import random
import warnings

import numpy as np
import pytest

import reftorch
from reftorch._shape import elementwise_strides
from spec_tests import test_plugin_cuda as cuda_base

torch = pytest.importorskip("torch")

emulated, device_kind, compiled = cuda_base.emulated, cuda_base.device_kind, cuda_base.compiled
kernel_cache_dir, plugin = cuda_base.kernel_cache_dir, cuda_base.plugin

BASE_NUMEL = 1 << 16   # every random layout fits in this many elements (4^5 dims, gaps)


def random_layout(rng, shape):
    """(shape, strides) of an operand broadcastable to `shape`: maybe fewer dims or size-1
    dims, dims in a random memory order, sometimes gaps, size-1 dims with any stride,
    sometimes a broadcast (stride 0) dim."""
    ndim = len(shape) if rng.random() < 0.7 else rng.randint(0, len(shape))
    sizes = [shape[len(shape) - ndim + i] if rng.random() < 0.8 else 1 for i in range(ndim)]
    order = list(range(ndim))
    rng.shuffle(order)
    gaps, strides, step = rng.random() < 0.2, [0] * ndim, 1
    for d in reversed(order):
        strides[d] = step * (2 if gaps and rng.random() < 0.3 else 1)
        step = strides[d] * max(sizes[d], 1)
    for d in range(ndim):
        if sizes[d] == 1 and rng.random() < 0.6:
            strides[d] = rng.randint(0, 9)
        elif sizes[d] > 1 and rng.random() < 0.03:
            strides[d] = 0
    return tuple(sizes), tuple(strides)


def random_case(rng):
    """A result shape and 1-3 operand layouts that broadcast to exactly that shape."""
    while True:
        shape = tuple(rng.choice([0, 1, 2, 3, 4]) if rng.random() < 0.05 else
                      rng.choice([1, 1, 2, 3, 4]) for _ in range(rng.randint(1, 5)))
        layouts = [random_layout(rng, shape) for _ in range(rng.choice([1, 2, 2, 3]))]
        broadcast = np.broadcast_shapes(*(s for s, _ in layouts))
        if broadcast == shape:
            return shape, layouts


# The ops, each given operand tensors of one library (`lib`: reftorch or torch).
OPS = {
    1: {"exp": lambda lib, x: lib.exp(x),
        "x * 0.5 (a number operand)": lambda lib, x: x * 0.5,
        "x > 0": lambda lib, x: x > 0,
        "clamp(x, 0, 1) (number parameters)": lambda lib, x: lib.clamp(x, 0.0, 1.0),
        "x ** 2 (a number parameter)": lambda lib, x: x ** 2,
        "x ** 0-dim tensor (an operand)": lambda lib, x: x ** lib.tensor(2.0),
        "where(x > 0, x, 0.0)": lambda lib, x: lib.where(x > 0, x, 0.0),
        "nan_to_num (like the input)": lambda lib, x: lib.nan_to_num(x),
        "deg2rad (like the input)": lambda lib, x: lib.deg2rad(x)},
    2: {"add": lambda lib, x, y: x + y,
        "lerp(x, y, 0.3) (a number parameter)": lambda lib, x, y: lib.lerp(x, y, 0.3),
        "maximum": lambda lib, x, y: lib.maximum(x, y)},
    3: {"addcmul": lambda lib, x, y, z: lib.addcmul(x, y, z),
        "where(x > 0, y, z)": lambda lib, x, y, z: lib.where(x > 0, y, z)},
}


def operands(lib, layouts, device=None):
    base = lib.arange(BASE_NUMEL, dtype=lib.float32) * 0.01 - 5.0
    if device is not None:
        base = base.to(device)
    return [base.as_strided(shape, strides) for shape, strides in layouts]


def cases(seed, count):
    rng = random.Random(seed)
    for _ in range(count):
        shape, layouts = random_case(rng)
        for name, fn in OPS[len(layouts)].items():
            yield shape, layouts, name, fn


def test_the_rule_matches_pytorch():
    """elementwise_strides itself, on 3,000 random layouts of PyTorch's exp, add, addcmul."""
    rng, wrong = random.Random(11), []
    call = {1: torch.exp, 2: torch.add, 3: torch.addcmul}
    for _ in range(3000):
        shape, layouts = random_case(rng)
        want = call[len(layouts)](*operands(torch, layouts)).stride()
        got = elementwise_strides(shape, tuple(layouts))
        if tuple(got) != tuple(want):
            wrong.append((shape, layouts, got, want))
    assert not wrong, wrong[:5]


def _mismatches(seed, count, run, device=None):
    wrong = []
    for shape, layouts, name, fn in cases(seed, count):
        want = fn(torch, *operands(torch, layouts))
        got = run(lambda: fn(reftorch, *operands(reftorch, layouts, device)))
        if tuple(got.stride()) != tuple(want.stride()) or tuple(got.shape) != tuple(want.shape):
            wrong.append((name, shape, layouts, got.stride(), want.stride()))
    return wrong


def test_reference_results_are_laid_out_as_pytorchs():
    def reference(fn):
        with reftorch.plugins.use_reference_kernels():
            return fn()
    wrong = _mismatches(12, 300, reference)
    assert not wrong, wrong[:5]


def test_reference_results_keep_their_values():
    """A result whose layout differs from NumPy's memory order is a copy: same values."""
    def pair(lib):
        base = lib.arange(60, dtype=lib.float32) * 0.01
        return (base.as_strided((1, 1, 3, 2, 1), (4, 8, 1, 3, 1)),
                base.as_strided((2, 3, 3, 2, 1), (18, 1, 6, 3, 36)))
    with reftorch.plugins.use_reference_kernels():
        got = reftorch.add(*pair(reftorch))
    want = torch.add(*pair(torch))
    assert got.stride() == want.stride() == (18, 1, 3, 9, 9)   # NumPy: (18, 1, 6, 3, 1)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_copies_keep_the_layout_as_pytorch_does():
    """clone, .to(dtype), .to(device) and empty_like (preserve_format): the same strides
    when non-overlapping and dense (or empty), else dense strides in the same memory order
    (reftorch._shape.kept_strides)."""
    rng, wrong = random.Random(15), []
    for _ in range(1500):
        shape, layouts = random_case(rng)
        (x_shape, x_strides), = layouts[:1]
        t = operands(torch, [(x_shape, x_strides)])[0]
        r = operands(reftorch, [(x_shape, x_strides)])[0]
        for name, fr, ft in (("clone", reftorch.clone, torch.clone),
                             ("empty_like", reftorch.empty_like, torch.empty_like),
                             ("double", lambda v: v.double(), lambda v: v.double())):
            if tuple(fr(r).stride()) != tuple(ft(t).stride()):
                wrong.append((name, x_shape, x_strides, fr(r).stride(), ft(t).stride()))
    assert not wrong, wrong[:5]


@pytest.mark.skipif("cpu" not in reftorch.plugins.loaded(), reason="the cpu plugin is not installed")
def test_cpu_plugin_results_are_laid_out_as_pytorchs():
    def plugin(fn):
        with reftorch.plugins.all_sizes():    # the layouts are small: serve them anyway
            return fn()
    wrong = _mismatches(13, 300, plugin)
    assert not wrong, wrong[:5]


def test_cuda_results_are_laid_out_as_pytorchs(device_kind):
    """The cuda plugin's kernels, and the reference run on host copies for an op it lacks
    (maximum): results and device transfers keep PyTorch's layout."""
    wrong = _mismatches(14, 120, lambda fn: fn(), device="cuda")
    assert not wrong, wrong[:5]


def test_contiguity_is_reported_as_pytorch_reports_it():
    """is_contiguous(), and is_contiguous(memory_format=channels_last), on random layouts
    (empty tensors are contiguous in the row-major sense only)."""
    rng, wrong = random.Random(16), []
    for _ in range(2000):
        shape, layouts = random_case(rng)
        r, t = operands(reftorch, layouts[:1])[0], operands(torch, layouts[:1])[0]
        got = (r.is_contiguous(), r.is_contiguous(memory_format=reftorch.channels_last))
        want = (t.is_contiguous(), t.is_contiguous(memory_format=torch.channels_last))
        if got != want:
            wrong.append((layouts[0], got, want))
    assert not wrong, wrong[:5]


# Ops whose results PyTorch lays out by a rule of their own (structured.declare's `layout`):
# contiguous, like the input (preserve_format), or the memory format the inputs suggest.
DECLARED = {
    "roll, flattened (contiguous)": lambda lib, x: lib.roll(x, 2),
    "roll (suggested)": lambda lib, x: lib.roll(x, 1, -1),
    "sum (a reduction: contiguous)": lambda lib, x: x.sum(0),
    "amax keepdim (a reduction: contiguous)": lambda lib, x: x.amax(-1, keepdim=True),
    "var_mean (a reduction: contiguous)": lambda lib, x: lib.var_mean(x, 0)[1],
    "any keepdim (a reduction: contiguous)": lambda lib, x: (x > 0).any(-1, keepdim=True),
    "logcumsumexp (contiguous)": lambda lib, x: lib.logcumsumexp(x, 0),
    "tril (contiguous)": lambda lib, x: lib.tril(x) if x.dim() >= 2 else lib.tril(x[None]),
    "renorm (contiguous)": lambda lib, x: lib.renorm(x, 2, 0, 1.0) if x.dim() >= 2 else x.clone(),
    "pad (suggested)": lambda lib, x: lib.nn.functional.pad(x, (1, 2)),
    "cat (suggested)": lambda lib, x: lib.cat([x, x], 0),
    "cat with a contiguous input (suggested)": lambda lib, x: lib.cat([x, x.contiguous()], -1),
    "stack (cat along the dim, then a view)": lambda lib, x: lib.stack([x, x], -2),
    "stack at a new last dim": lambda lib, x: lib.stack([x, x], -1),
    "rot90 (a flip, then a transpose)": lambda lib, x: lib.rot90(x, 1, (0, -1)) if x.dim() >= 2
    else x.clone(),
    "rot90 twice (a flip)": lambda lib, x: lib.rot90(x, 2, (0, -1)) if x.dim() >= 2
    else x.clone(),
    "rot90 no turn (contiguous)": lambda lib, x: lib.rot90(x, 4, (0, -1)) if x.dim() >= 2
    else x.clone(),
    "cumsum (contiguous)": lambda lib, x: lib.cumsum(x, 0),
    "cumprod (contiguous)": lambda lib, x: lib.cumprod(x, -1),
    "repeat (contiguous)": lambda lib, x: x.repeat(*([1] * x.dim())),
    "layer_norm (contiguous)": lambda lib, x: lib.nn.functional.layer_norm(x, x.shape[-1:]),
    "flip (like the input)": lambda lib, x: lib.flip(x, [0]),
    "sort (like the input)": lambda lib, x: lib.sort(x, -1)[1],
    "argsort (like the input)": lambda lib, x: lib.argsort(x, 0),
}


def _declared_mismatches(run, device=None, count=150):
    rng, wrong = random.Random(17), []
    for _ in range(count):
        shape, layouts = random_case(rng)
        if 0 in shape or layouts[0][0] != shape:    # one operand of the whole shape
            continue
        for name, fn in DECLARED.items():
            want = fn(torch, *operands(torch, layouts[:1]))
            got = run(lambda: fn(reftorch, *operands(reftorch, layouts[:1], device)))
            if tuple(got.stride()) != tuple(want.stride()):
                wrong.append((name, layouts[0], got.stride(), want.stride()))
    return wrong


def test_declared_layouts_match_pytorch():
    """The reference, the cpu plugin (all sizes) and the cuda plugin: the same strides."""
    def reference(fn):
        with reftorch.plugins.use_reference_kernels():
            return fn()

    def all_sizes(fn):
        with reftorch.plugins.all_sizes():
            return fn()
    wrong = _declared_mismatches(reference) + _declared_mismatches(all_sizes)
    assert not wrong, wrong[:5]


def test_declared_layouts_on_cuda(device_kind):
    wrong = _declared_mismatches(lambda fn: fn(), device="cuda", count=60)
    assert not wrong, wrong[:5]


@pytest.mark.parametrize("name", ["cat", "pad", "roll"])
def test_channels_last_inputs_give_channels_last_results(name):
    """cat, constant padding and roll keep the channels-last format every input suggests,
    and fall back to contiguous when one input suggests another."""
    def run(lib, dense):
        x = lib.arange(120.0).reshape(2, 4, 5, 3).permute(0, 3, 1, 2)   # channels-last
        other = x.contiguous() if not dense else x * 2
        if name == "cat":
            return lib.cat([x, other], 1)
        if name == "pad":
            return lib.nn.functional.pad(x if dense else other, (1, 1, 2, 0))
        return lib.roll(x if dense else other, 1, 2)
    for dense in (True, False):
        want, got = run(torch, dense), run(reftorch, dense)
        assert tuple(got.stride()) == tuple(want.stride()), (dense, got.stride(), want.stride())
        assert got.is_contiguous(memory_format=reftorch.channels_last) is dense
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_positive_is_the_input_itself():
    """torch.positive and unary + return their input, not a copy (and record nothing)."""
    x = reftorch.randn(3, 4, requires_grad=True)
    assert reftorch.positive(x) is x and (+x) is x and x.positive() is x
    t = torch.randn(3, 4, requires_grad=True)
    assert torch.positive(t) is t
    with pytest.raises(RuntimeError, match="bool"):
        reftorch.positive(reftorch.tensor([True]))
    with pytest.raises(TypeError, match="must be Tensor"):
        reftorch.positive(3)


def test_contiguous_and_clone_take_a_memory_format():
    """contiguous(memory_format=) returns the tensor itself when it already is contiguous in
    that format, else a copy that is; clone(memory_format=) always copies; channels_last
    needs 4 dims and contiguous() refuses preserve_format, with PyTorch's messages."""
    for lib in (torch, reftorch):
        x = lib.arange(120.0).reshape(2, 3, 4, 5)
        last = x.contiguous(memory_format=lib.channels_last)
        assert last.stride() == (60, 1, 15, 3)
        assert last.contiguous(memory_format=lib.channels_last) is last
        assert x.contiguous() is x and last.contiguous().stride() == (60, 20, 5, 1)
        assert x.clone(memory_format=lib.channels_last).stride() == (60, 1, 15, 3)
        assert lib.equal(last, x) and last.is_contiguous(memory_format=lib.channels_last)
        assert last.clone().stride() == (60, 1, 15, 3)     # preserve_format by default
        with pytest.raises(RuntimeError, match="required rank 4 tensor"):
            x[0].contiguous(memory_format=lib.channels_last)
        with pytest.raises(RuntimeError, match="preserve memory format is unsupported"):
            x.transpose(0, 1).contiguous(memory_format=lib.preserve_format)
        assert x.contiguous(memory_format=lib.preserve_format) is x
    y = reftorch.randn(2, 3, 4, 5, requires_grad=True)
    y.contiguous(memory_format=reftorch.channels_last).sum().backward()
    assert reftorch.equal(y.grad, reftorch.ones(2, 3, 4, 5))


# Every call that takes memory_format= lays out its result as PyTorch does (or raises its
# error): conversions, factories, *_like (random ones too) and Module.to.
MEMORY_FORMAT_CALLS = {
    "to": lambda L: L.randn(2, 3, 4, 5).to(memory_format=L.channels_last),
    "to dtype": lambda L: L.randn(2, 3, 4, 5).to(L.float64, memory_format=L.channels_last),
    "float": lambda L: L.randn(2, 3, 4, 5).float(memory_format=L.channels_last),
    "double": lambda L: L.randn(2, 3, 4, 5).double(memory_format=L.channels_last),
    "cpu": lambda L: L.randn(2, 3, 4, 5).cpu(memory_format=L.channels_last),
    "float 2-D": lambda L: L.randn(2, 3).float(memory_format=L.channels_last),
    "to a format it suggests": lambda L: L.randn(3, 4).t().to(
        memory_format=L.contiguous_format),
    "to contiguous": lambda L: L.randn(2, 3, 4, 5).contiguous(
        memory_format=L.channels_last).to(memory_format=L.contiguous_format),
    "empty": lambda L: L.empty(2, 3, 4, 5, memory_format=L.channels_last),
    "empty 2-D": lambda L: L.empty(2, 3, memory_format=L.channels_last),
    "empty preserve": lambda L: L.empty(2, 3, memory_format=L.preserve_format),
    "zeros_like": lambda L: L.zeros_like(L.randn(2, 3, 4, 5), memory_format=L.channels_last),
    "ones_like contiguous": lambda L: L.ones_like(L.randn(2, 3, 4, 5).transpose(1, 3),
                                                  memory_format=L.contiguous_format),
    "full_like": lambda L: L.full_like(L.randn(2, 3, 4, 5), 2.0,
                                       memory_format=L.channels_last),
    "empty_like": lambda L: L.empty_like(L.randn(2, 3, 4, 5), memory_format=L.channels_last),
    "rand_like": lambda L: L.rand_like(L.randn(2, 3, 4, 5), memory_format=L.channels_last),
    "randint_like": lambda L: L.randint_like(L.randn(2, 3, 4, 5), 5,
                                             memory_format=L.channels_last),
    "Module.to weight": lambda L: L.nn.Conv2d(3, 4, 3).to(memory_format=L.channels_last).weight,
    "Module.to bias": lambda L: L.nn.Conv2d(3, 4, 3).to(memory_format=L.channels_last).bias,
    "Module.to dtype": lambda L: L.nn.Conv2d(3, 4, 3).to(
        L.float64, memory_format=L.channels_last).weight,
    "channels_last_3d": lambda L: L.randn(2, 3, 4, 5, 6).contiguous(
        memory_format=L.channels_last_3d),
    "channels_last_3d 4-D": lambda L: L.randn(2, 3, 4, 5).contiguous(
        memory_format=L.channels_last_3d),
    "channels_last 5-D": lambda L: L.randn(2, 3, 4, 5, 6).to(memory_format=L.channels_last),
    "channels_last_3d empty": lambda L: L.empty(1, 2, 3, 4, 5, memory_format=L.channels_last_3d),
    "channels_last_3d Module.to": lambda L: L.nn.Conv3d(2, 3, 2).to(
        memory_format=L.channels_last_3d).weight,
    "cat of channels_last_3d": lambda L: L.cat([L.randn(2, 3, 4, 5, 6).contiguous(
        memory_format=L.channels_last_3d)] * 2, 1),
}


@pytest.mark.parametrize("name", MEMORY_FORMAT_CALLS)
def test_memory_format_arguments_lay_out_results(name):
    def outcome(lib):
        try:
            return tuple(MEMORY_FORMAT_CALLS[name](lib).stride())
        except RuntimeError as error:
            return str(error)
    assert outcome(reftorch) == outcome(torch)


def test_is_contiguous_in_each_memory_format():
    for lib in (torch, reftorch):
        x = lib.randn(2, 3, 4, 5, 6)
        y = x.contiguous(memory_format=lib.channels_last_3d)
        assert y.is_contiguous(memory_format=lib.channels_last_3d)
        assert not y.is_contiguous(memory_format=lib.channels_last) and not y.is_contiguous()
        assert not x.is_contiguous(memory_format=lib.channels_last_3d)
        assert y.contiguous(memory_format=lib.channels_last_3d) is y and lib.equal(x, y)
        assert repr(lib.channels_last_3d) == "torch.channels_last_3d"


# Convolution, pooling, upsampling and batch norm lay out their outputs in the memory format
# the input suggests (convolution: the input's or the weight's), as PyTorch's CPU kernels do.
NN_LAYOUT_CASES = {
    "conv2d": (4, lambda F, x, w: F.conv2d(x, w, padding=1)),
    "conv_transpose2d": (4, lambda F, x, w: F.conv_transpose2d(x, w.transpose(0, 1))),
    "max_pool2d indices": (4, lambda F, x, w: F.max_pool2d(x, 2, return_indices=True)[1]),
    "avg_pool2d": (4, lambda F, x, w: F.avg_pool2d(x, 2)),
    "adaptive_max_pool2d": (4, lambda F, x, w: F.adaptive_max_pool2d(x, 2)),
    "bilinear": (4, lambda F, x, w: F.interpolate(x, scale_factor=2, mode="bilinear")),
    "batch_norm": (4, lambda F, x, w: F.batch_norm(x, None, None, training=True)),
    "conv3d": (5, lambda F, x, w: F.conv3d(x, w)),
    "max_pool3d": (5, lambda F, x, w: F.max_pool3d(x, 2)),
    "avg_pool3d (contiguous)": (5, lambda F, x, w: F.avg_pool3d(x, 2)),
    "adaptive_avg_pool3d": (5, lambda F, x, w: F.adaptive_avg_pool3d(x, 1)),
    "trilinear": (5, lambda F, x, w: F.interpolate(x, scale_factor=2, mode="trilinear")),
}


def _same_layout(lib, t):
    """`t` (a torch tensor) rebuilt in `lib` over a copy of its whole storage."""
    count = t.untyped_storage().nbytes() // t.element_size()
    flat = t.as_strided((count,), (1,), 0).numpy().copy()
    base = torch.from_numpy(flat) if lib is torch else reftorch.from_numpy(flat)
    return base.as_strided(tuple(t.shape), tuple(t.stride()), t.storage_offset())


@pytest.mark.parametrize("name", NN_LAYOUT_CASES)
def test_nn_outputs_take_the_memory_format_the_input_suggests(name):
    rank, fn = NN_LAYOUT_CASES[name]
    last = torch.channels_last if rank == 4 else torch.channels_last_3d
    x = torch.randn(2, 3, *([4] * (rank - 2)))
    w = torch.randn(4, 3, *([2] * (rank - 2)))
    layouts = {"contiguous": x, "channels-last": x.contiguous(memory_format=last),
               "transposed": x.transpose(-1, -2), "sliced": x[..., ::2]}
    for label, xs in layouts.items():
        for ws in (w, w.contiguous(memory_format=last)):
            want = fn(torch.nn.functional, _same_layout(torch, xs), _same_layout(torch, ws))
            got = fn(reftorch.nn.functional, _same_layout(reftorch, xs),
                     _same_layout(reftorch, ws))
            assert tuple(got.stride()) == tuple(want.stride()), (label, ws.stride())
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


GRADIENT_LAYOUT_CASES = {
    "conv2d": lambda F, x, w: F.conv2d(x, w, padding=1),
    "max_pool2d": lambda F, x, w: F.max_pool2d(x, 2),
    "adaptive_avg_pool2d": lambda F, x, w: F.adaptive_avg_pool2d(x, 2),
    "bilinear": lambda F, x, w: F.interpolate(x, scale_factor=2, mode="bilinear"),
    "batch_norm": lambda F, x, w: F.batch_norm(x, None, None, training=True),
}


@pytest.mark.parametrize("name", GRADIENT_LAYOUT_CASES)
def test_gradients_of_channels_last_inputs_have_pytorch_strides(name):
    fn = GRADIENT_LAYOUT_CASES[name]
    x = torch.randn(2, 3, 6, 6)
    w = torch.randn(4, 3, 3, 3)
    for xs in (x, x.contiguous(memory_format=torch.channels_last)):
        for ws in (w, w.contiguous(memory_format=torch.channels_last)):
            grads = []
            for lib in (torch, reftorch):
                a = _same_layout(lib, xs).requires_grad_()
                b = _same_layout(lib, ws).requires_grad_()
                fn(lib.nn.functional, a, b).sum().backward()
                grads.append((tuple(a.grad.stride()),
                              None if b.grad is None else tuple(b.grad.stride())))
            assert grads[1] == grads[0], (xs.stride(), ws.stride())


@pytest.mark.parametrize("shape,nonzero", [((2, 2), 0), ((2, 2), 3), ((3,), 2), ((3,), 0),
                                           ((2, 3, 4), 5), ((), 1), ((), 0)])
def test_nonzero_indices_are_laid_out_transposed(shape, nonzero):
    """nonzero's (n, ndim) result has strides (1, n), as PyTorch writes it."""
    values = np.zeros(shape, np.float32)
    values.reshape(-1)[:nonzero] = 1
    want = torch.from_numpy(values).nonzero()
    got = reftorch.from_numpy(values).nonzero()
    assert tuple(got.shape) == tuple(want.shape)
    assert tuple(got.stride()) == tuple(want.stride())
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("out_shape,transposed", [((0,), False), ((10, 2), False),
                                                  ((3, 2), False), ((2, 3), True)])
def test_nonzero_out_is_resized_and_laid_out_as_torchs(out_shape, transposed):
    """An out= of another shape becomes the transpose of an (ndim, n) tensor, strides (1, n)
    (with the resize warning when it held elements); one of the right shape keeps its own
    strides; the out tensor itself is returned, holding the indices."""
    values = np.array([[0, 1, 0], [2, 0, 3]], np.float32)
    results = []
    for lib in (torch, reftorch):
        out = lib.empty(out_shape, dtype=lib.int64)
        out = out.t() if transposed else out
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = lib.nonzero(lib.from_numpy(values.copy()), out=out)
        assert got is out
        results.append((tuple(got.shape), tuple(got.stride()), got.tolist(),
                        any("was resized" in str(w.message) for w in caught)))
    assert results[1] == results[0]


def test_nonzero_out_must_hold_int64():
    for lib in (torch, reftorch):
        with pytest.raises(RuntimeError, match="Expected out tensor to have scalar type Long"):
            lib.nonzero(lib.ones(3), out=lib.empty(0))
