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


def _adaptive_max_samples(dtype, rng):
    yield Sample((tensor((2, 3, 8, 12), dtype, rng), (4, 3)), {}, "shrink, sizes divide")
    yield Sample((tensor((2, 3, 7, 8), dtype, rng), (3, 5)), {}, "shrink, uneven windows")
    yield Sample((tensor((3, 6, 4), dtype, rng, "transposed"), 2), {}, "unbatched transposed")
    yield Sample((tensor((1, 2, 9, 6), dtype, rng, "strided"), (None, 2)), {}, "None keeps")
    yield Sample((tensor((2, 2, 5, 5), dtype, rng), 1), {"return_indices": True},
                 "global, indices")
    yield Sample((tensor((1, 1, 4, 6), dtype, rng), (2, 3)), {}, "small (for gradcheck)")


def _max_pool1d_samples(dtype, rng):
    yield Sample((tensor((2, 3, 9), dtype, rng), 3, 2, 1), {}, "k3 s2 p1")
    yield Sample((tensor((3, 8), dtype, rng, "transposed"), 2), {}, "unbatched transposed")
    yield Sample((tensor((1, 2, 9), dtype, rng, "strided"), 3), {"stride": 2,
                                                               "ceil_mode": True},
                 "strided ceil_mode")
    yield Sample((tensor((2, 2, 10), dtype, rng), 2), {"dilation": 2, "padding": 1,
                                                       "return_indices": True},
                 "dilation return_indices")
    yield Sample((tensor((0, 2, 4), dtype, rng), 2), {}, "empty batch")


def _max_pool3d_samples(dtype, rng):
    yield Sample((tensor((2, 3, 5, 6, 4), dtype, rng), 3, 2, 1), {}, "k3 s2 p1")
    yield Sample((tensor((3, 4, 4, 4), dtype, rng, "transposed"), 2), {},
                 "unbatched transposed")
    yield Sample((tensor((1, 2, 5, 4, 5), dtype, rng, "strided"), (3, 2, 2)),
                 {"stride": (2, 1, 1), "ceil_mode": True}, "strided ceil_mode")
    yield Sample((tensor((2, 2, 6, 5, 4), dtype, rng), 2), {"dilation": 2, "padding": 1,
                                                            "return_indices": True},
                 "dilation return_indices")
    yield Sample((tensor((0, 2, 4, 4, 4), dtype, rng), 2), {}, "empty batch")


def _avg_pool1d_samples(dtype, rng):
    yield Sample((tensor((2, 3, 9), dtype, rng), 3, 2, 1), {}, "k3 s2 p1")
    yield Sample((tensor((3, 8), dtype, rng, "transposed"), 2), {}, "unbatched transposed")
    yield Sample((tensor((1, 2, 9), dtype, rng, "strided"), 3, 2, 1),
                 {"ceil_mode": True, "count_include_pad": False}, "ceil_mode exclude pad")
    yield Sample((tensor((0, 2, 4), dtype, rng), 2), {}, "empty batch")


def _avg_pool3d_samples(dtype, rng):
    yield Sample((tensor((2, 3, 5, 6, 4), dtype, rng), 3, 2, 1), {}, "k3 s2 p1")
    yield Sample((tensor((3, 4, 4, 4), dtype, rng, "transposed"), 2), {},
                 "unbatched transposed")
    yield Sample((tensor((1, 2, 6, 6, 6), dtype, rng, "strided"), 3, 2, 1),
                 {"ceil_mode": True, "count_include_pad": False}, "ceil_mode exclude pad")
    yield Sample((tensor((2, 2, 5, 4, 6), dtype, rng), (3, 2, 2)), {"divisor_override": 4},
                 "divisor_override")
    yield Sample((tensor((0, 2, 4, 4, 4), dtype, rng), 2), {}, "empty batch")


def _adaptive_avg1d_samples(dtype, rng):
    yield Sample((tensor((2, 3, 9), dtype, rng), 4), {}, "shrink")
    yield Sample((tensor((3, 5), dtype, rng, "transposed"), 7), {}, "grow unbatched")
    yield Sample((tensor((2, 2, 5), dtype, rng, "strided"), 1), {}, "global strided")


def _adaptive_avg3d_samples(dtype, rng):
    yield Sample((tensor((2, 3, 5, 6, 4), dtype, rng), (2, 3, 3)), {}, "shrink")
    yield Sample((tensor((3, 4, 5, 3), dtype, rng, "transposed"), 5), {}, "grow unbatched")
    yield Sample((tensor((1, 2, 6, 5, 4), dtype, rng, "strided"), (None, 2, 3)), {},
                 "None keeps")
    yield Sample((tensor((2, 2, 3, 3, 3), dtype, rng), 1), {}, "global")


_FLOATING = ("float16", "bfloat16", "float32", "float64")

OPS = [
    OpInfo("max_pool2d", _functional("max_pool2d"), _max_pool_samples,
           dtypes=_FLOATING + ("int64", "uint8", "bool")),
    OpInfo("avg_pool2d", _functional("avg_pool2d"), _avg_pool_samples,
           dtypes=_FLOATING + ("int64", "int32")),
    OpInfo("adaptive_avg_pool2d", _functional("adaptive_avg_pool2d"), _adaptive_avg_samples,
           dtypes=_FLOATING + ("int64",)),
    OpInfo("adaptive_max_pool2d", _functional("adaptive_max_pool2d"), _adaptive_max_samples,
           dtypes=_FLOATING),
    OpInfo("max_pool1d", _functional("max_pool1d"), _max_pool1d_samples, dtypes=_FLOATING),
    OpInfo("max_pool3d", _functional("max_pool3d"), _max_pool3d_samples, dtypes=_FLOATING),
    OpInfo("avg_pool1d", _functional("avg_pool1d"), _avg_pool1d_samples, dtypes=_FLOATING),
    # PyTorch 2.13 has no cpu avg_pool3d kernel for float16/bfloat16 (NotImplementedError).
    OpInfo("avg_pool3d", _functional("avg_pool3d"), _avg_pool3d_samples,
           dtypes=("float32", "float64")),
    OpInfo("adaptive_avg_pool1d", _functional("adaptive_avg_pool1d"), _adaptive_avg1d_samples,
           dtypes=_FLOATING),
    OpInfo("adaptive_avg_pool3d", _functional("adaptive_avg_pool3d"), _adaptive_avg3d_samples,
           dtypes=_FLOATING),
]
