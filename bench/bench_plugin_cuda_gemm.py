"""reftorch-cuda's matrix products (kernels/gemm.cu) against PyTorch on the same GPU (cuBLAS):
mm 4096^3 in float32 (CUDA cores; PyTorch's default keeps TF32 off, so both are full float32),
float16 and bfloat16 (tensor cores), plus a transposed-operand and a batched case.

Two ways to run it, both skipped without a GPU (or without a CUDA build of torch):
  * under pytest-benchmark, like every bench file (`bench/report.py` prints the ratios); each
    call synchronises, so the time is the product's, not the launch's;
  * `python bench/bench_plugin_cuda_gemm.py`: each product timed with CUDA events over
    repeated launches, printed as TFLOP/s for reftorch and torch and their ratio (the issue's
    targets: float32 >= 60%, float16/bfloat16 >= 50% of cuBLAS).

Nothing here asserts a time.
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from cases import as_tests, event_seconds, no_gpu_reason, synchronised

torch = pytest.importorskip("torch")
NO_GPU = no_gpu_reason(reftorch, torch)
if NO_GPU and __name__ != "__main__":
    pytest.skip(NO_GPU, allow_module_level=True)

# name -> (op, shapes of the two operands, dtype name, operand views)
PRODUCTS = {
    "mm float32 4096^3": ("mm", (4096, 4096), (4096, 4096), "float32", None),
    "mm float16 4096^3": ("mm", (4096, 4096), (4096, 4096), "float16", None),
    "mm bfloat16 4096^3": ("mm", (4096, 4096), (4096, 4096), "bfloat16", None),
    "mm float32 4096^3 b transposed": ("mm", (4096, 4096), (4096, 4096), "float32",
                                       lambda b: b.t()),
    "bmm float16 32x1024^3": ("bmm", (32, 1024, 1024), (32, 1024, 1024), "float16", None),
}


def flops(shape_a, shape_b):
    batch = shape_a[0] if len(shape_a) == 3 else 1
    return 2.0 * batch * shape_a[-2] * shape_a[-1] * shape_b[-1]


def operands(shape_a, shape_b, dtype_name, view_b):
    """The same values on both libraries' GPUs."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shape_a).astype(np.float32)
    b = rng.standard_normal(shape_b).astype(np.float32)
    mine = [reftorch.tensor(x).to(getattr(reftorch, dtype_name)).cuda() for x in (a, b)]
    theirs = [torch.from_numpy(x).to(getattr(torch, dtype_name)).cuda() for x in (a, b)]
    if view_b is not None:
        mine[1], theirs[1] = view_b(mine[1]), view_b(theirs[1])
    return mine, theirs


CASES = {}
for _name, (_op, _sa, _sb, _dtype, _view) in ({} if NO_GPU else PRODUCTS).items():
    (_ra, _rb), (_ta, _tb) = operands(_sa, _sb, _dtype, _view)
    CASES[_name] = {
        "reftorch": synchronised(lambda f=getattr(reftorch, _op), a=_ra, b=_rb: f(a, b),
                                  reftorch.cuda.synchronize),
        "torch": synchronised(lambda f=getattr(torch, _op), a=_ta, b=_tb: f(a, b),
                               torch.cuda.synchronize),
    }

test_plugin_cuda_gemm = as_tests(CASES)



def main():
    if NO_GPU:
        print(f"skipped: {NO_GPU}")
        return
    print(f"{'product':36s} {'reftorch TFLOP/s':>16s} {'torch TFLOP/s':>14s} {'ratio':>6s}")
    for name, (op, shape_a, shape_b, dtype_name, view_b) in PRODUCTS.items():
        (ra, rb), (ta, tb) = operands(shape_a, shape_b, dtype_name, view_b)
        reftorch.plugins.reset_fallbacks()
        mine = event_seconds(lambda: getattr(reftorch, op)(ra, rb), reftorch.cuda.Event,
                             reftorch.cuda.synchronize)
        fell_back = reftorch.plugins.fallbacks()
        theirs = event_seconds(lambda: getattr(torch, op)(ta, tb), torch.cuda.Event,
                               torch.cuda.synchronize)
        work = flops(shape_a, shape_b) / 1e12
        note = f"  (fallbacks: {fell_back})" if fell_back else ""
        print(f"{name:36s} {work / mine:16.1f} {work / theirs:14.1f} "
              f"{theirs / mine:6.2f}{note}")


if __name__ == "__main__":
    main()
