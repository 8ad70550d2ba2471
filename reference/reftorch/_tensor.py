"""The strided Tensor: (storage, storage_offset, sizes, strides in elements, dtype, device).

Views share storage and get exactly PyTorch's strides. On cpu a tensor caches the NumPy view of
its elements (`_np`), built once from the storage's 1-D array, so reference kernels read and
write through it and every other view of the same storage sees the writes.
"""
from __future__ import annotations

import builtins
import math
import operator
import weakref

import numpy as np

from . import _dtype as D
from ._device import (CPU, Size, channels_last, channels_last_3d, contiguous_format,
                      preserve_format, strided)
from ._device import device as Device
from ._storage import CPUStorage, allocate
from ._shape import (contiguous_strides, expand_strides, infer_size, is_channels_last,
                     is_contiguous, is_non_overlapping_and_dense, storage_span, view_strides,
                     wrap_dim)


class Tensor:
    """A multi-dimensional array of one dtype on one device, with autograd fields."""

    __slots__ = ("_storage", "_offset", "_shape", "_strides", "_cached_np", "_cached_from",
                 "requires_grad", "grad", "grad_fn", "_base", "_retains_grad",
                 "_backward_hooks", "__dict__", "__weakref__")

    # Legacy constructor: torch.Tensor(2, 3), torch.Tensor([1, 2]), torch.Tensor(size).
    def __new__(cls, *args, **kwargs):
        return _legacy.legacy_construct(cls, None, args, kwargs)

    # --- construction helpers (internal) -------------------------------------------------
    @classmethod
    def _make(cls, storage, offset, shape, strides, cached_np=None, cached_from=None):
        t = object.__new__(cls)
        t._storage = storage
        t._offset = offset
        t._shape = shape
        t._strides = strides
        t._cached_np = cached_np
        t._cached_from = cached_from
        t.requires_grad = False
        t.grad = None
        t.grad_fn = None
        t._base = None
        t._retains_grad = False
        t._backward_hooks = None
        return t

    @classmethod
    def _from_array(cls, array, dtype=None):
        """Wrap a NumPy array that nobody else holds (a kernel's fresh result) without copying."""
        if dtype is None:  # the table lookup first: from_numpy_dtype also normalises
            dtype = D._BY_NUMPY.get(array.dtype) or D.from_numpy_dtype(array.dtype)
        if array.flags.c_contiguous:
            flat = array.ravel()  # a view, as reshape(-1), but cheaper to call
            strides = _CONTIGUOUS_STRIDES.get(array.shape)
            if strides is None:
                strides = _remember_contiguous_strides(array.shape)
        elif _is_dense(array):
            # NumPy kept the inputs' memory order (as PyTorch's TensorIterator does); view the
            # dense block as 1-D so the tensor can keep those strides.
            itemsize = array.itemsize
            flat = np.lib.stride_tricks.as_strided(array, (array.size,), (itemsize,))
            strides = tuple(s // itemsize for s in array.strides)
        else:
            array = np.array(array, order="C")
            flat = array.reshape(-1)
            strides = contiguous_strides(array.shape)
        t = object.__new__(cls)
        t._storage = CPUStorage(flat, dtype)
        t._offset = 0
        t._shape = array.shape
        t._strides = strides
        t._cached_np = array
        t._cached_from = flat
        t.requires_grad = False
        t.grad = t.grad_fn = t._base = t._backward_hooks = None
        t._retains_grad = False
        return t

    @classmethod
    def _empty(cls, shape, dtype, device=CPU, strides=None):
        """An uninitialised tensor in new storage: row-major, or with the given dense
        `strides` (a permutation of row-major, as a result layout rule gives them)."""
        shape = tuple(shape)
        storage = allocate(math.prod(shape), dtype, device)
        return cls._make(storage, 0, shape, strides or contiguous_strides(shape))

    def _view(self, shape, strides, offset=None, op="as_strided", replay=None, **params):
        """A tensor sharing this one's storage with new geometry; `op` and `params` name the
        view for autograd (its node and derivative row).

        Views that pick elements pass `replay` (the same view as a function of a tensor).
        Their gradient maps view elements to storage slots; when this tensor is itself an
        expanded view, several of its elements share a slot, so the mapping is made on a
        contiguous stand-in of this tensor's shape instead (its logical element positions)."""
        t = Tensor._make(self._storage, self._offset if offset is None else offset,
                         tuple(shape), tuple(strides))
        t._base = self if self._base is None else self._base
        if self.requires_grad:
            logical = None
            if replay is not None and _expanded(self):
                stand_in = Tensor._make(self._storage, 0, self._shape,
                                        contiguous_strides(self._shape))
                logical = (stand_in, replay(stand_in))
            _graph.record_view(self, t, op, params, logical)
        return t

    # --- the NumPy view ----------------------------------------------------------------------
    @property
    def _np(self):
        """The NumPy view of this tensor's elements (cpu only).

        The cached view is kept with the storage array it was built on: a storage that moves
        its elements (resize_, share_memory_) gets a new array, and every tensor viewing it
        must then see the new memory."""
        a = self._cached_np
        if a is None or self._cached_from is not self._storage.array:
            storage = self._storage
            if not isinstance(storage, CPUStorage):
                raise TypeError(
                    f"can't convert {self.device} device type tensor to numpy. Use "
                    f"Tensor.cpu() to copy the tensor to host memory first.")
            itemsize = storage.dtype.itemsize
            if 0 in self._shape:
                # An empty view may sit past the end of its storage (x[1] of a (2, 0) tensor).
                a = np.empty(self._shape, dtype=storage.array.dtype)
            else:
                # (positional arguments: the keywords cost as much as the view itself)
                a = np.ndarray(self._shape, storage.array.dtype, storage.array,
                               self._offset * itemsize,
                               tuple([s * itemsize for s in self._strides]))
            self._cached_np = a
            self._cached_from = storage.array
        return a

    def _host_array(self):
        """The elements as a host NumPy array (a view on cpu, a copy from other devices)."""
        if isinstance(self._storage, CPUStorage):
            return self._np
        return self.cpu()._np

    def _set_geometry(self, storage, offset, shape, strides):
        """In-place metadata change (resize_, set_, t_, ...): drop the cached NumPy view."""
        self._storage = storage
        self._offset = offset
        self._shape = tuple(shape)
        self._strides = tuple(strides)
        self._cached_np = None

    def _bump_version(self):
        self._storage._version += 1

    # --- metadata ---------------------------------------------------------------------------
    @property
    def dtype(self):
        return self._storage.dtype

    @property
    def device(self):
        return self._storage.device

    @property
    def shape(self):
        return Size._of(self._shape)

    @property
    def ndim(self):
        return len(self._shape)

    @property
    def layout(self):
        return strided

    @property
    def is_cuda(self):
        return self._storage.device.type == "cuda"

    @property
    def is_cpu(self):
        return self._storage.device.type == "cpu"

    @property
    def is_sparse(self):
        return False

    @property
    def is_quantized(self):
        return False

    @property
    def is_meta(self):
        return False

    @property
    def _version(self):
        return self._storage._version

    @property
    def is_leaf(self):
        return self.grad_fn is None

    @property
    def data(self):
        return self.detach()

    @data.setter
    def data(self, other):
        self._set_geometry(other._storage, other._offset, other._shape, other._strides)

    def dim(self):
        return len(self._shape)

    ndimension = dim

    def size(self, dim=None):
        if dim is None:
            return Size._of(self._shape)
        return self._shape[wrap_dim(dim, len(self._shape))]

    def stride(self, dim=None):
        if dim is None:
            return tuple(self._strides)
        return self._strides[wrap_dim(dim, len(self._shape))]

    def storage_offset(self):
        return self._offset

    def numel(self):
        return math.prod(self._shape)

    nelement = numel

    def element_size(self):
        return self._storage.dtype.itemsize

    @property
    def itemsize(self):
        return self._storage.dtype.itemsize

    @property
    def nbytes(self):
        return self.numel() * self._storage.dtype.itemsize

    def data_ptr(self):
        base = self._storage.data_ptr()
        return base + self._offset * self._storage.dtype.itemsize if base else 0

    def untyped_storage(self):
        return self._storage

    def storage(self):
        return _legacy.typed_storage_for(self._storage)

    def is_floating_point(self):
        return self._storage.dtype.is_floating_point

    def is_complex(self):
        return self._storage.dtype.is_complex

    def is_signed(self):
        return self._storage.dtype.is_signed

    def get_device(self):
        index = self._storage.device.index
        return -1 if index is None else index

    def record_stream(self, stream):
        """Tell the cuda caching allocator that `stream` uses this tensor's memory too, so
        that the memory is not reused before the work queued there by then has run."""
        record = getattr(self._storage, "record_stream", None)
        if record is None:
            raise RuntimeError(f"record_stream expects a cuda tensor, but got one on "
                               f"{self.device}")
        record(stream._handle)

    def is_contiguous(self, memory_format=None):
        if memory_format is channels_last:
            return is_channels_last(self._shape, self._strides)
        if memory_format is channels_last_3d:
            return is_channels_last(self._shape, self._strides, ndim=5)
        return is_contiguous(self._shape, self._strides)

    def is_set_to(self, other):
        return (self._storage is other._storage and self._offset == other._offset
                and self._shape == other._shape and self._strides == other._strides)

    def __len__(self):
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def __iter__(self):
        if not self._shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self.select(0, i) for i in range(self._shape[0]))

    def __hash__(self):
        return id(self)

    # --- views ----------------------------------------------------------------------------
    def view(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], D.dtype):
            return self._view_as_dtype(shape[0])
        shape = infer_size(_shape_arg(shape), self.numel())
        strides = view_strides(self._shape, self._strides, shape)
        if strides is None:
            raise RuntimeError(
                "view size is not compatible with input tensor's size and stride (at least one "
                "dimension spans across two contiguous subspaces). Use .reshape(...) instead.")
        return self._view(shape, strides, op="view", self_shape=self._shape)

    def _view_as_dtype(self, dtype):
        if dtype.itemsize != self.dtype.itemsize:
            raise RuntimeError("view(dtype) with a different element size is not supported "
                               "by reftorch yet")
        if dtype is self.dtype:
            return self._view(self._shape, self._strides, op="alias")
        storage = CPUStorage(self._storage.array.view(dtype.numpy_dtype), dtype)
        storage._version = self._storage._version
        return Tensor._make(storage, self._offset, self._shape, self._strides)

    def view_as(self, other):
        return self.view(other._shape)

    def reshape(self, *shape):
        shape = infer_size(_shape_arg(shape), self.numel())
        strides = view_strides(self._shape, self._strides, shape)
        if strides is not None:
            return self._view(shape, strides, op="view", self_shape=self._shape)
        return self.contiguous().view(shape)

    def reshape_as(self, other):
        return self.reshape(other._shape)

    def flatten(self, start_dim=0, end_dim=-1):
        if not self._shape:
            return self.reshape(1)
        start = wrap_dim(start_dim, self.ndim)
        end = wrap_dim(end_dim, self.ndim)
        if start > end:
            raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
        middle = 1
        for s in self._shape[start:end + 1]:
            middle *= s
        return self.reshape(self._shape[:start] + (middle,) + self._shape[end + 1:])

    def transpose(self, dim0, dim1):
        n = self.ndim
        dim0, dim1 = wrap_dim(dim0, n), wrap_dim(dim1, n)
        shape, strides = list(self._shape), list(self._strides)
        shape[dim0], shape[dim1] = shape[dim1], shape[dim0]
        strides[dim0], strides[dim1] = strides[dim1], strides[dim0]
        return self._view(shape, strides, op="transpose", dim0=dim0, dim1=dim1)

    swapaxes = swapdims = transpose

    def t(self):
        if self.ndim > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                               f"{self.ndim}D")
        if self.ndim < 2:
            return self._view(self._shape, self._strides, op="t")
        return self._view(self._shape[::-1], self._strides[::-1], op="t")

    @property
    def T(self):
        return self.permute(*reversed(range(self.ndim)))

    @property
    def mT(self):
        if self.ndim < 2:
            raise RuntimeError("tensor.mT is only supported on matrices or batches of matrices. "
                               f"Got {self.ndim}-D tensor.")
        return self.transpose(-2, -1)

    def permute(self, *dims):
        dims = _shape_arg(dims)
        n = self.ndim
        if len(dims) != n:
            raise RuntimeError(
                f"permute(sparse_coo): number of dimensions in the tensor input does not match "
                f"the length of the desired ordering of dimensions i.e. input.dim() = {n} is not "
                f"equal to len(dims) = {len(dims)}")
        dims = [wrap_dim(d, n) for d in dims]
        if len(set(dims)) != n:
            raise RuntimeError("permute(): duplicate dims are not allowed.")
        return self._view([self._shape[d] for d in dims], [self._strides[d] for d in dims],
                          op="permute", dims=tuple(dims))

    def expand(self, *sizes):
        shape, strides = expand_strides(self._shape, self._strides, _shape_arg(sizes))
        return self._view(shape, strides, op="expand", self_shape=self._shape)

    def expand_as(self, other):
        return self.expand(other._shape)

    def narrow(self, dim, start, length):
        dim = wrap_dim(dim, self.ndim)
        size = self._shape[dim]
        start = operator.index(start)
        if not -size <= start <= size:
            raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], "
                             f"but got {start})")
        if start < 0:
            start += size
        if length < 0 or start + length > size:
            raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size "
                               f"({size}).")
        shape = list(self._shape)
        shape[dim] = length
        return self._view(shape, self._strides, self._offset + start * self._strides[dim],
                          op="slice", replay=lambda t: t.narrow(dim, start, length))

    def select(self, dim, index):
        if not self._shape:
            raise IndexError("select() cannot be applied to a 0-dim tensor.")
        dim = wrap_dim(dim, self.ndim)
        size = self._shape[dim]
        index = operator.index(index)
        if not -size <= index < size:
            raise IndexError(f"index {index} is out of bounds for dimension {dim} with size "
                             f"{size}")
        if index < 0:
            index += size
        return self._view(self._shape[:dim] + self._shape[dim + 1:],
                          self._strides[:dim] + self._strides[dim + 1:],
                          self._offset + index * self._strides[dim], op="select",
                          replay=lambda t: t.select(dim, index))

    def squeeze(self, dim=None):
        n = self.ndim
        if dim is None:
            dims = {i for i, s in enumerate(self._shape) if s == 1}
        else:
            given = dim if isinstance(dim, (tuple, list)) else (dim,)
            dims = {wrap_dim(d, n) for d in given if n}
            dims = {d for d in dims if self._shape[d] == 1}
        keep = [i for i in range(n) if i not in dims]
        return self._view([self._shape[i] for i in keep], [self._strides[i] for i in keep],
                          op="squeeze", self_shape=self._shape, dim=dim)

    def unsqueeze(self, dim):
        n = self.ndim
        dim = wrap_dim(dim, n + 1)
        stride = self._shape[dim] * self._strides[dim] if dim < n else 1
        return self._view(self._shape[:dim] + (1,) + self._shape[dim:],
                          self._strides[:dim] + (stride,) + self._strides[dim:],
                          op="unsqueeze", dim=dim)

    def unfold(self, dimension, size, step):
        n = self.ndim
        dim = wrap_dim(dimension, max(n, 1))
        dim_size = self._shape[dim] if n else 1
        dim_stride = self._strides[dim] if n else 1
        if size > dim_size:
            raise RuntimeError(f"maximum size for tensor at dimension {dim} is {dim_size} but "
                               f"size is {size}")
        if step <= 0:
            raise RuntimeError(f"step is {step} but must be > 0")
        shape, strides = list(self._shape), list(self._strides)
        if n:
            shape[dim] = (dim_size - size) // step + 1
            strides[dim] = dim_stride * step
        return self._view(shape + [size], strides + [dim_stride], op="unfold",
                          replay=lambda t: t.unfold(dimension, size, step))

    def diagonal(self, offset=0, dim1=0, dim2=1):
        n = self.ndim
        d1, d2 = wrap_dim(dim1, n), wrap_dim(dim2, n)
        if d1 == d2:
            raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
        start = self._offset
        if offset >= 0:
            length = max(min(self._shape[d1], self._shape[d2] - offset), 0)
            if length:
                start += offset * self._strides[d2]
        else:
            length = max(min(self._shape[d1] + offset, self._shape[d2]), 0)
            if length:
                start -= offset * self._strides[d1]
        keep = [i for i in range(n) if i not in (d1, d2)]
        shape = [self._shape[i] for i in keep] + [length]
        strides = [self._strides[i] for i in keep] + [self._strides[d1] + self._strides[d2]]
        return self._view(shape, strides, start, op="diagonal",
                          replay=lambda t: t.diagonal(offset, dim1, dim2))

    def as_strided(self, size, stride, storage_offset=None):
        size, stride = tuple(size), tuple(stride)
        if len(size) != len(stride):
            raise RuntimeError(f"mismatch in length of strides and shape")
        if any(s < 0 for s in stride):
            raise RuntimeError("as_strided: Negative strides are not supported at the moment, "
                               f"got strides: {list(stride)}")
        offset = self._offset if storage_offset is None else storage_offset
        needed = offset + storage_span(size, stride) if all(size) else 0
        if needed > len(self._storage):
            raise RuntimeError(
                f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset "
                f"{offset}, and itemsize {self.itemsize} requiring a storage size of "
                f"{needed * self.itemsize} are out of bounds for storage of size "
                f"{len(self._storage) * self.itemsize}")
        return self._view(size, stride, offset, op="as_strided")

    def contiguous(self, memory_format=None):
        """self when it is contiguous in `memory_format` (contiguous_format, the default,
        channels_last or channels_last_3d), else a copy that is."""
        memory_format = memory_format or contiguous_format
        if self.is_contiguous(memory_format=memory_format):
            return self
        if memory_format is preserve_format:
            raise RuntimeError("preserve memory format is unsupported by the contiguous "
                               "operator")
        return _copy.clone(self, memory_format)

    # --- copies and conversions --------------------------------------------------------------
    def clone(self, *, memory_format=None):
        return _copy.clone(self, memory_format)

    def copy_(self, src, non_blocking=False):
        return _copy.copy_(self, src, non_blocking)

    def to(self, *args, **kwargs):
        return _copy.to(self, *args, **kwargs)

    def cpu(self, memory_format=None):
        return self.to(CPU, memory_format=memory_format)

    def cuda(self, device=None, non_blocking=False, memory_format=None):
        if device is None:
            target = Device("cuda")
        elif isinstance(device, builtins.int):
            target = Device("cuda", device)
        else:
            target = Device(device)
        return self.to(target, non_blocking=non_blocking, memory_format=memory_format)

    def type(self, dtype=None, non_blocking=False, **kwargs):
        return _legacy.tensor_type(self, dtype)

    def type_as(self, other):
        return self.to(other.dtype)

    def float(self, memory_format=None):
        return self.to(D.float32, memory_format=memory_format)

    def double(self, memory_format=None):
        return self.to(D.float64, memory_format=memory_format)

    def half(self, memory_format=None):
        return self.to(D.float16, memory_format=memory_format)

    def bfloat16(self, memory_format=None):
        return self.to(D.bfloat16, memory_format=memory_format)

    def int(self, memory_format=None):
        return self.to(D.int32, memory_format=memory_format)

    def long(self, memory_format=None):
        return self.to(D.int64, memory_format=memory_format)

    def short(self, memory_format=None):
        return self.to(D.int16, memory_format=memory_format)

    def char(self, memory_format=None):
        return self.to(D.int8, memory_format=memory_format)

    def byte(self, memory_format=None):
        return self.to(D.uint8, memory_format=memory_format)

    def bool(self, memory_format=None):
        return self.to(D.bool, memory_format=memory_format)

    def cfloat(self, memory_format=None):
        return self.to(D.complex64, memory_format=memory_format)

    def cdouble(self, memory_format=None):
        return self.to(D.complex128, memory_format=memory_format)

    def detach(self):
        return Tensor._make(self._storage, self._offset, self._shape, self._strides,
                            self._cached_np, self._cached_from)

    def detach_(self):
        self.grad_fn = None
        self.requires_grad = False
        return self

    def requires_grad_(self, requires_grad=True):
        _graph.set_requires_grad(self, requires_grad)
        return self

    def retain_grad(self):
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self.grad_fn is not None and not self._retains_grad:
            # weakly, as PyTorch: the node is reachable from this tensor (its grad_fn)
            self.grad_fn._retained[getattr(self, "_output_nr", 0)] = weakref.ref(self)
        self._retains_grad = True

    # --- autograd -------------------------------------------------------------------------
    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulate the gradient of this tensor into the leaves' `.grad` (see autograd)."""
        _engine.backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    def register_hook(self, hook):
        """Call `hook(grad)` when this tensor's gradient is computed; a returned tensor
        replaces the gradient. Returns a handle whose `remove()` unregisters the hook."""
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require "
                               "gradient")
        if self.grad_fn is not None:
            hooks = self.grad_fn._pre_hooks.setdefault(getattr(self, "_output_nr", 0), [])
        else:
            hooks = self._leaf_hooks()
        hooks.append(hook)
        return _graph.RemovableHandle(hooks, hook)

    def _grad_accumulator(self):
        """The AccumulateGrad node of this leaf, made on first use. As in PyTorch, the leaf
        holds it weakly (the graphs that use it hold it): the node holds the leaf, so a strong
        reference back would make a cycle that keeps the leaf, its .grad and every graph
        through it alive until the cyclic garbage collector runs. Hooks registered on the
        leaf live on the leaf and are shared with each accumulator it gets."""
        ref = self.__dict__.get("_accumulator")
        acc = None if ref is None else ref()
        if acc is None:
            acc = _graph.AccumulateGrad(self)
            hooks = self.__dict__.get("_hook_list")
            if hooks is not None:
                acc._pre_hooks[0] = hooks
            self.__dict__["_accumulator"] = weakref.ref(acc)
        return acc

    def _leaf_hooks(self):
        """The list of this leaf's gradient hooks (the pre-hooks of its accumulator)."""
        hooks = self.__dict__.get("_hook_list")
        if hooks is None:
            hooks = self.__dict__["_hook_list"] = []
            ref = self.__dict__.get("_accumulator")
            acc = None if ref is None else ref()
            if acc is not None:
                acc._pre_hooks[0] = hooks
        return hooks

    @property
    def retains_grad(self):
        return self._retains_grad

    # --- NumPy and Python interop -----------------------------------------------------------
    def numpy(self, *, force=False):
        if self.requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use "
                               "tensor.detach().numpy() instead.")
        if force:
            return self._host_array()
        return self._np

    def __array__(self, dtype=None, copy=None):
        a = self._host_array()
        return a if dtype is None else a.astype(dtype, copy=False)

    def tolist(self):
        return _python_values(self._host_array())

    def item(self):
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to "
                               f"Scalar")
        return _python_values(self._host_array().reshape(()))

    def __float__(self):
        value = self.item()
        if isinstance(value, builtins.complex):
            raise TypeError("can't convert complex to float")
        return builtins.float(value)

    def __int__(self):
        value = self.item()
        if isinstance(value, builtins.complex):
            raise TypeError("can't convert complex to int")
        return builtins.int(value)

    def __complex__(self):
        return builtins.complex(self.item())

    def __index__(self):
        if self.dtype.category is not D.Category.INTEGER and self.dtype is not D.bool \
                or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an "
                            "index")
        return builtins.int(self.item())

    def __bool__(self):
        n = self.numel()
        if n != 1:
            if n == 0:
                raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
            raise RuntimeError(f"Boolean value of Tensor with more than one value is ambiguous")
        return builtins.bool(self.item())

    def __repr__(self, *, tensor_contents=None):
        return _tensor_str.tensor_repr(self, tensor_contents=tensor_contents)

    def __format__(self, spec):
        if not self._shape:
            return self.item().__format__(spec)
        return object.__format__(self, spec)

    def __reduce_ex__(self, protocol):
        return (_legacy.rebuild_tensor, (self.cpu()._np.copy(), self.dtype, str(self.device),
                                 self.requires_grad))

    def __deepcopy__(self, memo):
        result = self.clone().detach()
        result.requires_grad = self.requires_grad
        memo[id(self)] = result
        return result

    # Tensors are unhashable-by-value and must not be compared with `==` in containers;
    # `__eq__` is the elementwise op (attached in _tensor_methods).


