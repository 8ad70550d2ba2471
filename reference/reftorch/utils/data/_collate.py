"""Turning a list of samples into a batch (`default_collate`) and samples into tensors
(`default_convert`, used when automatic batching is off).

`collate` dispatches on the type of the first sample through `collate_fn_map` (exact type
first, then isinstance in order), and recurses into mappings, namedtuples and sequences, so
the batch has the structure of one sample with tensors of one more dimension at the leaves.
"""
from __future__ import annotations

import collections.abc
import copy
import re

import numpy as np

import reftorch as torch
from ..._shape import contiguous_strides
from ..._storage import CPUStorage
from ._worker import get_worker_info

# NumPy arrays of strings, bytes or objects cannot become tensors.
_STR_OBJ_DTYPE = re.compile(r"[SaUO]")

_COLLATE_ERROR = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts "
                  "or lists; found {}")


def collate_tensor_fn(batch, *, collate_fn_map=None):
    elem = batch[0]
    out = None
    if get_worker_info() is not None and elem.device.type == "cpu":
        # Stack straight into shared memory: the batch then reaches the main process as a
        # handle to the memory instead of as pickled bytes.
        shape = (len(batch),) + tuple(elem.shape)
        storage = CPUStorage._new_shared(len(batch) * elem.numel(), elem.dtype)
        out = torch.Tensor._make(storage, 0, shape, contiguous_strides(shape))
    return torch.stack(batch, 0, out=out)


def collate_numpy_array_fn(batch, *, collate_fn_map=None):
    elem = batch[0]
    if _STR_OBJ_DTYPE.search(elem.dtype.str) is not None:
        raise TypeError(_COLLATE_ERROR.format(elem.dtype))
    return collate([torch.as_tensor(b) for b in batch], collate_fn_map=collate_fn_map)


def collate_numpy_scalar_fn(batch, *, collate_fn_map=None):
    return torch.as_tensor(batch)


def collate_float_fn(batch, *, collate_fn_map=None):
    return torch.tensor(batch, dtype=torch.float64)


def collate_int_fn(batch, *, collate_fn_map=None):
    return torch.tensor(batch)


def collate_str_fn(batch, *, collate_fn_map=None):
    return batch


default_collate_fn_map = {
    torch.Tensor: collate_tensor_fn,
    (np.ndarray, np.memmap): collate_numpy_array_fn,
    (np.bool_, np.number, np.object_): collate_numpy_scalar_fn,
    float: collate_float_fn,
    int: collate_int_fn,
    str: collate_str_fn,
    bytes: collate_str_fn,
}


def collate(batch, *, collate_fn_map=None):
    """Collate `batch` (a list of samples of one structure) using `collate_fn_map` for the
    leaves; containers are rebuilt with their own type where possible."""
    elem = batch[0]
    elem_type = type(elem)
    if collate_fn_map is not None:
        if elem_type in collate_fn_map:
            return collate_fn_map[elem_type](batch, collate_fn_map=collate_fn_map)
        for collate_type, fn in collate_fn_map.items():
            if isinstance(elem, collate_type):
                return fn(batch, collate_fn_map=collate_fn_map)

    def recurse(samples):
        return collate(samples, collate_fn_map=collate_fn_map)

    if isinstance(elem, collections.abc.Mapping):
        collated = {key: recurse([d[key] for d in batch]) for key in elem}
        if isinstance(elem, collections.abc.MutableMapping):
            clone = copy.copy(elem)       # keeps the mapping's type and extra state
            clone.update(collated)
            return clone
        try:
            return elem_type(collated)
        except TypeError:
            return collated               # the mapping type cannot be built from a dict
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):       # namedtuple
        return elem_type(*(recurse(samples) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        it = iter(batch)
        elem_size = len(next(it))
        if not all(len(e) == elem_size for e in it):
            raise RuntimeError("each element in list of batch should be of equal size")
        transposed = list(zip(*batch))     # tuples: strings stay grouped in tuples
        if isinstance(elem, tuple):
            return [recurse(samples) for samples in transposed]   # tuples become lists
        try:
            if isinstance(elem, collections.abc.MutableSequence):
                clone = copy.copy(elem)
                for i, samples in enumerate(transposed):
                    clone[i] = recurse(samples)
                return clone
            return elem_type([recurse(samples) for samples in transposed])
        except TypeError:
            return [recurse(samples) for samples in transposed]
    raise TypeError(_COLLATE_ERROR.format(elem_type))


def default_collate(batch):
    """Stack a list of samples into a batch: tensors are stacked along a new dim 0, NumPy
    arrays and scalars become tensors first, Python floats give float64 and ints int64
    tensors, strings stay lists; dicts, namedtuples, tuples and lists are collated per field
    (tuples come back as lists)."""
    return collate(batch, collate_fn_map=default_collate_fn_map)


def default_convert(data):
    """Convert NumPy arrays and scalars inside `data` to tensors, keeping the structure (used
    per sample when batching is disabled)."""
    elem_type = type(data)
    if isinstance(data, torch.Tensor):
        return data
    if elem_type.__module__ == "numpy" and elem_type.__name__ not in ("str_", "string_"):
        if isinstance(data, np.ndarray) and _STR_OBJ_DTYPE.search(data.dtype.str) is not None:
            return data
        if isinstance(data, (np.ndarray, np.bool_, np.number)):
            return torch.as_tensor(data)
        return data
    if isinstance(data, collections.abc.Mapping):
        converted = {key: default_convert(data[key]) for key in data}
        if isinstance(data, collections.abc.MutableMapping):
            clone = copy.copy(data)
            clone.update(converted)
            return clone
        try:
            return elem_type(converted)
        except TypeError:
            return converted
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return elem_type(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            if isinstance(data, collections.abc.MutableSequence):
                clone = copy.copy(data)
                for i, d in enumerate(data):
                    clone[i] = default_convert(d)
                return clone
            return elem_type([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data
