"""`torch.X(input, ...)` for ops that are Tensor methods first: views, copies and conversions.

Each function calls the method, so the method remains the one definition (its geometry,
errors and autograd node); these exist because PyTorch documents both spellings.
"""
from __future__ import annotations

from .._tensor import Tensor

__all__ = ["reshape", "view_copy", "squeeze", "unsqueeze", "t", "transpose", "swapaxes",
           "swapdims", "permute", "narrow", "select", "diagonal", "flatten", "as_strided",
           "clone", "adjoint", "is_nonzero", "is_same_size"]


def _tensor(input, name):
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    return input


def _int_sequence(value, fn, name):
    # The functional forms take one sequence argument; only the methods accept varargs.
    if not isinstance(value, (tuple, list)):
        raise TypeError(f"{fn}(): argument '{name}' (position 2) must be tuple of ints, not "
                        f"{type(value).__name__}")
    return tuple(value)


def reshape(input, shape):
    return _tensor(input, "reshape").reshape(_int_sequence(shape, "reshape", "shape"))


def view_copy(input, size):
    return _tensor(input, "view_copy").view(size).clone()


def squeeze(input, dim=None):
    return _tensor(input, "squeeze").squeeze(dim)


def unsqueeze(input, dim):
    return _tensor(input, "unsqueeze").unsqueeze(dim)


def t(input):
    return _tensor(input, "t").t()


def transpose(input, dim0, dim1):
    return _tensor(input, "transpose").transpose(dim0, dim1)


swapaxes = swapdims = transpose


def permute(input, dims):
    return _tensor(input, "permute").permute(_int_sequence(dims, "permute", "dims"))


def narrow(input, dim, start, length):
    return _tensor(input, "narrow").narrow(dim, start, length)


def select(input, dim, index):
    return _tensor(input, "select").select(dim, index)


def diagonal(input, offset=0, dim1=0, dim2=1):
    return _tensor(input, "diagonal").diagonal(offset, dim1, dim2)


def flatten(input, start_dim=0, end_dim=-1):
    return _tensor(input, "flatten").flatten(start_dim, end_dim)


def as_strided(input, size, stride, storage_offset=None):
    return _tensor(input, "as_strided").as_strided(size, stride, storage_offset)


def clone(input, *, memory_format=None):
    return _tensor(input, "clone").clone(memory_format=memory_format)


def adjoint(input):
    """The conjugate transpose of the last two dims (a view)."""
    return _tensor(input, "adjoint").mT.conj()


def is_nonzero(input):
    """bool(input) for a one-element tensor; PyTorch raises for any other size."""
    input = _tensor(input, "is_nonzero")
    if input.numel() == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if input.numel() > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(input.item())


def is_same_size(input, other):
    return _tensor(input, "is_same_size").shape == other.shape


Tensor.swapaxes = Tensor.swapdims = Tensor.transpose
Tensor.adjoint = adjoint
Tensor.is_nonzero = is_nonzero
Tensor.is_same_size = is_same_size
