"""Op-database entries: neural-network ops (embedding), torch.nn.functional spellings."""
from __future__ import annotations

import numpy as np

from . import DTYPE_NAMES, FLOATING
from .core import OpInfo, Sample, TensorArg, tensor


def _f(name):
    return lambda m, *a, **k: getattr(m.nn.functional, name)(*a, **k)


def _index(values, layout="contiguous"):
    return TensorArg(np.asarray(values), "int64", layout, requires_grad=False)


def _embedding_samples(dtype, rng):
    weight = tensor((6, 3), dtype, rng)
    yield Sample((_index([[1, 2, 5], [0, 2, 2]]), weight), {}, "2-d indices")
    yield Sample((_index(4), tensor((6, 3), dtype, rng)), {}, "0-dim index")
    yield Sample((_index(np.zeros((0,), int)), tensor((6, 3), dtype, rng)), {}, "empty")
    yield Sample((_index([[1, 3], [4, 1]], "transposed"), tensor((6, 2), dtype, rng,
                                                                 "transposed")),
                 {"padding_idx": 1}, "padding_idx, non-contiguous")
    yield Sample((_index([0, 0, 5]), tensor((6, 2), dtype, rng)),
                 {"padding_idx": -1, "scale_grad_by_freq": True}, "negative padding, freq")
    yield Sample((_index([0, 6]), tensor((6, 2), dtype, rng)), {}, "index out of range")
    yield Sample((_index([1]), tensor((6,), dtype, rng)), {}, "1-d weight")


def _bag_samples(dtype, rng):
    yield Sample((_index([[1, 2, 5], [0, 2, 2]]), tensor((6, 3), dtype, rng)),
                 {"mode": "sum"}, "2-d sum")
    yield Sample((_index([1, 2, 5, 0, 2]), tensor((6, 3), dtype, rng), _index([0, 2, 2])),
                 {"mode": "mean"}, "offsets with an empty bag, mean")
    yield Sample((_index([1, 2, 5, 0, 2]), tensor((6, 2), dtype, rng), _index([0, 1, 5])),
                 {"mode": "max", "include_last_offset": True}, "max, include_last_offset")
    yield Sample((_index([1, 2, 5, 2]), tensor((6, 2), dtype, rng), _index([0, 2])),
                 {"mode": "sum", "per_sample_weights": tensor((4,), dtype, rng),
                  "padding_idx": 5}, "per_sample_weights, padding")
    yield Sample((_index([1, 7]), tensor((6, 2), dtype, rng), _index([0])), {"mode": "sum"},
                 "index out of range")
    yield Sample((_index([1, 2]), tensor((6, 2), dtype, rng), _index([0])),
                 {"mode": "median"}, "bad mode")


def _one_hot_samples(dtype, rng):
    yield Sample((_index([[1, 0], [3, 2]]),), {}, "inferred classes")
    yield Sample((_index([1, 0, 2]),), {"num_classes": 5}, "num_classes")
    yield Sample((_index(2),), {"num_classes": 3}, "0-dim")
    yield Sample((_index([4]),), {"num_classes": 3}, "too large")
    yield Sample((_index([-1]),), {}, "negative")


OPS = [
    OpInfo("embedding", _f("embedding"), _embedding_samples, dtypes=DTYPE_NAMES),
    OpInfo("embedding_bag", _f("embedding_bag"), _bag_samples, dtypes=FLOATING),
    OpInfo("one_hot", _f("one_hot"), _one_hot_samples, dtypes=("int64",),
           differentiable=False),
]
