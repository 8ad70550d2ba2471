"""Shape and stride arithmetic shared by views, factories and kernels."""
from __future__ import annotations

import operator
from functools import lru_cache


def wrap_dim(dim, ndim):
    """A possibly negative dim as an index in [0, ndim); 0-dim tensors accept -1 and 0."""
    dim = operator.index(dim)
    bound = max(ndim, 1)
    if not -bound <= dim < bound:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-bound}, "
                         f"{bound - 1}], but got {dim})")
    return dim + bound if dim < 0 else dim


@lru_cache(maxsize=4096)
def contiguous_strides(shape):
    """Row-major strides; a size-0 or size-1 dim counts as size 1 so strides stay positive."""
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * max(shape[i + 1], 1)
    return tuple(strides)


def is_contiguous(shape, strides):
    """Row-major with size-1 dims ignored; every empty tensor is contiguous."""
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size == 0:
            return True
        if size != 1:
            if stride != expected:
                return False
            expected *= size
    return True


def is_dense(shape, strides):
    """Non-overlapping and dense: some permutation of the dims is contiguous."""
    dims = sorted((s, n) for s, n in zip(strides, shape) if n != 1)
    expected = 1
    for stride, size in dims:
        if stride != expected:
            return False
        expected *= size
    return True


def kept_strides(shape, strides):
    """The strides of a new tensor laid out like one of (shape, strides): those strides when
    they are dense (a permuted, e.g. channels-last, layout is kept, as PyTorch's
    preserve_format does), else contiguous ones."""
    contiguous = contiguous_strides(shape)
    if strides != contiguous and is_dense(shape, strides):  # a contiguous one skips the test
        return strides
    return contiguous


def infer_size(shape, numel):
    """Resolve one -1 in a requested shape; error when the shape cannot hold `numel`."""
    shape = tuple(operator.index(s) for s in shape)
    known, infer_at = 1, None
    for i, s in enumerate(shape):
        if s == -1:
            if infer_at is not None:
                raise RuntimeError("only one dimension can be inferred")
            infer_at = i
        elif s < 0:
            raise RuntimeError(f"invalid shape dimension {s}")
        else:
            known *= s
    if infer_at is not None and known != 0 and numel % known == 0:
        return shape[:infer_at] + (numel // known,) + shape[infer_at + 1:]
    if infer_at is None and known == numel:
        return shape
    raise RuntimeError(f"shape '[{', '.join(map(str, shape))}]' is invalid for input of size "
                       f"{numel}")


def view_strides(old_shape, old_strides, new_shape):
    """Strides that let `new_shape` view memory laid out as (old_shape, old_strides), or None.

    Old dims are grouped into chunks that are contiguous with each other; every new dim must
    fall inside one chunk. This is the rule that decides between view and copy in reshape.
    """
    numel = 1
    for s in old_shape:
        numel *= s
    if numel == 0 or not old_shape:
        return contiguous_strides(tuple(new_shape))
    new_strides = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base = old_strides[-1]
    chunk_numel = view_numel = 1
    for d in range(len(old_shape) - 1, -1, -1):
        chunk_numel *= old_shape[d]
        chunk_ends = d == 0 or (old_shape[d - 1] != 1
                                and old_strides[d - 1] != chunk_numel * chunk_base)
        if not chunk_ends:
            continue
        while view_d >= 0 and (view_numel < chunk_numel or new_shape[view_d] == 1):
            new_strides[view_d] = view_numel * chunk_base
            view_numel *= new_shape[view_d]
            view_d -= 1
        if view_numel != chunk_numel:
            return None
        if d > 0:
            chunk_base = old_strides[d - 1]
            chunk_numel = view_numel = 1
    if view_d != -1:
        return None
    return tuple(new_strides)


def is_expandable(shape, to_shape):
    """Can a tensor of `shape` broadcast to `to_shape` (sum_to_size's inverse)?"""
    if len(shape) > len(to_shape):
        return False
    return all(s == t or s == 1 for s, t in zip(reversed(shape), reversed(to_shape)))


def expand_strides(shape, strides, sizes):
    """Shape and strides of `expand(sizes)`: broadcast dims get stride 0."""
    sizes = tuple(operator.index(s) for s in sizes)
    ndim = len(sizes)
    if ndim < len(shape):
        raise RuntimeError(
            f"expand(torch.FloatTensor{{[{', '.join(map(str, shape))}]}}, size=[{', '.join(map(str, sizes))}]): "
            f"the number of sizes provided ({ndim}) must be greater or equal to the number of "
            f"dimensions in the tensor ({len(shape)})")
    out_shape = [0] * ndim
    out_strides = [0] * ndim
    for i in range(ndim - 1, -1, -1):
        old = i - (ndim - len(shape))
        size = shape[old] if old >= 0 else 1
        if old >= 0:
            stride = strides[old]
        else:
            stride = out_shape[i + 1] * out_strides[i + 1] if i + 1 < ndim else 1
        target = sizes[i]
        if target == -1:
            if old < 0:
                raise RuntimeError(f"The expanded size of the tensor (-1) isn't allowed in a "
                                   f"leading, non-existing dimension {i}")
            target = size
        if size != target:
            if size != 1:
                raise RuntimeError(
                    f"The expanded size of the tensor ({target}) must match the existing size "
                    f"({size}) at non-singleton dimension {i}.  Target sizes: "
                    f"[{', '.join(map(str, sizes))}].  Tensor sizes: "
                    f"[{', '.join(map(str, shape))}]")
            size, stride = target, 0
        out_shape[i], out_strides[i] = size, stride
    return tuple(out_shape), tuple(out_strides)
