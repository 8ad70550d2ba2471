"""Every kernel a loaded plugin registered agrees with the reference (the conformance kit).

For each registered (op, device, dtype) the op database's samples run twice: once normally
(the plugin kernel serves, or declines) and once under `use_reference_kernels()`; results must
agree exactly for integers and within the dtype's tolerance for floats. Binary pointwise ops
run over broadcasting shape pairs and layouts, with Python numbers (and in place); unary ones
over the op database's shapes and layouts plus a large one; every other op over its
op-database samples.
A kernel whose op has no entry of its own is reached through the entries that call it
(`REACHED_THROUGH`: convolution through conv2d, a softmax's backward through softmax's
gradient, ...), and the samplers (`RANDOM`) are compared bit for bit from one seed.

Two rules keep the comparison from being empty:
  * it runs under `plugins.all_sizes()`, so a kernel that leaves small calls to the
    reference for speed (`plugins.size_threshold`) serves the small samples too;
  * each row counts the calls its kernel accepted and fails when the kernel declined every
    sample: then nothing of the plugin was checked.

On a machine without a GPU the cuda rows of reftorch-cuda run on its emulated driver
(spec_tests/cuda_emulator.py: the plugin's host side for real, each kernel as a NumPy model
of it), so every registered cuda kernel's dispatch, geometry and argument packing meet the
op database's samples; with a GPU they run on the device.
"""
from __future__ import annotations

import contextlib

import numpy as np
import pytest

import reftorch
from reftorch import _dispatch, plugins
from .opdb import BY_NAME, pointwise_as_opinfo, structured_ops
from .opdb.core import OpInfo, Sample, TensorArg, build, build_sample, tensor
from .opdb.samples import BINARY_SHAPES, layouts
from .oracle import compare_values, host


def _entries():
    """Op name -> its op-database entry (pointwise OpEntry or OpInfo)."""
    entries = {entry.name: entry for entry in structured_ops()}
    entries.update(BY_NAME)
    return entries


def _copy_samples(dtype_name, rng):
    """dst.copy_(src): same shapes and broadcasts, each layout of dst, a transposed src."""
    pairs = (((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 3, 4), (3, 1)), ((), ()), ((0, 3), (3,)),
             ((257, 129), (257, 129)))
    for dst_shape, src_shape in pairs:
        src_layout = "transposed" if len(src_shape) >= 2 else "contiguous"
        for layout in layouts(dst_shape):
            yield Sample((tensor(dst_shape, dtype_name, rng, layout),
                          tensor(src_shape, dtype_name, rng, src_layout)), {},
                         f"{dst_shape} {layout} <- {src_shape}")


ENTRIES = _entries()
# Ops the op database reaches only inside other ops' samples.
ENTRIES["copy_"] = OpInfo("copy_", lambda m, dst, src: dst.copy_(src), _copy_samples)

CONVOLUTIONS = ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                "conv_transpose3d")
# Kernels whose op has no op-database entry of its own: the entries whose calls reach them,
# and whether through the gradient (the kit then runs the backward pass too).
REACHED_THROUGH = {
    "convolution": (CONVOLUTIONS, False),
    "convolution_backward_weight": (CONVOLUTIONS, True),
    "max_pool2d_with_indices": (("max_pool2d", "max_pool1d"), False),
    "max_pool2d_with_indices_backward": (("max_pool2d", "max_pool1d"), True),
    "max_pool3d_with_indices": (("max_pool3d",), False),
    "max_pool3d_with_indices_backward": (("max_pool3d",), True),
    "avg_pool2d_backward": (("avg_pool2d", "avg_pool1d"), True),
    "avg_pool3d_backward": (("avg_pool3d",), True),
    "adaptive_avg_pool2d_backward": (("adaptive_avg_pool2d", "adaptive_avg_pool1d"), True),
    "adaptive_avg_pool3d_backward": (("adaptive_avg_pool3d",), True),
    "_softmax_backward_data": (("softmax",), True),
    "_log_softmax_backward_data": (("log_softmax",), True),
    "native_layer_norm": (("layer_norm",), False),
    "native_layer_norm_backward": (("layer_norm",), True),
    "native_group_norm_backward": (("group_norm",), True),
    "native_batch_norm": (("batch_norm",), False),
    "native_batch_norm_backward": (("batch_norm",), True),
    "native_group_norm": (("group_norm",), False),
    "max.dim": (("max",), False),
    "min.dim": (("min",), False),
    "scatter_value": (("scatter",), False),
    "embedding_dense_backward": (("embedding", "embedding_bag"), True),
    "sum_to_size": (("add", "mul"), True),   # the gradient of a broadcast operand
    **{f"{prefix}_pad{nd}d_backward": ((f"{prefix}_pad{nd}d",), True)
       for prefix in ("reflection", "replication") for nd in (1, 2, 3)},
}

