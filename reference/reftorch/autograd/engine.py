"""The backward engine: runs the recorded graph from the outputs back to the leaves.

Nodes run once all the gradients flowing into them have arrived (dependency counting), later
nodes first (PyTorch's order for independent branches). Each gradient a node returns is
checked against what its input looked like in forward: summed down to the input's shape when
it was broadcast, converted to the input's dtype, or rejected with PyTorch's message.
"""
from __future__ import annotations

import heapq
import sys
import warnings

import numpy as np

from .._device import Size
from .._shape import is_expandable
from .._storage import CPUStorage
from .._tensor import Tensor
from .._ops import creation
from .._ops.copy import copy_, empty_like_layout
from . import anomaly_mode
from .grad_mode import _set_enabled, is_grad_enabled, no_grad
from .graph import AccumulateGrad, gradient_edge


def _as_tuple(x):
    if x is None:
        return ()
    if isinstance(x, (tuple, list)):
        return tuple(x)
    return (x,)


def _make_grads(outputs, grad_outputs):
    """The gradient to start from for each output; ones for a scalar output when omitted."""
    grads = []
    for i, out in enumerate(outputs):
        g = grad_outputs[i] if i < len(grad_outputs) else None
        if g is None:
            if out.requires_grad and out.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            if out.requires_grad and not (out.dtype.is_floating_point):
                raise RuntimeError(f"grad can be implicitly created only for real scalar "
                                   f"outputs but got {out.dtype}")
            g = _ones_like(out) if type(out) is Tensor else creation.ones_like(out)
            grads.append(g)
            continue
        if isinstance(g, Tensor):
            if g._shape != out._shape:
                raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of "
                                   f"{Size(g._shape)} and output[{i}] has a shape of "
                                   f"{Size(out._shape)}.")
            if g.is_complex() != out.is_complex():
                raise RuntimeError(f"For complex Tensors, both grad_output and output are "
                                   f"required to have the same dtype. Mismatch in dtype: "
                                   f"grad_output[{i}] has a dtype of {g.dtype} and output[{i}]"
                                   f" has a dtype of {out.dtype}.")
        else:
            g = creation.full(out._shape, g, dtype=out.dtype)
        grads.append(g)
    return grads


def _ones_like(out):
    """ones_like(out) for a dense tensor: on cpu a fresh NumPy array wrapped as it is (the
    root gradient of every backward() of a loss; ones_like's layout, device and sparse
    handling cost a few us more), on another device through ones_like."""
    if type(out._storage) is not CPUStorage:
        return creation.ones_like(out)
    dtype = out._storage.dtype
    ones = np.empty(out._shape, dtype.numpy_dtype)
    ones.fill(1)  # (np.ones is Python code around these two calls: 0.4 us more)
    return Tensor._from_array(ones, dtype)


def _root_edges(outputs):
    edges = []
    for i, out in enumerate(outputs):
        edge = gradient_edge(out)
        if edge is None:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not "
                               f"have a grad_fn")
        edges.append(edge)
    return edges


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
             grad_variables=None, inputs=None):
    """Accumulate d(tensors)/d(leaf) into every leaf's `.grad` (or only those in `inputs`)."""
    tensors = _as_tuple(tensors)
    grad_tensors = _as_tuple(grad_tensors if grad_tensors is not None else grad_variables)
    if retain_graph is None:
        retain_graph = create_graph
    input_edges = None
    if inputs is not None:
        inputs = _as_tuple(inputs)
        if not inputs:
            raise RuntimeError("'inputs' argument to backward() cannot be empty.")
        input_edges = [_input_edge(t, i) for i, t in enumerate(inputs)]
    grads = _make_grads(tensors, grad_tensors)
    _run(_root_edges(tensors), grads, retain_graph, create_graph, input_edges,
         accumulate=True)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """The gradients of `outputs` with respect to `inputs`, without touching any `.grad`."""
    import reftorch
    outputs = _as_tuple(outputs)
    inputs_tuple = _as_tuple(inputs)
    if not only_inputs:
        warnings.warn("only_inputs argument is deprecated and is ignored now (defaults to "
                      "True). To accumulate gradient for other parts of the graph, please use "
                      "torch.autograd.backward.", FutureWarning, stacklevel=2)
    if allow_unused is None:
        allow_unused = materialize_grads
    if retain_graph is None:
        retain_graph = create_graph
    input_edges = [_input_edge(t, i) for i, t in enumerate(inputs_tuple)]
    grads = _make_grads(outputs, _as_tuple(grad_outputs))
    captured = _run(_root_edges(outputs), grads, retain_graph, create_graph, input_edges,
                    accumulate=False)
    results = []
    for index, (t, g) in enumerate(zip(inputs_tuple, captured)):
        if g is None:
            if not allow_unused:
                raise RuntimeError(f"The differentiated Tensor at index {index} appears to not "
                                   f"have been used in the graph. Set allow_unused=True if this "
                                   f"is the desired behavior.")
            if materialize_grads:
                g = reftorch.zeros_like(t)
        results.append(g)
    return tuple(results)


