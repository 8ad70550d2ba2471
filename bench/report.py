"""Print speed ratios, reftorch against PyTorch and NumPy, for every bench case.

Each bench/bench_<group>.py may define `CASES = {case: {"reftorch": fn, "torch": fn,
"numpy": fn}}` of zero-argument callables. This script times them interleaved: in each of
ROUNDS rounds every implementation of a case runs one timed block, so a ratio compares
blocks taken seconds apart. Nothing here asserts a time.

Why interleaved: on a shared machine the speed drifts (up to 2x within minutes here), and
timing one library after the other turned 20% differences around. The printed ratio is the
median over rounds of (peer's time / reftorch's time) within a round: above 1, reftorch is
the faster, as the issues' speed goals are written. Before each timed block the same
callable runs untimed for SETTLE seconds, so the other library's OpenMP threads, which spin
a while after their last parallel region, have gone idle and do not take a core.

NumPy's OpenBLAS threads spin far longer: after one matrix product they kept a core busy for
about 100 ms (process CPU time while the main thread slept, 2-core x86-64), so whichever
implementation ran next had its product take up to twice its time (mm 1024^3: 7.0 -> 13.4
ms for reftorch and 6.8 -> 13.1 ms for torch right after `a @ a`). With the rotation below
that was mostly reftorch. OPENBLAS_THREAD_TIMEOUT=4 (a spin of 2^4 cycles; set before NumPy
loads, a user's own setting wins) ends that; it left NumPy's own products as fast (64^3 4.1
us, 1024^3 6.3-6.4 ms either way).
"""
from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import importlib.util  # noqa: E402
import pathlib  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

import reftorch  # noqa: E402

HERE = pathlib.Path(__file__).parent
ROUNDS = 7
SETTLE = 2e-3       # seconds of untimed calls before each timed block (at least 3 calls)
SHOWN = ("reftorch", "torch", "numpy")   # the implementations timed and printed


def calls_per_block(fn, seconds):
    """How many calls of fn take about `seconds` (at least 1)."""
    fn()  # warm up (plugin compilation, caches)
    number = 1
    while True:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= seconds or number >= 1_000_000:
            return max(1, int(number * seconds / max(elapsed, 1e-9)))
        number *= 4


def settle(fn):
    start, calls = time.perf_counter(), 0
    while calls < 3 or time.perf_counter() - start < SETTLE:
        fn()
        calls += 1


def interleaved(impls, budget=0.5):
    """{implementation: [seconds per call in each round]}: ROUNDS rounds, each running every
    implementation once (settled, then one timed block); the order rotates every round."""
    names = list(impls)
    number = {name: calls_per_block(fn, budget / ROUNDS / len(names))
              for name, fn in impls.items()}
    times = {name: [] for name in names}
    for r in range(ROUNDS):
        for name in names[r % len(names):] + names[:r % len(names)]:
            fn = impls[name]
            settle(fn)
            start = time.perf_counter()
            for _ in range(number[name]):
                fn()
            times[name].append((time.perf_counter() - start) / number[name])
    return times


def speed_ratio(times, peer, ours="reftorch"):
    """Median over rounds of peer's time / ours (above 1: ours is faster)."""
    return statistics.median(p / o for p, o in zip(times[peer], times[ours]))


def overhead_cases():
    cases = {}
    for n in (10, 100_000):
        ra, rb = reftorch.ones(n), reftorch.ones(n)
        ta, tb = torch.ones(n), torch.ones(n)
        na, nb = np.ones(n, np.float32), np.ones(n, np.float32)
        cases[f"add float32 n={n}"] = {"reftorch": lambda ra=ra, rb=rb: ra + rb,
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
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - one broken or skipped bench file (pytest's
            # skip, a BaseException, when there is no GPU) must not hide the others
            print(f"# {path.name}: not run ({type(exc).__name__}: {exc})")
            continue
        if hasattr(module, "CASES"):
            yield path.stem, module.CASES


def main(selected=()):
    """Print every group's table (`python bench/report.py [word ...]`: only the bench files
    whose name contains one of the words, e.g. `plugin_reductions nn_mlp`). Times are the
    median µs per call over the rounds; torch/ours and numpy/ours are speed ratios."""
    print(f"{'case':44s} {'reftorch':>10s} {'torch':>10s} {'numpy':>10s} {'torch/ours':>10s} "
          f"{'numpy/ours':>10s}")
    groups = [] if selected else [("overhead", overhead_cases())]
    groups += list(bench_modules(selected))
    for group, cases in groups:
        print(f"# {group}")
        for case, impls in cases.items():
            times = interleaved({name: fn for name, fn in impls.items() if name in SHOWN})
            row = f"{case:44s} {statistics.median(times['reftorch']) * 1e6:9.1f}µ"
            for peer in ("torch", "numpy"):
                row += (f" {statistics.median(times[peer]) * 1e6:9.1f}µ" if peer in times
                        else f" {'-':>10s}")
            for peer in ("torch", "numpy"):
                row += f" {speed_ratio(times, peer):9.2f}x" if peer in times else f" {'-':>10s}"
            print(row, flush=True)


if __name__ == "__main__":
    main(tuple(sys.argv[1:]))
