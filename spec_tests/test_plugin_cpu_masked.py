"""The C plugin's masked ops (reftorch_cpu.masked over _masked) against the reference kernels.

masked_fill, masked_select and masked_scatter move elements, so every result must be the
reference's bit for bit (compared as bytes: NaN payloads and -0 included), for every dtype
the plugin registers, over contiguous, transposed, strided and broadcast layouts, and sizes
that cross the C loops' blocks. Each comparison runs the same call with the plugin and inside
`reftorch.plugins.use_reference_kernels()`; the C call counter tells whether C really ran.
"""
import numpy as np
import pytest

import reftorch

try:
    import reftorch_cpu
    from reftorch_cpu import _masked, masked
except ImportError as exc:  # not built or not installed in this environment
    pytest.skip(f"reftorch_cpu is not importable ({exc}); build it with "
                f"`pip install --no-build-isolation ./plugin_cpu`", allow_module_level=True)

DTYPES = [reftorch.float32, reftorch.float64, reftorch.int64, reftorch.int32, reftorch.int16,
          reftorch.int8, reftorch.uint8, reftorch.bool, reftorch.float16, reftorch.bfloat16,
          reftorch.complex64]
BLOCK = _masked.BLOCK


from .cpu_plugin import plugin_loaded  # noqa: E402,F401 (the autouse fixture)


# ---------------------------------------------------------------------------------------------
# Helpers

