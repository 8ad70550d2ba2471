"""Op-database entries: indexing, slicing, joining, mutating (see core.py for the format)."""
from __future__ import annotations

import numpy as np

from . import DTYPE_NAMES
from .core import OpInfo, Sample, TensorArg, function, inplace, tensor

NUMERIC = tuple(d for d in DTYPE_NAMES if d != "bool")


def idx(array):
    """An int64 index tensor with exactly these values (never requires grad)."""
    return TensorArg(np.asarray(array, dtype=np.int64), "int64", requires_grad=False)


def mask(array):
    return TensorArg(np.asarray(array, dtype=bool), "bool", requires_grad=False)


def cat_samples(dtype, rng):
    t = lambda shape, layout="contiguous": tensor(shape, dtype, rng, layout)  # noqa: E731
    yield Sample(([t((2, 3)), t((4, 3))],), {}, "dim0")
    yield Sample(([t((2, 3), "transposed"), t((2, 1)), t((2, 2), "strided")],), {"dim": -1},
                 "dim -1 layouts")
    yield Sample(([t((2, 3)), t((0,))],), {"dim": 1}, "skip 1-D empty")
    yield Sample(([t((0, 3)), t((2, 3))],), {}, "empty")
    yield Sample(([t((3,))],), {}, "single")
    yield Sample(([t((2, 3)), tensor((2, 3), "float64", rng)],), {}, "promotion")
    yield Sample(([t((2, 3)), t((2, 4))],), {}, "size mismatch")
    yield Sample(([t((2, 3)), t((3,))],), {}, "ndim mismatch")
    yield Sample(([t(())],), {}, "0-dim error")
    yield Sample(([t((2, 3))],), {"dim": 2}, "bad dim")


def stack_samples(dtype, rng):
    t = lambda shape, layout="contiguous": tensor(shape, dtype, rng, layout)  # noqa: E731
    yield Sample(([t((2, 3)), t((2, 3), "transposed")],), {}, "dim0")
    yield Sample(([t((2, 3)), t((2, 3))],), {"dim": -1}, "dim -1")
    yield Sample(([t(()), t(())],), {}, "0-dim")
    yield Sample(([t((0, 2))],), {"dim": 1}, "empty")
    yield Sample(([t((2, 3)), t((3, 2))],), {}, "shape mismatch")


def hvd_samples(dtype, rng):
    t = lambda shape: tensor(shape, dtype, rng)  # noqa: E731
    yield Sample(([t((3,)), t((2,))],), {}, "1-D")
    yield Sample(([t((2, 3)), t((2, 3))],), {}, "2-D")
    yield Sample(([t(()), t(())],), {}, "0-D")
    yield Sample(([t((2, 3, 2)), t((2, 3, 2))],), {}, "3-D")


def split_samples(dtype, rng):
    t = lambda shape, layout="contiguous": tensor(shape, dtype, rng, layout)  # noqa: E731
    yield Sample((t((5, 3)), 2), {}, "int")
    yield Sample((t((5, 3), "transposed"), [1, 2], 1), {}, "sizes dim1")
    yield Sample((t((4, 3)), 4), {"dim": -2}, "exact")
    yield Sample((t((0, 3)), 2), {}, "empty")
    yield Sample((t((5,)), [1, 1]), {}, "bad sizes")


def chunk_samples(dtype, rng):
    yield Sample((tensor((5, 3), dtype, rng), 2), {}, "2")
    yield Sample((tensor((6, 4), dtype, rng, "strided"), 4, -1), {}, "4 dim -1")
    yield Sample((tensor((2,), dtype, rng), 5), {}, "more chunks than elements")
    yield Sample((tensor((3,), dtype, rng), 0), {}, "zero chunks")


