"""What every bench file shares: its CASES dict turned into pytest-benchmark tests, float32
inputs made identical for reftorch, PyTorch and NumPy, and the timing helpers of the cuda
benches."""
from __future__ import annotations

import time

import numpy as np
import pytest


def as_tests(cases):
    """A test benchmarking every implementation each case has, grouped by case (so
    pytest-benchmark compares reftorch, torch and numpy side by side)."""
    params = [(case, impl) for case, fns in cases.items() for impl in sorted(fns)]

    @pytest.mark.parametrize("case,impl", params, ids=[f"{c} {i}" for c, i in params])
    def test(benchmark, case, impl):
        benchmark.group = case
        benchmark(cases[case][impl])
    return test


def inputs(array):
    """The same values as a reftorch tensor, a torch tensor and a NumPy array (own copies)."""
    import reftorch
    import torch
    return reftorch.from_numpy(array.copy()), torch.from_numpy(array.copy()), array


def float32_inputs(shape, rng):
    return inputs(rng.standard_normal(shape).astype(np.float32))


# --- cuda benches ------------------------------------------------------------------------------

def no_gpu_reason(reftorch, torch):
    """Why the cuda benches cannot run here, or None when both libraries see a GPU."""
    if reftorch.cuda.is_available() and torch.cuda.is_available():
        return None
    return "no CUDA GPU (or no CUDA build of torch) on this machine"


def synchronised(fn, synchronize):
    """fn followed by a wait for the device, so a benchmark times the work, not the launch."""
    def run():
        fn()
        synchronize()
    return run


def event_seconds(fn, events, synchronize, repeats=20):
    """Seconds per call of fn, from CUDA events around `repeats` back-to-back calls (after a
    warm-up call that also compiles)."""
    fn()
    synchronize()
    start, end = events(enable_timing=True), events(enable_timing=True)
    start.record()
    for _ in range(repeats):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1000.0 / repeats


def host_seconds(fn, synchronize, calls=2000, rounds=5):
    """Wall-clock seconds per call of fn issued back to back, best of `rounds` (for a small
    op the device keeps up, so this is the host side of a launch); the device is waited for
    between rounds, outside the timing."""
    fn()
    synchronize()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
        synchronize()
    return best
