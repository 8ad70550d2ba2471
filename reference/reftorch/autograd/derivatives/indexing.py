"""Derivative rows: indexing, slicing, joining, mutating."""
from __future__ import annotations

from ._table import derivative, not_differentiable, torch


# Formulas pair each op with its adjoint (gather <-> scatter_add, index_select <-> index_add,
# index <-> index_put accumulate, take <-> put accumulate), so double backward works.

def _zeros_for(ctx, i, grad):
    return torch.zeros(ctx.shape(i), dtype=grad.dtype, device=grad.device)


def _sum_all(t):
    return t.sum_to_size(())


@derivative("cat", "CatBackward0", saves=("dim",))
def _cat(ctx, grad):
    grads, start = [], 0
    for i in range(len(ctx.needs_input_grad)):
        shape = ctx.shape(i)
        if shape == (0,) and grad.ndim != 1:  # skipped by cat (legacy empty tensor)
            grads.append(torch.zeros(shape, dtype=grad.dtype, device=grad.device))
            continue
        grads.append(grad.narrow(ctx.dim, start, shape[ctx.dim]))
        start += shape[ctx.dim]
    return tuple(grads)


@derivative("stack", "StackBackward0", saves=("dim",))
def _stack(ctx, grad):
    return grad.unbind(ctx.dim)


@derivative("gather", "GatherBackward0", inputs=("self", "index"), saves=("index", "dim"))
def _gather(ctx, grad):
    if ctx.shape(0) == () and grad.ndim == 0:
        return grad, None
    grad_self = _zeros_for(ctx, 0, grad).scatter_add(ctx.dim, ctx.index, grad)
    return grad_self, None


def _grad_src(grad, ctx):
    """gather(grad) laid into src's shape: src elements beyond the index's shape get 0."""
    picked = grad.gather(ctx.dim, ctx.index)
    shape = ctx.shape(2)
    if tuple(picked.shape) == tuple(shape) or not shape:
        return picked
    padded = torch.zeros(shape, dtype=grad.dtype, device=grad.device)
    padded[tuple(slice(0, n) for n in picked.shape)] = picked
    return padded


@derivative("scatter", "ScatterBackward0", inputs=("self", "index", "src"),
            saves=("index", "dim"))
def _scatter(ctx, grad):
    needs = ctx.needs_input_grad
    return (grad.scatter(ctx.dim, ctx.index, 0) if needs[0] else None, None,
            _grad_src(grad, ctx) if needs[2] else None)


@derivative("scatter_value", "ScatterBackward1", inputs=("self", "index", "value"),
            saves=("index", "dim"))
def _scatter_value(ctx, grad):
    return grad.scatter(ctx.dim, ctx.index, 0), None, None


@derivative("scatter_add", "ScatterAddBackward0", inputs=("self", "index", "src"),
            saves=("index", "dim"))
def _scatter_add(ctx, grad):
    needs = ctx.needs_input_grad
    return grad, None, _grad_src(grad, ctx) if needs[2] else None


@derivative("scatter_reduce", "ScatterReduceBackward0", inputs=("self", "index", "src"),
            saves=("self", "index", "src", "result", "dim", "reduce", "include_self"))
def _scatter_reduce(ctx, grad):
    dim, index, reduce = ctx.dim, ctx.index, ctx.reduce
    self, src, result = ctx.self, ctx.src, ctx.result
    hit = torch.zeros(ctx.shape(0), dtype=torch.bool, device=grad.device).scatter(
        dim, index, True) if not ctx.include_self else None
    if reduce == "sum":
        grad_self, grad_src = grad, grad.gather(dim, index)
    elif reduce == "mean":
        ones = torch.ones(ctx.shape(0), dtype=grad.dtype, device=grad.device)
        count = ones.scatter_add(dim, index, torch.ones_like(src))
        if not ctx.include_self:
            count = count - ones.masked_fill(~hit, 0)
        count = count.masked_fill(count == 0, 1)
        grad_self = grad / count
        grad_src = grad_self.gather(dim, index)
    elif reduce == "prod":
        # Every factor's derivative is the product of the others: result / factor
        # (inputs with zeros are not handled specially here).
        grad_self = grad * result / self
        grad_src = (grad * result).gather(dim, index) / src
    else:  # amax / amin: the gradient is shared equally by every element that attains it
        self_hit = (self == result).to(grad.dtype)
        if not ctx.include_self:
            self_hit = self_hit.masked_fill(hit, 0)
        src_hit = (src == result.gather(dim, index)).to(grad.dtype)
        count = self_hit.scatter_add(dim, index, src_hit)
        share = grad / count.masked_fill(count == 0, 1)
        grad_self = share * self_hit
        grad_src = share.gather(dim, index) * src_hit
    if not ctx.include_self:
        grad_self = grad_self.masked_fill(hit, 0)
    return grad_self, None, grad_src