def tensor_split_samples(dtype, rng):
    t = lambda shape: tensor(shape, dtype, rng)  # noqa: E731
    yield Sample((t((7, 2)), 3), {}, "sections")
    yield Sample((t((7, 2)), [1, 5]), {}, "indices")
    yield Sample((t((2, 7)), (2, 10, -1)), {"dim": 1}, "indices clamp neg")
    yield Sample((t((7,)), idx([2, 3])), {}, "tensor indices")
    yield Sample((t((7,)), idx(3)), {}, "tensor sections")
    yield Sample((t((7,)), 0), {}, "zero sections")


def hsplit_samples(dtype, rng):
    yield Sample((tensor((2, 4), dtype, rng), 2), {}, "sections")
    yield Sample((tensor((2, 4), dtype, rng), [1, 3]), {}, "indices")
    yield Sample((tensor((2, 4), dtype, rng), 3), {}, "not divisible")


def unbind_samples(dtype, rng):
    yield Sample((tensor((3, 2), dtype, rng),), {}, "dim0")
    yield Sample((tensor((3, 2), dtype, rng, "transposed"), -1), {}, "dim -1")
    yield Sample((tensor((), dtype, rng),), {}, "0-dim error")


def movedim_samples(dtype, rng):
    t = tensor((2, 3, 4), dtype, rng)
    yield Sample((t, 0, 2), {}, "int")
    yield Sample((t, (0, 1), (-1, 0)), {}, "tuple")
    yield Sample((t, (0, 0), (1, 2)), {}, "repeated")
    yield Sample((t, (0,), (1, 2)), {}, "length mismatch")


def gather_samples(dtype, rng):
    a = tensor((3, 4), dtype, rng)
    yield Sample((a, 0, idx([[0, 2, 1, 0], [2, 2, 0, 1]])), {}, "dim0 repeats")
    yield Sample((tensor((3, 4), dtype, rng, "transposed"), 1, idx([[3, 0], [1, 1], [2, 0]])),
                 {}, "dim1 transposed")
    yield Sample((a, -1, idx([[0], [3]])), {}, "smaller index")
    yield Sample((tensor((), dtype, rng), 0, idx(0)), {}, "0-dim")
    yield Sample((a, 0, idx(np.zeros((0, 4)))), {}, "empty index")
    yield Sample((a, 0, idx([[3, 0, 0, 0]])), {}, "out of range")
    yield Sample((a, 0, idx([0, 1])), {}, "ndim mismatch")


def scatter_samples(dtype, rng):
    a = tensor((3, 4), dtype, rng)
    yield Sample((a, 0, idx([[0, 2, 1, 0], [2, 0, 0, 1]]), tensor((2, 4), dtype, rng)), {},
                 "src")
    yield Sample((tensor((3, 4), dtype, rng, "transposed"), 1, idx([[3, 0], [1, 2], [2, 0]]),
                  tensor((3, 2), dtype, rng, "transposed")), {}, "transposed src")
    yield Sample((a, -1, idx([[1], [0], [3]])), {"value": 2}, "value")
    yield Sample((a, 0, idx([[5, 0, 0, 0]]), tensor((1, 4), dtype, rng)), {}, "out of range")


def scatter_reduce_two_samples(dtype, rng):
    a = tensor((3, 4), dtype, rng)
    yield Sample((a, 0, idx([[0, 0, 1, 0], [0, 2, 0, 1]]), tensor((2, 4), dtype, rng)),
                 {"reduce": "add"}, "add")
    yield Sample((a, 0, idx([[0, 0, 1, 0], [0, 2, 0, 1]]), tensor((2, 4), dtype, rng)),
                 {"reduce": "multiply"}, "multiply")
    yield Sample((a, 1, idx([[0, 0], [1, 1], [3, 3]])), {"value": 3, "reduce": "add"},
                 "value add")
    yield Sample((a, 1, idx([[0, 0]])), {"value": 3, "reduce": "max"}, "bad reduce")


