"""Legacy sparse tensor types: `torch.sparse.FloatTensor` and friends, and `Tensor.type()`.

Each class is a constructor and an `isinstance` test for sparse tensors of its dtype, like the
dense legacy types in reftorch/_legacy.py. The forms PyTorch accepts:
    torch.sparse.FloatTensor(indices, values, size)
    torch.sparse.FloatTensor(indices, values)      # size inferred
    torch.sparse.FloatTensor(*sizes) / (Size) / () # an empty (nnz = 0) tensor
As in PyTorch 2.x, the values keep their own dtype in the (indices, values) forms.
"""
from __future__ import annotations

import builtins

import numpy as np

from .. import _dtype as D
from .._device import Size
from .._legacy import _BY_TYPE_NAME as _DENSE_BY_NAME
from .._legacy import _LegacyTensorMeta
from .._storage import normalize_device
from .._tensor import Tensor
from ._coo import SparseTensor, make_sparse, sparse_coo_tensor


class _SparseTypeMeta(type):
    def __instancecheck__(cls, obj):
        return (isinstance(obj, SparseTensor) and obj.dtype is cls.dtype
                and obj.device.type == "cpu")

    def __call__(cls, *args, device=None):
        return legacy_sparse_construct(cls.dtype, args, device)

    def __getattr__(cls, name):
        # The class stands for the tensor type: its methods are the sparse tensor's.
        return getattr(SparseTensor, name)

    def __repr__(cls):
        return f"<class 'torch.sparse.{cls.__name__}'>"


# PyTorch has no sparse Bool/Complex legacy types.
_DTYPES = (D.float32, D.float64, D.float16, D.bfloat16, D.uint8, D.int8, D.int16, D.int32,
           D.int64)
SPARSE_TYPES = {d: _SparseTypeMeta(d.legacy_prefix + "Tensor", (),
                                   {"dtype": d, "is_sparse": True, "is_cuda": False,
                                    "__module__": "torch.sparse"})
                for d in _DTYPES}
_BY_NAME = {f"torch.sparse.{cls.__name__}": cls for cls in SPARSE_TYPES.values()}


def _invalid(args):
    got = ", ".join(type(a).__name__ for a in args)
    return TypeError(
        f"new() received an invalid combination of arguments - got ({got}), but expected one "
        f"of:\n * (*, torch.device device = None)\n * (Tensor indices, Tensor values, *, "
        f"torch.device device = None)\n * (Tensor indices, Tensor values, tuple of ints size, "
        f"*, torch.device device = None)\n * (tuple of ints size, *, torch.device device = "
        f"None)")


def legacy_sparse_construct(dtype, args, device=None):
    device = normalize_device(device)
    if len(args) in (2, 3) and all(isinstance(a, Tensor) for a in args[:2]):
        indices, values = args[:2]
        if indices.dtype is not D.int64:
            raise RuntimeError(f"expected scalar type Long but found "
                               f"{indices.dtype.scalar_name}")
        size = args[2] if len(args) == 3 else None
        return sparse_coo_tensor(indices, values, size, device=device)
    if len(args) == 1 and isinstance(args[0], (Size, tuple)):
        args = tuple(args[0])
    if not all(isinstance(a, (builtins.int, np.integer)) and not isinstance(a, builtins.bool)
               for a in args):
        raise _invalid(args)
    shape = tuple(builtins.int(a) for a in args) if args else (0,)
    return empty_sparse(shape, dtype, device)


def empty_sparse(shape, dtype, device, sparse_dim=None):
    """A sparse tensor of `shape` with no entries (all dims sparse unless told)."""
    sparse_dim = len(shape) if sparse_dim is None else sparse_dim
    indices = Tensor._from_array(np.zeros((sparse_dim, 0), np.int64))
    values = Tensor._from_array(np.zeros((0,) + tuple(shape[sparse_dim:]), dtype.numpy_dtype),
                                dtype)
    if device.type != "cpu":
        indices, values = indices.to(device), values.to(device)
    return make_sparse(indices, values, shape, True)


def sparse_type(t, dtype=None):
    """`Tensor.type()` of a sparse tensor: 'torch.sparse.FloatTensor', or a conversion."""
    if dtype is None:
        return f"torch.sparse.{t.dtype.legacy_prefix}Tensor"
    if isinstance(dtype, str):
        cls = _BY_NAME.get(dtype) or _DENSE_BY_NAME.get(dtype)
        if cls is None:
            raise ValueError(f"invalid type: '{dtype}'")
        dtype = cls
    if isinstance(dtype, (_SparseTypeMeta, _LegacyTensorMeta)):
        dtype = dtype.dtype
    return t.to(dtype)


FloatTensor = SPARSE_TYPES[D.float32]
DoubleTensor = SPARSE_TYPES[D.float64]
HalfTensor = SPARSE_TYPES[D.float16]
BFloat16Tensor = SPARSE_TYPES[D.bfloat16]
ByteTensor = SPARSE_TYPES[D.uint8]
CharTensor = SPARSE_TYPES[D.int8]
ShortTensor = SPARSE_TYPES[D.int16]
IntTensor = SPARSE_TYPES[D.int32]
LongTensor = SPARSE_TYPES[D.int64]
