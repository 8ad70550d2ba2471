"""The C extension of reftorch-cpu (metadata lives in pyproject.toml).

Needs only gcc (or a compatible C compiler with OpenMP) and setuptools: the kernels read
NumPy arrays through the buffer protocol, so no NumPy headers are needed to build.
"""
from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "reftorch_cpu._C",
            sources=["src/kernels.c"],
            # -ffp-contract=off: a + alpha * b must not become one fused multiply-add, so the
            # results stay bit-equal to the NumPy reference.
            extra_compile_args=["-std=c11", "-O3", "-fopenmp", "-ffp-contract=off"],
            extra_link_args=["-fopenmp"],
        )
    ],
)