def scatter_add_samples(dtype, rng):
    yield Sample((tensor((3, 4), dtype, rng), 0, idx([[0, 0, 1, 0], [0, 2, 0, 1]]),
                  tensor((2, 4), dtype, rng)), {}, "repeats")
    yield Sample((tensor((3, 4), dtype, rng, "strided"), 1, idx([[3, 3], [1, 1], [0, 2]]),
                  tensor((3, 2), dtype, rng, "transposed")), {}, "dim1 layouts")
    yield Sample((tensor((5,), dtype, rng), 0, idx([4, 4, 0]), tensor((3,), dtype, rng)), {},
                 "1-D")
    yield Sample((tensor((3, 4), dtype, rng), 0, idx([[0, 0]]), tensor((1, 2), "float64", rng)),
                 {}, "dtype mismatch")


def scatter_reduce_samples(dtype, rng):
    index = idx([[0, 0, 1, 0], [0, 2, 0, 1], [2, 2, 2, 2]])
    for reduce in ("sum", "prod", "mean", "amax", "amin"):
        for include_self in (True, False):
            yield Sample((tensor((3, 4), dtype, rng), 0, index, tensor((3, 4), dtype, rng),
                          reduce), {"include_self": include_self}, f"{reduce} {include_self}")
    yield Sample((tensor((3, 4), dtype, rng), 0, index, tensor((3, 4), dtype, rng), "median"),
                 {}, "bad reduce")


def index_select_samples(dtype, rng):
    yield Sample((tensor((4, 3), dtype, rng), 0, idx([3, 0, 3])), {}, "repeats")
    yield Sample((tensor((4, 3), dtype, rng, "transposed"), -1, idx([2, 1])), {}, "dim -1")
    yield Sample((tensor((4, 3), dtype, rng), 1, idx(1)), {}, "0-dim index")
    yield Sample((tensor((4, 3), dtype, rng), 0, idx(np.zeros(0))), {}, "empty index")
    yield Sample((tensor((), dtype, rng), 0, idx([0])), {}, "0-dim input")
    yield Sample((tensor((4, 3), dtype, rng), 0, idx([4])), {}, "out of range")
    yield Sample((tensor((4, 3), dtype, rng), 0, idx([[0]])), {}, "2-D index")


def index_add_samples(dtype, rng):
    yield Sample((tensor((4, 3), dtype, rng), 0, idx([3, 0, 3]), tensor((3, 3), dtype, rng)),
                 {}, "repeats")
    yield Sample((tensor((4, 3), dtype, rng, "transposed"), 1, idx([2, 0]),
                  tensor((4, 2), dtype, rng)), {"alpha": 2}, "alpha dim1")
    yield Sample((tensor((4, 3), dtype, rng), 0, idx([1]), tensor((2, 3), dtype, rng)), {},
                 "shape mismatch")
    yield Sample((tensor((4, 3), dtype, rng), 0, idx([9]), tensor((1, 3), dtype, rng)), {},
                 "out of range")


def index_copy_samples(dtype, rng):
    yield Sample((tensor((4, 3), dtype, rng), 0, idx([3, 0]), tensor((2, 3), dtype, rng)), {},
                 "dim0")
    yield Sample((tensor((4, 3), dtype, rng, "strided"), -1, idx([2, 0]),
                  tensor((4, 2), dtype, rng)), {}, "dim -1")


def index_fill_samples(dtype, rng):
    yield Sample((tensor((4, 3), dtype, rng), 0, idx([3, 0]), 2), {}, "number")
    yield Sample((tensor((4, 3), dtype, rng, "transposed"), 1, idx([2, 2]),
                  tensor((), dtype, rng)), {}, "0-dim tensor value")
    yield Sample((tensor((4, 3), dtype, rng), 1, idx([2]), tensor((2,), dtype, rng)), {},
                 "1-D value")


def index_put_samples(dtype, rng):
    a = tensor((4, 3), dtype, rng)
    yield Sample((a, (idx([0, 2]),), tensor((2, 3), dtype, rng)), {}, "rows")
    yield Sample((a, (idx([0, 2, 0]), idx([1, 1, 1])), tensor((3,), dtype, rng)),
                 {"accumulate": True}, "accumulate repeats")
    yield Sample((tensor((4, 3), dtype, rng, "transposed"), (mask([True, False, True, True]),),
                  tensor((3,), dtype, rng)), {}, "mask broadcast value")
    yield Sample((a, (idx([-1]),), tensor((), dtype, rng)), {"accumulate": True}, "negative")
    yield Sample((a, (idx([4]),), tensor((), dtype, rng)), {}, "out of range")
    yield Sample((a, (idx([0, 1]),), tensor((3, 3), dtype, rng)), {}, "shape mismatch")


