"""Op-database entries: other (see core.py for the entry format)."""
from __future__ import annotations

import math

import numpy as np

from . import DTYPE_NAMES
from .core import DTypeArg, OpInfo, Sample, TensorArg, function, method, tensor

FLOAT_ONLY = ("float32", "float64")


def _t(shape, dt, rng, layout="contiguous", **kw):
    return tensor(shape, dt, rng, layout, **kw)


def _flip_samples(dt, rng):
    yield Sample((_t((3, 4), dt, rng), [0]), {}, "dim0")
    yield Sample((_t((3, 4), dt, rng, "transposed"), [0, 1]), {}, "both transposed")
    yield Sample((_t((2, 3, 4), dt, rng, "strided"), [-1, 0]), {}, "negative strided")
    yield Sample((_t((), dt, rng), []), {}, "0-dim")
    yield Sample((_t((0, 3), dt, rng), [1]), {}, "empty")
    yield Sample((_t((3, 4), dt, rng), [0, 0]), {}, "error repeated dim")
    yield Sample((_t((3, 4), dt, rng), [2]), {}, "error dim range")


def _fliplr_samples(dt, rng):
    yield Sample((_t((3, 4), dt, rng, "transposed"),), {}, "2-d")
    yield Sample((_t((2, 3, 4), dt, rng),), {}, "3-d")
    yield Sample((_t((4,), dt, rng),), {}, "1-d")
    yield Sample((_t((), dt, rng),), {}, "0-dim")


def _roll_samples(dt, rng):
    yield Sample((_t((3, 4), dt, rng), 1), {}, "flattened")
    yield Sample((_t((3, 4), dt, rng, "transposed"), (1, -2), (0, 1)), {}, "tuple")
    yield Sample((_t((2, 3, 4), dt, rng, "strided"), 5), {"dims": -1}, "big shift")
    yield Sample((_t((3, 4), dt, rng), -7), {"dims": 0}, "negative shift")
    yield Sample((_t((), dt, rng), 1), {}, "0-dim")
    yield Sample((_t((0, 3), dt, rng), 2, 1), {}, "empty")
    yield Sample((_t((3, 4), dt, rng), (1, 2)), {}, "error no dims")
    yield Sample((_t((3, 4), dt, rng), (1, 2), (0,)), {}, "error lengths")


def _rot90_samples(dt, rng):
    for k in (1, 2, 3, -1, 6):
        yield Sample((_t((3, 4), dt, rng, "transposed"), k), {}, f"k={k}")
    yield Sample((_t((3, 4), dt, rng), 1, [1, 0]), {}, "dims reversed")
    yield Sample((_t((2, 3, 4), dt, rng, "strided"),), {"k": 1, "dims": [-1, 0]}, "3-d")
    yield Sample((_t((0, 3), dt, rng), 1), {}, "empty")
    yield Sample((_t((4,), dt, rng),), {}, "error 1-d")
    yield Sample((_t((3, 4), dt, rng), 1, [0, 0]), {}, "error same dims")
    yield Sample((_t((3, 4), dt, rng), 1, [0, 1, 1]), {}, "error three dims")


def _triangle_samples(dt, rng):
    for diagonal in (0, 1, -1, 5):
        yield Sample((_t((3, 4), dt, rng), diagonal), {}, f"diagonal={diagonal}")
    yield Sample((_t((2, 3, 4), dt, rng, "transposed"),), {"diagonal": -2}, "batched")
    yield Sample((_t((4, 3), dt, rng, "strided"),), {}, "strided")
    yield Sample((_t((0, 3), dt, rng),), {}, "empty")
    yield Sample((_t((4,), dt, rng),), {}, "error 1-d")


def _diag_samples(dt, rng):
    for offset in (0, 2, -1):
        yield Sample((_t((4,), dt, rng, "strided"), offset), {}, f"vector offset={offset}")
        yield Sample((_t((3, 4), dt, rng, "transposed"), offset), {}, f"matrix offset={offset}")
    yield Sample((_t((0,), dt, rng),), {}, "empty vector")
    yield Sample((_t((2, 3, 4), dt, rng),), {}, "error 3-d")


