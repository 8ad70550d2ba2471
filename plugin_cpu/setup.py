"""The C extensions of reftorch-cpu (metadata lives in pyproject.toml).

Needs only gcc (or a compatible C compiler with OpenMP) and setuptools: the kernels read
NumPy arrays through the buffer protocol, so no NumPy headers are needed to build.

Each C file in src/ is one extension module: src/kernels.c is `reftorch_cpu._C` (the
elementwise binary ops and copies), any other src/NAME.c is `reftorch_cpu._NAME`. They share
src/common.h (argument parsing and bounds checks); bags.c, distance.c, nn_rows.c, pool.c and
reduce.c instantiate their kernels per type and instruction set through src/isa_clones.h, and
nn_rows.c and reduce.c take their float32 exp from src/clone_exp.h.
"""
import os
from pathlib import Path

from setuptools import Extension, setup

# -ffp-contract=off: a + alpha * b must not become one fused multiply-add, so the results
# stay bit-equal to the NumPy reference. REFTORCH_CPU_CFLAGS adds flags (the sanitizer build).
FLAGS = ["-std=c11", "-O3", "-fopenmp", "-ffp-contract=off"]
EXTRA = os.environ.get("REFTORCH_CPU_CFLAGS", "").split()


def extension(source):
    name = "reftorch_cpu._C" if source.stem == "kernels" else f"reftorch_cpu._{source.stem}"
    return Extension(name, sources=[str(source)],
                     depends=["src/common.h", "src/isa_clones.h", "src/clone_exp.h"],
                     extra_compile_args=FLAGS + EXTRA, extra_link_args=["-fopenmp"] + EXTRA)


setup(ext_modules=[extension(source) for source in sorted(Path("src").glob("*.c"))])