def _large_masks(rng):
    """Masks past the plugins' size thresholds: (40, 130) and its broadcast row."""
    return mask(rng.integers(0, 2, (40, 130))), mask(rng.integers(0, 2, (130,)))


def masked_select_samples(dtype, rng):
    full, row = _large_masks(rng)
    yield Sample((tensor((40, 130), dtype, rng, "transposed"), full), {}, "large")
    yield Sample((tensor((40, 1), dtype, rng), row), {}, "large broadcast both")
    yield Sample((tensor((3, 4), dtype, rng), mask(rng.integers(0, 2, (3, 4)))), {}, "same")
    yield Sample((tensor((3, 4), dtype, rng, "transposed"), mask([True, False, True, True])),
                 {}, "broadcast mask")
    yield Sample((tensor((4,), dtype, rng), mask(rng.integers(0, 2, (3, 4)))), {},
                 "broadcast input")
    yield Sample((tensor((), dtype, rng), mask(True)), {}, "0-dim")
    yield Sample((tensor((3,), dtype, rng), idx([1, 0, 1])), {}, "int mask")


def masked_fill_samples(dtype, rng):
    full, row = _large_masks(rng)
    yield Sample((tensor((40, 130), dtype, rng, "strided"), full, 2), {}, "large")
    yield Sample((tensor((40, 130), dtype, rng), row, tensor((), dtype, rng)), {},
                 "large broadcast mask")
    yield Sample((tensor((3, 4), dtype, rng), mask(rng.integers(0, 2, (3, 4))), 2), {}, "number")
    yield Sample((tensor((3, 4), dtype, rng, "strided"), mask([True, False, True, True]),
                  tensor((), dtype, rng)), {}, "0-dim tensor")
    yield Sample((tensor((0, 4), dtype, rng), mask([True, False, True, True]), 1), {}, "empty")
    yield Sample((tensor((3,), dtype, rng), mask([True, False, True]),
                  tensor((1,), dtype, rng)), {}, "1-D value")
    yield Sample((tensor((3,), dtype, rng), idx([1, 0, 1]), 1), {}, "int mask")


def masked_scatter_samples(dtype, rng):
    full, row = _large_masks(rng)
    yield Sample((tensor((40, 130), dtype, rng), full, tensor((60, 100), dtype, rng)), {},
                 "large")
    yield Sample((tensor((40, 130), dtype, rng, "transposed"), row,
                  tensor((5200,), dtype, rng)), {}, "large broadcast mask")
    yield Sample((tensor((3, 4), dtype, rng), mask(rng.integers(0, 2, (3, 4))),
                  tensor((3, 5), dtype, rng)), {}, "extra source")
    yield Sample((tensor((3, 4), dtype, rng, "transposed"), mask([True, False, True, True]),
                  tensor((9,), dtype, rng)), {}, "broadcast mask")
    yield Sample((tensor((2, 2), dtype, rng), mask([[True, True], [True, True]]),
                  tensor((2,), dtype, rng)), {}, "too small source")


def take_samples(dtype, rng):
    yield Sample((tensor((3, 4), dtype, rng), idx([[0, 11], [5, 5]])), {}, "2-D index")
    yield Sample((tensor((3, 4), dtype, rng, "transposed"), idx([-1, 3, 3])), {}, "negative")
    yield Sample((tensor((), dtype, rng), idx(0)), {}, "0-dim")
    yield Sample((tensor((3, 4), dtype, rng), idx([12])), {}, "out of range")