def _diag_embed_samples(dt, rng):
    yield Sample((_t((2, 3), dt, rng),), {}, "default")
    yield Sample((_t((2, 3), dt, rng, "transposed"), 1), {}, "offset")
    yield Sample((_t((2, 3), dt, rng), -2, 0, 2), {}, "dims 0 2")
    yield Sample((_t((4,), dt, rng),), {"offset": 1, "dim1": -1, "dim2": 0}, "swapped dims")
    yield Sample((_t((0, 2), dt, rng),), {}, "empty")
    yield Sample((_t((2, 3), dt, rng), 0, 1, 1), {}, "error same dims")


def _diagflat_samples(dt, rng):
    yield Sample((_t((2, 3), dt, rng, "transposed"),), {}, "2-d")
    yield Sample((_t((3,), dt, rng), 1), {}, "offset")
    yield Sample((_t((), dt, rng), -1), {}, "0-dim")


def _trace_samples(dt, rng):
    yield Sample((_t((3, 4), dt, rng),), {}, "wide")
    yield Sample((_t((4, 3), dt, rng, "transposed"),), {}, "tall transposed")
    yield Sample((_t((3, 3), dt, rng, "strided"),), {}, "strided")
    yield Sample((_t((0, 0), dt, rng),), {}, "empty")
    yield Sample((_t((3,), dt, rng),), {}, "error 1-d")


def _bincount_samples(dt, rng):
    small = dict(small=True)
    yield Sample((_t((10,), dt, rng, **small),), {}, "counts")
    yield Sample((_t((10,), dt, rng, "strided", **small),), {"minlength": 9}, "minlength")
    for w in ("float32", "float64", "int64", "float16"):
        yield Sample((_t((6,), dt, rng, **small), _t((6,), w, rng)), {}, f"weights {w}")
    yield Sample((_t((0,), dt, rng),), {"minlength": 3}, "empty")
    yield Sample((_t((2, 3), dt, rng, **small),), {}, "error 2-d")
    yield Sample((_t((6,), dt, rng, **small), _t((5,), "float64", rng)), {}, "error weights")


def _histc_samples(dt, rng):
    yield Sample((_t((20,), dt, rng),), {"bins": 5}, "bins")
    yield Sample((_t((4, 5), dt, rng, "transposed"), 4, -2, 2), {}, "range")
    yield Sample((_t((3, 4), dt, rng),), {}, "default")
    yield Sample((_t((6,), dt, rng), 3, 1, 1), {}, "equal bounds")
    yield Sample((_t((0,), dt, rng), 3), {}, "empty")
    yield Sample((_t((5,), dt, rng), 4, 2, 1), {}, "error min > max")


def _histogram_samples(dt, rng):
    yield Sample((_t((20,), dt, rng), 5), {}, "bins")
    yield Sample((_t((4, 5), dt, rng, "transposed"), 4), {"range": (-2.0, 2.0)}, "range")
    yield Sample((_t((20,), dt, rng), 3), {"weight": _t((20,), dt, rng), "density": True},
                 "weights density")
    yield Sample((_t((10,), dt, rng), TensorArg(np.array([-3.0, 0.0, 1.0, 4.0]),
                                                dt)), {}, "edges")


def _cross_samples(dt, rng):
    yield Sample((_t((3, 4), dt, rng), _t((3, 4), dt, rng)), {"dim": 0}, "dim 0")
    yield Sample((_t((4, 3), dt, rng, "transposed"), _t((4, 3), dt, rng)), {"dim": -1}, "last")
    yield Sample((_t((2, 4, 3), dt, rng), _t((1, 1, 3), dt, rng)), {"dim": 2}, "broadcast")
    yield Sample((_t((4, 3), dt, rng), _t((4, 3), dt, rng)), {}, "default dim")
    yield Sample((_t((3, 2), dt, rng), _t((3, 2), dt, rng)), {"dim": 1}, "error size")


