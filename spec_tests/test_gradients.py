"""Gradients of every differentiable op in the op database, compared with real PyTorch.

For each sample in float64 the same cotangents (seeded random tensors, one per floating
output) are pulled back through reftorch and through torch with `autograd.grad`; the input
gradients must agree. Ops added to the database later are covered without touching this file.
"""
from __future__ import annotations

import zlib

import numpy as np
import pytest

import reftorch
from .opdb import differentiable_ops
from .opdb.core import build_sample, grad_leaves
from .oracle import compare_values

torch = pytest.importorskip("torch")

GRADIENT_OPS = differentiable_ops()
CASES = [(entry, dtype) for entry in GRADIENT_OPS for dtype in entry.grad_dtypes
         if dtype in entry.dtypes]


def _flat_outputs(result):
    if isinstance(result, (tuple, list)):
        return [x for r in result for x in _flat_outputs(r)]
    return [result] if hasattr(result, "requires_grad") else []


def pullback(module, entry, sample, cotangent_seed):
    """Input gradients of sum(output * cotangent) for one sample, or a string if it raised."""
    args, kwargs = build_sample(sample, module, requires_grad=True)
    inputs = grad_leaves(args, kwargs)
    try:
        outputs = [o for o in _flat_outputs(entry.call(module, *args, **kwargs))
                   if o.requires_grad]
    except Exception as exc:  # noqa: BLE001 - both libraries must agree on raising
        return f"raised {type(exc).__name__}"
    if not inputs or not outputs:
        return None
    rng = np.random.default_rng(cotangent_seed)
    cotangents = [module.from_numpy(rng.standard_normal(tuple(o.shape))).to(o.dtype)
                  for o in outputs]
    grads = module.autograd.grad(outputs, inputs, cotangents, allow_unused=True)
    return [module.zeros_like(x) if g is None else g for x, g in zip(inputs, grads)]


@pytest.mark.parametrize("entry,dtype_name", CASES, ids=[f"{e.name}-{d}" for e, d in CASES])
def test_gradients_match_torch(entry, dtype_name):
    rng = np.random.default_rng(zlib.crc32(f"grad {entry.name} {dtype_name}".encode()))
    failures = []
    checked = 0
    for i, sample in enumerate(entry.samples(dtype_name, rng)):
        expected = pullback(torch, entry, sample, i)
        got = pullback(reftorch, entry, sample, i)
        if isinstance(expected, str) or expected is None:
            continue  # torch cannot differentiate this sample: nothing to compare
        if isinstance(got, str) or got is None:
            failures.append(f"[{sample.label}] reftorch {got}; torch returned gradients")
            continue
        checked += 1
        for k, (g, e) in enumerate(zip(got, expected)):
            msg = compare_values(g.detach(), e.detach())
            if msg:
                failures.append(f"[{sample.label}] input {k}: {msg}")
    assert not failures, f"{len(failures)} failing samples:\n" + "\n".join(failures[:5])
    assert checked, "no sample produced gradients in torch"