# The samplers: how to call each on a tensor; results must be bit-identical from one seed.
RANDOM = {
    "uniform_": lambda t: t.uniform_(-2.0, 3.0),
    "normal_": lambda t: t.normal_(0.5, 2.0),
    "random_": lambda t: t.random_(0, 100) if t.dtype is not reftorch.bool else t.random_(),
    "bernoulli_": lambda t: t.bernoulli_(0.3),
    "exponential_": lambda t: t.exponential_(1.5),
    "cauchy_": lambda t: t.cauchy_(0.5, 2.0),
    "geometric_": lambda t: t.geometric_(0.3),
    "log_normal_": lambda t: t.log_normal_(0.5, 0.75),
    # randperm's shuffle, as many elements as t has, written into t
    "_randperm_": lambda t: t.copy_(reftorch.randperm(t.numel(), dtype=t.dtype).view(t.shape)),
}


def _checked(op):
    return op in ENTRIES or op in REACHED_THROUGH or op in RANDOM


def _registered():
    cases = []
    for name, info in sorted(plugins.loaded().items()):
        for op, device_type, dtype in info.kernels:
            if _checked(op):
                cases.append(pytest.param(name, op, device_type, dtype,
                                          id=f"{name}-{op}-{device_type}-{dtype.name}"))
    return cases or [pytest.param(None, None, None, None, marks=pytest.mark.skip(
        reason="no plugin kernels for op-database ops are loaded"))]


@pytest.fixture(autouse=True, scope="module")
def every_size():
    """Plugins' size thresholds off: the samples are small."""
    with plugins.all_sizes():
        yield


@contextlib.contextmanager
def counting(plugin, op_name, device_type, dtype):
    """A one-element list counting the calls `plugin`'s kernel for the row accepted (returned
    something other than NotImplemented) inside the block."""
    op = _dispatch.get_op(op_name)
    key = (device_type, dtype)
    original = op.kernels[key]
    accepted = [0]

    def counted(fn):
        def kernel(out, inputs, dtypes, params):
            result = fn(out, inputs, dtypes, params)
            if result is not NotImplemented:
                accepted[0] += 1
            return result
        return kernel

    op.kernels[key] = [(p, counted(fn) if p == plugin else fn, n) for p, fn, n in original]
    op._chains.clear()
    try:
        yield accepted
    finally:
        op.kernels[key] = original
        op._chains.clear()


def _available(device_type):
    if device_type == "cpu":
        return True
    if device_type == "cuda":
        return reftorch.cuda.is_available()
    return False


def _inputs(shape, dtype, device, rng, layout):
    n = int(np.prod(shape)) if shape else 1
    values = rng.standard_normal(n * 2).reshape(-1)[:n].reshape(shape) * 3 + 0.5
    t = reftorch.tensor(values, dtype=dtype)
    if layout == "transposed" and len(shape) >= 2:
        t = reftorch.tensor(np.swapaxes(values, -1, -2).copy(), dtype=dtype).transpose(-1, -2)
    return t.to(device)


@pytest.fixture(scope="module")
def emulated_cuda():
    """reftorch-cuda's backend on the emulated driver for this module (restored after)."""
    from reftorch import _storage
    from spec_tests import test_plugin_cuda as cuda_tests   # skips without the plugin
    if cuda_tests.NO_BINDINGS is not None:
        pytest.skip(cuda_tests.NO_BINDINGS)
    previous = _storage._BACKENDS["cuda"]
    _storage._BACKENDS["cuda"], _ = cuda_tests.emulated_backend()
    yield
    _storage._BACKENDS["cuda"] = previous


@pytest.mark.parametrize("plugin,op,device_type,dtype", _registered())
def test_plugin_kernel_matches_reference(plugin, op, device_type, dtype, request):
    if device_type == "cuda" and plugin == "cuda" and not reftorch.cuda.is_available():
        request.getfixturevalue("emulated_cuda")
    if not _available(device_type):
        pytest.skip(f"no {device_type} device on this machine")
    with counting(plugin, op, device_type, dtype) as accepted:
        if op in RANDOM:
            _check_random(RANDOM[op], device_type, dtype)
        elif op in REACHED_THROUGH:
            entries, backward = entries_reaching(op)
            if not any(dtype.name in entry.dtypes for entry in entries):
                pytest.skip(f"the op database has no {dtype.name} samples for "
                            f"{REACHED_THROUGH[op][0]}")
            for entry in entries:
                if dtype.name in entry.dtypes:
                    _check_samples(entry, device_type, dtype, backward)
        elif isinstance(ENTRIES[op], OpInfo):
            _check_samples(ENTRIES[op], device_type, dtype)
        elif ENTRIES[op].arity == 1:
            _check_samples(_unary_with_large(ENTRIES[op]), device_type, dtype)
        else:
            _check_binary(ENTRIES[op], device_type, dtype)
    assert accepted[0], (f"{plugin}'s {op} kernel for {device_type} {dtype.name} declined "
                         f"every sample, so none of it was checked")


