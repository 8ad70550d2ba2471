"""Loop geometry for elementwise kernels: one shape and one stride list per operand.

`elementwise_geometry(out, inputs)` broadcasts every input to `out`'s shape and merges
adjacent dims that are contiguous in every operand, so a kernel usually sees 1 or 2 dims.
Strides are in elements; a broadcast dim has stride 0. C and CUDA kernels share this ABI.
"""
from __future__ import annotations


def broadcast_strides(shape, in_shape, in_strides):
    """Strides of an input viewed with `shape` (missing leading dims and size-1 dims -> 0)."""
    pad = len(shape) - len(in_shape)
    strides = [0] * pad
    for size, in_size, stride in zip(shape[pad:], in_shape, in_strides):
        strides.append(0 if in_size == 1 and size != 1 else stride)
    return strides


def coalesce(shape, operand_strides):
    """Drop size-1 dims and merge dim pairs that are contiguous for every operand."""
    dims = [i for i, s in enumerate(shape) if s != 1]
    if not dims:
        return [1], [[0] for _ in operand_strides]
    new_shape = [shape[dims[0]]]
    new_strides = [[st[dims[0]]] for st in operand_strides]
    for d in dims[1:]:
        size = shape[d]
        if all(ns[-1] == st[d] * size for ns, st in zip(new_strides, operand_strides)):
            new_shape[-1] *= size
            for ns, st in zip(new_strides, operand_strides):
                ns[-1] = st[d]
        else:
            new_shape.append(size)
            for ns, st in zip(new_strides, operand_strides):
                ns.append(st[d])
    return new_shape, new_strides


def elementwise_geometry(out, inputs):
    """(shape, [out strides, input strides...]) for a kernel writing `out` from `inputs`."""
    shape = list(out._shape)
    strides = [list(out._strides)]
    strides += [broadcast_strides(shape, t._shape, t._strides) for t in inputs]
    return coalesce(shape, strides)
