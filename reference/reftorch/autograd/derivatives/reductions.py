"""Derivative rows: reductions."""
from __future__ import annotations

from ._table import _conj, derivative, not_differentiable, torch


def _red_restore(grad, shape, dims, keepdim):
    """A reduction's gradient (or result) with its reduced dims put back as size 1."""
    if not keepdim and len(shape) > 0:
        for d in (range(len(shape)) if dims is None else sorted(dims)):
            grad = grad.unsqueeze(d)
    return grad


def _red_expand(grad, shape, dims, keepdim):
    return _red_restore(grad, shape, dims, keepdim).expand(shape)


def _red_count(shape, dims):
    """How many input elements feed each output element."""
    import math
    if dims is None or len(shape) == 0:
        return math.prod(shape)
    return math.prod(shape[d] for d in dims)


def _red_dims_arg(dims):
    return None if dims is None else list(dims)


def _red_evenly(grad, x, result, dims, keepdim):
    """Gradient of a full max/min/median: split evenly among the elements equal to the result
    (NaN results: among the NaN elements), as PyTorch's evenly_distribute_backward does."""
    value = _red_restore(result, x.shape, dims, keepdim)
    mask = (x == value) | ((x != x) & (value != value))
    mask = mask.to(grad.dtype)
    count = torch.sum(mask, _red_dims_arg(dims), keepdim=True)
    return _red_restore(grad, x.shape, dims, keepdim) * mask / count


def _red_scatter_index(grad, indices, dim, shape):
    """grad_input[.., i, ..] = sum of grad[.., j, ..] over the j with indices[.., j, ..] == i.

    A one-hot comparison with an arange does the scatter with ordinary (differentiable) ops.
    """
    if len(shape) == 0:
        return grad
    positions = torch.arange(shape[dim]).unsqueeze(-1)                  # (n, 1)
    onehot = (indices.transpose(dim, -1).unsqueeze(-2) == positions)    # (..., n, m)
    spread = grad.transpose(dim, -1).unsqueeze(-2) * onehot.to(grad.dtype)
    return torch.sum(spread, -1).transpose(dim, -1)


def _red_select(grad, indices, shape, dim, keepdim):
    """Gradient of a reduction along `dim` that picked the element at `indices`."""
    if len(shape) == 0:
        return grad
    if not keepdim:
        grad, indices = grad.unsqueeze(dim), indices.unsqueeze(dim)
    return _red_scatter_index(grad, indices, dim, shape)


def _red_triangle(n, relation):
    """(n, n) bool matrix [k, j] of `relation(k, j)` over positions 0..n-1."""
    positions = torch.arange(n)
    return relation(positions.unsqueeze(1), positions.unsqueeze(0))


@derivative("sum", lambda inputs, params: "SumBackward0" if params.get("overload") == 0
            else "SumBackward1", saves=("dim", "keepdim"))
def _sum(ctx, grad):
    return _red_expand(grad, ctx.shape(0), ctx.dim, ctx.keepdim)


@derivative("nansum", "NansumBackward0", saves=("self", "dim", "keepdim"))
def _nansum(ctx, grad):
    x = ctx.self
    return _red_expand(grad, x.shape, ctx.dim, ctx.keepdim) * (x == x).to(grad.dtype)


@derivative("mean", lambda inputs, params: "MeanBackward0" if params.get("overload") == 0
            else "MeanBackward1", saves=("dim", "keepdim"))
def _mean(ctx, grad):
    shape = ctx.shape(0)
    count = max(_red_count(shape, ctx.dim), 1)  # an empty reduction has an empty gradient
    return _red_expand(grad, shape, ctx.dim, ctx.keepdim) / count


@derivative("prod", lambda inputs, params: "ProdBackward0" if params.get("dim") is None
            else "ProdBackward1", saves=("self", "dim", "keepdim"))
def _prod(ctx, grad):
    # d prod / d x_k is the product of the other elements. Dividing the result by x_k fails
    # at zeros, so: with no zero in the slice it is prod / x_k; with exactly one zero only
    # that element gets the product of the nonzeros; with two or more zeros all are zero.
    x, dims = ctx.self, ctx.dim
    zero = x == 0
    ones_for_zeros = x + zero.to(x.dtype)
    if dims is None:
        product_of_nonzeros = torch.prod(ones_for_zeros)
        zeros = torch.sum(zero)
    else:
        product_of_nonzeros = torch.prod(ones_for_zeros, dims[0], keepdim=True)
        zeros = torch.sum(zero, dims[0], keepdim=True)
    no_zero = (zeros == 0).to(x.dtype)
    one_zero = (zeros == 1).to(x.dtype)
    others = (no_zero * product_of_nonzeros / ones_for_zeros
              + one_zero * zero.to(x.dtype) * product_of_nonzeros)
    return _red_restore(grad, x.shape, dims, ctx.keepdim) * _conj(others)


def _var_backward(grad, x, dims, keepdim, correction):
    dof = _red_count(x.shape, dims) - correction
    scale = 2.0 / dof if dof > 0 else float("inf")
    centred = x - torch.mean(x, _red_dims_arg(dims), keepdim=True)
    return _red_restore(grad, x.shape, dims, keepdim) * centred * scale


