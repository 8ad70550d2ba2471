"""Recording history: the nodes of the backward graph, their edges and saved tensors.

When grad mode is on and an op's input requires grad, `record` makes a node named like
PyTorch's (`AddBackward0`) whose `next_functions` point at the inputs' own nodes (or at an
`AccumulateGrad` for a leaf). The node keeps what its derivative row (autograd/derivatives/) asks
to save, each saved tensor with the version it had, so that a later in-place write is caught.
"""
from __future__ import annotations

import itertools
import traceback

from .grad_mode import is_grad_enabled
from . import anomaly_mode

_sequence = itertools.count()

SAVED_TWICE = ("Trying to backward through the graph a second time (or directly access saved "
               "tensors after they have already been freed). Saved intermediate values of the "
               "graph are freed when you call .backward() or autograd.grad(). Specify "
               "retain_graph=True if you need to backward through the graph a second time or if "
               "you need to access saved tensors after calling backward.")


class SavedTensor:
    """A tensor kept for backward, with the version it had when it was saved.

    An output of the node that saves it is kept as an alias without history (same memory
    and version counter) and gets the node back as its grad_fn when unpacked, as PyTorch's
    SavedVariable does: the output holds the node, so holding the output itself would make
    a cycle that keeps the graph's memory alive until the cyclic garbage collector runs.
    """
    __slots__ = ("tensor", "version", "name", "output_nr")

    def __init__(self, tensor, name, output_nr=None):
        self.tensor = tensor if output_nr is None else tensor.detach()
        self.version = tensor._version
        self.name = name
        self.output_nr = output_nr

    def unpack(self, node):
        t = self.tensor
        if t._version != self.version:
            raise RuntimeError(
                f"one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: [{t.type()} {list(t.shape)}], which is output "
                f"0 of {type(node).__name__}, is at version {t._version}; expected version "
                f"{self.version} instead. Hint: enable anomaly detection to find the operation "
                f"that failed to compute its gradient, with torch.autograd.set_detect_anomaly"
                f"(True).")
        if self.output_nr is not None:
            t = t.detach()
            t.grad_fn, t.requires_grad, t._output_nr = node, True, self.output_nr
        return t


class InputMeta:
    """What an input looked like, so the engine can shape and cast the gradient it gets."""
    __slots__ = ("shape", "dtype", "device")

    def __init__(self, t):
        self.shape, self.dtype, self.device = t._shape, t.dtype, t.device


class Node:
    """One recorded op. Subclasses are named like PyTorch's nodes (see `node_class`)."""

    def __init__(self, edges=(), metas=(), derivative=None):
        self.next_functions = tuple(edges)       # ((node or None, output index), ...)
        self._input_metas = tuple(metas)         # one per edge (None where the edge is None)
        self._derivative = derivative
        self._saved = {}                         # name -> SavedTensor
        self._values = {}                        # name -> non-tensor value (params, shapes)
        self._released = False
        self._pre_hooks = {}                     # output index -> [hook(grad) -> grad]
        self._hooks = []                         # hook(grad_inputs, grad_outputs)
        self._retained = {}                      # output index -> tensor whose .grad to set
        self._sequence_nr = next(_sequence)
        self.metadata = {}
        if anomaly_mode.is_anomaly_enabled():
            self.metadata["traceback_"] = "".join(traceback.format_stack()[:-3])

    def name(self):
        return type(self).__name__

    def __repr__(self):
        return f"<{type(self).__name__} object at {hex(id(self))}>"

    def register_hook(self, hook):
        """`hook(grad_inputs, grad_outputs)` runs after this node; may return new grad_inputs."""
        self._hooks.append(hook)
        return RemovableHandle(self._hooks, hook)

    def register_prehook(self, hook):
        """`hook(grad_outputs)` runs before this node; may return new grad_outputs."""
        self._pre_hooks.setdefault(None, []).append(hook)
        return RemovableHandle(self._pre_hooks[None], hook)

    def apply(self, *grads):
        """The gradients for this node's inputs, given the gradients of its outputs."""
        return self._derivative.backward(SavedContext(self), *grads)

    __call__ = apply

    def release(self):
        self._saved.clear()
        self._released = True

    # The tensors a node saved, as PyTorch shows them (`node._saved_self`).
    def __getattr__(self, attr):
        if attr.startswith("_saved_"):
            key = attr[len("_saved_"):]
            if key in self.__dict__.get("_saved", {}):
                return self._saved[key].unpack(self)
            if key in self.__dict__.get("_values", {}):
                return self._values[key]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{attr}'")


class AccumulateGrad(Node):
    """The node of a leaf: it adds the incoming gradient into `variable.grad`."""

    def __init__(self, variable):
        super().__init__()
        self.variable = variable

    def name(self):
        return "torch::autograd::AccumulateGrad"


