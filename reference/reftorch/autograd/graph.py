"""Recording history: which op made a tensor (`grad_fn`) and whether it requires grad.

Node class names match PyTorch's (`AddBackward0`), so they appear in reprs as in PyTorch.
The backward engine and the derivative table arrive with the autograd capability; until then
a node records its op and inputs (`next_functions`) and refuses to run backward.
"""
from __future__ import annotations

from .grad_mode import is_grad_enabled

# PyTorch's node names for the ops declared so far; an op without an entry gets
# "<CamelCaseName>Backward0".
_NODE_NAMES = {"div": "DivBackward0", "floor_divide": None, "remainder": "RemainderBackward0",
               "bitwise_and": None, "bitwise_or": None, "bitwise_xor": None,
               "bitwise_not": None, "bitwise_left_shift": None, "bitwise_right_shift": None,
               "eq": None, "ne": None, "lt": None, "le": None, "gt": None, "ge": None,
               "pow": "PowBackward0", "positive": None}


class Node:
    """One recorded op in the graph."""

    def __init__(self, inputs):
        self.next_functions = tuple((_edge(t), 0) for t in inputs)
        self.metadata = {}

    def name(self):
        return type(self).__name__

    def __repr__(self):
        return f"<{type(self).__name__} object at {hex(id(self))}>"

    def __call__(self, *grads):
        raise NotImplementedError(
            f"{type(self).__name__}: the backward engine is not part of reftorch yet")


class AccumulateGrad(Node):
    def __init__(self, variable):
        self.variable = variable
        self.next_functions = ()
        self.metadata = {}


_NODE_CLASSES = {}


def node_class(name):
    cls = _NODE_CLASSES.get(name)
    if cls is None:
        cls = _NODE_CLASSES[name] = type(name, (Node,), {})
    return cls


def _camel(name):
    return "".join(part.capitalize() for part in name.split("_"))


def _edge(t):
    if t is None or not getattr(t, "requires_grad", False):
        return None
    if t.grad_fn is not None:
        return t.grad_fn
    return AccumulateGrad(t)


def _differentiable(dtype):
    return dtype.is_floating_point or dtype.is_complex


def record_op(op, operands, result, params, inplace):
    """Attach `grad_fn` to `result` when grad mode is on and an input requires grad."""
    if not is_grad_enabled():
        return result
    tensors = [x for x in operands if getattr(x, "requires_grad", False)]
    if not tensors:
        return result
    if inplace and operands[0].is_leaf and operands[0].requires_grad:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                           "operation.")
    name = _NODE_NAMES.get(op.name, _camel(op.name) + "Backward0")
    if name is None or not _differentiable(result.dtype):
        return result
    inputs = [x if hasattr(x, "requires_grad") else None for x in operands]
    result.grad_fn = node_class(name)(inputs)
    result.requires_grad = True
    return result


def record_view(base, view):
    """A view of a tensor that requires grad requires grad too."""
    if base.requires_grad and is_grad_enabled():
        view.requires_grad = True
        view.grad_fn = node_class("ViewBackward0")([base])
    return view


def set_requires_grad(t, flag):
    if not t.is_leaf and not flag:
        raise RuntimeError("you can only change requires_grad flags of leaf variables. If you "
                           "want to use a computed variable in a subgraph that doesn't require "
                           "differentiation use var_no_grad = var.detach().")
    if flag and not _differentiable(t.dtype):
        raise RuntimeError("only Tensors of floating point and complex dtype can require "
                           "gradients")
    t.requires_grad = bool(flag)
