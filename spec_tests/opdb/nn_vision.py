"""Op-database entries: neural-network ops (vision), torch.nn.functional spellings."""
from __future__ import annotations

from . import DTYPE_NAMES, FLOATING
from .core import OpInfo, Sample, tensor


def _f(name):
    return lambda m, *a, **k: getattr(m.nn.functional, name)(*a, **k)


def _interpolate(mode, align_corners):
    def samples(dtype, rng):
        for shape, layout, kw in [
                ((1, 2, 3, 4), "contiguous", {"size": (5, 3)}),
                ((2, 1, 4, 3), "transposed", {"scale_factor": 1.5}),
                ((1, 1, 2, 5), "strided", {"scale_factor": (2.0, 0.6)}),
                ((0, 2, 3, 3), "contiguous", {"size": 4}),
                ((1, 1, 3, 3), "contiguous", {"scale_factor": 1.7,
                                              "recompute_scale_factor": True})]:
            kw = dict(kw, mode=mode)
            if align_corners is not None:
                kw["align_corners"] = align_corners
            yield Sample((tensor(shape, dtype, rng, layout),), kw, f"{shape} {layout} {kw}")
        yield Sample((tensor((1, 1, 3), dtype, rng),), {"size": 4, "mode": "bicubic"},
                     "wrong rank")
    return samples


def _grid_samples(dtype, rng):
    for mode, padding, align in [("bilinear", "zeros", False), ("nearest", "border", True),
                                 ("bicubic", "reflection", False),
                                 ("bilinear", "reflection", True)]:
        yield Sample((tensor((1, 2, 3, 3), dtype, rng),
                      tensor((1, 2, 2, 2), dtype, rng, domain=(-1.2, 1.2))),
                     {"mode": mode, "padding_mode": padding, "align_corners": align},
                     f"{mode} {padding} {align}")
    yield Sample((tensor((2, 1, 2, 3, 2), dtype, rng),
                  tensor((2, 1, 2, 2, 3), dtype, rng, domain=(-1.2, 1.2), layout="transposed")),
                 {"align_corners": False}, "3-d")
    yield Sample((tensor((1, 1, 3, 3), dtype, rng), tensor((2, 2, 2, 2), dtype, rng)),
                 {"align_corners": False}, "batch mismatch")


def _affine_samples(dtype, rng):
    yield Sample((tensor((2, 2, 3), dtype, rng), (2, 1, 3, 4)), {"align_corners": False}, "2-d")
    yield Sample((tensor((1, 3, 4), dtype, rng, "transposed"), (1, 1, 2, 3, 2)),
                 {"align_corners": True}, "3-d")
    yield Sample((tensor((2, 2, 3), dtype, rng), (2, 1, 3)), {"align_corners": False},
                 "bad size")


def _shuffle(factor, shapes, bad):
    def samples(dtype, rng):
        for shape, layout in shapes:
            yield Sample((tensor(shape, dtype, rng, layout), factor), {}, f"{shape} {layout}")
        yield Sample((tensor(bad, dtype, rng), factor), {}, "not divisible")
    return samples


OPS = [
    OpInfo("upsample_nearest2d", _f("interpolate"), _interpolate("nearest", None),
           dtypes=FLOATING + ("uint8",)),
    OpInfo("upsample_bilinear2d", _f("interpolate"), _interpolate("bilinear", False),
           dtypes=FLOATING),
    OpInfo("upsample_bilinear2d (align_corners)", _f("interpolate"),
           _interpolate("bilinear", True), dtypes=FLOATING),
    OpInfo("upsample_bicubic2d", _f("interpolate"), _interpolate("bicubic", False),
           dtypes=FLOATING),
    OpInfo("_upsample_nearest_exact2d", _f("interpolate"), _interpolate("nearest-exact", None),
           dtypes=FLOATING),
    # half types: PyTorch's CPU kernel rounds intermediate steps differently (not compared)
    OpInfo("grid_sampler_2d", _f("grid_sample"), _grid_samples, dtypes=("float32", "float64")),
    OpInfo("affine_grid_generator", _f("affine_grid"), _affine_samples, dtypes=FLOATING),
    OpInfo("pixel_shuffle", _f("pixel_shuffle"),
           _shuffle(2, [((1, 8, 2, 3), "contiguous"), ((4, 2, 2), "transposed"),
                        ((2, 1, 4, 1, 2), "strided")],
                    (1, 6, 2, 2)), dtypes=DTYPE_NAMES),
    OpInfo("pixel_unshuffle", _f("pixel_unshuffle"),
           _shuffle(2, [((1, 2, 4, 6), "contiguous"), ((1, 4, 2), "transposed")],
                    (1, 1, 3, 2)), dtypes=DTYPE_NAMES),
    OpInfo("channel_shuffle", _f("channel_shuffle"),
           _shuffle(3, [((2, 6, 2), "contiguous"), ((1, 3, 2, 2), "transposed")],
                    (1, 4, 2)), dtypes=DTYPE_NAMES),
]
