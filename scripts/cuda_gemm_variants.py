"""Time edited copies of kernels/gemm.cu on a GPU, and compare their products bit for bit.

For tuning the tensor-core GEMM in a short GPU session: each FILE is a complete gemm.cu
(copy the package's, edit the copy). It is compiled in place of the package's program for
float16 and bfloat16 products of several shapes (odd sizes, transposed operands, a batch),
whose results must have the same bits as those of the first file given (mma's summation
order is the hardware's, so an edit that only changes how tiles move keeps every bit), and the
4096^3 products are timed with CUDA events.

    PYTHONPATH=reference:plugins:plugin_cuda python scripts/cuda_gemm_variants.py \
        plugin_cuda/reftorch_cuda/kernels/gemm.cu /tmp/gemm_edited.cu
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from cases import event_seconds  # noqa: E402  (the cuda benches' CUDA-event timer)

import reftorch  # noqa: E402
from reftorch_cuda import ops_gemm  # noqa: E402
from reftorch_cuda.kernel_base import PRELUDE, Program, _read_source  # noqa: E402


@dataclass(frozen=True, eq=False)
class EditedProgram(Program):
    """A Program whose own file's text is `text` (the prelude and includes stay the
    package's)."""
    text: str = ""

    def source(self):
        parts = [_read_source(PRELUDE), *(_read_source(name) for name in self.includes)]
        return "\n".join(parts + [self.text])


def cases():
    """name -> (a, b) on the GPU: the timed 4096^3 product and the bounds/layout cases."""
    reftorch.manual_seed(0)
    found = {}
    for dtype in (reftorch.float16, reftorch.bfloat16):
        def randn(*shape):
            return reftorch.randn(*shape).to(dtype).cuda()
        name = dtype.name
        found[f"{name} 4096^3"] = (randn(4096, 4096), randn(4096, 4096))
        found[f"{name} 1000x555 @ (777x555)^T"] = (randn(1000, 555), randn(777, 555).t())
        found[f"{name} 33x17 @ 17x9"] = (randn(33, 17), randn(17, 9))
        found[f"{name} bmm (8x70x130)^T @ 8x70x200"] = (randn(8, 70, 130).transpose(1, 2),
                                                        randn(8, 70, 200))
    return found


def main(paths):
    if not reftorch.cuda.is_available():
        raise SystemExit("needs a CUDA GPU")
    original, products, first = ops_gemm.GEMM, cases(), {}
    try:
        for path in paths:
            ops_gemm.GEMM = EditedProgram(original.filename, original.name_expressions,
                                          original.includes, Path(path).read_text())
            report = []
            for name, (a, b) in products.items():
                bits = reftorch.matmul(a, b).float().cpu().numpy().view(np.uint32)
                same = np.array_equal(bits, first.setdefault(name, bits))
                timing = ""
                if "4096" in name:
                    seconds = event_seconds(lambda a=a, b=b: reftorch.matmul(a, b),
                                            reftorch.cuda.Event, reftorch.cuda.synchronize,
                                            repeats=10)
                    timing = f" {2 * 4096 ** 3 / seconds / 1e12:.1f} TFLOP/s"
                report.append(f"  {name}:{timing} {'same bits' if same else 'BITS DIFFER'}")
            print(path, *report, sep="\n", flush=True)
    finally:
        ops_gemm.GEMM = original


if __name__ == "__main__":
    main(sys.argv[1:] or [str(Path(ops_gemm.__file__).parent / "kernels" / "gemm.cu")])
