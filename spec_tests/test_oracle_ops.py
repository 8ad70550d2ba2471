"""Reference vs real PyTorch for every structured op in the op database (opdb.core.OpInfo).

One test per (op, dtype): every sample is run on both libraries; results (tensors, tuples,
named tuples, numbers) must agree in shape, dtype and values, or both must raise the same
exception type. A failure lists the first disagreeing samples.
"""
from __future__ import annotations

import zlib

import numpy as np
import pytest

import reftorch
from .opdb import structured_ops
from .opdb.core import build_sample
from .oracle import compare

torch = pytest.importorskip("torch")

CASES = [(entry, dtype) for entry in structured_ops() for dtype in entry.dtypes]


def sample_failures(entry, dtype_name, limit=None):
    rng = np.random.default_rng(zlib.crc32(f"{entry.name} {dtype_name}".encode()))
    failures = []
    for i, sample in enumerate(entry.samples(dtype_name, rng)):
        if limit is not None and i >= limit:
            break
        r_args, r_kwargs = build_sample(sample, reftorch)
        t_args, t_kwargs = build_sample(sample, torch)
        msg = compare(lambda: entry.call(reftorch, *r_args, **r_kwargs),
                      lambda: entry.call(torch, *t_args, **t_kwargs), entry.check_strides,
                      entry.tolerances)
        if msg:
            failures.append(f"[{sample.label}] {msg}")
        if entry.inplace_call is not None:
            r_args, r_kwargs = build_sample(sample, reftorch)
            t_args, t_kwargs = build_sample(sample, torch)
            msg = compare(lambda: entry.inplace_call(*r_args, **r_kwargs),
                          lambda: entry.inplace_call(*t_args, **t_kwargs),
                          tolerances=entry.tolerances)
            if msg:
                failures.append(f"[{sample.label} in-place] {msg}")
    return failures


@pytest.mark.parametrize("entry,dtype_name", CASES,
                         ids=[f"{e.name}-{d}" for e, d in CASES])
def test_op_matches_torch(entry, dtype_name):
    failures = sample_failures(entry, dtype_name)
    assert not failures, f"{len(failures)} failing samples:\n" + "\n".join(failures[:5])