class SavedContext:
    """What a derivative formula sees: saved tensors, the op's parameters, input shapes."""

    def __init__(self, node):
        # The saved values are unpacked here, as the node starts, so that the formula's reads
        # are plain attribute reads. A tensor modified in place since it was saved is left to
        # __getattr__: it raises PyTorch's error only if the formula reads it (batch norm
        # saves the running statistics it then updates, and reads them only in eval mode).
        # Without grad mode (a backward that makes no graph) a saved output needs no history:
        # its stored alias serves as it is.
        self._node = node
        fields = self.__dict__
        fields.update(node._values)
        plain = not is_grad_enabled()
        for name, saved in node._saved.items():
            if saved.tensor._version == saved.version:
                fields[name] = saved.tensor if plain and saved.output_nr is not None \
                    else saved.unpack(node)

    def __getattr__(self, name):   # a name not filled in above
        node = self._node
        saved = node._saved.get(name)
        if saved is not None:
            return saved.unpack(node)
        if node._released and name in node._derivative.saves:
            raise RuntimeError(SAVED_TWICE)
        raise AttributeError(f"{type(node).__name__} saved no '{name}'")

    def shape(self, index):
        """The shape of input `index` when the op ran."""
        return self._node._input_metas[index].shape

    def dtype(self, index):
        return self._node._input_metas[index].dtype

    def device(self, index):
        return self._node._input_metas[index].device

    @property
    def needs_input_grad(self):
        return tuple(edge is not None for edge, _ in self._node.next_functions)


class RemovableHandle:
    """Returned by `register_hook`; `remove()` unregisters the hook."""
    _ids = itertools.count()

    def __init__(self, container, hook, key=None):
        self._container, self._hook, self._key = container, hook, key
        self.id = next(self._ids)

    def remove(self):
        container = self._container
        if isinstance(container, dict):
            container.pop(self._key, None)
        elif self._hook in container:
            container.remove(self._hook)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


_NODE_CLASSES = {}


def node_class(name):
    """The Node subclass called `name` (one class per name, made on first use)."""
    cls = _NODE_CLASSES.get(name)
    if cls is None:
        cls = _NODE_CLASSES[name] = type(name, (Node,), {})
    return cls


def gradient_edge(t):
    """(node, output index) that gradients for `t` flow into, or None if `t` needs none."""
    if t is None or not getattr(t, "requires_grad", False):
        return None
    if t.grad_fn is not None:
        return t.grad_fn, getattr(t, "_output_nr", 0)
    acc = t._grad_accumulator()
    return acc, 0


_NO_EDGE = (None, 0)   # the edge of an input that needs no gradient


def differentiable_dtype(dtype):
    return dtype.is_floating_point or dtype.is_complex


def record(op_name, inputs, outputs, params, saved_inputs=None):
    """Attach a node for `op_name` to `outputs` (a tensor or tuple) if an input requires grad.

    `inputs` are the op's inputs in the order its derivative row names them (tensors, numbers
    or None); `saved_inputs` may give replacements for inputs an in-place op overwrote.
    Returns `outputs`.
    """
    # Most calls record nothing: find that out first, with a plain loop (no generator).
    for x in inputs:
        if getattr(x, "requires_grad", False):
            break
    else:
        return outputs
    if not is_grad_enabled():
        return outputs
    row = row_for(op_name)
    if row is None or not row.differentiable:
        return outputs
    results = outputs if isinstance(outputs, tuple) else (outputs,)
    edges, metas = [], []
    for x in inputs:
        if hasattr(x, "_shape"):
            edges.append((gradient_edge(x) if x.requires_grad else None) or _NO_EDGE)
            metas.append(InputMeta(x))
        else:
            edges.append(_NO_EDGE)
            metas.append(None)
    node = node_class(row.node_name(inputs, params))(edges, metas, row)
    for index, out in enumerate(results):
        if out is None or not hasattr(out, "_shape"):
            continue
        if index in row.nondifferentiable_outputs or not differentiable_dtype(out.dtype):
            continue
        out.grad_fn = node
        out.requires_grad = True
        out._output_nr = index
    if results[0] is inputs[0] and results[0]._base is not None:
        _rebase_history(results[0], node)
    # Saved after the outputs are attached: an output whose grad_fn is this node is saved
    # without its history (see SavedTensor).
    for key, value in row.values_to_save(inputs, results, params, saved_inputs):
        if hasattr(value, "_shape"):
            output_nr = value._output_nr if value.grad_fn is node else None
            node._saved[key] = SavedTensor(value, key, output_nr)
        else:
            node._values[key] = value
    return outputs


