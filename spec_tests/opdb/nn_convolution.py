"""Op-database entries: neural-network ops (convolution), torch.nn.functional spellings.

conv2d and conv_transpose2d (every option: stride, padding incl. 'same'/'valid', dilation,
groups, bias, output_padding, unbatched input), unfold/fold, and pad in every mode. Samples are
small so that gradcheck (at most 30 input elements) picks up the first few of each.
"""
from __future__ import annotations

from .core import OpInfo, Sample, tensor

CONV_DTYPES = ("bool", "int32", "int64", "float16", "bfloat16", "float32", "float64",
               "complex64", "complex128")
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128")


def _f(name):
    return lambda m, *a, **k: getattr(m.nn.functional, name)(*a, **k)


def _conv2d_samples(dtype, rng):
    def t(*shape, layout="contiguous"):
        return tensor(shape, dtype, rng, layout)
    yield Sample((t(1, 2, 3, 3), t(2, 2, 2, 2)), {}, "small")
    yield Sample((t(1, 2, 3, 4), t(2, 1, 2, 2), t(2)), {"groups": 2, "padding": 1},
                 "groups=2 padding=1 bias")
    yield Sample((t(2, 3, 3), t(1, 2, 2, 2)), {"padding": "same"}, "unbatched same (even)")
    yield Sample((t(2, 4, 7, 6, layout="transposed"), t(6, 2, 3, 2), t(6)),
                 {"stride": (2, 1), "padding": (1, 2), "dilation": (1, 2), "groups": 2},
                 "transposed layout, stride, dilation")
    yield Sample((t(2, 3, 5, 5, layout="strided"), t(4, 3, 3, 3, layout="strided")),
                 {"padding": "valid", "stride": 2}, "strided layouts valid")
    yield Sample((t(0, 3, 5, 5), t(4, 3, 3, 3)), {}, "empty batch")
    yield Sample((t(1, 3, 5, 5), t(4, 3, 3, 3)), {"dilation": 2, "padding": 1}, "dilated")
    yield Sample((t(1, 3, 5, 5), t(4, 3, 6, 6)), {}, "kernel larger than input")
    yield Sample((t(1, 3, 5, 5), t(3, 1, 3, 3)), {"groups": 2}, "groups not dividing")
    yield Sample((t(1, 3, 5, 5), t(4, 3, 3, 3)), {"padding": "same", "stride": 2},
                 "same with stride")


def _conv_transpose2d_samples(dtype, rng):
    def t(*shape, layout="contiguous"):
        return tensor(shape, dtype, rng, layout)
    yield Sample((t(1, 2, 2, 3), t(2, 1, 2, 2)), {"stride": 2}, "small stride 2")
    yield Sample((t(1, 2, 2, 2), t(2, 1, 2, 2), t(2)), {"groups": 2, "output_padding": 1,
                                                        "stride": 2, "padding": 1},
                 "groups output_padding bias")
    yield Sample((t(2, 3, 3), t(2, 2, 2, 2)), {"dilation": 2, "output_padding": 1},
                 "unbatched, output_padding < dilation")
    yield Sample((t(2, 4, 3, 4, layout="transposed"), t(4, 3, 3, 2), t(6)),
                 {"stride": (2, 3), "padding": (1, 0), "output_padding": (1, 2), "groups": 2,
                  "dilation": (1, 2)}, "every option")
    yield Sample((t(1, 3, 4, 4, layout="strided"), t(3, 2, 3, 3)), {"padding": 1},
                 "strided layout")
    yield Sample((t(1, 3, 4, 4), t(3, 2, 3, 3)), {"output_padding": 1}, "bad output_padding")
    yield Sample((t(1, 3, 4, 4), t(4, 2, 3, 3)), {}, "wrong channels")


def _unfold_samples(dtype, rng):
    def t(*shape, layout="contiguous"):
        return tensor(shape, dtype, rng, layout)
    yield Sample((t(1, 2, 3, 3), 2), {}, "small")
    yield Sample((t(2, 3, 3), (2, 1)), {"stride": (1, 2), "padding": 1}, "unbatched")
    yield Sample((t(2, 3, 7, 6, layout="transposed"), 3),
                 {"dilation": 2, "padding": 1, "stride": 2}, "transposed layout")
    yield Sample((t(2, 2, 4, 5, layout="strided"), (2, 3)), {}, "strided layout")
    yield Sample((t(0, 2, 4, 4), 2), {}, "empty batch")
    yield Sample((t(1, 2, 3, 3), 4), {}, "kernel too large")
    yield Sample((t(1, 1, 2, 3, 3), 2), {}, "5-D input")


