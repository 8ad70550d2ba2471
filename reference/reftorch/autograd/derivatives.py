"""The derivative table: one row per differentiable op, every formula written with reftorch ops.

Because formulas are ordinary reftorch code, running them with grad mode on records a graph
of their own (double backward), and plugin kernels speed them up like any forward code.

A row is written as

    @derivative("mul", "MulBackward0", inputs=("self", "other"), saves=("self", "other"))
    def _(ctx, grad):
        return grad * ctx.other.conj(), grad * ctx.self.conj()

`inputs` names the op's inputs in the order the op records them; `saves` lists the inputs,
outputs (`result`, or the names in `outputs`) and parameters the formula reads through `ctx`;
`ctx.shape(i)` and `ctx.dtype(i)` give input i's shape and dtype without saving the tensor.
A formula receives one gradient per output (None for outputs nobody used) and returns one
gradient per input (None where there is none). The engine then sums each gradient to its
input's shape (broadcasting) and converts it to the input's dtype, as PyTorch's engine does.
Complex gradients follow PyTorch's convention (the conjugate Wirtinger derivative).
"""
from __future__ import annotations

from dataclasses import dataclass, field

_ROWS = {}


@dataclass(eq=False)
class Row:
    op: str
    node: object                       # the node name, or fn(inputs, params) -> name
    backward_fn: object
    inputs: tuple = ("self",)
    saves: tuple = ()
    outputs: tuple = ("result",)
    nondifferentiable_outputs: frozenset = field(default_factory=frozenset)
    differentiable: bool = True

    def node_name(self, inputs, params):
        return self.node if isinstance(self.node, str) else self.node(inputs, params)

    def save(self, node, inputs, results, params, replaced=None):
        from .graph import SavedTensor
        names = dict(zip(self.inputs, inputs))
        if replaced:
            names.update(replaced)
        names.update(zip(self.outputs, results))
        for key in self.saves:
            if key in names:
                value = names[key]
                if hasattr(value, "_shape"):
                    node._saved[key] = SavedTensor(value, key)
                else:
                    node._values[key] = value
            elif key in params:
                node._values[key] = params[key]
            else:
                node._values[key] = _default(self.op, key)

    def backward(self, ctx, *grads):
        result = self.backward_fn(ctx, *grads)
        return result if isinstance(result, tuple) else (result,)


def _default(op, key):
    """A parameter the caller left out has the op's declared default."""
    from .._dispatch import all_ops
    declared = all_ops().get(op)
    return None if declared is None else declared.params.get(key)


def derivative(op, node, inputs=("self",), saves=(), outputs=("result",),
               nondifferentiable_outputs=()):
    """Register the derivative row of `op` (decorates the formula)."""
    def register(fn):
        if op in _ROWS:
            raise RuntimeError(f"derivative of '{op}' is registered twice")
        _ROWS[op] = Row(op, node, fn, tuple(inputs), tuple(saves), tuple(outputs),
                        frozenset(nondifferentiable_outputs))
        return fn
    return register


def not_differentiable(*ops):
    """Ops whose outputs never require grad (comparisons, indices, bit operations)."""
    for op in ops:
        _ROWS[op] = Row(op, None, None, differentiable=False)


def row_for(op):
    return _ROWS.get(op)


def all_rows():
    return dict(_ROWS)


# The formulas use the public API; importing it lazily keeps this table importable first.
class _Torch:
    def __getattr__(self, name):
        import reftorch
        return getattr(reftorch, name)


torch = _Torch()


def _conj(t):
    return t.conj() if t.is_complex() else t


def _real_if(grad, dtype):
    """A gradient for a real input of an op with a complex result keeps only the real part."""
    return grad.real if grad.is_complex() and not dtype.is_complex else grad


# --- arithmetic ------------------------------------------------------------------------------

@derivative("add", "AddBackward0", inputs=("self", "other"), saves=("alpha",))
def _add(ctx, grad):
    return grad, _maybe_scale(grad, ctx.alpha)


