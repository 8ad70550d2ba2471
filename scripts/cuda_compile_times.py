"""NVRTC compile times of the plugin's kernel programs, per program and per instantiation.

For each program named (default: all), prints the time of one compile of every instantiation
together (what the CI compile test does), and with `--each` the time of compiling each
instantiation alone (what a first launch does), for `--arch` (sm_XY: CUBIN, the front end,
NVVM and ptxas; compute_XY: PTX, no ptxas). Times are the compiling thread's CPU time
(steadier than the wall clock on a shared machine; NVRTC runs on the calling thread) and
wall time. No cache is used. `--ptx DIR` also writes each instantiation's PTX (from its own
compile) to DIR, named after the program and the instantiation, to compare two versions of a
kernel file.

    PYTHONPATH=reference:plugins:plugin_cuda python scripts/cuda_compile_times.py \
        --arch sm_90 --each conv.cu gemm.cu
"""
from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

from reftorch_cuda import nvrtc as N
from reftorch_cuda import ops as O


def timed_compile(program, arch, expressions, options):
    cache = N.ProgramCache(disk=False)
    wall, cpu = time.perf_counter(), time.thread_time()
    result = N.compile(program.source(), program.filename, arch=arch, options=options,
                       name_expressions=expressions, cache=cache)
    return result, time.thread_time() - cpu, time.perf_counter() - wall


def ptx_of(program, expression, arch, options):
    """The PTX of one instantiation (NVRTC gives it for a real arch too)."""
    virtual = "compute_" + arch.split("_", 1)[1]
    result, _, _ = timed_compile(program, virtual, (expression,), options)
    return result.image.decode()


def file_name(program, expression):
    return program.filename + "." + re.sub(r"[^A-Za-z0-9]+", "_", expression).strip("_") + ".ptx"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("programs", nargs="*", help="kernel file names (default: all)")
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--each", action="store_true", help="also each instantiation alone")
    parser.add_argument("--ptx", help="write each instantiation's PTX into this folder")
    parser.add_argument("--option", action="append", default=[],
                        help="an extra NVRTC option (repeatable)")
    args = parser.parse_args()
    options = N.DEFAULT_OPTIONS + tuple(args.option)
    chosen = [p for p in O.PROGRAMS if not args.programs or p.filename in args.programs]
    print(f"NVRTC {'.'.join(map(str, N.nvrtc_version()))}, arch {args.arch}, "
          f"options {' '.join(options)}")
    for program in chosen:
        expressions = program.name_expressions
        _, cpu, wall = timed_compile(program, args.arch, expressions, options)
        print(f"{program.filename}: {len(expressions)} together: {cpu:.1f} s CPU "
              f"({wall:.1f} s wall)", flush=True)
        if not args.each:
            continue
        total = 0.0
        for expression in expressions:
            result, cpu, wall = timed_compile(program, args.arch, (expression,), options)
            total += cpu
            print(f"    {expression}: {cpu:.1f} s CPU ({wall:.1f} s wall), "
                  f"{len(result.image)} bytes", flush=True)
            if args.ptx:
                folder = Path(args.ptx)
                folder.mkdir(parents=True, exist_ok=True)
                (folder / file_name(program, expression)).write_text(
                    ptx_of(program, expression, args.arch, options))
        print(f"    each alone, summed: {total:.1f} s CPU", flush=True)


if __name__ == "__main__":
    main()