@derivative("index_select", "IndexSelectBackward0", inputs=("self", "index"),
            saves=("index", "dim"))
def _index_select(ctx, grad):
    if ctx.shape(0) == ():
        return grad.sum_to_size(()), None
    return _zeros_for(ctx, 0, grad).index_add(ctx.dim, ctx.index, grad), None


@derivative("index_add", "IndexAddBackward0", inputs=("self", "index", "source"),
            saves=("index", "dim", "alpha"))
def _index_add(ctx, grad):
    grad_source = None
    if ctx.needs_input_grad[2]:
        grad_source = _selected(grad, ctx.dim, ctx.index, ctx.shape(2))
        if ctx.alpha != 1:
            grad_source = grad_source * ctx.alpha
    return grad, None, grad_source


def _selected(grad, dim, index, source_shape):
    """grad's slices at `index` along dim, shaped like the op's source."""
    if grad.ndim == 0:
        return grad.reshape(source_shape)
    return grad.index_select(dim, index).reshape(source_shape)


@derivative("index_copy", "IndexCopyBackward0", inputs=("self", "index", "source"),
            saves=("index", "dim"))
def _index_copy(ctx, grad):
    needs = ctx.needs_input_grad
    grad_self = grad.index_fill(ctx.dim, ctx.index, 0) if needs[0] else None
    grad_source = _selected(grad, ctx.dim, ctx.index, ctx.shape(2)) if needs[2] else None
    return grad_self, None, grad_source


@derivative("index_fill", lambda inputs, params: "IndexFillBackward1"
            if hasattr(inputs[2], "_shape") else "IndexFillBackward0",
            inputs=("self", "index", "value"), saves=("index", "dim"))
def _index_fill(ctx, grad):
    needs = ctx.needs_input_grad
    grad_self = grad.index_fill(ctx.dim, ctx.index, 0) if needs[0] else None
    grad_value = None
    if len(needs) > 2 and needs[2]:
        # Repeated indices fill a slot once: sum the filled slots, each counted once.
        grad_value = _sum_all(grad - grad.index_fill(ctx.dim, ctx.index, 0))
    return grad_self, None, grad_value


@derivative("index", "IndexBackward0", saves=("indices",))
def _index(ctx, grad):
    return _zeros_for(ctx, 0, grad).index_put(ctx.indices, grad, accumulate=True)


@derivative("index_put", "IndexPutBackward0", inputs=("self", "values"),
            saves=("indices", "accumulate"))
def _index_put(ctx, grad):
    needs = ctx.needs_input_grad
    grad_self = None
    if needs[0]:
        grad_self = grad if ctx.accumulate else grad.index_put(
            ctx.indices, torch.zeros((), dtype=grad.dtype, device=grad.device))
    grad_values = None
    if needs[1]:
        from reftorch._ops.joining import index as index_op
        grad_values = index_op(grad, list(ctx.indices))
        if grad_values.numel() == _numel(ctx.shape(1)):  # values had extra leading 1s
            grad_values = grad_values.reshape(ctx.shape(1))
    return grad_self, grad_values


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


@derivative("masked_fill", lambda inputs, params: "MaskedFillBackward1"
            if hasattr(inputs[2], "_shape") else "MaskedFillBackward0",
            inputs=("self", "mask", "value"), saves=("mask",))
