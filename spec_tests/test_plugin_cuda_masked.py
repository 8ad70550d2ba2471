"""reftorch-cuda's masked_select and masked_scatter (kernels/masked_scan.cu) against the cpu
reference.

Every launch test runs on a real GPU when there is one and on the emulated driver (the
`device_kind` fixture of test_plugin_cuda). Both ops move elements in the order a prefix count
of the mask gives them (integers: exact), so results must equal the reference bit for bit.
Sizes cross the 4096-position chunks the count is cut into, and a lowered grid makes blocks
loop over the chunks beyond it.
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from reftorch import plugins

pytest.importorskip("reftorch_cuda", reason="reftorch-cuda is not installed")
from reftorch_cuda import ops_masked as X  # noqa: E402
from spec_tests import test_plugin_cuda as base  # noqa: E402
from spec_tests.test_plugin_cuda_index import _guarded_result, sample  # noqa: E402
from spec_tests.test_plugin_cuda_kernels import assert_same_values  # noqa: E402

# The launch fixtures of test_plugin_cuda (pytest finds fixtures by name).
kernel_cache_dir, plugin, compiled = base.kernel_cache_dir, base.plugin, base.compiled
emulated, device_kind = base.emulated, base.device_kind
reference = base.reference
MOVED = base.FLOATS + ["int64", "int32", "int16", "uint8", "bool", "complex64",
                       "complex128"]


def mask(shape, seed, p=0.5):
    return reftorch.tensor(np.random.default_rng(seed).random(shape) < p)


def values(shape, dtype_name, seed):
    if dtype_name == "complex128":
        return sample(shape, "complex64", seed).to(reftorch.complex128)
    if dtype_name in ("int16", "uint8"):
        return sample(shape, "int32", seed).to(getattr(reftorch, dtype_name))
    return sample(shape, dtype_name, seed)


def assert_matches(fn, *cpu_args):
    expected = reference(fn, *cpu_args)
    got = fn(*(a.cuda() if isinstance(a, reftorch.Tensor) else a for a in cpu_args))
    assert got.device.type == "cuda"
    assert_same_values(got, expected)


# (x shape and layout, mask shape and layout), from a (6, 5) x and a (6, 5) mask
CASES = {
    "contiguous": (lambda x: x, lambda m: m),
    "transposed": (lambda x: x.t(), lambda m: m.t()),
    "transposed_x_only": (lambda x: x.t(), lambda m: m.t().contiguous()),
    "sliced": (lambda x: x[1::2, 1:], lambda m: m[:3, ::5].expand(3, 4)),
    "broadcast_mask_row": (lambda x: x, lambda m: m[0]),
    "broadcast_x_column": (lambda x: x[:, :1], lambda m: m),
    "both_broadcast": (lambda x: x[:, :1], lambda m: m[:1]),
    "zero_dim_x": (lambda x: x[0, 0], lambda m: m),
    "zero_dim_mask": (lambda x: x, lambda m: m[0, 0]),
    "empty": (lambda x: x[:0], lambda m: m[:0]),
    "all_false": (lambda x: x, lambda m: m & False),
    "all_true": (lambda x: x, lambda m: m | True),
}


@pytest.mark.parametrize("dtype_name", MOVED)
def test_masked_select_matches_the_reference(device_kind, dtype_name):
    plugins.reset_fallbacks()
    for seed, (case, (arrange_x, arrange_m)) in enumerate(CASES.items()):
        x, m = arrange_x(values((6, 5), dtype_name, seed)), arrange_m(mask((6, 5), seed))
        assert_matches(reftorch.masked_select, x, m)
    assert plugins.fallbacks() == {}


@pytest.mark.parametrize("dtype_name", MOVED)
def test_masked_scatter_matches_the_reference(device_kind, dtype_name):
    plugins.reset_fallbacks()
    for seed, (case, (arrange_x, arrange_m)) in enumerate(CASES.items()):
        x, m = arrange_x(values((6, 5), dtype_name, seed)), arrange_m(mask((6, 5), seed))
        source = values((7, 6), dtype_name, seed + 50)        # more than enough, any shape
        assert_matches(reftorch.masked_scatter, x, m, source)
        assert_matches(reftorch.masked_scatter, x, m, source.t())   # non-contiguous: copied
        if x.shape == reftorch.broadcast_shapes(x.shape, m.shape):
            assert_matches(lambda a, b, s: a.clone().masked_scatter_(b, s), x, m, source)
    assert plugins.fallbacks() == {}


def test_masked_scatter_with_exactly_enough_source(device_kind):
    x, m = values((4, 9), "float32", 1), mask((4, 9), 2)
    source = values((int(m.sum()),), "float32", 3)
    assert_matches(reftorch.masked_scatter, x, m, source)


@pytest.mark.parametrize("shape", [(3, 5000), (4097,), (2, 3, 4096), (7, 1, 1234)])
def test_sizes_crossing_chunks_match_the_reference(device_kind, shape):
    for p in (0.5, 0.02, 0.98):
        x, m = values(shape, "float32", 4), mask(shape, 5, p)
        assert_matches(reftorch.masked_select, x, m)
        assert_matches(reftorch.masked_scatter, x, m, values((x.numel(),), "float32", 6))
        # a mask broadcast along the leading dims, a transposed input
        assert_matches(reftorch.masked_select, x.transpose(0, -1).contiguous().transpose(0, -1),
                       m[(0,) * (len(shape) - 1)])


def test_blocks_loop_over_the_chunks_beyond_the_grid(device_kind, monkeypatch):
    monkeypatch.setattr(X, "MAX_GRID", 2)
    x, m = values((5, 3000), "float64", 7), mask((5, 3000), 8)   # 4 chunks on 2 blocks
    driver = reftorch.ones(1).cuda()._storage._driver
    grids = []
    launch_grid = driver.launch_grid
    monkeypatch.setattr(driver, "launch_grid", lambda index, program, expression, grid, *rest:
                        grids.append(grid) or launch_grid(index, program, expression, grid,
                                                          *rest))
    assert_matches(reftorch.masked_select, x, m)
    assert_matches(reftorch.masked_scatter, x, m, values((15000,), "float64", 9))
    assert grids.count((2, 1, 1)) == 4   # count, select; count, scatter


def test_masked_select_backward_runs_on_the_device(device_kind):
    """MaskedSelectBackward0 is masked_scatter into zeros; MaskedScatterBackward0 is
    masked_fill and masked_select (and cat): all served, no fallback."""
    x, m, source = values((4, 6), "float32", 10), mask((6,), 11), values((30,), "float32", 12)
    grads = []
    for device in ("cpu", "cuda"):
        leaves = [t.to(device).detach().requires_grad_() for t in (x, source)]
        plugins.reset_fallbacks()
        picked = reftorch.masked_select(leaves[0], m.to(device))
        scattered = reftorch.masked_scatter(leaves[0], m.to(device), leaves[1])
        (picked.sum() * 2 + (scattered * scattered).sum()).backward()
        if device == "cuda":
            assert plugins.fallbacks() == {}
        grads.append([t.grad for t in leaves])
    for got, expected in zip(grads[1], grads[0]):
        assert_same_values(got, expected)


def test_too_few_source_elements_raise_the_reference_error(device_kind):
    x, m = values((5, 3), "float32", 13), mask((5, 3), 14, 0.8)
    short = values((int(m.sum()) - 2,), "float32", 15)
    with pytest.raises(RuntimeError) as expected:
        reference(reftorch.masked_scatter, x, m, short)
    # The public call does not synchronise to count the mask: the kernel checks on the device
    # and the next synchronisation raises the reference's error.
    scattered = reftorch.masked_scatter(x.cuda(), m.cuda(), short.cuda())
    with pytest.raises(RuntimeError) as got:
        scattered.cpu()
    assert str(got.value) == str(expected.value)
    # The kernel never reads past the source: it records the first position that runs out.
    f32 = reftorch.float32
    result, raw = _guarded_result(
        lambda a, b, s: X.masked_scatter_kernel(None, (a, b, s), (f32,) * 3, {}),
        (x.cuda(), m.cuda(), short.cuda()))
    assert (raw[result.numel() * 4:] == 0x5A).all()
    # the positions the source covers got it; the rest keep x's elements
    got_values = raw[:result.numel() * 4].view(np.float32).reshape(5, 3)
    flat_mask = m._np.reshape(-1)
    covered = np.cumsum(flat_mask) <= short.numel()
    expected_values = x._np.reshape(-1).copy()
    take = flat_mask & covered
    expected_values[take] = short._np[:int(take.sum())]
    np.testing.assert_array_equal(got_values.reshape(-1), expected_values)
    reftorch.cuda.synchronize()                  # reported once
    x_cuda = x.cuda()
    X.masked_scatter_kernel(None, (x_cuda, m.cuda(), short.cuda()), (f32,) * 3, {})
    with pytest.raises(RuntimeError, match="at least as many elements as ones in mask"):
        x_cuda.cpu()


def test_kernels_decline_what_they_do_not_handle(device_kind):
    f32 = reftorch.float32
    x, m = values((3, 4), "float32", 16).cuda(), mask((3, 4), 17).cuda()
    assert X.masked_select_kernel(None, (x, m.to(reftorch.uint8)), (f32,) * 3, {}) \
        is NotImplemented                                    # not a bool mask
    assert X.masked_select_kernel(None, (x.cpu(), m.cpu()), (f32,) * 3, {}) is NotImplemented
    assert X.masked_scatter_kernel(None, (x, m, x.double()), (f32,) * 3, {}) \
        is NotImplemented                                    # source of another dtype
    assert X.masked_select_kernel(reftorch.empty(0).cuda(), (x, m), (f32,) * 3, {}) \
        is NotImplemented                                    # out=