@derivative("sub", "SubBackward0", inputs=("self", "other"), saves=("alpha",))
def _sub(ctx, grad):
    return grad, -_maybe_scale(grad, ctx.alpha)


def _maybe_scale(grad, alpha):
    return grad if alpha == 1 else grad * _conj_scalar(alpha)


def _conj_scalar(x):
    return x.conjugate() if isinstance(x, complex) else x


@derivative("mul", "MulBackward0", inputs=("self", "other"), saves=("self", "other"))
def _mul(ctx, grad):
    needs = ctx.needs_input_grad
    return (grad * _conj_value(ctx.other) if needs[0] else None,
            grad * _conj_value(ctx.self) if needs[1] else None)


def _conj_value(x):
    return _conj(x) if hasattr(x, "_shape") else _conj_scalar(x)


@derivative("div", lambda inputs, params: "DivBackward0" if params.get("rounding_mode") is None
            else "DivBackward1", inputs=("self", "other"),
            saves=("self", "other", "rounding_mode"))
def _div(ctx, grad):
    if ctx.rounding_mode is not None:  # piecewise constant: zero almost everywhere
        return grad * 0, grad * 0 if hasattr(ctx.other, "_shape") else None
    needs = ctx.needs_input_grad
    other = _conj_value(ctx.other)
    grad_self = grad / other if needs[0] else None
    grad_other = -grad * _conj_value(ctx.self) / (other * other) if needs[1] else None
    return grad_self, grad_other


@derivative("pow", lambda inputs, params: "PowBackward1" if hasattr(inputs[1], "_shape") and
            hasattr(inputs[0], "_shape") else "PowBackward0" if hasattr(inputs[0], "_shape")
            else "PowBackward2",
            inputs=("self", "exponent"), saves=("self", "exponent", "result"))
def _pow(ctx, grad):
    base, exponent = ctx.self, ctx.exponent
    needs = ctx.needs_input_grad
    grad_base = grad_exponent = None
    if needs[0]:
        if not hasattr(exponent, "_shape") and exponent == 0:
            grad_base = grad * 0
        else:
            grad_base = grad * _conj_value(exponent * base ** (exponent - 1))
    if needs[1]:
        # d/dy x**y = x**y log x, taken as 0 where x == 0 and y >= 0 (PyTorch's convention).
        result = ctx.result
        log_base = torch.log(base) if hasattr(base, "_shape") else _log_scalar(base)
        value = result * log_base
        if hasattr(base, "_shape"):
            value = torch.where((base == 0) & (exponent >= 0), value * 0, value)
        grad_exponent = grad * _conj(value)
    return grad_base, grad_exponent


def _log_scalar(x):
    import cmath
    import math
    return cmath.log(x) if isinstance(x, complex) or x < 0 else (
        math.log(x) if x > 0 else float("-inf"))


@derivative("neg", "NegBackward0")
def _neg(ctx, grad):
    return -grad


@derivative("positive", "AliasBackward0")
def _positive(ctx, grad):
    return grad


@derivative("abs", "AbsBackward0", saves=("self",))
def _abs(ctx, grad):
    return grad * torch.sgn(ctx.self)


@derivative("remainder", lambda inputs, params: "RemainderBackward0" if not hasattr(
    inputs[1], "_shape") else "RemainderBackward1", inputs=("self", "other"),
    saves=("self", "other"))
def _remainder(ctx, grad):
    needs = ctx.needs_input_grad
    grad_other = None
    if needs[1]:
        grad_other = -grad * torch.floor_divide(ctx.self, ctx.other)
    return grad, grad_other


not_differentiable("eq", "ne", "lt", "le", "gt", "ge", "floor_divide", "bitwise_and",
                   "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift",
                   "bitwise_right_shift")


# --- copies and conversions ------------------------------------------------------------------

@derivative("clone", "CloneBackward0")
def _clone(ctx, grad):
    return grad


@derivative("_to_copy", "ToCopyBackward0")
def _to_copy(ctx, grad):
    return _real_if(grad, ctx.dtype(0)).to(device=ctx.device(0), dtype=ctx.dtype(0))