def _fold_samples(dtype, rng):
    def t(*shape, layout="contiguous"):
        return tensor(shape, dtype, rng, layout)
    yield Sample((t(1, 4, 4), (3, 3), 2), {}, "small overlapping")
    yield Sample((t(8, 3), (2, 4), 2), {"stride": (1, 2), "padding": (0, 1)}, "unbatched")
    yield Sample((t(2, 12, 12, layout="transposed"), (7, 6), (3, 2)),
                 {"dilation": (1, 2), "padding": 1, "stride": 2}, "transposed layout")
    yield Sample((t(2, 12, 16, layout="strided"), (5, 5), 2), {}, "strided layout")
    yield Sample((t(2, 12, 17), (5, 5), 2), {}, "wrong block count")
    yield Sample((t(2, 13, 16), (5, 5), 2), {}, "channels not divisible")


def _pad_samples(dtype, rng):
    def t(*shape, layout="contiguous"):
        return tensor(shape, dtype, rng, layout)
    yield Sample((t(2, 3), (1, 2)), {}, "constant")
    yield Sample((t(1, 2, 4), (2, 1)), {"mode": "reflect"}, "reflect 1d")
    yield Sample((t(2, 3, 3), (1, 0, 2, 1)), {"mode": "replicate"}, "replicate 2d")
    yield Sample((t(1, 2, 3), (1, 2)), {"mode": "circular"}, "circular 1d")
    yield Sample((t(2, 3, 4, layout="transposed"), (1, -1, 2, 0, 0, 1)), {"value": 1.5},
                 "constant 3 dims, crop, value")
    yield Sample((t(), ()), {}, "0-dim, no padding")
    yield Sample((t(0, 3), (1, 1)), {"value": -2}, "empty")
    yield Sample((t(2, 3, 4, 5, layout="strided"), (1, 2, 3, 1)), {"mode": "reflect"},
                 "reflect 2d strided")
    yield Sample((t(1, 2, 3, 3, 2), (1, 1, 2, 0, 1, 1)), {"mode": "replicate"},
                 "replicate 3d")
    yield Sample((t(2, 2, 3, 4, 3), (1, 2, 2, 1, 0, 2)), {"mode": "reflect"}, "reflect 3d")
    yield Sample((t(3, 6, layout="transposed"), (2, 3)), {"mode": "replicate"},
                 "replicate 1d, transposed")
    yield Sample((t(2, 3, 5, 4), (-1, 2, 1, -2)), {"mode": "replicate"}, "replicate 2d crop")
    yield Sample((t(2, 3, 4, 5), (2, -1, 1, 3)), {"mode": "circular"}, "circular 2d crop")
    yield Sample((t(1, 2, 3), (3, 1)), {"mode": "reflect"}, "reflect too large")
    yield Sample((t(2, 3), (1,)), {}, "odd pad length")
    yield Sample((t(2, 3, 4, 5), (1, 1)), {"mode": "replicate"}, "wrong rank for mode")


def _index_pad_samples(mode, nd):
    """F.pad's "reflect" / "replicate" over nd dims: the reflection_pad{nd}d and
    replication_pad{nd}d ops, each with samples of its own (batched, unbatched transposed,
    strided; replicate also crops)."""
    spatial, pad = (5, 4, 6)[:nd], (2, 1, 3, 2, 1, 3)[:2 * nd]

    def samples(dtype, rng):
        def t(*shape, layout="contiguous"):
            return tensor(shape, dtype, rng, layout)
        yield Sample((t(2, 3, *spatial), pad), {"mode": mode}, f"{mode} {nd}d")
        yield Sample((t(3, *spatial, layout="transposed"), pad[::-1]), {"mode": mode},
                     "unbatched, transposed")
        yield Sample((t(2, 2, *spatial, layout="strided"), (0, 1) * nd), {"mode": mode},
                     "strided")
        if mode == "replicate":
            yield Sample((t(2, 3, *spatial), (-1, 2) * nd), {"mode": mode}, "crop")
        yield Sample((t(1, *(3, 3, 2)[:nd]), (1, 1, 1, 1, 0, 1)[:2 * nd]), {"mode": mode},
                     "small (for gradcheck)")
    return samples


