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


def storage_span(shape, strides):
    """How many elements a view of (shape, strides) reaches, from its first element to its
    last one inclusive (non-negative strides); 0 when it is empty."""
    if 0 in shape:
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(shape, strides))


def is_contiguous(shape, strides):
    """Row-major with size-1 dims ignored; every empty tensor is contiguous."""
    if strides == contiguous_strides(shape) or 0 in shape:   # (the common answer, cached)
        return True
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size != 1:
            if stride != expected:
                return False
            expected *= size
    return True


def is_channels_last(shape, strides, ndim=4):
    """A 4-D (N, C, H, W) tensor laid out as (N, H, W, C), channels fastest, size-1 dims
    ignored (PyTorch's channels_last contiguity; unlike the row-major kind, an empty tensor
    has to pass the same test); `ndim` 5: (N, C, D, H, W) as (N, D, H, W, C), channels_last_3d."""
    if len(shape) != ndim:
        return False
    expected = 1
    for d in _CHANNELS_LAST_ORDER[ndim]:
        if shape[d] != 1:
            if strides[d] != expected:
                return False
            expected *= shape[d]
    return True


# The dims of a channels-last layout from fastest to slowest: channels, the spatial dims from
# last to first, then the batch.
_CHANNELS_LAST_ORDER = {4: (1, 3, 2, 0), 5: (1, 4, 3, 2, 0)}


@lru_cache(maxsize=4096)
def suggested_format(shape, strides):
    """PyTorch's suggest_memory_format: "channels_last" for a 4-D (5-D: "channels_last_3d")
    tensor whose strides order its dims as channels-last does, else "contiguous". Its
    heuristic: walking the dims in channels-last order, no size-0 dim and no stride below the
    span of the faster dims; ambiguous cases (a channel stride of 0, a batch stride equal to
    the channels' span) count as contiguous. The layout need not be dense."""
    order = _CHANNELS_LAST_ORDER.get(len(shape))
    if order is None or strides[1] == 0:
        return "contiguous"
    span = 0
    for d in order:
        if shape[d] == 0 or strides[d] < span or (d == 0 and span == strides[1]):
            return "contiguous"
        span = strides[d] * max(shape[d], 1)
    return "channels_last" if len(shape) == 4 else "channels_last_3d"


def common_format(layouts):
    """The memory format every (shape, strides) of `layouts` suggests, "contiguous" when they
    disagree: how PyTorch's cat chooses its result's format."""
    formats = {suggested_format(shape, strides) for shape, strides in layouts}
    return formats.pop() if len(formats) == 1 else "contiguous"


@lru_cache(maxsize=4096)
def format_strides(shape, memory_format):
    """Dense strides of `shape` in a memory format: row-major for "contiguous", channels
    fastest for the channels-last ones (each stride the product of the faster dims' sizes as
    they are, as PyTorch computes it: a size-0 dim zeroes the slower strides)."""
    if memory_format == "contiguous":
        return contiguous_strides(shape)
    strides = [0] * len(shape)
    step = 1
    for d in _CHANNELS_LAST_ORDER[len(shape)]:
        strides[d] = step
        step *= shape[d]
    return tuple(strides)


def is_non_overlapping_and_dense(shape, strides):
    """PyTorch's test: the dims of size 2 or more, ordered by stride, are row-major
    contiguous (the rest, size 0 or 1, do not count)."""
    if len(shape) == 1:
        return shape[0] < 2 or strides[0] == 1
    expected = 1
    for stride, size in sorted((s, n) for n, s in zip(shape, strides) if n >= 2):
        if stride != expected:
            return False
        expected *= size
    return True


def _iteration_strides(op_shape, op_strides, shape):
    """An operand's strides over the result's dims: 0 where it is broadcast (a missing
    leading dim, or size 1 against a larger size)."""
    lead = len(shape) - len(op_shape)
    return (0,) * lead + tuple(0 if n == 1 and shape[lead + i] != 1 else s
                               for i, (n, s) in enumerate(zip(op_shape, op_strides)))


