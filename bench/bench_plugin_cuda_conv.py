"""reftorch-cuda's convolutions (kernels/conv.cu, implicit GEMMs) against PyTorch on the same
GPU (cuDNN): conv2d 3x3, N=8, 64 -> 64 channels, 56x56, padding 1 (a ResNet stage), forward
in float32 and float16, and the float32 backward (input and weight gradients).

Two ways to run it, both skipped without a GPU (or without a CUDA build of torch):
  * under pytest-benchmark, like every bench file (`bench/report.py` prints the ratios); each
    call synchronises, so the time is the convolution's, not the launch's;
  * `python bench/bench_plugin_cuda_conv.py`: each case timed with CUDA events over repeated
    launches, printed as TFLOP/s for reftorch and torch and their ratio.

PyTorch's default keeps TF32 off for cuDNN convolutions only when told: this file turns it
off (`torch.backends.cudnn.allow_tf32 = False`), so both float32 sides are full float32.
Nothing here asserts a time.
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
import reftorch.nn.functional as RF
from cases import as_tests, event_seconds, no_gpu_reason, synchronised

torch = pytest.importorskip("torch")
NO_GPU = no_gpu_reason(reftorch, torch)
if NO_GPU and __name__ != "__main__":
    pytest.skip(NO_GPU, allow_module_level=True)

# name -> (input shape, weight shape, dtype name, backward too)
CONVOLUTIONS = {
    "conv2d 3x3 N=8 64->64 56x56 float32": ((8, 64, 56, 56), (64, 64, 3, 3), "float32", False),
    "conv2d 3x3 N=8 64->64 56x56 float16": ((8, 64, 56, 56), (64, 64, 3, 3), "float16", False),
    "conv2d 3x3 N=8 64->64 56x56 float32 fwd+bwd": ((8, 64, 56, 56), (64, 64, 3, 3), "float32",
                                                    True),
}


def flops(x_shape, w_shape, backward):
    """2 * N * O * OH * OW * C * KH * KW (padding 1 keeps OH, OW); the backward is two more
    products of that size."""
    n, c, h, w = x_shape
    o, _, kh, kw = w_shape
    forward = 2.0 * n * o * h * w * c * kh * kw
    return forward * (3 if backward else 1)


def operands(x_shape, w_shape, dtype_name, backward):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32) * 0.05
    mine = [reftorch.tensor(v).to(getattr(reftorch, dtype_name)).cuda() for v in (x, w)]
    theirs = [torch.from_numpy(v).to(getattr(torch, dtype_name)).cuda() for v in (x, w)]
    if backward:
        mine = [t.requires_grad_() for t in mine]
        theirs = [t.requires_grad_() for t in theirs]
    return mine, theirs


def step(conv, x, w, backward):
    """One convolution (and, for backward, one backward pass with a ones gradient)."""
    def run():
        y = conv(x, w, None, 1, 1)
        if backward:
            y.sum().backward()
    return run



if not NO_GPU:
    torch.backends.cudnn.allow_tf32 = False

CASES = {}
for _name, (_xs, _ws, _dtype, _bwd) in ({} if NO_GPU else CONVOLUTIONS).items():
    (_rx, _rw), (_tx, _tw) = operands(_xs, _ws, _dtype, _bwd)
    CASES[_name] = {
        "reftorch": synchronised(step(RF.conv2d, _rx, _rw, _bwd), reftorch.cuda.synchronize),
        "torch": synchronised(step(torch.nn.functional.conv2d, _tx, _tw, _bwd),
                               torch.cuda.synchronize),
    }

test_plugin_cuda_conv = as_tests(CASES)


def main():
    if NO_GPU:
        print(f"skipped: {NO_GPU}")
        return
    print(f"{'convolution':46s} {'reftorch TFLOP/s':>16s} {'torch TFLOP/s':>14s} {'ratio':>6s}")
    for name, (x_shape, w_shape, dtype_name, backward) in CONVOLUTIONS.items():
        (rx, rw), (tx, tw) = operands(x_shape, w_shape, dtype_name, backward)
        reftorch.plugins.reset_fallbacks()
        mine = event_seconds(step(RF.conv2d, rx, rw, backward), reftorch.cuda.Event,
                             reftorch.cuda.synchronize)
        fell_back = reftorch.plugins.fallbacks()
        theirs = event_seconds(step(torch.nn.functional.conv2d, tx, tw, backward),
                               torch.cuda.Event, torch.cuda.synchronize)
        work = flops(x_shape, w_shape, backward) / 1e12
        note = f"  (fallbacks: {fell_back})" if fell_back else ""
        print(f"{name:46s} {work / mine:16.1f} {work / theirs:14.1f} "
              f"{theirs / mine:6.2f}{note}")


if __name__ == "__main__":
    main()