def put_samples(dtype, rng):
    yield Sample((tensor((3, 4), dtype, rng), idx([0, 11, 5]), tensor((3,), dtype, rng)), {},
                 "distinct")
    yield Sample((tensor((3, 4), dtype, rng), idx([[1, 1], [-1, 2]]), tensor((2, 2), dtype, rng)),
                 {"accumulate": True}, "accumulate repeats")
    yield Sample((tensor((3, 4), dtype, rng), idx([0, 1]), tensor((3,), dtype, rng)), {},
                 "size mismatch")


def take_along_dim_samples(dtype, rng):
    yield Sample((tensor((3, 4), dtype, rng), idx([[0], [3], [1]]), 1), {}, "dim1")
    yield Sample((tensor((3, 4), dtype, rng), idx([[2, 0, 1, 1]]), 0), {}, "broadcast")
    yield Sample((tensor((3, 4), dtype, rng), idx([5, 0])), {}, "flat")


def nonzero_samples(dtype, rng):
    yield Sample((tensor((3, 4), dtype, rng, small=True),), {}, "2-D")
    yield Sample((tensor((3, 4), dtype, rng, "transposed", small=True),), {"as_tuple": True},
                 "as_tuple")
    yield Sample((tensor((), dtype, rng),), {}, "0-dim")
    yield Sample((tensor((0, 2), dtype, rng),), {}, "empty")


def repeat_samples(dtype, rng):
    yield Sample((tensor((2, 3), dtype, rng), (2, 1)), {}, "2-D")
    yield Sample((tensor((2, 3), dtype, rng, "transposed"), (2, 1, 3)), {}, "new dim")
    yield Sample((tensor((), dtype, rng), (3,)), {}, "0-dim")
    yield Sample((tensor((2, 3), dtype, rng), (0, 2)), {}, "zero")
    yield Sample((tensor((2, 3), dtype, rng), (2,)), {}, "too few")


def tile_samples(dtype, rng):
    yield Sample((tensor((2, 3), dtype, rng), (2,)), {}, "short dims")
    yield Sample((tensor((2, 3), dtype, rng, "strided"), (2, 1, 2)), {}, "long dims")


def repeat_interleave_samples(dtype, rng):
    yield Sample((tensor((2, 3), dtype, rng), 2), {}, "flat")
    yield Sample((tensor((2, 3), dtype, rng, "transposed"), idx([1, 0, 2]), 1), {}, "tensor dim1")
    yield Sample((tensor((2, 3), dtype, rng), idx([3])), {"dim": 0}, "1-elem tensor")
    yield Sample((tensor((2, 3), dtype, rng), idx([1, 2])), {"dim": 0, "output_size": 3},
                 "output_size")
    yield Sample((tensor((2, 3), dtype, rng), idx([1, 2, 3])), {"dim": 0}, "size mismatch")
    yield Sample((tensor((2, 3), dtype, rng), -1), {}, "negative")


def scatter_view_samples(kind):
    def samples(dtype, rng):
        if kind == "select":
            yield Sample((tensor((3, 4), dtype, rng), tensor((4,), dtype, rng), 0, -1), {}, "")
            yield Sample((tensor((3, 4), dtype, rng, "transposed"), tensor((3,), dtype, rng), 1,
                          2), {}, "dim1")
            yield Sample((tensor((3, 4), dtype, rng), tensor((3,), dtype, rng), 0, 0), {},
                         "bad src")
        elif kind == "slice":
            yield Sample((tensor((5, 4), dtype, rng), tensor((2, 4), dtype, rng)),
                         {"start": 1, "end": 5, "step": 2}, "step")
            yield Sample((tensor((5, 4), dtype, rng), tensor((5, 1), dtype, rng)),
                         {"dim": 1, "start": -1}, "negative start")
        else:
            yield Sample((tensor((3, 4), dtype, rng), tensor((3,), dtype, rng)), {}, "main")
            yield Sample((tensor((3, 4), dtype, rng), tensor((2,), dtype, rng)),
                         {"offset": -1}, "offset")
            yield Sample((tensor((2, 3, 4), dtype, rng), tensor((3, 2), dtype, rng)),
                         {"dim1": 0, "dim2": -1}, "dims")
    return samples