def _input_edge(t, i):
    import reftorch
    if not isinstance(t, reftorch.Tensor):
        raise TypeError(f"grad(): inputs must be Tensors, got {type(t).__name__}")
    if not t.requires_grad:
        raise RuntimeError("One of the differentiated Tensors does not require grad")
    return gradient_edge(t)


# --- the run ---------------------------------------------------------------------------------

def _dependencies(roots):
    """How many edges point at each node reachable from `roots`."""
    counts = {}
    seen = set()
    stack = []
    for node, _ in roots:        # several outputs of one node are one root
        if node not in seen:
            seen.add(node)
            stack.append(node)
    while stack:
        node = stack.pop()
        for child, _ in node.next_functions:
            if child is None:
                continue
            counts[child] = counts.get(child, 0) + 1
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return counts


def _needed(roots, input_edges):
    """The nodes on a path to one of `input_edges` (all nodes when there are none)."""
    if input_edges is None:
        return None
    targets = {node for node, _ in input_edges}
    memo = {}

    def reaches(node):
        # Iterative post-order: graphs of thousands of nodes must not hit the recursion limit.
        stack = [(node, False)]
        while stack:
            current, expanded = stack.pop()
            if current in memo:
                continue
            children = [c for c, _ in current.next_functions if c is not None]
            if expanded:
                memo[current] = current in targets or any(memo.get(c, False) for c in children)
                continue
            stack.append((current, True))
            stack.extend((c, False) for c in children if c not in memo)
        return memo[node]

    for node, _ in roots:
        reaches(node)
    return {node for node, ok in memo.items() if ok}


def _run(roots, grads, retain_graph, create_graph, input_edges, accumulate):
    dependencies = _dependencies(roots)
    needed = _needed(roots, input_edges)
    capture = {}  # (node, output index) -> position in the captured list
    if input_edges is not None:
        for position, edge in enumerate(input_edges):
            capture.setdefault(edge, []).append(position)
    captured = [None] * (len(input_edges) if input_edges is not None else 0)

    buffers = {}
    ready = []
    for (node, index), g in zip(roots, grads):
        _add_to_buffer(buffers, node, index, g)
    queued = set()
    for node, _ in roots:
        if dependencies.get(node, 0) == 0 and node not in queued:
            queued.add(node)
            heapq.heappush(ready, (-node._sequence_nr, id(node), node))

    previous_mode = is_grad_enabled()
    _set_enabled(create_graph)
    try:
        while ready:
            _, _, node = heapq.heappop(ready)
            grads_in = buffers.pop(node, {})
            grads_in = _run_pre_hooks(node, grads_in)
            if capture:  # autograd.grad / backward(inputs=...): keep the inputs' gradients
                for index, g in grads_in.items():
                    for p in capture.get((node, index), ()):
                        captured[p] = g
            if isinstance(node, AccumulateGrad):
                if accumulate and (input_edges is None or (node, 0) in capture):
                    g = grads_in.pop(0, None)  # the engine's last reference: see _accumulate
                    _accumulate(node.variable, g, create_graph)
                continue
            if needed is not None and node not in needed:
                continue
            outputs = _call_node(node, grads_in)
            if not retain_graph:
                node.release()
            for (child, index), g in zip(node.next_functions, outputs):
                if child is None:
                    continue
                if g is not None:
                    _add_to_buffer(buffers, child, index, g)
                dependencies[child] -= 1
                if dependencies[child] == 0 and child not in queued:
                    queued.add(child)
                    heapq.heappush(ready, (-child._sequence_nr, id(child), child))
            outputs = g = None  # hold no gradient the buffers hold (see _accumulate)
    finally:
        _set_enabled(previous_mode)
    return captured


def _add_to_buffer(buffers, node, index, g):
    slots = buffers.setdefault(node, {})
    previous = slots.get(index)
    slots[index] = g if previous is None else previous + g


def _run_pre_hooks(node, grads_in):
    """Tensor hooks (by output index) may replace a gradient; retained grads are stored."""
    if not node._pre_hooks and not node._retained:
        return grads_in  # most nodes: nothing to run
    for index, hooks in list(node._pre_hooks.items()):
        if index is None:
            continue
        g = grads_in.get(index)
        if g is None:
            continue
        for hook in list(hooks):
            replaced = hook(g)
            if replaced is not None:
                g = replaced
        grads_in[index] = g
    for hook in list(node._pre_hooks.get(None, ())):
        ordered = tuple(grads_in.get(i) for i in range(max(grads_in, default=-1) + 1))
        replaced = hook(ordered)
        if replaced is not None:
            grads_in = {i: g for i, g in enumerate(replaced) if g is not None}
    for index, ref in node._retained.items():
        g, tensor = grads_in.get(index), ref()
        if g is not None and tensor is not None:
            _accumulate(tensor, g, is_grad_enabled())
    return grads_in