def entries_reaching(op):
    """The OpInfos whose samples reach `op`'s kernel, and whether through the gradient."""
    if op in REACHED_THROUGH:
        names, backward = REACHED_THROUGH[op]
        return [_as_opinfo(ENTRIES[name]) for name in names], backward
    return [_as_opinfo(ENTRIES[op])], False


def _as_opinfo(entry):
    return entry if isinstance(entry, OpInfo) else pointwise_as_opinfo(entry)


def _unary_with_large(entry):
    """A unary pointwise entry's samples, plus a large contiguous and a transposed input
    (sizes that cross vector widths and thread blocks)."""
    base = pointwise_as_opinfo(entry)

    def samples(dtype_name, rng):
        yield from base.samples(dtype_name, rng)
        for layout in ("contiguous", "transposed"):
            yield Sample((tensor((257, 129), dtype_name, rng, layout, domain=entry.domain),),
                         dict(entry.kwargs[0]), f"(257, 129) {layout}")
    return OpInfo(name=entry.name, call=entry.call, samples=samples, dtypes=entry.dtypes)


def _check_binary(entry, device_type, dtype):
    """A binary pointwise entry over broadcasting shape pairs, both layouts, with the entry's
    Python numbers as the right operand, and in place."""
    if dtype.name not in entry.dtypes:
        pytest.skip(f"the op database has no {dtype.name} samples for {entry.name}")
    rng = np.random.default_rng(0)
    device = reftorch.device(device_type)
    shapes = BINARY_SHAPES + [((257, 129), (257, 129)), ((1000, 100), (100,))]
    failures = []
    for (sa, sb) in shapes:
        for layout in ("contiguous", "transposed"):
            a = _inputs(sa, dtype, device, rng, layout)
            b = _inputs(sb, dtype, device, rng, layout)
            for kwargs in entry.kwargs:
                got = _run(lambda: entry.call(reftorch, a, b, **kwargs))
                with plugins.use_reference_kernels():
                    expected = _run(lambda: entry.call(reftorch, a.cpu(), b.cpu(), **kwargs))
                message = _differ(got, expected)
                if message:
                    failures.append(f"{sa}{layout} {sb} {kwargs}: {message}")
            for number in entry.scalars:   # (a Python number as the right operand)
                got = _run(lambda: entry.call(reftorch, a, number))
                with plugins.use_reference_kernels():
                    expected = _run(lambda: entry.call(reftorch, a.cpu(), number))
                message = _differ(got, expected)
                if message:
                    failures.append(f"{sa}{layout} {number!r}: {message}")
            inplace_target = a.clone()
            if entry.inplace and tuple(inplace_target.shape) == \
                    reftorch.broadcast_shapes(sa, sb):
                got = _run(lambda: entry.inplace(inplace_target, b))
                with plugins.use_reference_kernels():
                    expected = _run(lambda: entry.inplace(a.cpu().clone(), b.cpu()))
                message = _differ(got, expected)
                if message:
                    failures.append(f"{sa}{layout} {sb} in-place: {message}")
    assert not failures, "\n".join(failures[:5])


def _check_random(sample, device_type, dtype):
    """A sampler from one seed, with the plugin and on the reference: the same bits. Sizes
    below, at and above the 16-element blocks some samplers draw in, and a strided view."""
    failures = []
    for shape in ((1,), (15,), (16,), (17,), (1000,), (33, 31)):
        for strided in (False, True):
            if strided and len(shape) < 2:
                continue
            got, expected = [
                _sampled(sample, shape, strided, dtype, device_type if plugin_run else "cpu",
                         plugin_run)
                for plugin_run in (True, False)]
            message = _differ(got, expected)
            if not message and not isinstance(expected, Exception):
                a, b = host(got.cpu()), host(expected)
                if not np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"):
                    message = "not bit-identical"
            if message:
                failures.append(f"{shape} strided={strided}: {message}")
    assert not failures, "\n".join(failures[:5])