# Kernel results come in a few shapes over and over: remember their row-major strides
# (a dict lookup costs a fifth of computing them; functools.lru_cache saves nothing here).
_CONTIGUOUS_STRIDES = {}


def _remember_contiguous_strides(shape):
    if len(_CONTIGUOUS_STRIDES) >= 4096:
        _CONTIGUOUS_STRIDES.clear()  # a bound, for programs that see many shapes
    strides = _CONTIGUOUS_STRIDES[shape] = contiguous_strides(shape)
    return strides


def _shape_arg(args):
    """Accept both f(2, 3) and f((2, 3)) / f(Size) for shape-like varargs."""
    if len(args) == 1 and not isinstance(args[0], (builtins.int, np.integer)) \
            and not _is_int_tensor(args[0]):
        return tuple(args[0])
    return args


def _is_int_tensor(x):
    return isinstance(x, Tensor) and x.ndim == 0


def _expanded(t):
    """Whether some elements of `t` share a storage slot (a dim of stride 0, as expand makes)."""
    return any(size > 1 and stride == 0 for size, stride in zip(t._shape, t._strides))


def _is_dense(array):
    """Whether a NumPy array covers one dense block of memory with positive strides."""
    itemsize = array.itemsize
    strides = array.strides
    if array.size == 0 or any(s <= 0 or s % itemsize for s, n in zip(strides, array.shape)
                              if n != 1):
        return False
    return is_non_overlapping_and_dense(array.shape, [s // itemsize for s in strides])


def _python_values(array):
    """NumPy values as Python numbers: half types go through float32 so floats come out."""
    if array.dtype == D.bfloat16.numpy_dtype or array.dtype == np.float16:
        array = array.astype(np.float32)
    return array.tolist()


# Imported last, as modules: each imports this one, so Tensor must exist first. (Imported
# inside the methods instead, `from .x import y` cost 0.5-0.8 us a call: contiguous(),
# requires_grad_(), backward(), every view of a tensor that requires grad.)
from . import _legacy, _tensor_str  # noqa: E402
from .autograd import engine as _engine, graph as _graph  # noqa: E402
from ._ops import copy as _copy  # noqa: E402
