"""Op-database entries: neural-network ops (pooling), torch.nn.functional spellings."""
from __future__ import annotations

from .core import OpInfo, Sample, tensor

def _functional(name):
    return lambda m, *args, **kwargs: getattr(m.nn.functional, name)(*args, **kwargs)


def _max_pool_samples(dtype, rng):
    yield Sample((tensor((2, 3, 7, 8), dtype, rng), 3, 2, 1), {}, "k3 s2 p1")
    yield Sample((tensor((3, 6, 6), dtype, rng, "transposed"), 2), {}, "unbatched transposed")
    yield Sample((tensor((1, 2, 7, 5), dtype, rng, "strided"), (3, 2)),
                 {"stride": (2, 1), "ceil_mode": True}, "strided ceil_mode")
    yield Sample((tensor((2, 2, 8, 7), dtype, rng), 2), {"dilation": 2, "padding": 1,
                                                          "return_indices": True},
                 "dilation return_indices")
    yield Sample((tensor((1, 1, 5, 5), dtype, rng), 3, 3, 1), {"ceil_mode": True,
                                                                "return_indices": True},
                 "ceil_mode clipped window")
    yield Sample((tensor((0, 2, 4, 4), dtype, rng), 2), {}, "empty batch")
    yield Sample((tensor((1, 2, 2, 2), dtype, rng), 3), {}, "kernel larger than input")
    yield Sample((tensor((1, 2, 5, 5), dtype, rng), 2, 1, 2), {}, "pad > kernel/2")
    yield Sample((tensor((5, 5), dtype, rng), 2), {}, "2-d input")


def _avg_pool_samples(dtype, rng):
    yield Sample((tensor((2, 3, 7, 8), dtype, rng), 3, 2, 1), {}, "k3 s2 p1")
    yield Sample((tensor((3, 6, 6), dtype, rng, "transposed"), 2), {}, "unbatched transposed")
    yield Sample((tensor((1, 2, 8, 8), dtype, rng, "strided"), 3, 2, 1),
                 {"ceil_mode": True, "count_include_pad": False}, "ceil_mode exclude pad")
    yield Sample((tensor((1, 2, 8, 8), dtype, rng), 3, 2, 1), {"ceil_mode": True},
                 "ceil_mode clipped divisor")
    yield Sample((tensor((2, 2, 7, 9), dtype, rng), (3, 2)), {"divisor_override": 4},
                 "divisor_override")
    yield Sample((tensor((0, 2, 4, 4), dtype, rng), 2), {}, "empty batch")
    yield Sample((tensor((1, 2, 2, 2), dtype, rng), 3), {}, "kernel larger than input")
    yield Sample((tensor((1, 2, 5, 5), dtype, rng), 2, 1, 2), {}, "pad > kernel/2")


def _adaptive_avg_samples(dtype, rng):
    yield Sample((tensor((2, 3, 7, 8), dtype, rng), (3, 5)), {}, "shrink")
    yield Sample((tensor((3, 5, 4), dtype, rng, "transposed"), 7), {}, "grow unbatched")
    yield Sample((tensor((1, 2, 9, 6), dtype, rng, "strided"), (None, 2)), {}, "None keeps")
    yield Sample((tensor((2, 2, 5, 5), dtype, rng), 1), {}, "global")
    if dtype != "int64":    # torch skips its dtype check for an empty input
        yield Sample((tensor((0, 2, 5, 5), dtype, rng), 2), {}, "empty batch")
    yield Sample((tensor((2, 0, 5), dtype, rng), 2), {}, "empty spatial")
    yield Sample((tensor((5,), dtype, rng), 2), {}, "1-d input")


_FLOATING = ("float16", "bfloat16", "float32", "float64")

OPS = [
    OpInfo("max_pool2d", _functional("max_pool2d"), _max_pool_samples,
           dtypes=_FLOATING + ("int64", "uint8", "bool")),
    OpInfo("avg_pool2d", _functional("avg_pool2d"), _avg_pool_samples,
           dtypes=_FLOATING + ("int64", "int32")),
    OpInfo("adaptive_avg_pool2d", _functional("adaptive_avg_pool2d"), _adaptive_avg_samples,
           dtypes=_FLOATING + ("int64",)),
]
