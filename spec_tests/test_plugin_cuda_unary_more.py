"""reftorch-cuda's second unary.cu program against the cpu reference: erf and leaky_relu.

Launch tests run on a real GPU when there is one and on the emulated driver (see
test_plugin_cuda_kernels).
  - erf: CUDA's double erf (within 2 ulp of the exact value, CUDA C Programming Guide's
    table) rounded to the dtype; the reference's float64 Cody approximation is within 3 ulp
    of the exact value (measured against mpmath on 47,000 points). So float64 results agree
    within 5 ulp, and every other dtype within 1 ulp of its own (both sides round values a few
    double ulp apart once, or twice for the 16-bit types through float: a rounding boundary
    between them moves the result by 1 ulp). The emulation computes erf with Python's
    math.erf (within 1 ulp of the exact value), an implementation other than the
    reference's, so the emulated run is held to the same bounds, and they are tight enough
    that a wrong formula or a missing rounding fails them.
  - leaky_relu: one comparison and one rounded product in the computation type, the slope
    rounded to it: bit for bit in both modes (NaN, signed zeros, infinities included).
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from reftorch import plugins
import reftorch.nn.functional as F

pytest.importorskip("reftorch_cuda", reason="reftorch-cuda is not installed")
from spec_tests import test_plugin_cuda as base  # noqa: E402
from spec_tests.test_plugin_cuda_kernels import UNARY_LAYOUTS, assert_close  # noqa: E402

# The launch fixtures and value helpers of test_plugin_cuda (pytest finds fixtures by name).
kernel_cache_dir, plugin, compiled = base.kernel_cache_dir, base.plugin, base.compiled
emulated, device_kind = base.emulated, base.device_kind
FLOATS, values, host, reference = base.FLOATS, base.values, base.host, base.reference

ERF_ULPS = {"float64": 5, "float32": 1, "float16": 1, "bfloat16": 1}


def dense_range(dtype_name):
    """-6 .. 6 in fine steps (erf's curved part and its approach to +-1) and small values."""
    x = np.concatenate([np.linspace(-6, 6, 6001), np.geomspace(1e-30, 0.5, 500)])
    return reftorch.tensor(x.astype(np.float32)).to(getattr(reftorch, dtype_name))


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_erf_matches_the_cpu_reference(device_kind, dtype_name):
    plugins.reset_fallbacks()
    ulps = ERF_ULPS[dtype_name]
    for seed, (layout, arrange) in enumerate(UNARY_LAYOUTS.items()):
        x = values((6, 5), dtype_name, seed)   # with +-0, +-inf, NaN, subnormals
        expected = reference(reftorch.erf, arrange(x))
        assert_close(reftorch.erf(arrange(x.cuda())), expected, True, ulps, err_msg=layout)
    x = dense_range(dtype_name)
    assert_close(reftorch.erf(x.cuda()), reference(reftorch.erf, x), True, ulps,
                 err_msg="dense range")
    assert plugins.fallbacks() == {}


def test_erf_in_place(device_kind):
    x = values((4, 7), "float32", 21)
    plugins.reset_fallbacks()
    y = x.cuda().t()
    y.erf_()   # in place through a transposed view
    assert_close(y, reference(reftorch.erf, x.t()), True, 1)
    assert plugins.fallbacks() == {}


SLOPES = [0.01, 0.2, -0.5, 0, 3, 1e-3]


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_leaky_relu_is_bit_equal_to_the_reference(device_kind, dtype_name):
    plugins.reset_fallbacks()
    for slope in SLOPES:
        for seed, (layout, arrange) in enumerate(UNARY_LAYOUTS.items()):
            x = values((6, 5), dtype_name, seed)
            expected = reference(lambda t: F.leaky_relu(t, slope), arrange(x))
            assert_close(F.leaky_relu(arrange(x.cuda()), slope), expected, False,
                         err_msg=f"{layout} slope {slope}")
    x = values((3, 300), dtype_name, 22)   # more elements than one block of threads
    assert_close(F.leaky_relu(x.cuda()), reference(F.leaky_relu, x), False, err_msg="large")
    assert plugins.fallbacks() == {}


def test_leaky_relu_in_place_and_backward(device_kind):
    """leaky_relu_ through a transposed view writes in place; the gradient (the reference's
    derivative: a where of the slope and a product) equals the reference's."""
    x = values((4, 7), "float32", 23)
    plugins.reset_fallbacks()
    y = x.cuda().t()
    F.leaky_relu_(y, 0.1)
    assert_close(y, reference(lambda t: F.leaky_relu(t, 0.1), x.t()), False)
    assert plugins.fallbacks() == {}
    finite = reftorch.tensor(np.nan_to_num(host(x), posinf=5, neginf=-5).astype(np.float32))
    leaf = finite.cuda().requires_grad_()
    F.leaky_relu(leaf, 0.1).backward(reftorch.ones(4, 7).cuda())
    cpu_leaf = finite.clone().requires_grad_()
    with plugins.use_reference_kernels():
        F.leaky_relu(cpu_leaf, 0.1).backward(reftorch.ones(4, 7))
    np.testing.assert_array_equal(host(leaf.grad), host(cpu_leaf.grad))


def test_leaky_relu_declines_a_slope_that_is_not_a_plain_number(device_kind):
    """A slope a double cannot hold exactly (a huge int), or not a real number, declines;
    through the op, the counted fallback then runs it."""
    from reftorch_cuda import ops_unary as U
    f32 = reftorch.float32
    x = values((3, 4), "float32", 24)
    kernel = U.unary_scalar_kernel("leaky_relu")
    assert kernel(None, (x.cuda(),), (f32,) * 3, {"negative_slope": 0.5}) is not NotImplemented
    for slope in (2 ** 60, complex(1, 1), "0.1"):
        assert kernel(None, (x.cuda(),), (f32,) * 3, {"negative_slope": slope}) \
            is NotImplemented
    plugins.reset_fallbacks()
    got = F.leaky_relu(x.cuda(), 2 ** 60)
    np.testing.assert_array_equal(host(got), host(reference(
        lambda t: F.leaky_relu(t, 2 ** 60), x)))
    assert plugins.fallbacks() == {("leaky_relu", "cuda", f32): 1}
