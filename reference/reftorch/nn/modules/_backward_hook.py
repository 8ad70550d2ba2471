"""Full backward hooks: call `hook(module, grad_input, grad_output)` with the gradients of a
module's own inputs and outputs, however many ops its forward ran.

The module's tensor inputs and outputs each pass through one identity autograd Function.
Backward reaches the outputs' identity first (grad_output is known: backward pre-hooks run
and may replace it), then, after the whole forward's graph, the inputs' identity, which sees
every grad_input at once and runs the hooks (which may replace grad_input).
"""
from __future__ import annotations

from ..._tensor import Tensor
from ...autograd.function import Function


class _Identity(Function):
    """Returns its tensor arguments unchanged; its backward hands the gradients to
    `on_backward`, which may replace them."""

    @staticmethod
    def forward(ctx, on_backward, *tensors):
        ctx.on_backward = on_backward
        return tuple(t.view_as(t) for t in tensors)

    @staticmethod
    def backward(ctx, *grads):
        return (None,) + tuple(ctx.on_backward(grads))


def _tensor_positions(values):
    return [i for i, v in enumerate(values) if isinstance(v, Tensor) and v.requires_grad]


def _replace(values, positions, new):
    values = list(values)
    for i, value in zip(positions, new):
        values[i] = value
    return values


class BackwardHook:
    def __init__(self, module, hooks, pre_hooks):
        self.module = module
        self.hooks = hooks
        self.pre_hooks = pre_hooks
        self.n_inputs = 0
        self.input_positions = None
        self.grad_outputs = None

    def _packed(self, positions, grads, size):
        """A tuple of `size` gradients, None where the value was not a grad-requiring tensor."""
        packed = [None] * size
        for i, g in zip(positions, grads):
            packed[i] = g
        return tuple(packed)

    # --- inputs ------------------------------------------------------------------------
    def setup_input_hook(self, args):
        self.n_inputs = len(args)
        positions = _tensor_positions(args)
        if not positions:
            return args
        self.input_positions = positions
        passed = _Identity.apply(self._on_grad_inputs, *(args[i] for i in positions))
        return tuple(_replace(args, positions, passed))

    def _on_grad_inputs(self, grads):
        grad_inputs = self._packed(self.input_positions, grads, self.n_inputs)
        for hook in self.hooks:
            result = hook(self.module, grad_inputs, self.grad_outputs)
            if result is None:
                continue
            if len(result) != len(grad_inputs):
                raise RuntimeError(f"Backward hook returned an invalid number of grad_input, "
                                   f"got {len(result)}, but expected {len(grad_inputs)}")
            grad_inputs = tuple(result)
        return [grad_inputs[i] for i in self.input_positions]

    # --- outputs -----------------------------------------------------------------------
    def setup_output_hook(self, result):
        single = isinstance(result, Tensor)
        outputs = (result,) if single else result
        if not isinstance(outputs, tuple):
            return result
        positions = _tensor_positions(outputs)
        if not positions:
            return result
        self.n_outputs = len(outputs)
        self.output_positions = positions
        passed = _Identity.apply(self._on_grad_outputs, *(outputs[i] for i in positions))
        outputs = tuple(_replace(outputs, positions, passed))
        return outputs[0] if single else outputs

    def _on_grad_outputs(self, grads):
        grad_outputs = self._packed(self.output_positions, grads, self.n_outputs)
        for hook in self.pre_hooks:
            result = hook(self.module, grad_outputs)
            if result is None:
                continue
            if len(result) != len(grad_outputs):
                raise RuntimeError(f"Backward pre hook returned an invalid number of "
                                   f"grad_output, got {len(result)}, but expected "
                                   f"{len(grad_outputs)}")
            grad_outputs = tuple(result)
        self.grad_outputs = grad_outputs
        if self.input_positions is None:
            # No input needs a gradient, so the hooks run now with grad_input all None.
            for hook in self.hooks:
                hook(self.module, (None,) * self.n_inputs, grad_outputs)
        return [grad_outputs[i] for i in self.output_positions]