@derivative("copy_", "CopyBackwards", inputs=("self", "src"))
def _copy(ctx, grad):
    grad_src = _real_if(grad, ctx.dtype(1)).to(device=ctx.device(1), dtype=ctx.dtype(1)) \
        if ctx.needs_input_grad[1] else None
    return grad * 0 if ctx.needs_input_grad[0] else None, grad_src


@derivative("sum_to_size", "SumToSizeBackward0")
def _sum_to_size(ctx, grad):
    return grad.expand(ctx.shape(0))


# --- views -----------------------------------------------------------------------------------
# A view's gradient is its base's gradient seen through the inverse geometry.

@derivative("view", "ViewBackward0", saves=("self_shape",))
def _view(ctx, grad):
    return grad.reshape(ctx.self_shape)


@derivative("reshape_alias", "ReshapeAliasBackward0", saves=("self_shape",))
def _reshape_alias(ctx, grad):
    return grad.reshape(ctx.self_shape)


@derivative("unsafe_view", "UnsafeViewBackward0", saves=("self_shape",))
def _unsafe_view(ctx, grad):
    return grad.reshape(ctx.self_shape)


@derivative("squeeze", lambda inputs, params: "SqueezeBackward0" if params.get("dim") is None
            else "SqueezeBackward1" if isinstance(params["dim"], int) else "SqueezeBackward2",
            saves=("self_shape",))
def _squeeze(ctx, grad):
    return grad.reshape(ctx.self_shape)


@derivative("unsqueeze", "UnsqueezeBackward0", saves=("dim",))
def _unsqueeze(ctx, grad):
    return grad.squeeze(ctx.dim)


@derivative("transpose", "TransposeBackward0", saves=("dim0", "dim1"))
def _transpose(ctx, grad):
    return grad.transpose(ctx.dim0, ctx.dim1)


@derivative("t", "TBackward0")
def _t(ctx, grad):
    return grad.t()


@derivative("permute", "PermuteBackward0", saves=("dims",))
def _permute(ctx, grad):
    inverse = [0] * len(ctx.dims)
    for i, d in enumerate(ctx.dims):
        inverse[d] = i
    return grad.permute(inverse)


@derivative("expand", "ExpandBackward0", saves=("self_shape",))
def _expand(ctx, grad):
    return grad.sum_to_size(ctx.self_shape)


@derivative("alias", "AliasBackward0")
def _alias(ctx, grad):
    return grad


# Views that pick elements (select, slicing, narrow, diagonal, unfold, as_strided) share one
# formula: scatter the view's gradient into the storage slots the view reads, then read the
# input's slots back. It is exact for overlapping views too (an unfolded window counts twice).
def _geometric_view(op, node):
    @derivative(op, node, saves=("self_geometry", "view_geometry"))
    def _(ctx, grad):
        return torch._view_scatter(grad, ctx.self_geometry, ctx.view_geometry)


for _op, _node in (("select", "SelectBackward0"), ("slice", "SliceBackward0"),
                   ("narrow", "NarrowBackward0"), ("diagonal", "DiagonalBackward0"),
                   ("unfold", "UnfoldBackward0"), ("as_strided", "AsStridedBackward0")):
    _geometric_view(_op, _node)


@derivative("_view_scatter", "ViewScatterBackward0", saves=("self_geometry", "view_geometry"))
def _view_scatter(ctx, grad):
    return torch._view_gather(grad, ctx.self_geometry, ctx.view_geometry)


@derivative("_view_gather", "ViewGatherBackward0", saves=("self_geometry", "view_geometry"))
def _view_gather(ctx, grad):
    return torch._view_scatter(grad, ctx.self_geometry, ctx.view_geometry)


# --- pointwise math -------------------------------------------------------------------------


# --- reductions -----------------------------------------------------------------------------


# --- indexing, slicing, joining, mutating ---------------------------------------------------


# --- sorting, selection and comparison ------------------------------------------------------


# --- other operations -----------------------------------------------------------------------
