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

The rows live in one module per documented section (arithmetic, views, reductions, ...);
they all register into the single table in `_table.py`, which the autograd graph reads.
"""
from ._table import all_rows, derivative, not_differentiable, row_for
from . import (arithmetic, copies, views, pointwise, special, reductions, indexing,  # noqa: F401
               sorting, other, blas, linalg, spectral, sampling, nn_activation, nn_convolution,
               nn_embedding, nn_loss, nn_normalization, nn_pooling, nn_vision, sparse)

__all__ = ["all_rows", "derivative", "not_differentiable", "row_for"]