def _rebase_history(view, node):
    """An in-place op wrote through a view: the base's history now includes that write.

    The base gets a CopySlices node (its gradient passes through unchanged except in the
    view's region, which goes through `node`), and the view becomes a view of the new base.
    """
    base = view._base
    base_edge = gradient_edge(base)
    edges = [base_edge or (None, 0)] + list(node.next_functions[1:])
    metas = [InputMeta(base)] + list(node._input_metas[1:])
    copy_slices = CopySlices(edges, metas, None)
    copy_slices.fn = node
    copy_slices.base_geometry, copy_slices.view_geometry = geometry(base), geometry(view)
    base.grad_fn = copy_slices
    base.requires_grad = True
    base._output_nr = 0
    view_node = node_class("AsStridedBackward0")(
        [(copy_slices, 0)], [InputMeta(base)], row_for("as_strided"))
    view_node._values.update(self_geometry=geometry(base), view_geometry=geometry(view))
    view.grad_fn = view_node
    view._output_nr = 0


class CopySlices(Node):
    """The node of a base tensor after an in-place op wrote through one of its views."""

    def name(self):
        return "torch::autograd::CopySlices"

    def apply(self, grad):
        import reftorch
        shape, strides, offset = self.base_geometry
        view_shape, view_strides, view_offset = self.view_geometry
        result = reftorch.empty_strided(shape, strides, dtype=grad.dtype, device=grad.device)
        result.copy_(grad)
        region = result.as_strided(view_shape, view_strides, view_offset - offset)
        grads = self.fn.apply(region.clone())
        grads = tuple(grads) + (None,) * (len(self.fn.next_functions) - len(grads))
        if grads[0] is None:
            region.zero_()
        else:
            region.copy_(grads[0])
        return (result,) + tuple(grads[1:])

    def release(self):
        self.fn.release()
        self._released = True


def record_view(base, view, name, params, logical=None):
    """A view of a tensor that requires grad: its node maps the view's gradient to `base`.
    `logical` (stand-in base, its view) replaces the storage geometry of an expanded base."""
    if base.requires_grad and is_grad_enabled():
        geometry_base, geometry_view = logical or (base, view)
        params = dict(params, self_geometry=geometry(geometry_base),
                      view_geometry=geometry(geometry_view))
        record(name, (base,), view, params)
    return view


def geometry(t):
    """(shape, strides, storage offset): where a tensor's elements sit in its storage."""
    return t._shape, t._strides, t._offset


def prepare_inplace(op_name, operands):
    """Before an in-place op writes `operands[0]`: refuse leaves that require grad, and keep
    a copy of the old value when the op's derivative needs it (returned for `record`)."""
    target = operands[0]
    if not is_grad_enabled():
        return None
    check_inplace(target)
    if not any(getattr(x, "requires_grad", False) for x in operands):
        return None
    row = row_for(op_name)
    if row is not None and row.differentiable and "self" in row.saves:
        return {"self": target.clone()}
    return None


# The nodes of ops that return several views of their input (split, unbind): PyTorch refuses
# in-place writes to those views while they take part in autograd.
_MULTIPLE_VIEW_NODES = frozenset({"SplitBackward0", "SplitWithSizesBackward0", "UnbindBackward0"})


def check_inplace(t):
    """PyTorch forbids in-place writes to a leaf that requires grad (while grad mode is on)."""
    if not is_grad_enabled():
        return
    if t.requires_grad and t.grad_fn is None:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                           "operation.")
    base = t._base
    if base is not None and t.grad_fn is not None and \
            type(t.grad_fn).__name__ in _MULTIPLE_VIEW_NODES:
        name = type(t.grad_fn).__name__[:-len("Backward0")]
        raise RuntimeError(f"Output {t._output_nr} of {name} is a view and is being modified "
                           f"inplace. This view is the output of a function that returns "
                           f"multiple views. Such functions do not allow the output views to "
                           f"be modified inplace. You should replace the inplace operation by "
                           f"an out-of-place one.")
    if base is not None and base.requires_grad and base.grad_fn is None:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an "
                           "in-place operation.")


def set_requires_grad(t, flag):
    if not t.is_leaf and not flag:
        raise RuntimeError("you can only change requires_grad flags of leaf variables. If you "
                           "want to use a computed variable in a subgraph that doesn't require "
                           "differentiation use var_no_grad = var.detach().")
    if flag and not differentiable_dtype(t.dtype):
        raise RuntimeError("only Tensors of floating point dtype can require gradients")
    t.requires_grad = bool(flag)


# The derivative table imports nothing from this module at import time, so it can come last.
from .derivatives import row_for  # noqa: E402
