"""torch.utils.bottleneck: a first look at where a script spends its time.

    python -m reftorch.utils.bottleneck /path/to/script.py [args for the script]

prints a short environment summary, then runs the script twice: once under Python's
cProfile (the Python functions that take the time) and once under
reftorch.autograd.profiler.profile (the tensor ops that take the time), and prints both
summaries. As in PyTorch, the script should finish in a reasonable time, because it runs
twice. reftorch devices report no separate GPU timings, so there is no CUDA-mode run.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import platform
import pstats
import sys

__all__ = ["main"]

_RULE = "-" * 80
_TOP = 15    # rows shown in each summary


def _section(title):
    return f"{_RULE}\n  {title}\n{_RULE}"


def _environment_summary():
    import numpy

    import reftorch
    from reftorch import plugins
    from reftorch._threads import get_num_threads
    lines = [
        f"reftorch {reftorch.__version__} (NumPy {numpy.__version__})",
        f"Python {platform.python_version()} on {platform.platform()}",
        f"plugins loaded: {', '.join(sorted(plugins.loaded())) or 'none'}",
        f"intra-op threads: {get_num_threads()}",
    ]
    return "\n".join(lines)


def _parse(argv):
    parser = argparse.ArgumentParser(
        prog="python -m reftorch.utils.bottleneck",
        description="Summarize where a script spends its time with cProfile and the "
                    "reftorch autograd profiler.")
    parser.add_argument("scriptfile", help="path to the script to be run")
    parser.add_argument("args", nargs=argparse.REMAINDER,
                        help="command-line arguments passed on to the script")
    return parser.parse_args(argv)


def _compile_script(path):
    with open(path, "rb") as f:
        return compile(f.read(), path, "exec")


def _script_globals(path):
    """A fresh namespace for one run of the script, as if it were run as __main__."""
    return {"__name__": "__main__", "__file__": path, "__package__": None,
            "__builtins__": __builtins__}


def _run_cprofile(code, path):
    profiler = cProfile.Profile()
    profiler.runctx(code, _script_globals(path), None)
    return profiler


def _run_autograd_profiler(code, path):
    from reftorch.autograd import profiler
    with profiler.profile() as prof:
        exec(code, _script_globals(path))
    return prof


def _cprofile_summary(profiler):
    stream = io.StringIO()
    stats = pstats.Stats(profiler, stream=stream)
    stats.sort_stats("tottime").print_stats(_TOP)
    return stream.getvalue().strip("\n")


def _autograd_summary(prof):
    averages = prof.key_averages()
    if not len(averages):
        return "        (no reftorch ops ran)"
    return (f"        top {_TOP} events sorted by cpu_time_total\n\n"
            + averages.table(sort_by="cpu_time_total", row_limit=_TOP))


def main(argv=None):
    """Profile the script named in `argv` (default: sys.argv[1:]) and print the summaries."""
    options = _parse(sys.argv[1:] if argv is None else argv)
    path = os.path.abspath(options.scriptfile)
    code = _compile_script(path)
    # The script sees itself as argv[0] and can import modules next to it.
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [options.scriptfile] + options.args
    sys.path.insert(0, os.path.dirname(path))
    try:
        print("`bottleneck` is a tool that can be used as an initial step for debugging\n"
              "bottlenecks in your program.\n")
        print(_section("Environment Summary"))
        print(_environment_summary())
        print("Running your script with cProfile")
        cprofile_run = _run_cprofile(code, path)
        print("Running your script with the autograd profiler...")
        autograd_run = _run_autograd_profiler(code, path)
        print(_section("cProfile output"))
        print(_cprofile_summary(cprofile_run))
        print(_section("autograd profiler output (CPU mode)"))
        print(_autograd_summary(autograd_run))
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    return 0