def _einsum_samples(dt, rng):
    yield Sample(("ij,jk->ik", _t((2, 3), dt, rng), _t((3, 4), dt, rng, "transposed")), {},
                 "matmul")
    yield Sample(("ii->i", _t((3, 3), dt, rng)), {}, "diagonal")
    yield Sample(("ii", _t((3, 3), dt, rng, "strided")), {}, "trace implicit")
    yield Sample(("ij->", _t((2, 3), dt, rng)), {}, "sum all")
    yield Sample(("bij,bjk->bik", _t((2, 2, 3), dt, rng), _t((2, 3, 2), dt, rng)), {}, "bmm")
    yield Sample(("...ij,...jk", _t((2, 2, 3), dt, rng), _t((3, 2), dt, rng)), {}, "ellipsis")
    yield Sample(("i,j->ij", [_t((3,), dt, rng), _t((4,), dt, rng)]), {}, "outer list")
    yield Sample(("ij,ij,ij->i", _t((2, 3), dt, rng), _t((2, 3), dt, rng),
                  _t((2, 3), dt, rng)), {}, "three operands")
    yield Sample(("ijk->kji", _t((2, 3, 4), dt, rng)), {}, "permute")
    yield Sample(("ij,jk", _t((0, 3), dt, rng), _t((3, 2), dt, rng)), {}, "empty")
    yield Sample(("...i,...i->...", _t((2, 1, 3), dt, rng), _t((4, 3), dt, rng)), {},
                 "broadcast")
    yield Sample(("i,i->", _t((), dt, rng), _t((3,), dt, rng)), {}, "error ndim")
    yield Sample(("ij,jk->ik", _t((2, 3), dt, rng)), {}, "error too few operands")


def _tensordot_samples(dt, rng):
    yield Sample((_t((2, 3, 4), dt, rng), _t((3, 4, 2), dt, rng)), {}, "default dims")
    yield Sample((_t((2, 3), dt, rng, "transposed"), _t((3, 4), dt, rng)), {"dims": 1}, "one")
    yield Sample((_t((2, 3), dt, rng), _t((3, 2), dt, rng)), {"dims": ([1, 0], [0, 1])},
                 "lists")
    yield Sample((_t((2,), dt, rng), _t((3,), dt, rng)), {"dims": 0}, "outer")
    yield Sample((_t((2, 3), dt, rng), _t((2, 3), dt, rng)), {"dims": 1}, "error sizes")


def _kron_samples(dt, rng):
    # (PyTorch's kron rejects some transposed operands: a view error, not a specification.)
    yield Sample((_t((2, 3), dt, rng), _t((3, 2), dt, rng)), {}, "matrices")
    yield Sample((_t((2,), dt, rng), _t((2, 3), dt, rng)), {}, "mixed ndim")
    yield Sample((_t((), dt, rng), _t((3,), dt, rng, "strided")), {}, "0-dim")
    yield Sample((_t((0, 2), dt, rng), _t((2, 2), dt, rng)), {}, "empty")


def _block_diag_samples(dt, rng):
    yield Sample((_t((2, 3), dt, rng, "transposed"), _t((3,), dt, rng), _t((), dt, rng)), {},
                 "mixed")
    yield Sample((_t((2, 2), dt, rng),), {}, "single")
    yield Sample((_t((0, 2), dt, rng), _t((1, 0), dt, rng), _t((2, 1), dt, rng)), {}, "empty")
    yield Sample((_t((2, 3), dt, rng), _t((3,), "float64", rng)), {}, "promotion")
    yield Sample((_t((2, 2, 2), dt, rng),), {}, "error 3-d")


def _cdist_samples(dt, rng):
    for p in (2.0, 1.0, 0.0, math.inf, 1.5, 3.0):
        yield Sample((_t((4, 3), dt, rng), _t((5, 3), dt, rng)), {"p": p}, f"p={p}")
    yield Sample((_t((2, 4, 3), dt, rng, "transposed"), _t((1, 5, 3), dt, rng)), {}, "batched")
    yield Sample((_t((0, 3), dt, rng), _t((2, 3), dt, rng)), {}, "empty")
    yield Sample((_t((4, 3), dt, rng), _t((5, 2), dt, rng)), {}, "error columns")


def _renorm_samples(dt, rng):
    yield Sample((_t((3, 4), dt, rng), 2, 0, 4.0), {}, "p2 dim0")
    yield Sample((_t((3, 4), dt, rng, "transposed"), 1, 1, 5.0), {}, "p1 dim1")
    yield Sample((_t((2, 3, 4), dt, rng), 3, -1, 3.0), {}, "p3 last")
    yield Sample((_t((3, 4), dt, rng), 2, 0, 100.0), {}, "no change")
    yield Sample((_t((4,), dt, rng), 2, 0, 1.0), {}, "error 1-d")


def _atleast_samples(dt, rng):
    for shape in ((), (3,), (2, 3), (2, 3, 4)):
        yield Sample((_t(shape, dt, rng),), {}, f"{shape}")
    yield Sample((_t((), dt, rng), _t((3,), dt, rng)), {}, "several")


