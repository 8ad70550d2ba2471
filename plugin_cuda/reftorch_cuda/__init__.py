"""reftorch-cuda: the `cuda` device for reftorch, with kernels compiled at run time by NVRTC.

Installed, it registers through the `reftorch.plugins` entry point `cuda`:
  * the `cuda` device backend (GPU memory through the CUDA driver API, see `device`);
  * elementwise add/sub/mul/div for float32, float64, float16 and bfloat16, and a strided
    same-dtype copy for every dtype (see `ops` and kernels/elementwise.cu).
Ops without a cuda kernel run through reftorch's copy-to-cpu fallback.

Registering touches neither the driver nor NVRTC: a machine without a GPU imports reftorch
silently, and the first cuda allocation raises a RuntimeError that says what is missing.
"""
from ._version import __version__


def register(registrar):
    """Entry point of the `reftorch.plugins` group."""
    from . import ops
    from .device import CUDABackend
    registrar.backend(CUDABackend())
    ops.register_kernels(registrar)
    try:  # make `reftorch.cuda` reachable as an attribute wherever the plugin is loaded
        import reftorch.cuda  # noqa: F401
    except ImportError:  # a reftorch without the module: the backend still works
        pass


__all__ = ["__version__", "register"]