def narrow_copy_samples(dtype, rng):
    yield Sample((tensor((4, 3), dtype, rng, "transposed"), 0, 1, 2), {}, "")
    yield Sample((tensor((4, 3), dtype, rng), -1, 1, 5), {}, "too long")


OPS = [
    OpInfo("cat", function("cat"), cat_samples),
    OpInfo("concatenate", function("concatenate"), cat_samples, dtypes=("float32", "float64")),
    OpInfo("stack", function("stack"), stack_samples),
    OpInfo("hstack", function("hstack"), hvd_samples),
    OpInfo("vstack", function("vstack"), hvd_samples),
    OpInfo("dstack", function("dstack"), hvd_samples),
    OpInfo("column_stack", function("column_stack"), hvd_samples),
    OpInfo("split", function("split"), split_samples, check_strides=True),
    OpInfo("chunk", function("chunk"), chunk_samples, check_strides=True),
    OpInfo("tensor_split", function("tensor_split"), tensor_split_samples, check_strides=True),
    OpInfo("hsplit", function("hsplit"), hsplit_samples, check_strides=True),
    OpInfo("unbind", function("unbind"), unbind_samples, check_strides=True),
    OpInfo("movedim", function("movedim"), movedim_samples, check_strides=True),
    OpInfo("gather", function("gather"), gather_samples),
    OpInfo("scatter", function("scatter"), scatter_samples, inplace_call=inplace("scatter")),
    OpInfo("scatter_reduce_two_", function("scatter"), scatter_reduce_two_samples, dtypes=NUMERIC,
           differentiable=False),
    OpInfo("scatter_add", function("scatter_add"), scatter_add_samples,
           inplace_call=inplace("scatter_add")),
    OpInfo("scatter_reduce", function("scatter_reduce"), scatter_reduce_samples,
           dtypes=tuple(d for d in NUMERIC if not d.startswith("complex")),
           inplace_call=inplace("scatter_reduce")),
    OpInfo("index_select", function("index_select"), index_select_samples),
    OpInfo("index_add", function("index_add"), index_add_samples, dtypes=NUMERIC,
           inplace_call=inplace("index_add")),
    OpInfo("index_copy", function("index_copy"), index_copy_samples,
           inplace_call=inplace("index_copy")),
    OpInfo("index_fill", function("index_fill"), index_fill_samples,
           inplace_call=inplace("index_fill")),
    OpInfo("index_put", function("index_put"), index_put_samples, dtypes=NUMERIC,
           inplace_call=inplace("index_put")),
    OpInfo("masked_select", function("masked_select"), masked_select_samples),
    OpInfo("masked_fill", function("masked_fill"), masked_fill_samples),
    OpInfo("masked_scatter", function("masked_scatter"), masked_scatter_samples),
    OpInfo("take", function("take"), take_samples),
    OpInfo("put", function("put"), put_samples, dtypes=NUMERIC, inplace_call=inplace("put")),
    OpInfo("take_along_dim", function("take_along_dim"), take_along_dim_samples),
    OpInfo("nonzero", function("nonzero"), nonzero_samples, differentiable=False),
    OpInfo("argwhere", function("argwhere"), lambda d, r: (s for s in nonzero_samples(d, r)
                                                      if not s.kwargs), differentiable=False),
    OpInfo("repeat", lambda m, x, sizes: x.repeat(*sizes), repeat_samples),
    OpInfo("tile", function("tile"), tile_samples),
    OpInfo("repeat_interleave", function("repeat_interleave"), repeat_interleave_samples),
    OpInfo("select_scatter", function("select_scatter"), scatter_view_samples("select")),
    OpInfo("slice_scatter", function("slice_scatter"), scatter_view_samples("slice")),
    OpInfo("diagonal_scatter", function("diagonal_scatter"), scatter_view_samples("diagonal")),
    OpInfo("narrow_copy", function("narrow_copy"), narrow_copy_samples),
]
