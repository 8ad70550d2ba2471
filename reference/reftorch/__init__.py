"""reftorch: a readable NumPy reference implementation of the documented PyTorch API.

`import reftorch as torch` and write PyTorch code; kernels come from the NumPy reference or,
where installed, from plugins (see `reftorch.plugins`).
"""
from . import _dtype
from ._dtype import (bfloat16, bool, cdouble, cfloat, complex64, complex128, double, dtype,
                     float, float16, float32, float64, get_default_dtype, half, int, int8,
                     int16, int32, int64, long, short, uint8)
from ._device import (Size, channels_last, contiguous_format, device, layout, memory_format,
                      preserve_format, sparse_coo, strided)
from ._finfo import finfo, iinfo
from ._promotion import broadcast_shapes, can_cast, promote_types, result_type
from ._storage import Storage
from ._tensor import Tensor
from . import _tensor_methods  # noqa: F401 (attaches op methods to Tensor)
from ._legacy import (BFloat16Storage, BFloat16Tensor, BoolStorage, BoolTensor, ByteStorage,
                      ByteTensor, CharStorage, CharTensor, ComplexDoubleStorage,
                      ComplexFloatStorage, DoubleStorage, DoubleTensor, FloatStorage,
                      FloatTensor, HalfStorage, HalfTensor, IntStorage, IntTensor, LongStorage,
                      LongTensor, ShortStorage, ShortTensor, TypedStorage,
                      set_default_tensor_type)
from ._ops.creation import (arange, as_tensor, empty, empty_like, empty_strided, eye,
                            from_numpy, full,
                            full_like, linspace, logspace, ones, ones_like, range,
                            scalar_tensor, tensor, zeros, zeros_like)
from ._ops import pointwise as _P
from ._ops import variants as _V
from ._tensor_str import get_printoptions, printoptions, set_printoptions
from .autograd import (enable_grad, inference_mode, is_grad_enabled, no_grad,
                       set_grad_enabled)
from ._ops import gradient_ops as _gradient_ops
from ._ops.gradient_ops import _view_gather, _view_scatter
from . import autograd, cuda, plugins, return_types
# Ops by documentation section: each module lists its public functions in __all__ and
# attaches its Tensor methods itself.
from ._ops.reduction import *  # noqa: F401,F403
from ._ops.sorting import *  # noqa: F401,F403
from ._ops.joining import *  # noqa: F401,F403
from ._ops.other_ops import *  # noqa: F401,F403

# --- elementwise functions: one line each, derived from the op declarations ------------------
add = _V.functional(_P.ADD)
sub = subtract = _V.functional(_P.SUB)
mul = multiply = _V.functional(_P.MUL)
div = divide = true_divide = _V.functional(_P.DIV)
floor_divide = _V.functional(_P.FLOOR_DIVIDE)
remainder = _V.functional(_P.REMAINDER, scalar_self=True)
pow = _V.functional(_P.POW, scalar_self=True)
neg = negative = _V.functional(_P.NEG, arity=1)
positive = _V.functional(_P.POSITIVE, arity=1)
abs = absolute = _V.functional(_P.ABS, arity=1)
eq = _V.functional(_P.EQ)
ne = not_equal = _V.functional(_P.NE)
lt = less = _V.functional(_P.LT)
le = less_equal = _V.functional(_P.LE)
gt = greater = _V.functional(_P.GT)
ge = greater_equal = _V.functional(_P.GE)
bitwise_and = _V.functional(_P.BITWISE_AND, scalar_self=True)
bitwise_or = _V.functional(_P.BITWISE_OR, scalar_self=True)
bitwise_xor = _V.functional(_P.BITWISE_XOR, scalar_self=True)
bitwise_not = _V.functional(_P.BITWISE_NOT, arity=1)
bitwise_left_shift = _V.functional(_P.BITWISE_LEFT_SHIFT, scalar_self=True)
bitwise_right_shift = _V.functional(_P.BITWISE_RIGHT_SHIFT, scalar_self=True)

set_default_dtype = _dtype.set_default_dtype


def is_tensor(obj):
    """True if `obj` is a reftorch Tensor."""
    return isinstance(obj, Tensor)


def is_storage(obj):
    """True if `obj` is a reftorch storage (untyped or typed)."""
    return isinstance(obj, (Storage, TypedStorage))


def is_floating_point(input):
    """True if `input`'s dtype is a floating point type."""
    return input.is_floating_point()


def is_complex(input):
    return input.is_complex()


def numel(input):
    """The number of elements in `input`."""
    return input.numel()


def set_flush_denormal(mode):
    """Denormal flushing is a CPU mode NumPy does not expose; report it as unsupported."""
    return False


__version__ = "0.1.0"

plugins.load_entry_points()