def _std_to_var_grad(grad, std):
    """d std = d var / (2 std); PyTorch takes it as 0 where std == 0."""
    zero = (std == 0).to(std.dtype)
    return grad / (std * 2 + zero) * (1 - zero)


@derivative("var", "VarBackward0", saves=("self", "dim", "keepdim", "correction"))
def _var(ctx, grad):
    return _var_backward(grad, ctx.self, ctx.dim, ctx.keepdim, ctx.correction)


@derivative("std", "StdBackward0", saves=("self", "result", "dim", "keepdim", "correction"))
def _std(ctx, grad):
    return _var_backward(_std_to_var_grad(grad, ctx.result), ctx.self, ctx.dim, ctx.keepdim,
                         ctx.correction)


def _spread_mean(grad_mean, x, dims, keepdim):
    return _red_expand(grad_mean, x.shape, dims, keepdim) / max(_red_count(x.shape, dims), 1)


@derivative("var_mean", "VarMeanBackward0", outputs=("var", "mean"),
            saves=("self", "dim", "keepdim", "correction"))
def _var_mean(ctx, grad_var, grad_mean):
    x, total = ctx.self, None
    if grad_var is not None:
        total = _var_backward(grad_var, x, ctx.dim, ctx.keepdim, ctx.correction)
    if grad_mean is not None:
        part = _spread_mean(grad_mean, x, ctx.dim, ctx.keepdim)
        total = part if total is None else total + part
    return total


@derivative("std_mean", "StdMeanBackward0", outputs=("std", "mean"),
            saves=("self", "std", "dim", "keepdim", "correction"))
def _std_mean(ctx, grad_std, grad_mean):
    x, total = ctx.self, None
    if grad_std is not None:
        total = _var_backward(_std_to_var_grad(grad_std, ctx.std), x, ctx.dim, ctx.keepdim,
                              ctx.correction)
    if grad_mean is not None:
        part = _spread_mean(grad_mean, x, ctx.dim, ctx.keepdim)
        total = part if total is None else total + part
    return total


def _norm_backward(grad, x, result, p, dims, keepdim):
    """Gradient of the vector p-norm (PyTorch's conventions at zeros and for complex x)."""
    g = _red_restore(grad, x.shape, dims, keepdim)
    norm_ = _red_restore(result, x.shape, dims, keepdim)
    if p == 0:
        return g.expand(x.shape) * 0
    magnitude = torch.abs(x)
    sign = x / (magnitude + (x == 0).to(magnitude.dtype))       # sgn(x), 0 at 0
    if p == 1:
        return g * sign
    if p in (float("inf"), float("-inf")):
        mask = (magnitude == norm_).to(magnitude.dtype)
        count = torch.sum(mask, _red_dims_arg(dims), keepdim=True)
        return g * sign * mask / count
    zero_norm = (norm_ == 0).to(norm_.dtype)
    if p == 2:
        return g * x / (norm_ + zero_norm)
    return g * sign * magnitude ** (p - 1) / (norm_ ** (p - 1) + zero_norm)


@derivative("norm", "LinalgVectorNormBackward0", saves=("self", "result", "p", "dim",
                                                        "keepdim"))
def _norm(ctx, grad):
    return _norm_backward(grad, ctx.self, ctx.result, ctx.p, ctx.dim, ctx.keepdim)


@derivative("dist", "DistBackward0", inputs=("self", "other"),
            saves=("self", "other", "result", "p"))
def _dist(ctx, grad):
    difference = _norm_backward(grad, ctx.self - ctx.other, ctx.result, ctx.p, None, False)
    return difference, -difference


@derivative("logsumexp", "LogsumexpBackward0", saves=("self", "result", "dim", "keepdim"))
def _logsumexp(ctx, grad):
    x = ctx.self
    value = _red_restore(ctx.result, x.shape, ctx.dim, ctx.keepdim)
    return _red_restore(grad, x.shape, ctx.dim, ctx.keepdim) * _conj(torch.exp(x - value))


@derivative("cumsum", "CumsumBackward0", saves=("dim",))
def _cumsum(ctx, grad):
    if grad.ndim == 0:
        return grad
    # The reversed running sum: sum over j >= k of grad_j.
    return torch.sum(grad, ctx.dim, keepdim=True) - torch.cumsum(grad, ctx.dim) + grad


