"""Print reftorch/PyTorch and reftorch/NumPy ratios from a quick timing of the bench cases."""
from __future__ import annotations

import timeit

import numpy as np
import torch

import reftorch


def best_of(fn, number):
    return min(timeit.repeat(fn, number=number, repeat=7)) / number * 1e6  # µs per call


def main():
    print(f"{'case':34s} {'reftorch':>10s} {'ref-only':>10s} {'torch':>10s} {'numpy':>10s} "
          f"{'vs torch':>9s} {'vs numpy':>9s}")
    for n, number in ((10, 20000), (100_000, 200), (10_000_000, 3)):
        ra, rb = reftorch.ones(n), reftorch.ones(n)
        ta, tb = torch.ones(n), torch.ones(n)
        na, nb = np.ones(n, np.float32), np.ones(n, np.float32)
        ours = best_of(lambda: ra + rb, number)
        with reftorch.plugins.use_reference_kernels():
            ref_only = best_of(lambda: ra + rb, number)
        theirs = best_of(lambda: ta + tb, number)
        numpy = best_of(lambda: na + nb, number)
        print(f"{'add float32 n=' + str(n):34s} {ours:9.2f}µ {ref_only:9.2f}µ {theirs:9.2f}µ "
              f"{numpy:9.2f}µ {ours / theirs:8.2f}x {ours / numpy:8.2f}x")


if __name__ == "__main__":
    main()
