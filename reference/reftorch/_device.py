"""torch.device, torch.layout, torch.memory_format and torch.Size."""
from __future__ import annotations

import operator

# Device types PyTorch's parser knows. Knowing a name is not the same as having a backend:
# allocation on a type without a registered backend raises (see _storage.backend_for).
KNOWN_DEVICE_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep",
                      "hip", "ve", "fpga", "maia", "xla", "lazy", "vulkan", "mps", "meta",
                      "hpu", "mtia", "privateuseone")


class device:
    """Where a tensor lives: a device type ('cpu', 'cuda') and an optional index."""

    __slots__ = ("_type", "_index")

    def __init__(self, type, index=None):  # noqa: A002 (PyTorch's argument name)
        if isinstance(type, device):
            if index is not None:
                raise TypeError("device(): cannot give an index together with a device object")
            self._type, self._index = type._type, type._index
            return
        if isinstance(type, int) and not isinstance(type, bool):
            # A bare integer is a legacy CUDA ordinal.
            type, index = "cuda", type
        if not isinstance(type, str):
            raise TypeError(f"device() received an invalid combination of arguments: "
                            f"got ({type.__class__.__name__})")
        name, sep, idx_text = type.partition(":")
        if name not in KNOWN_DEVICE_TYPES:
            raise RuntimeError(
                f"Expected one of {', '.join(KNOWN_DEVICE_TYPES)} device type at start of "
                f"device string: {type}")
        if sep:
            if index is not None:
                raise RuntimeError(f"type (string) must not include an index because index was "
                                   f"passed explicitly: {type}")
            if not idx_text.isdigit() or (len(idx_text) > 1 and idx_text[0] == "0"):
                raise RuntimeError(f"Invalid device string: '{type}'")
            index = int(idx_text)
        if index is not None:
            index = operator.index(index)
            if index < 0:
                raise RuntimeError(f"Device index must not be negative, got {index}")
        if name == "cpu" and index not in (None, 0):
            raise RuntimeError(f"CPU device index must be -1 or zero, got {index}")
        self._type, self._index = name, index

    @property
    def type(self):
        return self._type

    @property
    def index(self):
        return self._index

    def __eq__(self, other):
        if isinstance(other, str):
            other = device(other)
        return (isinstance(other, device) and self._type == other._type
                and self._index == other._index)

    def __hash__(self):
        return hash((self._type, self._index))

    def __str__(self):
        return self._type if self._index is None else f"{self._type}:{self._index}"

    def __repr__(self):
        if self._index is None:
            return f"device(type='{self._type}')"
        return f"device(type='{self._type}', index={self._index})"

    def __reduce__(self):
        return (device, (self._type, self._index))


CPU = device("cpu")


def as_device(d):
    """Normalise a `device=` argument (None, str, int or device) to a device."""
    if d is None or d is CPU:
        return CPU
    if isinstance(d, device):
        return d
    return device(d)


class layout:
    """Memory layout of a tensor: `strided` (dense) or `sparse_coo`."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "torch." + self.name

    def __reduce__(self):
        return self.name


strided = layout("strided")
sparse_coo = layout("sparse_coo")


class memory_format:
    """How `contiguous`, `clone` and `empty_like` lay out memory."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "torch." + self.name

    def __reduce__(self):
        return self.name


contiguous_format = memory_format("contiguous_format")
preserve_format = memory_format("preserve_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")


class Size(tuple):
    """The shape of a tensor: a tuple of ints that prints as `torch.Size([2, 3])`."""

    def __new__(cls, sizes=()):
        values = []
        for s in sizes:
            if hasattr(s, "ndim") and getattr(s, "ndim", 1) == 0 and hasattr(s, "item"):
                s = s.item()
            try:
                values.append(operator.index(s))
            except TypeError:
                raise TypeError(f"torch.Size() takes an iterable of 'int' "
                                f"(item {len(values)} is '{type(s).__name__}')") from None
        return super().__new__(cls, values)

    @classmethod
    def _of(cls, sizes):
        """A Size of a tuple of Python ints known to be valid (a tensor's own shape), without
        Size()'s per-item conversion: tensors hand out their shape on every `.shape`."""
        return tuple.__new__(cls, sizes)

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n

    def __getitem__(self, key):
        item = tuple.__getitem__(self, key)
        return Size._of(item) if isinstance(key, slice) else item   # our items: ints already

    def __add__(self, other):
        return Size(tuple(self) + tuple(other))

    def __radd__(self, other):
        return Size(tuple(other) + tuple(self))

    def __mul__(self, n):
        return Size(tuple(self) * n)

    __rmul__ = __mul__

    def __repr__(self):
        return f"torch.Size([{', '.join(str(s) for s in self)}])"

    __str__ = __repr__

    def __reduce__(self):
        return (Size, (tuple(self),))
