"""The dispatcher: one registry of ops, kernels keyed by (op, device type, dtype).

A kernel is called as `kernel(out, inputs, dtypes, params)`:
  out     the tensor to write (for in-place and `out=` calls) or None to allocate one;
  inputs  a tuple of tensors, already on one device, Python scalars wrapped as 0-dim tensors;
  dtypes  (common, computation, result) as decided by `_promotion.promoted_dtypes`: inputs
          convert to `common`, compute in `computation` (float32 for half types), and the
          result has dtype `result`; kernels are keyed by `common`;
  params  a dict of the op's non-tensor arguments (alpha, rounding_mode, ...).
It returns the result tensor, or NotImplemented to decline (the next kernel then runs).
A plugin may register a kernel with `min_numel`: it declines results with fewer elements,
and elementwise calls (which know the result's size) skip it without calling it, since a
declined Python call is a noticeable share of a small op's cost.

Lookup order for (op, device type, dtype): plugin kernels, newest registration first, then
the reference kernel on cpu, or on any other device the copy-to-cpu fallback, which is
counted so that `reftorch.plugins.fallbacks()` can report it.
"""
from __future__ import annotations

import contextlib
from collections import Counter
from dataclasses import dataclass, field

from ._shape import storage_span

_OPS = {}
_reference_only = False  # process-wide, like the plugin set itself
_size_thresholds = True  # False inside plugins.all_sizes() (conformance runs)
_fallback_counts = Counter()
_hooks = []


@dataclass(eq=False)
class Op:
    """One op's declaration: everything the rest of reftorch needs to know about it."""
    name: str
    family: str                          # "pointwise", "creation", ...
    reference: object                    # the reference kernel (cpu)
    promotion: object = None             # a _promotion.Promotion, for pointwise ops
    params: dict = field(default_factory=dict)  # keyword parameters and their defaults
    dtypes: frozenset = None             # dtypes the op accepts (None: all)
    # (device type, dtype) -> [(plugin, fn, min_numel)]
    kernels: dict = field(default_factory=dict)
    doc: str = ""
    layout: object = None                # a structured op's result layout (structured.declare)
    _chains: dict = field(default_factory=dict, repr=False)

    def chain(self, device_type, dtype):
        """The (kernel, min_numel) pairs to try, in order, for this device type and dtype
        (cached)."""
        found = self._chains.get((device_type, dtype))
        if found is None:
            found = self._chains[(device_type, dtype)] = self._build_chain(device_type, dtype)
        return found

    def _build_chain(self, device_type, dtype):
        chain = []
        if not _reference_only:
            chain += [(fn, size_threshold(min_numel)) for _plugin, fn, min_numel
                      in reversed(self.kernels.get((device_type, dtype), []))]
        chain.append((self.reference if device_type == "cpu" else _make_fallback(self), 0))
        return tuple(chain)

    def serving(self, device_type, dtype):
        """Name of the kernel that would serve first: a plugin name, 'reference' or 'fallback'."""
        entries = self.kernels.get((device_type, dtype), [])
        if entries and not _reference_only:
            return entries[-1][0]
        return "reference" if device_type == "cpu" else "fallback"


def declare(op):
    """Add an op to the registry; every op is declared exactly once."""
    if op.name in _OPS:
        raise RuntimeError(f"op '{op.name}' is declared twice")
    _OPS[op.name] = op
    return op


def get_op(name):
    try:
        return _OPS[name]
    except KeyError:
        raise KeyError(f"no op named '{name}' is declared") from None


def find_op(name):
    """The op declared as `name`, or None."""
    return _OPS.get(name)


def all_ops():
    return dict(_OPS)


def register_kernel(op_name, device_type, dtypes, fn, plugin, min_numel=0):
    """Register a plugin kernel for `op_name` on `device_type` for each dtype in `dtypes`;
    elementwise calls with results of fewer than `min_numel` elements skip it."""
    op = get_op(op_name)
    for dtype in dtypes:
        if op.dtypes is not None and dtype not in op.dtypes:
            raise ValueError(f"{plugin}: op '{op_name}' does not support dtype {dtype}")
        op.kernels.setdefault((device_type, dtype), []).append((plugin, fn, min_numel))
    op._chains.clear()


def unregister_plugin(plugin):
    """Remove every kernel a plugin registered (used by tests and by failed loads)."""
    for op in _OPS.values():
        for key, entries in list(op.kernels.items()):
            kept = [e for e in entries if e[0] != plugin]
            if kept:
                op.kernels[key] = kept
            else:
                del op.kernels[key]
        op._chains.clear()