def _masked_fill(ctx, grad):
    needs = ctx.needs_input_grad
    grad_self = grad.masked_fill(ctx.mask, 0) if needs[0] else None
    grad_value = None
    if len(needs) > 2 and needs[2]:
        grad_value = _sum_all(grad.masked_select(ctx.mask))
    return grad_self, None, grad_value


@derivative("masked_select", "MaskedSelectBackward0", inputs=("self", "mask"),
            saves=("mask",))
def _masked_select(ctx, grad):
    shape = torch.broadcast_shapes(ctx.shape(0), ctx.mask.shape)
    zeros = torch.zeros(shape, dtype=grad.dtype, device=grad.device)
    return zeros.masked_scatter(ctx.mask, grad), None


@derivative("masked_scatter", "MaskedScatterBackward0", inputs=("self", "mask", "source"),
            saves=("mask",))
def _masked_scatter(ctx, grad):
    needs = ctx.needs_input_grad
    grad_self = grad.masked_fill(ctx.mask, 0) if needs[0] else None
    grad_source = None
    if needs[2]:
        picked = grad.masked_select(ctx.mask)
        numel = 1
        for s in ctx.shape(2):
            numel *= s
        rest = torch.zeros(numel - picked.numel(), dtype=grad.dtype, device=grad.device)
        grad_source = torch.cat([picked, rest]).reshape(ctx.shape(2))
    return grad_self, None, grad_source


@derivative("take", "TakeBackward0", inputs=("self", "index"), saves=("index",))
def _take(ctx, grad):
    return _zeros_for(ctx, 0, grad).put(ctx.index, grad, accumulate=True), None


@derivative("put", "PutBackward0", inputs=("self", "index", "source"),
            saves=("index", "accumulate"))
def _put(ctx, grad):
    needs = ctx.needs_input_grad
    grad_self = None
    if needs[0]:
        grad_self = grad if ctx.accumulate else grad.put(
            ctx.index, torch.zeros(ctx.shape(2), dtype=grad.dtype, device=grad.device))
    grad_source = grad.take(ctx.index).reshape(ctx.shape(2)) if needs[2] else None
    return grad_self, None, grad_source


@derivative("repeat", "RepeatBackward0", saves=("repeats",))
def _repeat(ctx, grad):
    repeats = ctx.repeats
    shape = (1,) * (len(repeats) - len(ctx.shape(0))) + tuple(ctx.shape(0))
    # Split each dim into (repeat, size), move the repeat axes first, and sum them away.
    split = [n for pair in zip(repeats, shape) for n in pair]
    order = list(range(0, 2 * len(shape), 2)) + list(range(1, 2 * len(shape), 2))
    summed = grad.reshape(split).permute(order).sum_to_size(shape)
    return summed.reshape(ctx.shape(0))


def _scatter_row(kind, node):
    @derivative(f"{kind}_scatter", node, inputs=("self", "src"),
                saves=("dim", "index", "start", "end", "step", "offset", "dim1", "dim2"))
    def _(ctx, grad):
        params = {k: getattr(ctx, k) for k in ("dim", "index", "start", "end", "step",
                                                 "offset", "dim1", "dim2")}
        from reftorch._ops.joining import _region
        needs = ctx.needs_input_grad
        grad_src = _region(grad, kind, params) if needs[1] else None
        grad_self = None
        if needs[0]:
            zeros = torch.zeros(ctx.shape(1), dtype=grad.dtype, device=grad.device)
            grad_self = getattr(torch, f"{kind}_scatter")(grad, zeros, **{
                k: v for k, v in params.items() if k in _SCATTER_PARAMS[kind]})
        return grad_self, grad_src


_SCATTER_PARAMS = {"select": ("dim", "index"), "slice": ("dim", "start", "end", "step"),
                   "diagonal": ("offset", "dim1", "dim2")}
for _kind, _node in (("select", "SelectScatterBackward0"), ("slice", "SliceScatterBackward0"),
                     ("diagonal", "DiagonalScatterBackward0")):
    _scatter_row(_kind, _node)

not_differentiable("nonzero", "scatter_reduce_two_")
