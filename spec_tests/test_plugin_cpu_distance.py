"""The C plugin's cdist for p = 1 and p = 2 (plugin_cpu/src/distance.c,
reftorch_cpu/distance.py) against the reference: bit for bit for row-major inputs (the
reference's np.sum then adds each distance's terms in NumPy's pairwise order, as C does),
within rounding for other layouts (NumPy's order then follows the memory layout)."""
import numpy as np
import pytest

import reftorch

try:
    import reftorch_cpu
    from reftorch_cpu import _distance
except ImportError as exc:  # not built or not installed in this environment
    pytest.skip(f"reftorch_cpu is not importable ({exc}); build it with "
                f"`pip install --no-build-isolation ./plugin_cpu`", allow_module_level=True)

F32, F64 = reftorch.float32, reftorch.float64


from .cpu_plugin import plugin_loaded  # noqa: E402,F401 (the autouse fixture)


def rows(shape, dtype, seed):
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype.numpy_dtype)
    a.reshape(-1, shape[-1])[0, 0] = np.nan
    a.reshape(-1, shape[-1])[-1, -1] = np.inf
    return reftorch.from_numpy(a)


def run_both(call):
    before = _distance.calls()
    with reftorch.plugins.all_sizes():
        got = call()
    ran = _distance.calls() - before
    with reftorch.plugins.use_reference_kernels():
        want = call()
    return got.numpy(), want.numpy(), ran


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("p", [1.0, 2.0])
@pytest.mark.parametrize("features", [1, 5, 8, 32, 129, 300])  # both sides of 8, 128
def test_row_major_inputs_give_the_references_bits(dtype, p, features):
    for shapes in (((40, features), (30, features)), ((3, 20, features), (3, 25, features))):
        x1, x2 = rows(shapes[0], dtype, 1), rows(shapes[1], dtype, 2)
        got, want, ran = run_both(lambda: reftorch.cdist(x1, x2, p=p))
        assert ran == 1
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("p", [1.0, 2.0])
def test_other_layouts_agree_within_rounding(dtype, p):
    x1 = rows((60, 33), dtype, 3)
    x2 = reftorch.from_numpy(np.ascontiguousarray(rows((50, 33), dtype, 4).numpy().T)).t()
    stepped = rows((60, 66), dtype, 5)[:, ::2]
    expanded = rows((1, 50, 33), dtype, 6).expand(4, 50, 33)
    for a, b in ((x1, x2), (stepped, x2), (x1.expand(4, 60, 33), expanded)):
        got, want, ran = run_both(lambda: reftorch.cdist(a, b, p=p))
        assert ran == 1
        np.testing.assert_allclose(got, want, rtol=1e-5 if dtype is F32 else 1e-13)


def test_declines_other_p_and_broadcast_batches():
    x1, x2 = rows((40, 8), F32, 7), rows((2, 30, 8), F32, 8)
    before = _distance.calls()
    reftorch.cdist(x1, x1, p=3.0)
    reftorch.cdist(x1, x1, p=0.0)
    reftorch.cdist(x1.unsqueeze(0), x2)          # batch dims 1 and 2: broadcast
    assert _distance.calls() == before


def test_gradients_still_flow():
    rng = np.random.default_rng(9)
    x1 = reftorch.from_numpy(rng.standard_normal((40, 8))).requires_grad_()
    x2 = reftorch.from_numpy(rng.standard_normal((30, 8)))
    before = _distance.calls()
    reftorch.cdist(x1, x2).sum().backward()
    assert _distance.calls() == before + 1
    assert x1.grad is not None and np.isfinite(x1.grad.numpy()).all()


def test_c_entry_point_checks_its_arguments():
    a, out = np.zeros(24, np.float32), np.zeros(16, np.float32)
    _distance.cdist(2, a, 0, (1, 4, 6), (0, 6, 1), a, 0, 4, (0, 6, 1), out)
    with pytest.raises(ValueError):
        _distance.cdist(3, a, 0, (1, 4, 6), (0, 6, 1), a, 0, 4, (0, 6, 1), out)
    with pytest.raises(ValueError):   # x2's view overruns a
        _distance.cdist(2, a, 0, (1, 4, 6), (0, 6, 1), a, 1, 4, (0, 6, 1), out)
    with pytest.raises(ValueError):   # out too small
        _distance.cdist(2, a, 0, (1, 4, 6), (0, 6, 1), a, 0, 4, (0, 6, 1), out[:15])
    with pytest.raises(TypeError):
        _distance.cdist(2, a, 0, (1, 4, 6), (0, 6, 1), a.astype(np.float64), 0, 4, (0, 6, 1),
                        out)


def test_every_instruction_set_and_thread_count_gives_the_same_bits():
    """Lanes of 4, 8 or 16 distances, one or two threads: each distance the same steps."""
    x1, x2 = rows((70, 45), F32, 11), rows((53, 45), F32, 12)
    outs = []
    previous_isa, previous_threads = _distance.isa(), _distance.set_num_threads(1)
    try:
        for isa in _distance.supported_isas():
            for threads in (1, 2):
                _distance.set_isa(isa)
                _distance.set_num_threads(threads)
                for p in (1.0, 2.0):
                    outs.append((p, reftorch.cdist(x1, x2, p=p).numpy().tobytes()))
    finally:
        _distance.set_isa(previous_isa)
        _distance.set_num_threads(previous_threads)
    for p in (1.0, 2.0):
        assert len({bits for q, bits in outs if q == p}) == 1
