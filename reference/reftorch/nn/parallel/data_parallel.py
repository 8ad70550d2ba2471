"""torch.nn.DataParallel and nn.parallel.data_parallel.

PyTorch splits the batch across the listed accelerator devices, runs a replica of the module
on each and gathers the outputs on output_device. Without an accelerator PyTorch keeps no
device ids and simply calls the module; so does this reference. With an accelerator, the
reference runs ONE replica on device_ids[0] on the whole batch and moves the output to
output_device: the same result whenever the module treats batch rows independently (layers
that couple the batch, e.g. BatchNorm in training, see per-replica statistics in PyTorch).
"""
from __future__ import annotations

from ... import cuda as _cuda
from ..modules.module import Module

__all__ = ["DataParallel", "data_parallel"]


def _available_device_type():
    return "cuda" if _cuda.is_available() else None


def _device_ids(device_ids):
    if device_ids is None:
        return list(range(_cuda.device_count()))
    return [d if isinstance(d, int) else _device_index(d) for d in device_ids]


def _device_index(device):
    index = getattr(device, "index", None)
    if index is None and isinstance(device, str):
        index = int(device.split(":")[1]) if ":" in device else 0
    return 0 if index is None else index


def _move(obj, device):
    """Moves every tensor in a (nested) tuple/list/dict to `device`."""
    if hasattr(obj, "to") and hasattr(obj, "dim"):
        return obj.to(device)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_move(x, device) for x in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_move(x, device) for x in obj)
    if isinstance(obj, dict):
        return type(obj)((k, _move(v, device)) for k, v in obj.items())
    return obj


class DataParallel(Module):
    """Wraps `module` (available as .module; state_dict keys get the prefix "module.")."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        if _available_device_type() is None:
            self.module = module
            self.device_ids = []
            return
        self.dim = dim
        self.module = module
        self.device_ids = _device_ids(device_ids)
        if output_device is None:
            output_device = self.device_ids[0]
        self.output_device = _device_index(output_device)
        self.src_device_obj = f"cuda:{self.device_ids[0]}"
        self.module.to(self.src_device_obj)

    def forward(self, *inputs, **kwargs):
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        inputs = _move(inputs, self.src_device_obj)
        kwargs = _move(kwargs, self.src_device_obj)
        return _move(self.module(*inputs, **kwargs), f"cuda:{self.output_device}")


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0,
                  module_kwargs=None):
    """Functional DataParallel: evaluates module(*inputs) (see the module note above)."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    if _available_device_type() is None:
        raise RuntimeError("device type could not be determined")
    device_ids = _device_ids(device_ids)
    if output_device is None:
        output_device = device_ids[0]
    source = f"cuda:{device_ids[0]}"
    result = module(*_move(inputs, source), **_move(module_kwargs or {}, source))
    return _move(result, f"cuda:{_device_index(output_device)}")
