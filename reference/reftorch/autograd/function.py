"""Custom autograd functions: `class MyFn(Function)` with static `forward` and `backward`.

`MyFn.apply(*args)` runs `forward` with grad mode off, then, when an input requires grad,
records one node of class `MyFnBackward`. That node is also the `ctx` that `forward` saw, as
in PyTorch: attributes set on ctx in forward are there in backward, and `grad_fn` shows them.
Edges go to the tensor arguments only; `backward` returns one gradient per forward argument
(None for non-tensors), which the node maps back onto those edges.
"""
from __future__ import annotations

import functools

from .grad_mode import _set_enabled, is_grad_enabled, no_grad
from .graph import (SAVED_TWICE, InputMeta, Node, SavedTensor, check_inplace,
                    differentiable_dtype, gradient_edge)

__all__ = ["Function", "FunctionCtx", "BackwardCFunction", "once_differentiable",
           "InplaceFunction"]


def _is_tensor(x):
    return hasattr(x, "_shape") and hasattr(x, "requires_grad")


class FunctionCtx:
    """What `forward`/`setup_context` use to pass information to `backward`."""

    def save_for_backward(self, *tensors):
        for t in tensors:
            if t is not None and not _is_tensor(t):
                raise TypeError("save_for_backward can only save variables, but argument "
                                f"{tensors.index(t)} is of type {type(t).__name__}")
        self.to_save = tensors

    def save_for_forward(self, *tensors):
        self.saved_for_forward = tensors

    def mark_dirty(self, *tensors):
        """The inputs `forward` modified in place (their history is rewritten)."""
        self.dirty_tensors = tensors

    def mark_non_differentiable(self, *tensors):
        """Outputs that never require grad (indices, masks)."""
        self.non_differentiable = tensors

    def set_materialize_grads(self, value):
        """With True (the default), None gradients reach `backward` as zeros."""
        self.materialize_grads = bool(value)