def values(shape, dtype, seed):
    """Values of `dtype` (with NaN and -0 among the floats, so bits matter)."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape) * 50
    if a.size > 3:
        flat = a.reshape(-1)
        flat[1], flat[2] = np.nan, -0.0
    t = reftorch.from_numpy(a)
    return t.to(dtype) if dtype.is_floating_point or dtype.is_complex else \
        t.nan_to_num().to(dtype)


def mask_of(shape, seed, density=0.4):
    return reftorch.from_numpy(np.random.default_rng(seed).random(shape) < density)


def both(fn):
    """fn() with the plugin and under the reference kernels, and how many C calls ran."""
    before = _masked.calls()
    got = fn()
    ran = _masked.calls() - before
    with reftorch.plugins.use_reference_kernels():
        expected = fn()
    return got, expected, ran


def assert_bits(got, expected):
    assert got.dtype == expected.dtype and tuple(got.shape) == tuple(expected.shape)
    assert got.contiguous().numpy().tobytes() == expected.contiguous().numpy().tobytes()


# (input, mask) pairs of shape (40, 130) or broadcasting to it, in several layouts.
def layouts(dtype, seed):
    x = values((40, 130), dtype, seed)
    m = mask_of((40, 130), seed + 1)
    wide = values((40, 260), dtype, seed + 2)
    yield "contiguous", x, m
    yield "transposed", values((130, 40), dtype, seed).t(), mask_of((130, 40), seed + 3).t()
    yield "strided", wide[:, ::2], mask_of((40, 390), seed + 4)[:, 2::3]
    yield "mask row broadcast", x, mask_of((130,), seed + 5)
    yield "mask column broadcast", x, mask_of((40, 1), seed + 6)
    yield "input broadcast", values((130,), dtype, seed + 7), m
    yield "both broadcast", values((40, 1), dtype, seed + 8), mask_of((1, 130), seed + 9)
    yield "3-d with a sliced middle dim", values((4, 20, 130), dtype, seed)[:, 3:13], \
        mask_of((10, 1), seed + 10)


# ---------------------------------------------------------------------------------------------
# masked_fill

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_masked_fill_is_bit_equal(dtype):
    fills = [2.5, -3, True, reftorch.tensor(7.25), reftorch.tensor(-2, dtype=reftorch.int8)]
    if dtype.is_floating_point:
        fills += [float("nan"), float("-inf"), -0.0]
    for label, x, m in layouts(dtype, 1):
        for value in fills:
            got, expected, ran = both(lambda: x.masked_fill(m, value))
            assert ran == 1, label
            assert_bits(got, expected)


@pytest.mark.parametrize("dtype", [reftorch.float32, reftorch.int64, reftorch.bool], ids=str)
def test_masked_fill_in_place_writes_through_views(dtype):
    base = values((40, 300), dtype, 2)
    m = mask_of((300,), 3)

    def fill():
        target = base.clone()
        target[:, 100:].masked_fill_(m[100:], 5)   # a view of a wider tensor
        return target
    got, expected, ran = both(fill)
    assert ran == 1
    assert_bits(got, expected)


def test_masked_fill_value_conversion_matches_the_reference():
    """The value becomes an element as the reference makes it: float to int truncates, a
    float64 tensor rounds to float32; a value out of the dtype's range is refused before any
    kernel runs (PyTorch's overflow check)."""
    x = values((50, 60), reftorch.int8, 4)
    m = mask_of((50, 60), 5)
    for value in (3.9, -3.9, -128, reftorch.tensor(100)):
        got, expected, ran = both(lambda: x.masked_fill(m, value))
        assert ran == 1
        assert_bits(got, expected)
    for value in (300, reftorch.tensor(1e10)):
        with pytest.raises(RuntimeError, match="cannot be converted to type int8_t"):
            x.masked_fill(m, value)
    y = values((50, 60), reftorch.float32, 6)
    got, expected, ran = both(lambda: y.masked_fill(m, reftorch.tensor(0.1, dtype=reftorch.float64)))
    assert ran == 1
    assert_bits(got, expected)
    assert got.numpy()[m.numpy()][0] == np.float32(0.1)


# ---------------------------------------------------------------------------------------------
# masked_select and masked_scatter

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_masked_select_is_bit_equal(dtype):
    for label, x, m in layouts(dtype, 10):
        got, expected, ran = both(lambda: x.masked_select(m))
        assert ran == 2, label          # the count, then the moves
        assert_bits(got, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_masked_scatter_is_bit_equal(dtype):
    source = values((40 * 130 + 7,), dtype, 20)
    for label, x, m in layouts(dtype, 21):
        for src in (source, source.flip(0)[:6000],
                    values((200, 60), dtype, 22).t()):   # non-contiguous: flattened in order
            got, expected, ran = both(lambda: x.masked_scatter(m, src))
            assert ran == 1, label
            assert_bits(got, expected)


@pytest.mark.parametrize("density", [0.0, 0.001, 0.5, 0.999, 1.0])
def test_sizes_across_blocks_and_mask_densities(density):
    """Blocks of BLOCK positions count, then write from their prefix offsets: results across
    block edges (and blocks with no or only true positions) stay in row-major order."""
    n = 3 * BLOCK + 77
    x = values((n,), reftorch.float32, 30)
    m = mask_of((n,), 31, density)
    m[BLOCK - 1] = True                    # true positions on both sides of a block edge
    m[BLOCK] = True
    source = values((n,), reftorch.float32, 32)
    for call in (lambda: x.masked_select(m), lambda: x.masked_scatter(m, source),
                 lambda: x.masked_fill(m, -1.5),
                 lambda: x.reshape(1, n).expand(3, n).masked_select(m)):
        got, expected, ran = both(call)
        assert ran >= 1
        assert_bits(got, expected)
    selected = x.masked_select(m).numpy()
    assert selected.size == int(m.sum()) and selected.tobytes() == x.numpy()[m.numpy()].tobytes()


def test_results_do_not_depend_on_the_thread_count():
    n = 200_003                            # above the parallel threshold, ragged last block
    x = values((n,), reftorch.float64, 40)
    m = mask_of((n,), 41, 0.3)
    xm = values((701, 300), reftorch.int32, 42)
    mm = mask_of((300,), 43)
    source = values((n,), reftorch.float64, 44)
    calls = [lambda: x.masked_fill(m, 2.0), lambda: x.masked_select(m),
             lambda: x.masked_scatter(m, source), lambda: xm.masked_select(mm),
             lambda: xm.t().masked_fill(mm.reshape(300, 1), 9),
             lambda: xm.masked_scatter(mm, xm.t())]
    previous = _masked.set_num_threads(1)
    try:
        runs = []
        for threads in (1, 2, 3):
            _masked.set_num_threads(threads)
            runs.append([call().numpy().tobytes() for call in calls])
    finally:
        _masked.set_num_threads(previous)
    assert runs[0] == runs[1] == runs[2]
    with reftorch.plugins.use_reference_kernels():
        assert runs[0] == [call().numpy().tobytes() for call in calls]


def test_backward_runs_through_the_plugin():
    x = values((64, 100), reftorch.float64, 50).nan_to_num().requires_grad_()
    m = mask_of((64, 100), 51)
    got, expected, ran = both(
        lambda: reftorch.autograd.grad((x.masked_fill(m, 0.0) ** 2).sum(), x)[0])
    assert ran >= 2                        # the forward and the gradient's masked_fill
    assert_bits(got, expected)


# ---------------------------------------------------------------------------------------------
# Declines and errors

def test_declines_run_the_reference():
    x = values((50, 60), reftorch.float32, 60)
    m = mask_of((50, 60), 61)
    cases = [lambda: x[:10, :10].masked_fill(m[:10, :10], 1.0),          # below MIN_NUMEL
             lambda: x[:10, :10].masked_select(m[:10, :10]),
             lambda: x.to(reftorch.complex128).masked_fill(m, 1.0),      # 16-byte elements
             lambda: x.to(reftorch.complex128).masked_select(m)]
    for call in cases:
        got, expected, ran = both(call)
        assert ran == 0
        assert_bits(got, expected)
    assert reftorch.complex128 not in masked.DTYPES and reftorch.float32 in masked.DTYPES


def test_errors_are_the_references():
    x = values((50, 60), reftorch.float32, 70)
    m = mask_of((50, 60), 71)
    cases = [(lambda: x.masked_fill(m.to(reftorch.uint8), 1.0), RuntimeError),
             (lambda: x.masked_fill(m, values((2,), reftorch.float32, 1)), RuntimeError),
             (lambda: x.masked_select(m.to(reftorch.int64)), RuntimeError),
             (lambda: x.masked_select(mask_of((7,), 1)), RuntimeError),
             (lambda: x.masked_scatter(m, values((3,), reftorch.float32, 1)), RuntimeError),
             (lambda: x.masked_scatter(m, values((3000,), reftorch.float64, 1)), RuntimeError),
             (lambda: x.masked_fill_(mask_of((2, 50, 60), 1), 1.0), RuntimeError)]
    for call, error in cases:
        with pytest.raises(error) as plugin_error:
            call()
        with reftorch.plugins.use_reference_kernels(), pytest.raises(error) as reference_error:
            call()
        assert str(plugin_error.value) == str(reference_error.value)


def test_raw_entry_points_check_every_buffer():
    a = np.arange(10, dtype=np.float32).view(np.uint32)
    out = np.zeros(10, np.uint32)
    mask = np.ones(10, bool)
    value = np.ones(1, np.uint32)
    with pytest.raises(ValueError):    # a's view reaches past its buffer
        _masked.fill([11], out, 0, [1], a, 0, [1], mask, 0, [1], value)
    with pytest.raises(ValueError):    # a negative stride from offset 0
        _masked.fill([10], out, 0, [1], a, 0, [-1], mask, 0, [1], value)
    with pytest.raises(TypeError):     # out and a of different element sizes
        _masked.fill([10], out, 0, [1], a.view(np.uint16), 0, [1], mask, 0, [1], value)
    with pytest.raises(TypeError):     # a mask of 4-byte elements
        _masked.fill([10], out, 0, [1], a, 0, [1], a, 0, [1], value)
    with pytest.raises(ValueError):    # an empty value
        _masked.fill([10], out, 0, [1], a, 0, [1], mask, 0, [1], value[:0])
    with pytest.raises(ValueError):    # out holds 9 from offset 1, 10 are selected
        _masked.select([10], out, 1, a, 0, [1], mask, 0, [1])
    with pytest.raises(RuntimeError, match="at least as many elements as ones in mask"):
        _masked.scatter([10], out, 0, [1], a, 0, [1], mask, 0, [1], a, 5)  # 5 from offset 5
    with pytest.raises(ValueError):    # offset past the buffer
        _masked.scatter([10], out, 0, [1], a, 0, [1], mask, 0, [1], a, 11)
    with pytest.raises(TypeError):
        _masked.select([10], out, 0, a, 0, [1], mask, 0)
    assert out.tolist() == [0] * 10    # nothing was written by a refused call
    assert _masked.select([10], out, 0, a, 0, [1], mask, 0, [1]) == 10
    assert _masked.count([2, 5], mask, 0, [0, 2]) == 10   # stride 0 and 2 stay inside


def test_buffers_of_zero_size_elements_are_refused_not_divided_by():
    """A buffer whose elements have itemsize 0 (an array of empty ctypes structures) once
    divided its length by 0 (SIGFPE); it holds no elements, so any view of it is refused."""
    import ctypes

    class Empty(ctypes.Structure):
        _fields_ = []

    empty = (Empty * 4)()
    assert memoryview(empty).itemsize == 0
    a = np.zeros(4, np.uint32)
    mask = np.ones(4, bool)
    with pytest.raises(ValueError, match="mask"):    # the walked mask reaches 4 elements
        _masked.count([4], empty, 0, [1])
    with pytest.raises(TypeError):                   # select's flat out: not 1-8 byte elements
        _masked.select([4], empty, 0, a, 0, [1], mask, 0, [1])
    assert _masked.count([4], mask, 0, [1]) == 4


@pytest.mark.parametrize("dtype", [reftorch.float32, reftorch.float64, reftorch.int64],
                         ids=str)
def test_masked_fill_in_place_writes_the_input_itself(dtype):
    """masked_fill_ on a contiguous input of the result's shape is written in place (same
    storage, version bumped, one C call); other layouts are computed out of place and copied
    in. The reference's bits either way."""
    for name, x, m in layouts(dtype, 60):
        if tuple(x.shape) != (40, 130):
            continue                      # an input that broadcasts cannot be written in place

        def run():
            target = x.clone() if name == "contiguous" else x.clone().t().contiguous().t() \
                if name == "transposed" else x.clone()
            storage, version = target._storage, target._version
            assert target.masked_fill_(m, -2.5) is target
            return target, storage, version

        (got, storage, version), (expected, _, _), ran = both(run)
        assert got._storage is storage and got._version > version
        assert ran == 1
        assert_bits(got, expected)


def test_masked_scatter_in_place_and_its_safe_declines():
    """masked_scatter_ writes the input itself (same storage, the reference's bits); a source
    that is a view of the input is read as it was (computed out of place, copied in); a
    source too short raises the reference's error and leaves the input unchanged."""
    mask = mask_of((40, 130), 70)
    source = values((40 * 130,), reftorch.float32, 71)

    def run():
        x = values((40, 130), reftorch.float32, 72)
        storage = x._storage
        assert x.masked_scatter_(mask, source) is x and x._storage is storage
        y = values((40, 130), reftorch.float32, 73)
        y.masked_scatter_(mask, y.flip(0).reshape(-1).clone().reshape(40, 130)[:, :])
        z = values((40, 130), reftorch.float32, 74)
        z.masked_scatter_(mask, z.t().contiguous().t())     # reads z's own memory? a copy
        return [x, y, z]
    got, expected, ran = both(run)
    assert ran == 3
    for g, e in zip(got, expected):
        assert_bits(g, e)
    w = values((40, 130), reftorch.float32, 75)
    before = w.clone()
    with pytest.raises(RuntimeError, match="at least as many elements"):
        w.masked_scatter_(mask, source[:10])
    assert_bits(w, before)
    # a view of fewer elements than its storage holds: counted as the view (the C loop was
    # once handed the whole storage and read past the view's end)
    with pytest.raises(RuntimeError, match="at least as many elements"):
        w.masked_scatter(mask, source[:10])
    got, expected, ran = both(lambda: [w.masked_scatter(mask, source[3:3 + 2200])])
    assert ran == 1
    assert_bits(got[0], expected[0])
    v = values((40, 130), reftorch.float32, 76)
    shifted = v.reshape(-1)                       # a view of v itself as the source
    got, expected, ran = both(lambda: [values((40, 130), reftorch.float32, 76).masked_scatter_(
        mask, values((40, 130), reftorch.float32, 76).reshape(-1))])
    assert_bits(got[0], expected[0])
    expected_self = v.clone()
    with reftorch.plugins.use_reference_kernels():
        expected_self.masked_scatter_(mask, expected_self.clone().reshape(-1))
    v.masked_scatter_(mask, shifted)
    assert_bits(v, expected_self)


# ---------------------------------------------------------------------------------------------
# tril / triu: a masked_fill with the dropped triangle's mask

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("fn", [reftorch.tril, reftorch.triu], ids=["tril", "triu"])
def test_triangles_are_the_references_bits(fn, dtype):
    """Square, wide, tall and batched inputs, contiguous and transposed, diagonals inside,
    at the edges and past them: the kept elements' bits (NaN, -0) and the reference's
    zeros. complex128 (16-byte elements) is left to the reference."""
    square, wide = values((3, 50, 50), dtype, 40), values((40, 130), dtype, 41)
    tall = values((130, 40), dtype, 42).t().t().contiguous()
    cases = [(square, 0), (square, -2), (square, 7), (wide, 1), (wide, -45), (wide, 200),
             (tall, -3), (tall, 90), (values((130, 40), dtype, 43).t(), 2),
             (square.transpose(1, 2), -1)]
    for x, diagonal in cases:
        got, expected, ran = both(lambda: fn(x, diagonal))
        assert ran == 1, (tuple(x.shape), diagonal)
        assert_bits(got, expected)
        assert got.is_contiguous()


def test_triangles_decline_small_and_complex128():
    small = values((20, 20), reftorch.float32, 44)
    big = values((60, 60), reftorch.float64, 45).to(reftorch.complex128)
    for x in (small, big):
        got, expected, ran = both(lambda: reftorch.tril(x, 1))
        assert ran == 0
        assert_bits(got, expected)