@lru_cache(maxsize=4096)
def elementwise_strides(shape, operands):
    """The strides of a new elementwise result of `shape` whose tensor operands (0-dim ones
    and wrapped Python numbers included) have the layouts `operands`, ((shape, strides), ...)
    in operand order, as PyTorch's TensorIterator allocates it:

    - all operands of the result's shape and row-major contiguous: contiguous;
      all channels_last (4-D): channels_last; all with one non-overlapping and dense layout:
      that layout, strides of size-1 dims included;
    - otherwise the dims are sorted from fastest to slowest by the operands' strides (the
      first operand that tells two dims apart decides; a broadcast dim, stride 0, tells
      nothing; equal strides put the smaller dim first; a tie keeps row-major order), and
      the result is dense in that order: contiguous if the order is row-major.

    Checked against PyTorch on 60,000 random layouts (broadcasts, size-0 and size-1 dims,
    gaps, 1 to 3 operands)."""
    ndim = len(shape)
    if all(op_shape == shape for op_shape, _ in operands):
        if all(is_contiguous(*op) for op in operands):
            return contiguous_strides(shape)
        if all(is_channels_last(*op) for op in operands):
            return format_strides(shape, "channels_last")
        first = operands[0][1]
        if all(strides == first for _, strides in operands) and \
                is_non_overlapping_and_dense(shape, first):
            return first
    order = _fastest_first(shape, [_iteration_strides(op_shape, op_strides, shape)
                                   for op_shape, op_strides in operands])
    if order == list(range(ndim - 1, -1, -1)):
        return contiguous_strides(shape)
    return _dense_in_order(shape, order, skip_small=False)


@lru_cache(maxsize=4096)
def kept_strides(shape, strides):
    """The strides of a new tensor laid out like one of (shape, strides), as PyTorch's
    preserve_format lays it out (empty_like, clone, .to): those strides when they are
    non-overlapping and dense or the tensor is empty (a permuted, e.g. channels-last,
    layout is kept exactly);
    otherwise dense strides in the same memory order: dims sorted from fastest to slowest by
    stride (stride 0 tells nothing, equal strides put the smaller dim first, a tie keeps
    row-major order), each dim's stride the product of the faster dims' sizes (of those
    larger than 1)."""
    if strides == contiguous_strides(shape) or 0 in shape or \
            is_non_overlapping_and_dense(shape, strides):   # (an empty tensor counts as dense)
        return strides
    return _dense_in_order(shape, _fastest_first(shape, [strides]), skip_small=True)


def _fastest_first(shape, operand_strides):
    """The dims from fastest to slowest by the operands' strides, as PyTorch sorts them: an
    insertion sort from row-major order (last dim fastest). Two dims are told apart by the
    first operand whose strides for them differ (a stride 0 tells nothing; equal strides
    put the smaller dim first); an undecided pair neither moves nor stops the sort."""
    def goes_after(d0, d1):      # 1: d0 is the slower dim, -1: the faster one, 0: no answer
        for s in operand_strides:
            if s[d0] == 0 or s[d1] == 0:
                continue
            if s[d0] != s[d1]:
                return 1 if s[d0] > s[d1] else -1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    order = list(range(len(shape) - 1, -1, -1))
    for i in range(1, len(order)):
        moving = i
        for j in range(i - 1, -1, -1):
            answer = goes_after(order[j], order[moving])
            if answer > 0:
                order[j], order[moving] = order[moving], order[j]
                moving = j
            elif answer < 0:
                break
    return order


def _dense_in_order(shape, order, skip_small):
    """Dense strides with the dims laid out fastest first in `order`: each dim's stride is the
    product of the faster dims' sizes (with `skip_small`, of those larger than 1, as
    preserve_format computes them; TensorIterator multiplies every size, 0 included)."""
    strides, step = [0] * len(shape), 1
    for d in order:
        strides[d] = step
        if shape[d] > 1 or not skip_small:
            step *= shape[d]
    return tuple(strides)


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
