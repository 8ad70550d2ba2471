"""Print time ratios, reftorch vs PyTorch and vs NumPy, for every bench case.

Each bench/bench_<group>.py may define `CASES = {case: {"reftorch": fn, "torch": fn,
"numpy": fn}}` of zero-argument callables; this script times each with the same method in
one run and prints µs per call and the ratios. Nothing here asserts a time.
"""
from __future__ import annotations

import importlib.util
import pathlib
import sys
import timeit

import numpy as np
import torch

import reftorch

HERE = pathlib.Path(__file__).parent


def best_of(fn, budget=0.2):
    """µs per call: best of 5 repeats, each sized to take about budget/5 seconds."""
    fn()  # warm up (plugin compilation, caches)
    number, elapsed = 1, 0.0
    while elapsed < budget / 5 and number < 1_000_000:
        elapsed = timeit.timeit(fn, number=number)
        number *= 4
    number = max(1, number // 4)
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def overhead_cases():
    cases = {}
    for n in (10, 100_000):
        ra, rb = reftorch.ones(n), reftorch.ones(n)
        ta, tb = torch.ones(n), torch.ones(n)
        na, nb = np.ones(n, np.float32), np.ones(n, np.float32)

        def reference_only(ra=ra, rb=rb):
            with reftorch.plugins.use_reference_kernels():
                return ra + rb
        cases[f"add float32 n={n}"] = {"reftorch": lambda ra=ra, rb=rb: ra + rb,
                                       "ref-only": reference_only,
                                       "torch": lambda: ta + tb, "numpy": lambda: na + nb}
    return cases


def bench_modules(selected=()):
    """(group, CASES) of every bench file, or of those whose name contains a `selected` word."""
    sys.path.insert(0, str(HERE.parent))
    for path in sorted(HERE.glob("bench_*.py")):
        if selected and not any(word in path.stem for word in selected):
            continue
        spec = importlib.util.spec_from_file_location(f"bench.{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001 - one broken bench file must not hide others
            print(f"# {path.name}: not run ({type(exc).__name__}: {exc})")
            continue
        if hasattr(module, "CASES"):
            yield path.stem, module.CASES


def main(selected=()):
    """Print every group's table (`python bench/report.py [word ...]`: only the bench files
    whose name contains one of the words, e.g. `plugin_reductions nn_mlp`)."""
    print(f"{'case':44s} {'reftorch':>10s} {'torch':>10s} {'numpy':>10s} {'vs torch':>9s} "
          f"{'vs numpy':>9s}")
    groups = [] if selected else [("overhead", overhead_cases())]
    groups += list(bench_modules(selected))
    for group, cases in groups:
        print(f"# {group}")
        for case, impls in cases.items():
            times = {name: best_of(fn) for name, fn in impls.items()}
            ours = times.get("reftorch")
            row = f"{case:44s} {ours:9.1f}µ"
            for peer in ("torch", "numpy"):
                row += f" {times[peer]:9.1f}µ" if peer in times else f" {'-':>10s}"
            for peer in ("torch", "numpy"):
                row += f" {ours / times[peer]:8.2f}x" if peer in times else f" {'-':>9s}"
            print(row)


if __name__ == "__main__":
    main(tuple(sys.argv[1:]))