def _call_node(node, grads_in):
    if node._derivative is not None:
        declared = len(node._derivative.outputs)
    elif hasattr(node, "_output_count"):
        declared = node._output_count()
    else:
        declared = 1
    count = max(declared, max(grads_in) + 1) if grads_in else declared
    grad_outputs = tuple(map(grads_in.get, range(count)))  # None where none arrived
    try:
        grad_inputs = node.apply(*grad_outputs)
    except Exception as exc:
        if anomaly_mode.is_anomaly_enabled():
            anomaly_mode.report_forward_trace(node)
        raise exc
    grad_inputs = _validate(node, tuple(grad_inputs))
    if node._hooks:
        for hook in list(node._hooks):
            replaced = hook(grad_inputs, grad_outputs)
            if replaced is not None:
                grad_inputs = tuple(replaced)
    return grad_inputs


def _validate(node, grads):
    """Shape each gradient like its input (PyTorch's validate_outputs)."""
    edges = node.next_functions
    if len(grads) != len(edges):
        raise RuntimeError(f"function {node.name()} returned an incorrect number of gradients "
                           f"(expected {len(edges)}, got {len(grads)})")
    check_nan = anomaly_mode.is_anomaly_enabled() and anomaly_mode.is_anomaly_check_nan_enabled()
    checked = []
    for i, (g, (child, _), meta) in enumerate(zip(grads, edges, node._input_metas)):
        if child is None or g is None:
            checked.append(None)
            continue
        if type(g) is not Tensor and not hasattr(g, "_shape"):
            raise TypeError(f"function {node.name()} returned a gradient of type "
                            f"{type(g).__name__} at index {i}")
        if g._shape != meta.shape:
            if not is_expandable(meta.shape, g._shape):
                raise RuntimeError(f"Function {node.name()} returned an invalid gradient at "
                                   f"index {i} - got {list(g._shape)} but expected shape "
                                   f"compatible with {list(meta.shape)}")
            g = g.sum_to_size(meta.shape)
        if g.dtype is not meta.dtype:  # (the common gradient has its input's dtype)
            if g.dtype.is_complex and not meta.dtype.is_complex:
                g = g.real
            if g.dtype is not meta.dtype:
                g = g.to(meta.dtype)
        if check_nan and _has_nan(g):
            anomaly_mode.report_forward_trace(node)
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th "
                               f"output.")
        checked.append(g)
    return tuple(checked)


def _has_nan(g):
    return bool(np.isnan(g.detach()._host_array()).any())


# References to a gradient that only the engine holds, seen from _accumulate: the engine's
# local variable, _accumulate's argument and getrefcount's own.
_ENGINE_ONLY = 3


def _memory_is_engines(g):
    """Whether only g, and the base it may be a view of, reach g's memory, with the base
    reachable only through g (an intermediate of the backward pass nobody else kept)."""
    base = g._base
    if base is None:
        return sys.getrefcount(g._storage) <= 2            # g's reference, the argument
    return sys.getrefcount(base) <= 3 and sys.getrefcount(g._storage) <= 3


def _copy_in_layout_of(variable, g):
    """A copy of g with variable's strides (row-major if variable's memory is not one dense
    block): PyTorch's layout contract for .grad, so that optimizers walk a parameter and
    its gradient in the same order (a transposed gradient would make every update strided)."""
    result = empty_like_layout(variable, dtype=g.dtype, device=g.device)
    with no_grad():
        copy_(result, g)
    return result


def _accumulate(variable, g, create_graph):
    """variable.grad += g, as PyTorch's AccumulateGrad does.

    The first time, variable.grad becomes a tensor of its own: g itself when nothing else can
    see g or its memory (a fresh result of the backward pass, in the variable's layout: the
    common case, which saves a copy of every parameter's gradient), else a copy of g (a
    gradient the caller passed in, one that a hook or retain_grad kept, one that another
    input also received, a view), laid out like the variable."""
    if g is None:
        return
    if variable.grad is None:
        if create_graph:
            variable.grad = g.clone()
        elif sys.getrefcount(g) <= _ENGINE_ONLY and _memory_is_engines(g) and \
                g._strides == variable._strides and g.grad_fn is None and not g.is_sparse:
            g._base = None     # a view of a dead intermediate (mm's transposed product)
            variable.grad = g
        else:
            g = g.detach()
            variable.grad = g.clone() if g.is_sparse else _copy_in_layout_of(variable, g)
    elif create_graph or variable.grad.requires_grad:
        variable.grad = variable.grad + g
    else:
        with no_grad():
            variable.grad.add_(g)
