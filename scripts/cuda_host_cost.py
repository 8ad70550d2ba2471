"""Host-side (Python) cost of one small cuda op, without a GPU (or, with --gpu, on one).

Runs reftorch-cuda on the emulated driver (spec_tests/cuda_emulator.py) with the kernel
bodies stubbed out, so what is timed is reftorch's host work plus the emulator's launch
bookkeeping. Two columns per op:

  with-emulator  the op as run (the emulator's cuLaunchKernel checks and records, minus the
                 NumPy kernel model);
  host-only      the same with the emulator's cuLaunchKernel replaced by a function that
                 returns success: reftorch's own Python. On a GPU, cuda-bindings'
                 cuLaunchKernel takes the emulator's place (its cost is printed separately
                 when cuda.bindings.driver can be called here).

Times are thread CPU time per call (time.thread_time: steadier than the wall clock on a
shared machine), best of REPEATS x CALLS. `--calls` also counts the Python-level calls one op
makes (sys.setprofile), by where the called function lives.

`--gpu` runs the same ops on the real driver instead: wall time per call (bench/cases.py's
host_seconds, what bench_plugin_cuda_ops.py reports), the time of the bare cuLaunchKernel call
with the op's own parameters, and with --profile a cProfile of the op.

    PYTHONPATH=reference:plugins:plugin_cpu:plugin_cuda python scripts/cuda_host_cost.py
"""
from __future__ import annotations

import argparse
import collections
import ctypes
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("REFTORCH_CACHE_DIR", "/tmp/reftorch-host-cost-cache")

import reftorch  # noqa: E402
from reftorch import _storage, plugins  # noqa: E402

import reftorch_cuda  # noqa: E402
from reftorch_cuda import ops as O  # noqa: E402
from reftorch_cuda.device import CUDABackend  # noqa: E402
from spec_tests import cuda_kernel_emulation  # noqa: E402
from spec_tests.cuda_emulator import EmulatedDriver  # noqa: E402

CALLS, REPEATS = 2000, 5


def emulated_backend():
    lowered = {}
    for program in O.PROGRAMS:
        lowered.update({v: k for k, v in program.compile("sm_90").lowered.items()})
    return EmulatedDriver(lowered)


def operations():
    a = reftorch.arange(16, dtype=reftorch.float32).cuda()
    b = reftorch.ones(16, dtype=reftorch.float32).cuda()
    return {
        "a + b": lambda: a + b,
        "a.relu()": lambda: a.relu(),
        "a.sum()": lambda: a.sum(),
        "a.mul_(1.0)": lambda: a.mul_(1.0),
    }


def seconds_per_call(fn, calls=CALLS, repeats=REPEATS):
    best = float("inf")
    for _ in range(repeats):
        start = time.thread_time()
        for _ in range(calls):
            fn()
        best = min(best, (time.thread_time() - start) / calls)
    return best


def count_calls(fn):
    """Python-level calls one `fn()` makes, by the top-level part of the callee's path."""
    counts = collections.Counter()

    def profile(frame, event, arg):
        if event == "call":
            path = frame.f_code.co_filename
            where = ("reference" if "/reference/" in path else
                     "plugin_cuda" if "/plugin_cuda/" in path else
                     "emulator" if "/spec_tests/" in path else "other")
            counts[where] += 1

    fn()
    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return counts


def count_opcodes(fn):
    """Bytecode instructions one `fn()` executes in Python functions (a deterministic
    measure of the Python work, next to the noisy clock)."""
    count = 0

    def trace(frame, event, arg):
        nonlocal count
        frame.f_trace_opcodes = True
        if event == "opcode":
            count += 1
        return trace

    fn()
    sys.settrace(trace)
    try:
        fn()
    finally:
        sys.settrace(None)
    return count - 2   # the lambda's own call and return


def bindings_launch_cost():
    """Seconds per cuda.bindings cuLaunchKernel call that fails at once (no context), or None
    when cuda.bindings.driver cannot be called here."""
    try:
        from cuda.bindings import driver as cu
        fn = cu.CUfunction()
        cu.cuLaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, 0, 0, 0)
    except Exception as exc:  # no libcuda: the call cannot be made
        return f"not callable here ({type(exc).__name__}: {exc})"

    def call():
        cu.cuLaunchKernel(fn, 1, 1, 1, 256, 1, 1, 0, 0, 0, 0)
    return f"{seconds_per_call(call) * 1e6:.2f} us per failing call"


class _Recording:
    """The driver module, with each cuLaunchKernel call's arguments kept in `launches`."""

    def __init__(self, cu, launches):
        self._cu, self._launches = cu, launches

    def __getattr__(self, name):
        return getattr(self._cu, name)

    def cuLaunchKernel(self, *call):  # noqa: N802 (the driver's name)
        self._launches.append(call)
        return self._cu.cuLaunchKernel(*call)


