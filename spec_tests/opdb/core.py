"""Op-database entries for ops that are not plain elementwise (`OpInfo`), and their samples.

An entry names the op, says how to call it on a module (`reftorch` or `torch`), and yields
samples: positional and keyword arguments in which every tensor is a `TensorArg` recipe, so
that both libraries receive identical values, dtypes and layouts. Runners (test_oracle_ops,
test_gradients) read these entries; adding an op to the spec tests means adding its entry.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from . import DTYPE_NAMES
from .samples import make_pair, values


@dataclass
class TensorArg:
    """A tensor argument: values (from `values()`), a dtype name and a layout."""
    array: np.ndarray
    dtype: str
    layout: str = "contiguous"     # "contiguous", "transposed" or "strided" (see samples.py)
    requires_grad: bool = True     # in gradient runs, when the dtype is floating or complex


@dataclass
class DTypeArg:
    """A dtype argument (`dtype=torch.float64`), resolved per library."""
    name: str


@dataclass
class Sample:
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    label: str = ""


@dataclass
class OpInfo:
    name: str                           # op name: registry / derivative row / public name
    call: Callable                      # call(module, *args, **kwargs) -> result
    samples: Callable                   # samples(dtype_name, rng) -> iterable of Sample
    dtypes: tuple = DTYPE_NAMES
    differentiable: bool = True         # gradients checked vs torch and by gradcheck
    grad_dtypes: tuple = ("float64",)   # dtypes the gradient runners use
    check_strides: bool = False         # compare strides too (views)
    gradcheck: bool = True              # also run finite-difference gradcheck
    inplace_call: Callable | None = None  # call(self, *args, **kwargs) for the Tensor.op_ form
    tolerances: dict | None = None      # {dtype name: (rtol, atol)} overriding TOLERANCES


def function(name):
    """call(module, *args, **kwargs) -> module.name(*args, **kwargs): the torch.X spelling."""
    return lambda module, *args, **kwargs: getattr(module, name)(*args, **kwargs)


def method(name):
    """call(module, self, *args, **kwargs) -> self.name(*args, **kwargs): the Tensor.X one."""
    return lambda module, self, *args, **kwargs: getattr(self, name)(*args, **kwargs)


def inplace(name):
    """inplace_call(self, *args, **kwargs) -> self.name_(*args, **kwargs)."""
    return lambda self, *args, **kwargs: getattr(self, name + "_")(*args, **kwargs)


def tensor(shape, dtype, rng, layout="contiguous", requires_grad=True, **value_kw):
    """A TensorArg of `shape` with values suited to `dtype` (see samples.values)."""
    return TensorArg(np.asarray(values(shape, dtype, rng, **value_kw)), dtype, layout,
                     requires_grad)


def build(arg, module, requires_grad=False):
    """Turn a sample argument into the module's object (tensors, dtypes, nested sequences)."""
    import reftorch
    if isinstance(arg, TensorArg):
        # Building reftorch's tensor alone needs no torch (the plugin conformance kit).
        other = reftorch if module is reftorch else _torch()
        r, t = make_pair(arg.array, arg.dtype, arg.layout, reftorch, other)
        x = r if module is reftorch else t
        if requires_grad and arg.requires_grad and arg.dtype in GRAD_DTYPES:
            x = x.detach().requires_grad_(True)
        return x
    if isinstance(arg, DTypeArg):
        return getattr(module, arg.name)
    if isinstance(arg, (list, tuple)) and any(isinstance(a, (TensorArg, DTypeArg, list, tuple))
                                              for a in arg):
        return type(arg)(build(a, module, requires_grad) for a in arg)
    return arg


def build_sample(sample, module, requires_grad=False):
    args = tuple(build(a, module, requires_grad) for a in sample.args)
    kwargs = {k: build(v, module, requires_grad) for k, v in sample.kwargs.items()}
    return args, kwargs


GRAD_DTYPES = ("float32", "float64", "complex64", "complex128")


def grad_leaves(args, kwargs):
    """The tensors among a built sample's arguments (nested too) that require grad."""
    found = []
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, (tuple, list)):
            found += grad_leaves(a, {})
        elif getattr(a, "requires_grad", False):
            found.append(a)
    return found


def _torch():
    import torch
    return torch