def call(op, out, inputs, dtypes, params, device_type, numel=None):
    """Run the first kernel that accepts the call (`numel`: the result's size, if known)."""
    chain = op._chains.get((device_type, dtypes[0])) or op.chain(device_type, dtypes[0])
    for kernel, min_numel in chain:
        if numel is not None and numel < min_numel:
            continue
        result = kernel(out, inputs, dtypes, params)
        if result is not NotImplemented:
            if _hooks:
                for hook in _hooks:
                    hook(op, inputs, params, result)
            return result
    raise RuntimeError(f"no kernel accepted {op.name} on {device_type} for {dtypes[0]}")


def call_in_place(op, target, inputs, dtypes, params, device_type):
    """Let a kernel write `op`'s result into `target` (inputs[0], for `Tensor.op_`) itself,
    rather than making a new tensor that is then copied in: only kernels marked
    `writes_in_place` are asked, with out=target, and each may decline. Returns the
    kernel's result (target), or NotImplemented when none took the call."""
    chain = op._chains.get((device_type, dtypes[0])) or op.chain(device_type, dtypes[0])
    for kernel, _min_numel in chain:
        if not getattr(kernel, "writes_in_place", False):
            continue
        result = kernel(target, inputs, dtypes, params)
        if result is not NotImplemented:
            if _hooks:
                for hook in _hooks:
                    hook(op, inputs, params, result)
            return result
    return NotImplemented


# --- oracle mode ----------------------------------------------------------------------------

def reference_only():
    return _reference_only


def _set_reference_only(flag):
    global _reference_only
    _reference_only = flag
    for op in _OPS.values():
        op._chains.clear()


@contextlib.contextmanager
def use_reference_kernels():
    """Run every op on the reference kernels (plugins ignored) inside the block: the oracle
    mode. It applies to the whole process, as the set of loaded plugins does."""
    previous = _reference_only
    _set_reference_only(True)
    try:
        yield
    finally:
        _set_reference_only(previous)


# --- size thresholds ------------------------------------------------------------------------

def size_threshold(n):
    """What a plugin compares a call's size with before declining it as too small for its
    kernel to pay off: `n`, or 0 inside `all_sizes()`."""
    return n if _size_thresholds else 0


@contextlib.contextmanager
def all_sizes():
    """Plugins serve every call they can, however small, inside the block. A size threshold
    is a speed choice (below it the Python side of a kernel call costs more than the
    reference's NumPy), so a conformance run turns them off: its samples are small, and a
    kernel that declined them all would be compared with nothing. Process-wide."""
    global _size_thresholds
    previous = _size_thresholds
    _size_thresholds = False
    for op in _OPS.values():
        op._chains.clear()
    try:
        yield
    finally:
        _size_thresholds = previous
        for op in _OPS.values():
            op._chains.clear()


# --- hooks: one subscription point for tracers and profilers ---------------------------------

def add_hook(fn):
    """Call `fn(op, inputs, params, result)` after every dispatched op; returns a remover."""
    _hooks.append(fn)
    return lambda: _hooks.remove(fn)


# --- the copy-to-cpu fallback for plugin devices --------------------------------------------

def _make_fallback(op):
    def fallback(out, inputs, dtypes, params):
        device = next((t.device for t in inputs if hasattr(t, "_storage")), None) or out.device
        _fallback_counts[(op.name, device.type, dtypes[0])] += 1
        cpu_inputs = tuple(_host_copy(t) if hasattr(t, "_storage") else t for t in inputs)
        cpu_out = None if out is None else out.cpu()
        result = op.reference(cpu_out, cpu_inputs, dtypes, params)
        if out is None:
            return _to_device(result, device)
        out.copy_(cpu_out)
        return out
    fallback.__name__ = f"{op.name}_fallback"
    return fallback


def _host_copy(t):
    """t on the cpu, with t's own strides (its storage span is read as it lies), so that the
    reference decides a result's layout from the operands' true layouts; a Python number's
    0-dim tensor stays marked as one (the reference does not round a wrapped number to the
    common dtype first, nor count it for the layout where the op takes it as a parameter)."""
    from ._storage import CPUStorage
    from ._tensor import Tensor
    if t.numel() == 0:
        host = t.cpu()
    else:
        span = storage_span(t._shape, t._strides)
        host = Tensor._make(CPUStorage(t._storage.read(t._offset, span), t.dtype), 0,
                            t._shape, t._strides)
    if getattr(t, "_wrapped_number", False):
        host._wrapped_number = True
    return host


def _to_device(result, device):
    if isinstance(result, tuple):
        return type(result)(_to_device(r, device) for r in result)
    return result if result is None else result.to(device)


def fallback_counts():
    return dict(_fallback_counts)


def reset_fallback_counts():
    _fallback_counts.clear()
