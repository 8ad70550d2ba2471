"""Fill the kernel cache ahead of time, so no first launch waits for NVRTC.

    python -m reftorch_cuda.precompile                 # every kernel, for GPU 0
    python -m reftorch_cuda.precompile --arch sm_90 --whole sm_90 --whole sm_80 --jobs 16
    python -m reftorch_cuda.precompile softmax.cu norm.cu      # only these kernel files

A first launch compiles only its own kernel (`Program.compile_expression`), which takes about
a second; a program that touches many ops and dtypes meets that wait many times. This compiles
every instantiation of every program, each under the disk key a first launch looks up, in
parallel processes (each NVRTC run keeps one thread busy, and Python's share of the work holds
the GIL, so processes rather than threads). `--whole ARCH` compiles each program in one piece
for ARCH, the form the test suite's compile checks and emulated driver use. The cache directory is `nvrtc.default_cache_dir()`
(`REFTORCH_CACHE_DIR` chooses it).
"""
from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ProcessPoolExecutor


def _compile(task):
    """One NVRTC run (in a worker process): (what, seconds, origin or error text)."""
    from . import nvrtc, ops
    arch, index, expression = task
    program = ops.PROGRAMS[index]   # (several programs may share a file)
    start = time.perf_counter()
    try:
        # A cache of its own: the process's would serve an instantiation from a whole
        # program compiled earlier in this worker, and write nothing under its own key.
        cache = nvrtc.ProgramCache()
        if expression is None:
            result = program.compile(arch, cache=cache)
        else:
            result = program.compile_expression(arch, expression, cache=cache)
        outcome = result.origin
    except Exception as error:  # reported, and the others go on
        outcome = f"FAILED: {type(error).__name__}: {str(error).splitlines()[0]}"
    return f"{arch} {program.filename} {expression or '(whole)'}", time.perf_counter() - start, outcome


def tasks(archs, whole_archs, files=()):
    """(arch, index into ops.PROGRAMS, name expression or None for the whole program) for
    every program, or those of the kernel files `files`."""
    from . import ops
    chosen = [i for i, p in enumerate(ops.PROGRAMS) if not files or p.filename in files]
    for arch in whole_archs:
        for index in chosen:
            yield arch, index, None
    for arch in archs:
        for index in chosen:
            for expression in ops.PROGRAMS[index].name_expressions:
                yield arch, index, expression


def default_arch():
    from reftorch import _storage
    return _storage._BACKENDS["cuda"].driver().arch(0)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", action="append",
                        help="sm_XY or compute_XY (repeatable; default: GPU 0's)")
    parser.add_argument("--whole", action="append", default=[], metavar="ARCH",
                        help="also compile each program in one piece for ARCH (repeatable)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("files", nargs="*", help="kernel files, e.g. softmax.cu (default: all)")
    args = parser.parse_args(argv)
    archs = args.arch or [default_arch()]
    everything = archs + [a for a in args.whole if a not in archs]
    # The longest compiles first, so the pool does not end waiting on one of them.
    from . import ops
    work = sorted(tasks(archs, args.whole, args.files),
                  key=lambda t: (t[2] is not None, ops.PROGRAMS[t[1]].filename != "conv.cu"))
    start, failed, compiled = time.perf_counter(), 0, 0
    with ProcessPoolExecutor(args.jobs) as pool:
        for what, seconds, outcome in pool.map(_compile, work):
            if outcome.startswith("FAILED"):
                failed += 1
                print(f"{what}: {outcome}", flush=True)
            compiled += outcome == "nvrtc"
    print(f"{len(work)} kernels for {', '.join(everything)}: {compiled} compiled, "
          f"{len(work) - compiled - failed} already cached, {failed} failed, "
          f"{time.perf_counter() - start:.0f} s with {args.jobs} processes")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