def _sampled(sample, shape, strided, dtype, device_type, plugin_run):
    context = contextlib.nullcontext() if plugin_run else plugins.use_reference_kernels()
    with context:
        t = reftorch.zeros(shape, dtype=dtype, device=device_type)
        if strided:
            t = t[:, ::2]
        reftorch.manual_seed(2024)
        if device_type == "cuda":
            reftorch.cuda.manual_seed(2024)
        return _run(lambda: sample(t))


def _check_samples(entry, device_type, dtype, backward=False):
    """An OpInfo's own samples for this dtype, with the plugin and on the reference; with
    `backward`, the gradients of a fixed weighted sum of the first result too."""
    if dtype.name not in entry.dtypes:
        pytest.skip(f"the op database has no {dtype.name} samples for {entry.name}")
    failures = []
    for sample in entry.samples(dtype.name, np.random.default_rng(0)):
        # Each run builds its own tensors from the sample, so an out= tensor or an in-place
        # op's input written by the first run cannot feed (or be) the second run's.
        got = _run_sample(entry, sample, device_type, backward)
        with plugins.use_reference_kernels():
            expected = _run_sample(entry, sample, "cpu", backward)
        message = _differ(got, expected)
        if message:
            failures.append(f"{sample.label} {sample.kwargs}: {message}")
    assert not failures, "\n".join(failures[:5])


def _run_sample(entry, sample, device_type, backward):
    if backward:
        args = tuple(_build_leaf(a) for a in sample.args)
        kwargs = {k: _build_leaf(v) for k, v in sample.kwargs.items()}
    else:
        args, kwargs = build_sample(sample, reftorch)
    args, kwargs = _moved(args, device_type), _moved(kwargs, device_type)
    if not backward:
        return _run(lambda: entry.call(reftorch, *args, **kwargs))
    return _run(lambda: _gradients(entry.call(reftorch, *args, **kwargs), args, kwargs))


def _build_leaf(arg):
    """A sample argument built as build_sample does, except that a floating tensor the
    sample marks differentiable becomes a leaf requiring grad whatever its dtype (the kit
    checks float16/bfloat16 backward kernels too). Built on cpu: moving it to the device
    keeps the gradient flowing."""
    if isinstance(arg, TensorArg):
        x = build(arg, reftorch)
        if arg.requires_grad and x.dtype.is_floating_point:
            x = x.detach().requires_grad_()
        return x
    if isinstance(arg, (tuple, list)):
        return type(arg)(_build_leaf(a) for a in arg)
    return build(arg, reftorch)


def _gradients(result, args, kwargs):
    """(first floating result, the gradients of sum(result * w) for a fixed w) as host
    tensors; w's values depend only on the result's shape."""
    first = result[0] if isinstance(result, (tuple, list)) else result
    inputs = [t for t in _flat((args, kwargs)) if getattr(t, "requires_grad", False)]
    weights = np.random.default_rng(7).standard_normal(first.numel()).reshape(first.shape)
    w = reftorch.tensor(weights, dtype=first.dtype).to(first.device)
    grads = reftorch.autograd.grad(first, inputs, w, allow_unused=True)
    return (first, *(g for g in grads if g is not None))


def _flat(value):
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _flat(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _flat(v)]
    return [value]


def _moved(value, device_type):
    """`value` with every tensor in it (positional, keyword such as out= or clamp's min=,
    inside tuples and lists) on `device_type`."""
    if isinstance(value, reftorch.Tensor):
        return value.to(device_type)
    if isinstance(value, (tuple, list)):
        return type(value)(_moved(v, device_type) for v in value)
    if isinstance(value, dict):
        return {k: _moved(v, device_type) for k, v in value.items()}
    return value


def _run(fn):
    try:
        result = fn()
        # A device may report a kernel's error at the next copy to the host (cuda's index
        # bounds checks, as PyTorch's device-side asserts): that copy belongs to this call.
        for t in result if isinstance(result, (tuple, list)) else (result,):
            if isinstance(t, reftorch.Tensor) and t.device.type != "cpu":
                t.cpu()
        return result
    except Exception as exc:  # noqa: BLE001
        return exc


def _differ(got, expected):
    if isinstance(expected, Exception) or isinstance(got, Exception):
        if type(got) is type(expected):
            return None
        return f"{got!r} vs {expected!r}"
    if isinstance(expected, (tuple, list)):
        return compare_values(tuple(_host(g) for g in got), tuple(expected))
    return compare_values(_host(got), expected)


def _host(value):
    return value.cpu() if isinstance(value, reftorch.Tensor) else value
