"""reftorch: a readable NumPy reference implementation of the documented PyTorch API.

`import reftorch as torch` and write PyTorch code; kernels come from the NumPy reference or,
where installed, from plugins (see `reftorch.plugins`).
"""
from . import _dtype
from ._dtype import (bfloat16, bool, cdouble, cfloat, complex64, complex128, double, dtype,
                     float, float16, float32, float64, get_default_dtype, half, int, int8,
                     int16, int32, int64, long, short, uint8)
from ._device import (Size, channels_last, channels_last_3d, contiguous_format, device, layout,
                      memory_format, preserve_format, sparse_coo, strided)
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
from . import autograd, cuda, plugins, random, return_types, special, utils
from . import multiprocessing  # registers the tensor reducers with multiprocessing's pickler
from .random import (Generator, default_generator, get_rng_state, initial_seed, manual_seed,
                     seed, set_rng_state)
# Ops by documentation section: each module lists its public functions in __all__ and
# attaches its Tensor methods itself.
from ._ops.special_pointwise import *  # noqa: F401,F403
from ._ops.reduction import *  # noqa: F401,F403
from ._ops.sorting import *  # noqa: F401,F403
from ._ops.joining import *  # noqa: F401,F403
from ._ops.other_ops import *  # noqa: F401,F403
from ._ops.tensor_functions import *  # noqa: F401,F403
from ._threads import (get_num_interop_threads, get_num_threads, set_num_interop_threads,
                       set_num_threads)
from .utils.dlpack import from_dlpack
from .utils.dlpack import tensor_dlpack as _tensor_dlpack
from .utils.dlpack import tensor_dlpack_device as _tensor_dlpack_device
from ._ops.blas import *  # noqa: F401,F403
from ._ops.linalg import *  # noqa: F401,F403
from ._ops.spectral import *  # noqa: F401,F403
from . import fft  # noqa: E402 (the torch.fft module, callable as the legacy torch.fft)
from . import linalg  # noqa: E402 (torch.linalg)
from ._ops.sampling import *  # noqa: F401,F403
# The neural-network ops PyTorch also exposes as torch.X (relu, conv2d, batch_norm, ...).
from ._ops.nn_activation import *  # noqa: F401,F403
from ._ops.nn_convolution import *  # noqa: F401,F403
from ._ops.nn_embedding import *  # noqa: F401,F403
from ._ops.nn_loss import *  # noqa: F401,F403
from ._ops.nn_normalization import *  # noqa: F401,F403
from ._ops.nn_pooling import *  # noqa: F401,F403
from ._ops.nn_vision import *  # noqa: F401,F403

