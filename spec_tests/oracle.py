"""Comparing a reftorch result with a torch result: shape, then dtype, then values.

A case is run on both libraries; either both raise the same exception type, or both return
tensors that agree. `compare` returns None when they agree and a message when they do not.
"""
from __future__ import annotations

import numpy as np

from .opdb import TOLERANCES


def host(t):
    """A NumPy array of a reftorch or torch tensor's values (half types widened exactly)."""
    name = str(t.dtype).replace("torch.", "")
    if hasattr(t, "_host_array"):
        a = t._host_array()
        return a.astype(np.float32) if name == "bfloat16" else a
    t = t.detach().cpu().resolve_conj()
    return (t.float() if name == "bfloat16" else t).numpy()


def outcome(fn):
    try:
        return "ok", fn()
    except Exception as exc:  # noqa: BLE001 - the exception type is what we compare
        return "raise", exc


def compare(ref_fn, torch_fn, check_strides=False, tolerances=None):
    """Run both; None when they agree, else a description of the first difference
    (`tolerances`: {dtype name: (rtol, atol)} where an op needs its own)."""
    torch_kind, expected = outcome(torch_fn)
    ref_kind, got = outcome(ref_fn)
    if torch_kind == "raise":
        if ref_kind != "raise":
            return f"torch raised {type(expected).__name__}: {expected}; reftorch returned"
        if type(got) is not type(expected) and not isinstance(got, type(expected)):
            return (f"torch raised {type(expected).__name__}: {expected}; reftorch raised "
                    f"{type(got).__name__}: {got}")
        return None
    if ref_kind == "raise":
        return f"reftorch raised {type(got).__name__}: {got}; torch returned"
    return compare_values(got, expected, check_strides, tolerances)


def compare_values(got, expected, check_strides=False, tolerances=None):
    if isinstance(expected, (tuple, list)):
        return _compare_sequences(got, expected, check_strides, tolerances)
    if expected is None or not hasattr(expected, "dtype"):
        if isinstance(expected, float) and isinstance(got, float) and \
                np.isclose(got, expected, rtol=1e-6, atol=1e-9, equal_nan=True):
            return None
        return None if got == expected else f"value {got!r} != {expected!r}"
    if not hasattr(got, "dtype"):
        return f"reftorch returned {type(got).__name__}, torch a tensor"
    if tuple(got.shape) != tuple(expected.shape):
        return f"shape {tuple(got.shape)} != {tuple(expected.shape)}"
    if str(got.dtype) != str(expected.dtype):
        return f"dtype {got.dtype} != {expected.dtype}"
    # Strides of empty tensors depend on how the sample was built (torch.tensor of an empty
    # ndarray gives all-zero strides), so they are compared only for tensors with elements.
    if check_strides and expected.numel() and tuple(got.stride()) != tuple(expected.stride()):
        return f"strides {got.stride()} != {expected.stride()}"
    a, b = host(got), host(expected)
    name = str(expected.dtype).replace("torch.", "")
    tolerance = (tolerances or {}).get(name) or TOLERANCES.get(name)
    if tolerance is not None:
        rtol, atol = tolerance
        ok = np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
        # Infinities must agree in sign, not merely be "close".
        ok = ok and np.array_equal(np.isinf(a), np.isinf(b))
    else:
        ok = np.array_equal(a, b)
    if not ok:
        return f"values differ:\nreftorch {a.tolist()}\ntorch    {b.tolist()}"
    return None


def _compare_sequences(got, expected, check_strides, tolerances):
    """Tuples, lists and named tuples (torch.return_types): same kind, length and fields."""
    if type(expected).__module__ == "torch.return_types":
        if type(got).__name__ != type(expected).__name__:
            return f"return type {type(got).__name__} != torch.return_types." \
                   f"{type(expected).__name__}"
        for name in ("values", "indices"):
            if hasattr(expected, name) and not hasattr(got, name):
                return f"result has no field '{name}'"
    elif not isinstance(got, (tuple, list)):
        return f"reftorch returned {type(got).__name__}, torch a {type(expected).__name__}"
    if len(got) != len(expected):
        return f"{len(got)} results != {len(expected)}"
    for i, (g, e) in enumerate(zip(got, expected)):
        msg = compare_values(g, e, check_strides, tolerances)
        if msg:
            return f"result {i}: {msg}"
    return None