def _vander_samples(dt, rng):
    yield Sample((_t((4,), dt, rng, small=True),), {}, "default")
    yield Sample((_t((3,), dt, rng, "strided", small=True),), {"N": 5, "increasing": True},
                 "increasing")
    yield Sample((_t((3,), dt, rng, small=True), 2), {}, "N")
    yield Sample((_t((0,), dt, rng),), {}, "empty")
    yield Sample((_t((2, 2), dt, rng),), {}, "error 2-d")


def _diff_samples(dt, rng):
    yield Sample((_t((3, 4), dt, rng),), {}, "default")
    yield Sample((_t((3, 5), dt, rng, "transposed"),), {"n": 2, "dim": 0}, "n=2 dim0")
    yield Sample((_t((4,), dt, rng),), {"prepend": _t((2,), dt, rng),
                                        "append": _t((1,), dt, rng)}, "prepend append")
    yield Sample((_t((2, 3), dt, rng, "strided"),), {"n": 4}, "n too big")
    yield Sample((_t((), dt, rng),), {}, "error 0-dim")


def _cov_samples(dt, rng):
    yield Sample((_t((3, 5), dt, rng),), {}, "default")
    yield Sample((_t((5,), dt, rng),), {}, "1-d")
    yield Sample((_t((2, 4), dt, rng, "transposed"),), {"correction": 0}, "correction 0")
    yield Sample((_t((2, 4), dt, rng),), {"fweights": _t((4,), "int64", rng, small=True),
                                          "aweights": _t((4,), "float64", rng, small=True)},
                 "weights")
    yield Sample((_t((2, 2, 2), dt, rng),), {}, "error 3-d")


def _corrcoef_samples(dt, rng):
    yield Sample((_t((3, 5), dt, rng),), {}, "default")
    yield Sample((_t((2, 4), dt, rng, "transposed"),), {}, "transposed")
    yield Sample((_t((5,), dt, rng),), {}, "1-d")


def _broadcast_to_samples(dt, rng):
    yield Sample((_t((3, 1), dt, rng), (2, 3, 4)), {}, "expand")
    yield Sample((_t((), dt, rng), (2,)), {}, "0-dim")
    yield Sample((_t((3,), dt, rng), (3, -1)), {}, "minus one")
    yield Sample((_t((3,), dt, rng), (4,)), {}, "error")


def _broadcast_tensors_samples(dt, rng):
    yield Sample((_t((3, 1), dt, rng), _t((4,), dt, rng), _t((), dt, rng)), {}, "three")
    yield Sample((_t((2, 3), dt, rng, "transposed"),), {}, "one")
    yield Sample((_t((2, 3), dt, rng), _t((4,), dt, rng)), {}, "error")


def _meshgrid_samples(dt, rng):
    yield Sample((_t((3,), dt, rng), _t((4,), dt, rng)), {"indexing": "ij"}, "ij")
    yield Sample((_t((3,), dt, rng), _t((4,), dt, rng), _t((2,), dt, rng)),
                 {"indexing": "xy"}, "xy")
    yield Sample(([_t((3,), dt, rng), _t((), dt, rng)],), {"indexing": "ij"}, "list")


def _cartesian_prod_samples(dt, rng):
    yield Sample((_t((3,), dt, rng), _t((2,), dt, rng, "strided")), {}, "two")
    yield Sample((_t((2,), dt, rng), _t((2,), dt, rng), _t((3,), dt, rng)), {}, "three")
    yield Sample((_t((3,), dt, rng),), {}, "one")
    yield Sample((_t((2, 2), dt, rng), _t((2,), dt, rng)), {}, "error 2-d")


def _combinations_samples(dt, rng):
    yield Sample((_t((4,), dt, rng),), {}, "pairs")
    yield Sample((_t((4,), dt, rng, "strided"), 3), {}, "triples")
    yield Sample((_t((3,), dt, rng),), {"r": 2, "with_replacement": True}, "replacement")
    yield Sample((_t((3,), dt, rng), 1), {}, "r=1")
    yield Sample((_t((2,), dt, rng), 3), {}, "r too big")
    yield Sample((_t((2, 2), dt, rng),), {}, "error 2-d")