# --- elementwise functions: one line each, derived from the op declarations ------------------
add = _V.functional(_P.ADD)
sub = subtract = _V.functional(_P.SUB)
mul = multiply = _V.functional(_P.MUL)
div = divide = true_divide = _V.functional(_P.DIV)
floor_divide = _V.functional(_P.FLOOR_DIVIDE)
remainder = _V.functional(_P.REMAINDER, scalar_self=True)
pow = _V.functional(_P.POW, scalar_self=True)
neg = negative = _V.functional(_P.NEG, arity=1)
positive = _V.identity(_P.POSITIVE)   # the input itself, as PyTorch returns it
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
acos = arccos = _V.functional(_P.ACOS, arity=1)
asin = arcsin = _V.functional(_P.ASIN, arity=1)
atan = arctan = _V.functional(_P.ATAN, arity=1)
acosh = arccosh = _V.functional(_P.ACOSH, arity=1)
asinh = arcsinh = _V.functional(_P.ASINH, arity=1)
atanh = arctanh = _V.functional(_P.ATANH, arity=1)
cos = _V.functional(_P.COS, arity=1)
cosh = _V.functional(_P.COSH, arity=1)
sin = _V.functional(_P.SIN, arity=1)
sinh = _V.functional(_P.SINH, arity=1)
tan = _V.functional(_P.TAN, arity=1)
tanh = _V.functional(_P.TANH, arity=1)
exp = _V.functional(_P.EXP, arity=1)
exp2 = _V.functional(_P.EXP2, arity=1)
expm1 = _V.functional(_P.EXPM1, arity=1)
log = _V.functional(_P.LOG, arity=1)
log10 = _V.functional(_P.LOG10, arity=1)
log1p = _V.functional(_P.LOG1P, arity=1)
log2 = _V.functional(_P.LOG2, arity=1)
sigmoid = _V.functional(_P.SIGMOID, arity=1)
logit = _P.logit_fn
reciprocal = _V.functional(_P.RECIPROCAL, arity=1)
rsqrt = _V.functional(_P.RSQRT, arity=1)
sqrt = _V.functional(_P.SQRT, arity=1)
square = _P.square
deg2rad = _V.functional(_P.DEG2RAD, arity=1)
rad2deg = _V.functional(_P.RAD2DEG, arity=1)
angle = _P.angle_fn
ceil = _V.functional(_P.CEIL, arity=1)
floor = _V.functional(_P.FLOOR, arity=1)
trunc = fix = _V.functional(_P.TRUNC, arity=1)
round = _P.round_fn
frac = _V.functional(_P.FRAC, arity=1)
sign = _V.functional(_P.SIGN, arity=1)
sgn = _V.functional(_P.SGN, arity=1)
signbit = _V.functional(_P.SIGNBIT, arity=1)
conj = _P.conj
is_conj = _P.is_conj
resolve_conj = _P.resolve_conj
conj_physical = _V.functional(_P.CONJ_PHYSICAL, arity=1)
real = _P.real
imag = _P.imag
view_as_real = _P.view_as_real
view_as_complex = _P.view_as_complex
nan_to_num = _P.nan_to_num_fn
isnan = _V.functional(_P.ISNAN, arity=1)
isinf = _V.functional(_P.ISINF, arity=1)
isposinf = _V.functional(_P.ISPOSINF, arity=1)
isneginf = _V.functional(_P.ISNEGINF, arity=1)
isfinite = _V.functional(_P.ISFINITE, arity=1)
isreal = _V.functional(_P.ISREAL, arity=1)
logical_not = _V.functional(_P.LOGICAL_NOT, arity=1)
logical_and = _P.TENSOR_OTHER_FORMS["logical_and"][0]
logical_or = _P.TENSOR_OTHER_FORMS["logical_or"][0]
logical_xor = _P.TENSOR_OTHER_FORMS["logical_xor"][0]
atan2 = arctan2 = _P.TENSOR_OTHER_FORMS["atan2"][0]
hypot = _P.TENSOR_OTHER_FORMS["hypot"][0]
logaddexp = _P.TENSOR_OTHER_FORMS["logaddexp"][0]
logaddexp2 = _P.TENSOR_OTHER_FORMS["logaddexp2"][0]
copysign = _V.functional(_P.COPYSIGN)
heaviside = _P.heaviside_fn
maximum = _P.TENSOR_OTHER_FORMS["maximum"][0]
minimum = _P.TENSOR_OTHER_FORMS["minimum"][0]
fmax = _P.TENSOR_OTHER_FORMS["fmax"][0]
fmin = _P.TENSOR_OTHER_FORMS["fmin"][0]
float_power = _P.float_power
xlogy = _V.functional(_P.XLOGY, scalar_self=True)
ldexp = _P.TENSOR_OTHER_FORMS["ldexp"][0]
nextafter = _P.TENSOR_OTHER_FORMS["nextafter"][0]
fmod = _V.functional(_P.FMOD)
gcd = _P.TENSOR_OTHER_FORMS["gcd"][0]
lcm = _P.TENSOR_OTHER_FORMS["lcm"][0]
clamp = clip = _P.clamp_fn
clamp_min = _V.functional(_P.CLAMP_MIN)
clamp_max = _V.functional(_P.CLAMP_MAX)
lerp = _P.lerp_fn
addcmul = _P.addcmul_fn
addcdiv = _P.addcdiv_fn
where = _P.where_fn

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

from . import nn  # noqa: E402 (layers are built from everything above)
from . import hub, optim, serialization  # noqa: E402
from .serialization import load, save  # noqa: E402
Tensor.__dlpack__ = _tensor_dlpack
Tensor.__dlpack_device__ = _tensor_dlpack_device
from . import sparse  # noqa: E402 (torch.sparse: sparse COO tensors)
sparse.accept_sparse_operands(globals())  # torch.add/mm/sum/...: sparse operands too

plugins.load_entry_points()
