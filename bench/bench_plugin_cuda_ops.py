"""reftorch-cuda's memory-bound ops and launch cost against PyTorch on the same GPU: the
issue's targets other than GEMM and convolution (those have their own files).

  * add float32, 64M elements: bandwidth (3 x 4 bytes per element) >= 90% of PyTorch's;
  * sum of 64M float32: bandwidth (4 bytes per element) >= 85% of PyTorch's;
  * softmax and layer_norm over the last dim of 8192 x 4096 float32: >= 80% of PyTorch's speed;
  * launch overhead: host time of one small op (`a + b` on 16 elements, no synchronisation
    between calls) from Python <= 10 us;
  * the reduction layouts ops_reduce's size rule sends off the block path (column sums, the
    column sum of NCHW keeping C and W, a million rows of 32, one long cumsum, few long
    products): bandwidth against PyTorch's, reported, no target set.

Two ways to run it, both skipped without a GPU (or without a CUDA build of torch):
  * under pytest-benchmark, like every bench file (`bench/report.py` prints the ratios); each
    call synchronises, so the time is the op's, not the launch's;
  * `python bench/bench_plugin_cuda_ops.py`: device time from CUDA events over repeated
    launches (GB/s or ms per call for both libraries and their ratio), and the host time of a
    small op from the wall clock.

Nothing here asserts a time.
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from cases import as_tests, event_seconds, host_seconds, no_gpu_reason, synchronised

torch = pytest.importorskip("torch")
NO_GPU = no_gpu_reason(reftorch, torch)
if NO_GPU and __name__ != "__main__":
    pytest.skip(NO_GPU, allow_module_level=True)

BIG = 64 * 1024 * 1024
ROWS = (8192, 4096)

# name -> (operand shapes, bytes moved per call (None: report time, not bandwidth), call)
OPS = {
    "add float32 64M": (((BIG,), (BIG,)), 3 * 4 * BIG, lambda lib, a, b: a + b),
    "sum float32 64M": (((BIG,),), 4 * BIG, lambda lib, a: a.sum()),
    "softmax 8192x4096 float32": ((ROWS,), None, lambda lib, x: lib.softmax(x, -1)),
    "layer_norm 8192x4096 float32": ((ROWS,), None,
                                     lambda lib, x: lib.nn.functional.layer_norm(x, ROWS[-1:])),
    "sum(0) 8192x4096 float32": ((ROWS,), 4 * 8192 * 4096, lambda lib, x: x.sum(0)),
    "sum(0, 2) 32x256x56x56 float32": (((32, 256, 56, 56),), 4 * 32 * 256 * 56 * 56,
                                       lambda lib, x: x.sum((0, 2))),
    "sum(1) 1Mx32 float32": (((1 << 20, 32),), 4 * 32 << 20, lambda lib, x: x.sum(1)),
    "cumsum 1x16M float32": (((1, 1 << 24),), 8 << 24, lambda lib, x: x.cumsum(1)),
    "prod(1) 4x4M float32": (((4, 1 << 22),), 4 << 24, lambda lib, x: x.prod(1)),
}


def operands(shapes):
    """The same float32 values on both libraries' GPUs."""
    rng = np.random.default_rng(0)
    host = [rng.standard_normal(shape).astype(np.float32) for shape in shapes]
    return ([reftorch.from_numpy(a).cuda() for a in host],
            [torch.from_numpy(a).cuda() for a in host])


def call(fn, lib, tensors):
    return lambda: fn(lib, *tensors)


CASES = {}
for _name, (_shapes, _bytes, _fn) in ({} if NO_GPU else OPS).items():
    _mine, _theirs = operands(_shapes)
    CASES[_name] = {
        "reftorch": synchronised(call(_fn, reftorch, _mine), reftorch.cuda.synchronize),
        "torch": synchronised(call(_fn, torch, _theirs), torch.cuda.synchronize),
    }

test_plugin_cuda_ops = as_tests(CASES)


def main():
    if NO_GPU:
        print(f"skipped: {NO_GPU}")
        return
    print(f"{'op':30s} {'reftorch':>14s} {'torch':>14s} {'ratio':>6s}")
    for name, (shapes, nbytes, fn) in OPS.items():
        mine, theirs = operands(shapes)
        reftorch.plugins.reset_fallbacks()
        ours = event_seconds(call(fn, reftorch, mine), reftorch.cuda.Event,
                             reftorch.cuda.synchronize)
        fell_back = reftorch.plugins.fallbacks()
        peer = event_seconds(call(fn, torch, theirs), torch.cuda.Event, torch.cuda.synchronize)
        if nbytes is None:
            cells = f"{ours * 1e3:11.3f} ms {peer * 1e3:11.3f} ms"
        else:
            cells = f"{nbytes / ours / 1e9:10.0f} GB/s {nbytes / peer / 1e9:10.0f} GB/s"
        note = f"  (fallbacks: {fell_back})" if fell_back else ""
        print(f"{name:30s} {cells} {peer / ours:6.2f}{note}")
    mine, theirs = operands(((16,), (16,)))
    ours = host_seconds(lambda: mine[0] + mine[1], reftorch.cuda.synchronize)
    peer = host_seconds(lambda: theirs[0] + theirs[1], torch.cuda.synchronize)
    print(f"{'launch: a + b, 16 elements':30s} {ours * 1e6:11.1f} us {peer * 1e6:11.1f} us "
          f"{peer / ours:6.2f}")


if __name__ == "__main__":
    main()