def _unflatten_samples(dt, rng):
    yield Sample((_t((2, 6), dt, rng), 1, (2, 3)), {}, "split")
    yield Sample((_t((6, 2), dt, rng), 0, (-1, 2)), {}, "infer")
    yield Sample((_t((2, 6), dt, rng), -1, (4, 2)), {}, "error")


def _ravel_samples(dt, rng):
    yield Sample((_t((2, 3), dt, rng, "transposed"),), {}, "transposed")
    yield Sample((_t((), dt, rng),), {}, "0-dim")


def _indices_samples(dt, rng):
    for args in ((3, 4), (4, 3, 1), (3, 3, -1), (0, 3), (2, 5, 10)):
        yield Sample(args, {}, f"{args}")
    yield Sample((3, 4), {"dtype": DTypeArg("int32")}, "int32")
    yield Sample((-1, 3), {}, "error negative")


OPS = [
    OpInfo("flip", function("flip"), _flip_samples),
    OpInfo("fliplr", function("fliplr"), _fliplr_samples),
    OpInfo("flipud", function("flipud"), _fliplr_samples),
    OpInfo("roll", function("roll"), _roll_samples),
    OpInfo("rot90", function("rot90"), _rot90_samples),
    OpInfo("tril", function("tril"), _triangle_samples,
           inplace_call=lambda a, *args, **kw: a.tril_(*args, **kw)),
    OpInfo("triu", function("triu"), _triangle_samples,
           inplace_call=lambda a, *args, **kw: a.triu_(*args, **kw)),
    OpInfo("diag", function("diag"), _diag_samples),
    OpInfo("diag_embed", function("diag_embed"), _diag_embed_samples),
    OpInfo("diagflat", function("diagflat"), _diagflat_samples),
    OpInfo("trace", function("trace"), _trace_samples),
    OpInfo("Tensor.trace", method("trace"), _trace_samples, differentiable=False),
    OpInfo("bincount", function("bincount"), _bincount_samples, differentiable=False),
    OpInfo("histc", function("histc"), _histc_samples, differentiable=False),
    OpInfo("histogram", function("histogram"), _histogram_samples, differentiable=False,
           dtypes=FLOAT_ONLY),
    OpInfo("cross", function("cross"), _cross_samples),
    OpInfo("einsum", function("einsum"), _einsum_samples),
    OpInfo("tensordot", function("tensordot"), _tensordot_samples),
    OpInfo("kron", function("kron"), _kron_samples),
    OpInfo("block_diag", function("block_diag"), _block_diag_samples),
    # Half types: PyTorch accepts them only for empty inputs; reftorch rejects them always.
    OpInfo("cdist", function("cdist"), _cdist_samples,
           dtypes=tuple(d for d in DTYPE_NAMES if d not in ("float16", "bfloat16"))),
    OpInfo("renorm", function("renorm"), _renorm_samples,
           inplace_call=lambda a, *args, **kw: a.renorm_(*args, **kw)),
    OpInfo("atleast_1d", function("atleast_1d"), _atleast_samples),
    OpInfo("atleast_2d", function("atleast_2d"), _atleast_samples),
    OpInfo("atleast_3d", function("atleast_3d"), _atleast_samples),
    # PyTorch 2.x cannot differentiate vander (an in-place error in its backward): its
    # gradient is checked in test_other_ops.py against a differentiable formulation.
    OpInfo("vander", function("vander"), _vander_samples, differentiable=False),
    OpInfo("diff", function("diff"), _diff_samples),
    OpInfo("cov", function("cov"), _cov_samples),
    OpInfo("corrcoef", function("corrcoef"), _corrcoef_samples),
    OpInfo("broadcast_to", function("broadcast_to"), _broadcast_to_samples),
    OpInfo("broadcast_tensors", function("broadcast_tensors"), _broadcast_tensors_samples),
    OpInfo("meshgrid", function("meshgrid"), _meshgrid_samples),
    OpInfo("cartesian_prod", function("cartesian_prod"), _cartesian_prod_samples),
    OpInfo("combinations", function("combinations"), _combinations_samples),
    OpInfo("unflatten", function("unflatten"), _unflatten_samples),
    OpInfo("ravel", function("ravel"), _ravel_samples),
    OpInfo("tril_indices", function("tril_indices"), _indices_samples, dtypes=("int64",),
           differentiable=False),
    OpInfo("triu_indices", function("triu_indices"), _indices_samples, dtypes=("int64",),
           differentiable=False),
]
