"""Sample inputs: the same values built as a reftorch tensor and as a torch tensor.

Values come from one seeded NumPy generator; a sample is a recipe (shape, view, dtype) so that
both libraries get identical inputs, including non-contiguous and broadcast layouts.
"""
from __future__ import annotations

import numpy as np

# Shape groups for binary ops: equal, broadcast both ways, 0-dim, empty.
BINARY_SHAPES = [((3, 4), (3, 4)), ((3, 4), (3, 1)), ((3, 1), (1, 4)), ((2, 3, 4), (4,)),
                 ((), (3,)), ((5,), ()), ((), ()), ((0,), (0,)), ((2, 0, 3), (1, 3))]
UNARY_SHAPES = [(3, 4), (), (0,), (2, 0, 3), (7,)]


def values(shape, dtype_name, rng, nonzero=False, small=False, domain=None):
    """A float64/complex128/int64/bool NumPy array of values suited to `dtype_name`.

    `domain=(low, high)` draws real values (and real parts) uniformly from that interval, for
    functions defined on part of the line only (acos, log, ...)."""
    if domain is not None and dtype_name != "bool":
        return _values_in(shape, dtype_name, rng, domain)
    if dtype_name == "bool":
        return rng.integers(0, 2, size=shape).astype(bool) | (
            np.ones(shape, bool) if nonzero else False)
    if dtype_name.startswith(("int", "uint")):
        low = 0 if dtype_name == "uint8" or small else -9
        high = 6 if small else 10
        v = rng.integers(low, high, size=shape)
        if nonzero:
            v = np.where(v == 0, 1, v)
        return v
    v = rng.standard_normal(size=shape) * 3
    if small:
        v = np.abs(v) % 4
    if dtype_name.startswith("complex"):
        v = v + 1j * rng.standard_normal(size=shape)
    return v


def _values_in(shape, dtype_name, rng, domain):
    low, high = domain
    if dtype_name.startswith(("int", "uint")):
        low = max(int(np.floor(low)), 0 if dtype_name == "uint8" else -9)
        high = min(int(np.ceil(high)), 9)
        return rng.integers(low, high + 1, size=shape)
    v = rng.uniform(low, high, size=shape)
    if dtype_name.startswith("complex"):
        v = v + 0.5j * rng.standard_normal(size=shape)
    return v


def layouts(shape):
    """Ways to present an array of `shape`: contiguous, and non-contiguous when possible."""
    out = ["contiguous"]
    if len(shape) >= 2 and all(shape):
        out.append("transposed")
    if len(shape) >= 1 and all(shape):
        out.append("strided")
    return out


def make_pair(array, dtype_name, layout, reftorch, torch):
    """The same values as (reftorch tensor, torch tensor) of dtype and layout."""
    if layout == "transposed":
        base = np.ascontiguousarray(np.swapaxes(array, -1, -2))
        r, t = _both(base, dtype_name, reftorch, torch)
        return r.transpose(-1, -2), t.transpose(-1, -2)
    if layout == "strided":
        base = np.repeat(array, 2, axis=-1)
        r, t = _both(base, dtype_name, reftorch, torch)
        return r[..., ::2], t[..., ::2]
    return _both(array, dtype_name, reftorch, torch)


def _both(array, dtype_name, reftorch, torch):
    if dtype_name == "bfloat16":
        # Neither from_numpy takes ml_dtypes' bfloat16: go through float32 in both.
        f32 = np.ascontiguousarray(array, dtype=np.float32)
        return (reftorch.tensor(f32).to(reftorch.bfloat16),
                torch.tensor(f32).to(torch.bfloat16))
    converted = np.array(array).astype(dtype_name)
    return (reftorch.tensor(converted, dtype=getattr(reftorch, dtype_name)),
            torch.tensor(converted, dtype=getattr(torch, dtype_name)))
