"""Op-database entries for elementwise ops with three operands (OpInfo, see core.py).

Each operand may be a tensor of its own shape (broadcasting), a Python number, or absent
(clamp's None bounds), so these are OpInfos with explicit samples rather than OpEntrys.
"""
from __future__ import annotations

from .core import OpInfo, Sample, tensor

SHAPES = [((3, 4), (3, 4), (3, 4)), ((3, 4), (4,), (3, 1)), ((), (2, 3), ()),
          ((2, 0, 3), (3,), (1, 3))]


def _clamp_samples(dtype, rng):
    # No 0-dim input with wider bounds here: torch's own clamp backward fails on it.
    for shapes in SHAPES[:2] + [((2, 3), (), (2, 3))] + SHAPES[3:]:
        x, low, high = (tensor(s, dtype, rng) for s in shapes)
        yield Sample((x,), {"min": low, "max": high}, f"{shapes} tensor bounds")
    x = tensor((3, 4), dtype, rng, "transposed")
    yield Sample((x,), {"min": tensor((4,), dtype, rng)}, "tensor min only")
    yield Sample((x,), {"max": tensor((3, 1), dtype, rng)}, "tensor max only")
    yield Sample((x, -1, 2), {}, "number bounds")
    yield Sample((x,), {"min": 0.5}, "float min on any dtype")
    yield Sample((x,), {"max": 1}, "int max only")
    yield Sample((x, 2, -1), {}, "min > max")
    yield Sample((x,), {}, "no bounds: error")
    yield Sample((x,), {"min": tensor((4,), dtype, rng), "max": 2.0}, "mixed kinds: error")


def _lerp_samples(dtype, rng):
    for shapes in SHAPES:
        a, end, weight = (tensor(s, dtype, rng) for s in shapes)
        yield Sample((a, end, weight), {}, f"{shapes} tensor weight")
    a = tensor((3, 4), dtype, rng, "strided")
    end = tensor((3, 4), dtype, rng, "transposed")
    for weight in (0.25, 0.75, 2):
        yield Sample((a, end, weight), {}, f"weight {weight}")
    yield Sample((a, tensor((4,), "float64" if dtype != "float64" else "float32", rng), 0.5),
                 {}, "end of another dtype: error")


def _addc_samples(dtype, rng):
    for shapes, value in zip(SHAPES, (1, 2, 0.5, -1)):
        a, t1, t2 = (tensor(s, dtype, rng, nonzero=True) for s in shapes)
        yield Sample((a, t1, t2), {"value": value}, f"{shapes} value={value}")
    a = tensor((3, 4), dtype, rng, "transposed")
    yield Sample((a, tensor((3, 4), dtype, rng, "strided"),
                  tensor((4,), "float64", rng, nonzero=True)), {}, "mixed dtypes")


def _where_samples(dtype, rng):
    for shapes in SHAPES:
        condition = tensor(shapes[1], "bool", rng)
        a, b = tensor(shapes[0], dtype, rng), tensor(shapes[2], dtype, rng)
        yield Sample((condition, a, b), {}, f"{shapes}")
    condition = tensor((3, 4), "bool", rng, "transposed")
    a = tensor((3, 4), dtype, rng, "strided")
    yield Sample((condition, a, 0.5), {}, "number other")
    yield Sample((condition, 2, a), {}, "number input")
    yield Sample((condition, a, tensor((), "float64", rng)), {}, "0-dim other")
    yield Sample((condition, a, tensor((4,), "int32", rng)), {}, "mixed dtypes")
    yield Sample((tensor((3, 4), "float32", rng), a, a), {}, "float condition: error")


def _method(name):
    return lambda self, *args, **kwargs: getattr(self.clone(), name + "_")(*args, **kwargs)


OPS = [
    OpInfo(name="clamp", call=lambda m, *a, **k: m.clamp(*a, **k), samples=_clamp_samples,
           inplace_call=_method("clamp")),
    OpInfo(name="lerp", call=lambda m, *a, **k: m.lerp(*a, **k), samples=_lerp_samples,
           inplace_call=_method("lerp")),
    OpInfo(name="addcmul", call=lambda m, *a, **k: m.addcmul(*a, **k), samples=_addc_samples,
           inplace_call=_method("addcmul")),
    OpInfo(name="addcdiv", call=lambda m, *a, **k: m.addcdiv(*a, **k), samples=_addc_samples,
           inplace_call=_method("addcdiv")),
    OpInfo(name="where", call=lambda m, *a, **k: m.where(*a, **k), samples=_where_samples),
]
