"""Op-database entries: neural-network ops (normalization), torch.nn.functional spellings."""
from __future__ import annotations

from .core import OpInfo, Sample, tensor


def _functional(name):
    return lambda m, *args, **kwargs: getattr(m.nn.functional, name)(*args, **kwargs)


def _param(shape, dtype, rng, grad=True):
    return tensor(shape, dtype, rng, requires_grad=grad)


def _stats(dtype, rng, channels=3):
    """Running mean and (positive) running variance: buffers, never differentiated."""
    return (tensor((channels,), dtype, rng, requires_grad=False),
            tensor((channels,), dtype, rng, requires_grad=False, domain=(0.5, 2.0)))


def _batch_norm_samples(dtype, rng):
    w, b = _param((3,), dtype, rng), _param((3,), dtype, rng)
    yield Sample((tensor((4, 3, 5), dtype, rng), *_stats(dtype, rng), w, b, True), {},
                 "training with stats")
    yield Sample((tensor((4, 3), dtype, rng, "transposed"), None, None), {"training": True},
                 "training no stats no affine")
    if dtype not in ("float16", "bfloat16"):
        # torch's half-type eval path rounds intermediates (several ulps off the exact
        # value); reftorch normalizes in float32 and rounds once
        yield Sample((tensor((2, 3, 4, 5), dtype, rng, "strided"), *_stats(dtype, rng)),
                     {"weight": w, "bias": b, "training": False}, "eval")
    yield Sample((tensor((2, 3, 3, 2, 2), dtype, rng), *_stats(dtype, rng), None, b),
                 {"training": True, "momentum": 0.3, "eps": 1e-3}, "5-d momentum eps")
    yield Sample((tensor((1, 3), dtype, rng), None, None), {"training": True},
                 "one value per channel")
    yield Sample((tensor((2, 4, 5), dtype, rng), *_stats(dtype, rng)), {}, "wrong channels")


def _layer_norm_samples(dtype, rng):
    yield Sample((tensor((3, 4, 5), dtype, rng), (5,), _param((5,), dtype, rng),
                  _param((5,), dtype, rng)), {}, "last dim affine")
    yield Sample((tensor((3, 4, 5), dtype, rng, "transposed"), (4, 5)), {"eps": 1e-2},
                 "two dims transposed")
    yield Sample((tensor((6,), dtype, rng, "strided"), [6], _param((6,), dtype, rng)), {},
                 "1-d weight only")
    yield Sample((tensor((0, 4), dtype, rng), (4,)), {}, "empty batch")
    yield Sample((tensor((3, 4), dtype, rng), (5,)), {}, "shape mismatch")


def _group_norm_samples(dtype, rng):
    yield Sample((tensor((2, 4, 5), dtype, rng), 2, _param((4,), dtype, rng),
                  _param((4,), dtype, rng)), {}, "2 groups affine")
    yield Sample((tensor((3, 6, 2, 2), dtype, rng, "transposed"), 3), {"eps": 1e-3},
                 "4-d transposed")
    yield Sample((tensor((2, 4), dtype, rng, "strided"), 2), {"weight": _param((4,), dtype, rng)},
                 "2-d input")
    yield Sample((tensor((2, 3, 4), dtype, rng), 2), {}, "not divisible")
    yield Sample((tensor((0, 4, 3), dtype, rng), 2), {}, "empty batch")


_FLOATING = ("float16", "bfloat16", "float32", "float64")

OPS = [
    OpInfo("batch_norm", _functional("batch_norm"), _batch_norm_samples,
           dtypes=_FLOATING + ("int64",)),
    OpInfo("layer_norm", _functional("layer_norm"), _layer_norm_samples,
           dtypes=_FLOATING + ("int64",)),
    OpInfo("group_norm", _functional("group_norm"), _group_norm_samples,
           dtypes=_FLOATING + ("int64",)),
]
