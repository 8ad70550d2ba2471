"""reftorch-cuda: the `cuda` device for reftorch, with kernels compiled at run time by NVRTC.

Installed, it registers through the `reftorch.plugins` entry point `cuda`:
  * the `cuda` device backend (GPU memory through the CUDA driver API, see `device`);
  * kernels for the ops listed in README.md ("Kernels"): one `ops_*` module per family over
    its kernels/*.cu program, all registered by `ops.register_kernels`;
  * `reftorch.cuda`'s backend pieces: the caching allocator, streams and events, pinned
    memory, one random generator per GPU.
Ops without a cuda kernel run through reftorch's copy-to-cpu fallback (counted).

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

# reftorch before any submodule: importing reftorch loads the plugins, this one included
# (register is defined by now), so `import reftorch_cuda.ops_conv` before `import reftorch`
# registers the plugin whole instead of meeting its own half-imported submodule.
import reftorch  # noqa: E402,F401