def gpu_main(args):
    """The ops on the real driver: wall time per call, and what the driver's own launch
    call costs (the same kernel and parameters, straight to cuLaunchKernel)."""
    ops = operations()
    for fn in ops.values():
        fn()
    reftorch.cuda.synchronize()
    assert not reftorch.plugins.fallbacks(), reftorch.plugins.fallbacks()
    driver = _storage._BACKENDS["cuda"].driver()

    sys.path.insert(0, str(ROOT / "bench"))
    from cases import host_seconds    # the cuda ops bench's measure of a launch's host time

    def wall(fn):
        return host_seconds(fn, reftorch.cuda.synchronize, args.round_calls, args.repeats)

    # a + b's own cuLaunchKernel call, replayed at once: its parameter slots live in this
    # thread's ParamBuffer until the next launch, and `result` keeps its output block alive.
    cu, launches = driver.cu, []
    driver.cu = _Recording(cu, launches)
    try:
        result = ops["a + b"]()
    finally:
        driver.cu = cu
    bare = wall(lambda: cu.cuLaunchKernel(*launches[-1]))
    assert reftorch.equal(result.cpu(), reftorch.arange(16, dtype=reftorch.float32) + 1)
    for name, fn in ops.items():
        print(f"{name:14s} {wall(fn) * 1e6:8.1f} us per call (wall, GPU)")
    print(f"cuLaunchKernel alone, a + b's kernel and parameters: {bare * 1e6:.1f} us per call")
    if args.profile:
        import cProfile
        import pstats
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(args.round_calls):
            ops[args.profile]()
        profiler.disable()
        reftorch.cuda.synchronize()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(30)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", action="store_true", help="count Python calls per op")
    parser.add_argument("--profile", metavar="OP", help="cProfile one op (its label)")
    parser.add_argument("--repeats", type=int, default=REPEATS,
                        help="timed rounds per op, best kept (more: steadier on a busy machine)")
    parser.add_argument("--round-calls", type=int, default=CALLS, help="calls per timed round")
    parser.add_argument("--gpu", action="store_true", help="on the real driver and GPU")
    args = parser.parse_args()
    if args.gpu:
        return gpu_main(args)

    if "cuda" not in plugins.loaded():
        plugins.load("cuda", reftorch_cuda.register)
    emulator = emulated_backend()
    _storage._BACKENDS["cuda"] = CUDABackend(driver_module=emulator)
    ops = operations()
    for fn in ops.values():
        fn()                                   # compile, load, warm every cache
    cuda_kernel_emulation.run = lambda *args: None   # kernel bodies stubbed out
    assert not reftorch.plugins.fallbacks(), reftorch.plugins.fallbacks()

    if args.profile:
        import cProfile
        import pstats
        fn = ops[args.profile]
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(CALLS):
            fn()
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(40)
        return

    def timed(fn):
        return seconds_per_call(fn, args.round_calls, args.repeats)

    with_emulator = {name: timed(fn) for name, fn in ops.items()}
    calls_emulated = {name: count_calls(fn) for name, fn in ops.items()} if args.calls else {}
    function = next(iter(emulator.lowered))
    slots = (ctypes.c_void_p * 1)()
    emulator_launch = timed(lambda: emulator.cuLaunchKernel(
        function, 1, 1, 1, 256, 1, 1, 0, 0, ctypes.addressof(slots), 0))
    success = (EmulatedDriver.CUresult.CUDA_SUCCESS,)
    emulator.cuLaunchKernel = lambda *args: success
    host_only = {name: timed(fn) for name, fn in ops.items()}
    calls = {name: count_calls(fn) for name, fn in ops.items()} if args.calls else {}
    opcodes = {name: count_opcodes(fn) for name, fn in ops.items()} if args.calls else {}

    print(f"{'op':14s} {'host-only':>10s} {'with-emulator':>14s}")
    for name in ops:
        print(f"{name:14s} {host_only[name] * 1e6:8.1f} us {with_emulator[name] * 1e6:11.1f} us")
        if args.calls:
            print(f"{'':14s} calls (host-only): {dict(calls[name])}, "
                  f"total {sum(calls[name].values())}; with emulator "
                  f"{sum(calls_emulated[name].values())}; bytecodes (host-only) "
                  f"{opcodes[name]}")
    print(f"the emulator's cuLaunchKernel alone (kernel body stubbed): "
          f"{emulator_launch * 1e6:.1f} us per call")
    print("cuda.bindings cuLaunchKernel:", bindings_launch_cost())


if __name__ == "__main__":
    main()
