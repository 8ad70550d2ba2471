"""The table every section registers its rows in, and what the formulas share."""
from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass, field

from ..._dispatch import find_op

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

    def __post_init__(self):
        # Where each saved name comes from, found once here rather than on every recorded
        # call: (name, its position among the outputs or None, among the inputs or None).
        # Names are distinct (see `derivative`), so a position identifies the value.
        self.save_sources = tuple(
            (key, _position(self.outputs, key), _position(self.inputs, key))
            for key in self.saves)

    def node_name(self, inputs, params):
        return self.node if isinstance(self.node, str) else self.node(inputs, params)

    def values_to_save(self, inputs, results, params, replaced=None):
        """[(name, value)] for each name in `saves`: an output, an input (or its replacement),
        or a parameter (the op's declared default when the caller left it out). A caller may
        pass fewer inputs or results than the row names; a name beyond them is looked up as
        a parameter."""
        values = []
        for key, output, input in self.save_sources:
            if output is not None and output < len(results):
                value = results[output]
            elif replaced and key in replaced:
                value = replaced[key]
            elif input is not None and input < len(inputs):
                value = inputs[input]
            elif key in params:
                value = params[key]
            else:
                value = _default(self.op, key)
            values.append((key, value))
        return values

    def backward(self, ctx, *grads):
        result = self.backward_fn(ctx, *grads)
        return result if isinstance(result, tuple) else (result,)


def _position(names, key):
    return names.index(key) if key in names else None


def _default(op, key):
    """A parameter the caller left out has the op's declared default."""
    declared = find_op(op)
    return None if declared is None else declared.params.get(key)


def derivative(op, node, inputs=("self",), saves=(), outputs=("result",),
               nondifferentiable_outputs=()):
    """Register the derivative row of `op` (decorates the formula)."""
    def register(fn):
        if op in _ROWS:
            raise RuntimeError(f"derivative of '{op}' is registered twice")
        names = tuple(inputs) + tuple(outputs)
        if len(set(names)) != len(names):
            raise RuntimeError(f"derivative of '{op}' names an input or output twice: {names}")
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


def op_module(name):
    """reftorch._ops.<name>, for a formula. The op modules import this table while reftorch
    loads, so the table cannot import them; a formula runs once reftorch has loaded them.
    (A function-level `from ..._ops import x` costs 0.5-0.8 us a call: once per backward node.)"""
    module = sys.modules.get("reftorch._ops." + name)
    return module if module is not None else importlib.import_module("reftorch._ops." + name)


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