def _constant_pad_samples(dtype, rng):
    """F.pad's "constant" mode: the constant_pad_nd op, each sample padding or cropping."""
    def t(*shape, layout="contiguous"):
        return tensor(shape, dtype, rng, layout)
    yield Sample((t(2, 3, 5, 4), (2, 1, 3, 2)), {"value": 1.5}, "2 dims")
    yield Sample((t(3, 4, 5, layout="transposed"), (1, -2, 0, 3)), {}, "crop, transposed")
    yield Sample((t(2, 3, 4, 5, layout="strided"), (1, 1)), {"value": -2}, "strided")
    yield Sample((t(2, 3, 4, 5, layout="transposed"), (1, 2, 2, 1)), {"value": 3},
                 "4-d transposed, integral value")
    yield Sample((t(2, 3, 2, 4, 3), (1, 0, 0, 1, 2, 2)), {}, "3 dims")
    yield Sample((t(2, 3, 4), (1, -1, 2, 0)), {"value": 0.5}, "small (for gradcheck)")


def _conv1d_samples(dtype, rng):
    def t(*shape, layout="contiguous"):
        return tensor(shape, dtype, rng, layout)
    yield Sample((t(1, 2, 5), t(2, 2, 3)), {}, "small")
    yield Sample((t(2, 4, 9, layout="transposed"), t(6, 2, 3), t(6)),
                 {"stride": 2, "padding": 1, "dilation": 2, "groups": 2},
                 "transposed layout, every option")
    yield Sample((t(2, 6), t(3, 2, 2)), {"padding": "same"}, "unbatched same (even)")
    yield Sample((t(2, 3, 8, layout="strided"), t(4, 3, 3)), {"padding": "valid"},
                 "strided layout")
    yield Sample((t(0, 2, 5), t(2, 2, 3)), {}, "empty batch")


def _conv3d_samples(dtype, rng):
    def t(*shape, layout="contiguous"):
        return tensor(shape, dtype, rng, layout)
    yield Sample((t(1, 1, 3, 3, 2), t(1, 1, 2, 2, 2)), {}, "small")
    yield Sample((t(1, 2, 3, 4, 3), t(2, 1, 2, 2, 2), t(2)), {"groups": 2, "padding": 1},
                 "groups=2 padding=1 bias")
    yield Sample((t(2, 4, 5, 4, 6, layout="transposed"), t(4, 2, 3, 2, 2), t(4)),
                 {"stride": (2, 1, 1), "padding": (1, 0, 1), "dilation": (1, 2, 1),
                  "groups": 2}, "transposed layout, stride, dilation")
    yield Sample((t(2, 3, 3, 3), t(1, 2, 2, 2, 2)), {"padding": "same"}, "unbatched same")
    yield Sample((t(1, 3, 5, 4, 5, layout="strided"), t(2, 3, 3, 3, 3)),
                 {"padding": "valid", "stride": 2}, "strided layouts valid")
    yield Sample((t(0, 2, 3, 3, 3), t(2, 2, 2, 2, 2)), {}, "empty batch")


def _conv_transpose1d_samples(dtype, rng):
    def t(*shape, layout="contiguous"):
        return tensor(shape, dtype, rng, layout)
    yield Sample((t(1, 2, 4), t(2, 1, 3)), {"stride": 2}, "small stride 2")
    yield Sample((t(1, 2, 3), t(2, 1, 2), t(2)), {"groups": 2, "output_padding": 1,
                                                  "stride": 2, "padding": 1},
                 "groups output_padding bias")
    yield Sample((t(2, 4, 5, layout="transposed"), t(4, 3, 3), t(6)),
                 {"stride": 3, "padding": 1, "output_padding": 2, "groups": 2,
                  "dilation": 2}, "transposed layout, every option")
    yield Sample((t(3, 4), t(3, 2, 2)), {}, "unbatched")


