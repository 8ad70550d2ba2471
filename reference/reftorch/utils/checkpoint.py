"""Activation checkpointing: trade compute for memory by recomputing forward in backward.

`checkpoint(fn, *args)` runs `fn` without recording history, keeps only its inputs, and when
backward reaches it runs `fn` again (with grad on, and the RNG state it saw the first time)
to get the gradients. It is a custom autograd Function, so it composes with everything else.
"""
from __future__ import annotations

import warnings

from ..autograd.function import Function
from ..autograd.grad_mode import enable_grad, no_grad

__all__ = ["checkpoint", "checkpoint_sequential"]


def _is_tensor(x):
    return hasattr(x, "_shape") and hasattr(x, "requires_grad")


def _get_rng_state():
    """The default CPU generator's state: the recomputation replays the same random draws."""
    from ..random import get_rng_state
    return get_rng_state()


def _set_rng_state(state):
    from ..random import set_rng_state
    if state is not None:
        set_rng_state(state)


class CheckpointFunction(Function):
    """forward: run `fn` with grad off; backward: rerun it with grad on and differentiate."""

    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        ctx.run_function = run_function
        ctx.preserve_rng_state = preserve_rng_state
        ctx.rng_state = _get_rng_state() if preserve_rng_state else None
        ctx.tensor_positions = [i for i, a in enumerate(args) if _is_tensor(a)]
        ctx.inputs = [None if _is_tensor(a) else a for a in args]
        ctx.save_for_backward(*(a for a in args if _is_tensor(a)))
        with no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx, *grad_outputs):
        import reftorch
        inputs = list(ctx.inputs)
        for position, saved in zip(ctx.tensor_positions, ctx.saved_tensors):
            inputs[position] = saved.detach().requires_grad_(saved.requires_grad)
        current = _get_rng_state() if ctx.preserve_rng_state else None
        _set_rng_state(ctx.rng_state)
        try:
            with enable_grad():
                outputs = ctx.run_function(*inputs)
        finally:
            _set_rng_state(current)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grad_outputs)
                 if _is_tensor(o) and o.requires_grad and g is not None]
        if not pairs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is "
                               "not necessary")
        targets = [x for x in inputs if _is_tensor(x) and x.requires_grad]
        grads = reftorch.autograd.grad([o for o, _ in pairs], targets, [g for _, g in pairs],
                                       allow_unused=True)
        by_input = iter(grads)
        result = [None, None]
        for x in inputs:
            result.append(next(by_input) if _is_tensor(x) and x.requires_grad else None)
        return tuple(result)


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default",
               debug=False, preserve_rng_state=True, **kwargs):
    """`function(*args, **kwargs)`, with its intermediate results recomputed in backward.

    Both `use_reentrant` settings give the same gradients here (reftorch has one engine);
    PyTorch 2.x warns when it is not passed explicitly, and so does reftorch.
    """
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint: the use_reentrant parameter should be passed "
                      "explicitly. In version 2.5 we will raise an exception if use_reentrant "
                      "is not passed. use_reentrant=False is recommended, but if you need to "
                      "preserve the current default behavior, you can pass use_reentrant=True. "
                      "Refer to docs for more details on the differences between the two "
                      "variants.", UserWarning, stacklevel=2)
        use_reentrant = True
    if use_reentrant and kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if kwargs:
        bound = function

        def function(*a):  # noqa: F811 - keyword arguments folded into the callable
            return bound(*a, **kwargs)
    return CheckpointFunction.apply(function, preserve_rng_state, *args)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Run `functions` (a list or nn.Sequential) in `segments` checkpointed chunks.

    The last chunk runs normally, as in PyTorch: its activations are needed right away.
    """
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint.checkpoint_sequential: the use_reentrant "
                      "parameter should be passed explicitly. use_reentrant=False is "
                      "recommended.", UserWarning, stacklevel=2)
        use_reentrant = True
    if hasattr(functions, "children") and not isinstance(functions, (list, tuple)):
        functions = list(functions.children())
    functions = list(functions)

    def run_range(start, end):
        def forward(x):
            for j in range(start, end + 1):
                x = functions[j](x)
            return x
        return forward

    segment_size = len(functions) // segments
    end = -1
    for start in range(0, segment_size * (segments - 1), segment_size):
        end = start + segment_size - 1
        input = checkpoint(run_range(start, end), input, use_reentrant=use_reentrant,
                           preserve_rng_state=kwargs.get("preserve_rng_state", True))
    return run_range(end + 1, len(functions) - 1)(input)