class BackwardCFunction(Node, FunctionCtx):
    """The recorded node of a custom Function (and the ctx its methods receive)."""
    _forward_cls = None

    def __init__(self, edges=(), metas=()):
        Node.__init__(self, edges, metas)
        self.to_save = ()
        self.dirty_tensors = ()
        self.non_differentiable = ()
        self.materialize_grads = True
        self.needs_input_grad = ()
        self._saved_list = None           # SavedTensor (or None) per saved slot
        self._tensor_positions = ()       # forward argument index of each edge
        self._arg_count = 0
        self._output_metas = ()           # (shape, dtype, device) per output, None if not tensor

    @property
    def saved_tensors(self):
        if self._released:
            raise RuntimeError(SAVED_TWICE)
        if self._saved_list is None:      # still inside forward / setup_context
            return tuple(self.to_save)
        return tuple(None if s is None else s.unpack(self) for s in self._saved_list)

    saved_variables = saved_tensors

    def _output_count(self):
        return len(self._output_metas)

    def release(self):
        self._saved_list = None
        self.to_save = ()
        self._released = True

    def apply(self, *grads):
        cls = self._forward_cls
        grads = list(grads) + [None] * (len(self._output_metas) - len(grads))
        if self.materialize_grads:
            grads = [_zeros(meta) if g is None and meta is not None else g
                     for g, meta in zip(grads, self._output_metas)]
        result = _resolve_backward(cls)(self, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        return self._grads_for_edges(result)

    def _grads_for_edges(self, result):
        """Map backward's per-argument gradients onto the tensor arguments' edges."""
        expected = self._arg_count
        if len(result) != expected:
            # PyTorch tolerates extra trailing Nones.
            if len(result) > expected and all(g is None for g in result[expected:]):
                result = result[:expected]
            else:
                raise RuntimeError(f"function {self.name()} returned an incorrect number of "
                                   f"gradients (expected {expected}, got {len(result)})")
        tensor_positions = set(self._tensor_positions)
        for i, g in enumerate(result):
            if i not in tensor_positions and g is not None:
                raise RuntimeError(f"function {self.name()} returned a gradient different "
                                   f"than None at position {i + 1}, but the corresponding "
                                   f"forward input was not a Variable")
        return tuple(result[i] for i in self._tensor_positions)


def _zeros(meta):
    import reftorch
    shape, dtype, device = meta
    return reftorch.zeros(shape, dtype=dtype, device=device)


class FunctionMeta(type):
    """Gives every Function subclass its own node class, named `<ClassName>Backward`."""

    def __init__(cls, name, bases, attrs):
        backward_cls = type(name + "Backward", (BackwardCFunction,), {"_forward_cls": cls})
        backward_cls.__module__ = __name__
        cls._backward_cls = backward_cls
        super().__init__(name, bases, attrs)


class Function(FunctionCtx, metaclass=FunctionMeta):
    """Base class of custom differentiable operations (use `MyFn.apply(...)`). As in PyTorch it
    derives from the context class, so the ctx methods are documented on Function too."""

    def __init__(self, *args, **kwargs):
        import warnings
        warnings.warn(f"{type(self)} should not be instantiated. Methods on autograd functions "
                      f"are all static, so you should invoke them on the class itself. "
                      f"Instantiating an autograd function will raise an error in a future "
                      f"version of PyTorch.", DeprecationWarning, stacklevel=2)

    def __call__(self, *args, **kwargs):
        raise RuntimeError("Legacy autograd function with non-static forward method is "
                           "deprecated. Please use new-style autograd function with static "
                           "forward method. (Example: https://pytorch.org/docs/stable/"
                           "autograd.html#torch.autograd.Function)")

    @staticmethod
    def forward(*args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom "
                                  "autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for "
                                  "your custom autograd.Function to use it with backward "
                                  "mode AD.")

    @staticmethod
    def vjp(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for "
                                  "your custom autograd.Function to use it with backward "
                                  "mode AD.")

    @staticmethod
    def jvp(ctx, *grad_inputs):
        raise NotImplementedError("You must implement the jvp function for custom "
                                  "autograd.Function to use it with forward mode AD.")

    @classmethod
    def _uses_setup_context(cls):
        return cls.setup_context is not Function.setup_context

    @classmethod
    def apply(cls, *args, **kwargs):
        if kwargs:
            args = _bind_keywords(cls, args, kwargs)
        return _apply(cls, args)


def _bind_keywords(cls, args, kwargs):
    """Keyword arguments of `apply` become positional, by forward's signature (minus ctx)."""
    import inspect
    signature = inspect.signature(cls.forward)
    skip_ctx = not cls._uses_setup_context()
    bound = signature.bind(*((None,) if skip_ctx else ()), *args, **kwargs)
    bound.apply_defaults()
    values = list(bound.arguments.values())
    return tuple(values[1:] if skip_ctx else values)


# PyTorch keeps backward on the class as `vjp` too: whichever the user overrides is used.
def _resolve_backward(cls):
    if cls.backward is Function.backward and cls.vjp is not Function.vjp:
        return cls.vjp
    return cls.backward


def _apply(cls, args):
    tensor_positions = tuple(i for i, a in enumerate(args) if _is_tensor(a))
    recording = is_grad_enabled() and any(args[i].requires_grad for i in tensor_positions)
    edges, metas = [], []
    for i in tensor_positions:
        edge = gradient_edge(args[i]) if recording else None
        edges.append(edge if edge is not None else (None, 0))
        metas.append(InputMeta(args[i]))
    ctx = cls._backward_cls(edges, metas)
    ctx._tensor_positions = tensor_positions
    ctx._arg_count = len(args)
    ctx.needs_input_grad = tuple(_is_tensor(a) and a.requires_grad and recording
                                 for a in args)

    previous = is_grad_enabled()
    _set_enabled(False)
    try:
        if cls._uses_setup_context():
            output = cls.forward(*args)
            cls.setup_context(ctx, args, output)
        else:
            output = cls.forward(ctx, *args)
    finally:
        _set_enabled(previous)

    is_tuple = isinstance(output, tuple)
    outputs = output if is_tuple else (output,)
    outputs = _wrap_outputs(ctx, args, outputs, recording)
    if recording:
        ctx._saved_list = [None if t is None else
                           SavedTensor(t, "saved", t._output_nr if t.grad_fn is ctx else None)
                           for t in ctx.to_save]
        ctx.to_save = ()
    return outputs if is_tuple else outputs[0]


def _wrap_outputs(ctx, args, outputs, recording):
    """Attach the node to the outputs, honouring mark_dirty / mark_non_differentiable."""
    dirty = {id(t) for t in ctx.dirty_tensors}
    non_diff = {id(t) for t in ctx.non_differentiable}
    input_ids = {id(a) for a in args if _is_tensor(a)}
    wrapped, metas = [], []
    for index, out in enumerate(outputs):
        if not _is_tensor(out):
            wrapped.append(out)
            metas.append(None)
            continue
        if id(out) in dirty:
            if recording:
                check_inplace(out)
        elif id(out) in input_ids:
            # An input returned unchanged comes back as a new view of it, as in PyTorch.
            with no_grad():
                out = out._view(out._shape, out._strides)
        metas.append((out._shape, out.dtype, out.device))
        if recording and id(out) not in non_diff and differentiable_dtype(out.dtype):
            out.grad_fn = ctx
            out.requires_grad = True
            out._output_nr = index
        elif id(out) in dirty and recording:
            out.grad_fn = None
        wrapped.append(out)
    ctx._output_metas = tuple(metas)
    return tuple(wrapped)


class InplaceFunction(Function):
    """Kept for compatibility: a Function with an `inplace` flag."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace


class DelayedError(Node):
    """Stands in the graph where a once_differentiable backward was differentiated."""

    def __init__(self, message, edges, metas):
        super().__init__(edges, metas)
        self.message = message

    def name(self):
        return "DelayedError"

    def apply(self, *grads):
        raise RuntimeError(self.message)


def once_differentiable(fn):
    """Run `backward` with grad mode off; differentiating its result then raises."""

    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with no_grad():
            outputs = fn(ctx, *args)
        if not is_grad_enabled():
            return outputs
        needing = [a for a in args if _is_tensor(a) and a.requires_grad]
        if not needing:
            return outputs
        edges = [gradient_edge(a) for a in needing]
        node = DelayedError("trying to differentiate twice a function that was marked with "
                             "@once_differentiable", edges, [InputMeta(a) for a in needing])
        is_tuple = isinstance(outputs, tuple)
        results = outputs if is_tuple else (outputs,)
        marked = []
        for out in results:
            if _is_tensor(out) and differentiable_dtype(out.dtype):
                out = out.detach()
                out.grad_fn = node
                out.requires_grad = True
                out._output_nr = 0
            marked.append(out)
        return tuple(marked) if is_tuple else marked[0]
    return wrapper