def _conv_transpose3d_samples(dtype, rng):
    def t(*shape, layout="contiguous"):
        return tensor(shape, dtype, rng, layout)
    yield Sample((t(1, 1, 2, 2, 2), t(1, 1, 2, 2, 2)), {"stride": 2}, "small stride 2")
    yield Sample((t(1, 2, 2, 2, 2), t(2, 1, 2, 2, 2), t(2)),
                 {"groups": 2, "output_padding": 1, "stride": 2, "padding": 1},
                 "groups output_padding bias")
    yield Sample((t(2, 4, 3, 2, 3, layout="transposed"), t(4, 3, 3, 2, 2), t(6)),
                 {"stride": (2, 1, 2), "padding": (1, 0, 0), "output_padding": (1, 0, 1),
                  "groups": 2, "dilation": (1, 2, 1)}, "transposed layout, every option")


# PyTorch's CPU transposed convolution in float16 is not one rounding everywhere: where
# oneDNN has f16 kernels for the CPU it computes in float32 and rounds once (the reference's
# rule), elsewhere (e.g. an AMD Zen 4, no AVX512-FP16) its slow path rounds each column
# product to half and adds the windows in half, as the reference does only for an
# output_padding that reaches the stride. Results then differ by a few half ulps where
# windows cancel, so these compare at bfloat16's tolerance. bfloat16 likewise: on a CPU
# without AVX512-BF16 (an AMD EPYC Zen 3, AVX2 only) PyTorch's 2-D and 3-D transposed
# convolutions gave 0.5625 and 0.531 where the reference (float32 sums, one rounding) gives
# 0.5 and 0.559: a bfloat16 ulp or two of the windows' larger partial sums (up to ~60 here,
# ulp 0.25), so the absolute tolerance is 0.125 for bfloat16.
_HALF_TRANSPOSED = {"float16": (1.6e-2, 1e-2), "bfloat16": (1.6e-2, 0.125)}

OPS = [
    OpInfo("conv1d", _f("conv1d"), _conv1d_samples, dtypes=FLOAT_DTYPES,
           grad_dtypes=("float64",)),
    OpInfo("conv3d", _f("conv3d"), _conv3d_samples, dtypes=FLOAT_DTYPES,
           grad_dtypes=("float64",)),
    OpInfo("conv_transpose1d", _f("conv_transpose1d"), _conv_transpose1d_samples,
           dtypes=FLOAT_DTYPES, grad_dtypes=("float64",), tolerances=_HALF_TRANSPOSED),
    OpInfo("conv_transpose3d", _f("conv_transpose3d"), _conv_transpose3d_samples,
           dtypes=FLOAT_DTYPES, grad_dtypes=("float64",), tolerances=_HALF_TRANSPOSED),
    OpInfo("conv2d", _f("conv2d"), _conv2d_samples, dtypes=CONV_DTYPES,
           grad_dtypes=("float64", "complex128")),
    OpInfo("conv_transpose2d", _f("conv_transpose2d"), _conv_transpose2d_samples,
           dtypes=CONV_DTYPES, grad_dtypes=("float64", "complex128"),
           tolerances=_HALF_TRANSPOSED),
    OpInfo("unfold", _f("unfold"), _unfold_samples, dtypes=("bool",) + FLOAT_DTYPES),
    OpInfo("fold", _f("fold"), _fold_samples, dtypes=("int64",) + FLOAT_DTYPES),
    OpInfo("pad", _f("pad"), _pad_samples,
           dtypes=("bool", "uint8", "int64") + FLOAT_DTYPES),
    OpInfo("constant_pad_nd", _f("pad"), _constant_pad_samples,
           dtypes=("bool", "int8", "uint8", "int16", "int32", "int64") + FLOAT_DTYPES),
    *(OpInfo(f"{prefix}_pad{nd}d", _f("pad"), _index_pad_samples(mode, nd),
             dtypes=("int8", "uint8", "int16", "int32", "int64") + FLOAT_DTYPES)
      for prefix, mode in (("reflection", "reflect"), ("replication", "replicate"))
      for nd in (1, 2, 3)),
]