@derivative("cumprod", "CumprodBackward0", saves=("self", "dim"))
def _cumprod(ctx, grad):
    # d out_j / d x_k = prod_{i<k} x_i * prod_{k<i<=j} x_i for j >= k. Both products are
    # built from the inputs (not out / x_k), so zeros are handled and double backward works.
    x, d = ctx.self, ctx.dim
    if x.ndim == 0 or x.numel() == 0:
        return grad
    rows = x.transpose(d, -1).unsqueeze(-2)                       # (..., 1, n)
    n = x.shape[d]
    before = _red_triangle(n, lambda k, i: i < k).to(x.dtype)
    after = _red_triangle(n, lambda k, i: i > k).to(x.dtype)
    prefix = torch.prod(rows * before + (1 - before), -1)        # (..., n_k)
    partial = torch.cumprod(rows * after + (1 - after), -1)      # (..., n_k, n_j)
    reach = _red_triangle(n, lambda k, j: j >= k).to(x.dtype)
    weights = prefix.unsqueeze(-1) * partial * reach
    spread = grad.transpose(d, -1).unsqueeze(-2) * _conj(weights)
    return torch.sum(spread, -1).transpose(d, -1)


@derivative("logcumsumexp", "LogcumsumexpBackward0", saves=("self", "result", "dim"))
def _logcumsumexp(ctx, grad):
    # d out_j / d x_k = exp(x_k - out_j) for j >= k (masked pairs with j < k are dropped).
    x, d = ctx.self, ctx.dim
    if x.ndim == 0 or x.numel() == 0:
        return grad
    n = x.shape[d]
    xs, outs = x.transpose(d, -1), ctx.result.transpose(d, -1)
    reach = _red_triangle(n, lambda k, j: j >= k).to(x.dtype)
    weights = torch.exp((xs.unsqueeze(-1) - outs.unsqueeze(-2)) * reach) * reach
    spread = grad.transpose(d, -1).unsqueeze(-2) * weights
    return torch.sum(spread, -1).transpose(d, -1)


def _cumulative_extreme_row(op, node):
    @derivative(op, node, outputs=("values", "indices"), saves=("indices", "dim"),
                nondifferentiable_outputs=(1,))
    def _(ctx, grad, grad_indices=None):
        if grad is None:
            return None
        return _red_scatter_index(grad, ctx.indices, ctx.dim, ctx.shape(0))


_cumulative_extreme_row("cummax", "CummaxBackward0")
_cumulative_extreme_row("cummin", "CumminBackward0")


def _evenly_row(op, node):
    @derivative(op, node, saves=("self", "result", "dim", "keepdim"))
    def _(ctx, grad):
        return _red_evenly(grad, ctx.self, ctx.result, ctx.dim, ctx.keepdim)


for _op, _node in (("max", "MaxBackward1"), ("min", "MinBackward1"), ("amax", "AmaxBackward0"),
                   ("amin", "AminBackward0"), ("median", "MedianBackward0"),
                   ("nanmedian", "NanmedianBackward0")):
    _evenly_row(_op, _node)


def _selecting_row(op, node):
    @derivative(op, node, outputs=("values", "indices"), saves=("indices", "dim", "keepdim"),
                nondifferentiable_outputs=(1,))
    def _(ctx, grad, grad_indices=None):
        if grad is None:
            return None
        return _red_select(grad, ctx.indices, ctx.shape(0), ctx.dim, ctx.keepdim)


for _op, _node in (("max.dim", "MaxBackward0"), ("min.dim", "MinBackward0"),
                   ("median.dim", "MedianBackward1"), ("nanmedian.dim", "NanmedianBackward1"),
                   ("mode", "ModeBackward0")):
    _selecting_row(_op, _node)


@derivative("aminmax", "AminmaxBackward0", outputs=("min", "max"),
            saves=("self", "min", "max", "dim", "keepdim"))
def _aminmax(ctx, grad_min, grad_max):
    total = None
    for grad, value in ((grad_min, ctx.min), (grad_max, ctx.max)):
        if grad is not None:
            part = _red_evenly(grad, ctx.self, value, ctx.dim, ctx.keepdim)
            total = part if total is None else total + part
    return total


not_differentiable("argmax", "argmin", "all", "any", "count_nonzero", "unique",
                   "unique_consecutive")


def _quantile_row(op, ignore_nan):
    # PyTorch builds quantile from sort and gather (its node is the final squeeze); here the
    # op is one node whose gradient sends each output's gradient to the one or two order
    # statistics it interpolates, with the interpolation weights.
    @derivative(op, "QuantileBackward0" if not ignore_nan else "NanquantileBackward0",
                inputs=("self", "q"), saves=("self", "q", "dim", "keepdim", "interpolation"))
    def _(ctx, grad):
        from ..._ops import structured
        from ..._ops.reduction import QUANTILE_WEIGHTS
        x, q, dim, keepdim = ctx.self, ctx.q, ctx.dim, ctx.keepdim
        with torch.no_grad():
            weights = structured.run(QUANTILE_WEIGHTS, (x.detach(), q), {
                "dim": dim, "keepdim": keepdim, "interpolation": ctx.interpolation,
                "ignore_nan": ignore_nan})                 # (len(q), *x.shape)
        if not isinstance(q, tuple):
            grad = grad.unsqueeze(0)                       # one row per quantile
        dims = None if dim is None else (dim,)
        if not keepdim:
            for d in (range(x.ndim) if dims is None else dims):
                grad = grad.unsqueeze(d + 1)
        return torch.sum(grad * weights, 0), None


_quantile_row("quantile", False)
_quantile_row("nanquantile", True)
