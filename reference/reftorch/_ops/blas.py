"""Matrix products (BLAS): mm, bmm, matmul, mv, dot, the add* family, chain_matmul, matrix_power.

The primitive products (mm, bmm, mv, dot, vdot, addmm, addbmm, baddbmm, addmv, addr) are
structured ops whose reference kernel is `numpy.matmul`; everything else is composed from them
and from views, so autograd works through the parts:

  matmul        dot / mv / mm / bmm plus reshape, expand and squeeze (by the operands' ndim)
  inner         mm over the flattened leading dims (a plain multiply when one side is 0-dim)
  outer, ger    a broadcasting multiply (as in PyTorch, whose node is MulBackward0)
  chain_matmul  mm in the cheapest association order (the matrix-chain algorithm)
  matrix_power  repeated squaring with matmul; negative powers invert first

PyTorch details kept here, and where NumPy differs:
  * half types (float16, bfloat16) accumulate in float32 and round once at the end;
    integer products wrap around like C integers (computed in int64, then narrowed);
  * `beta == 0` means the added tensor is not read at all: NaN and inf in it do not
    propagate (the BLAS convention); for addmm, addmv and addbmm in float32/float64/complex,
    `alpha == 0` likewise skips the product (PyTorch hands those to BLAS);
  * the operands of a product must share one dtype (no type promotion), except addr, which
    promotes like an elementwise op;
  * `out=` must already have the result's dtype (no casting), except for addr, outer, ger.
"""
from __future__ import annotations

import numbers
import operator
import warnings

import numpy as np

from .. import _dtype as D
from .._promotion import broadcast_shapes, check_output_cast, result_dtype
from .._tensor import Tensor
from ..autograd.grad_mode import is_grad_enabled
from . import structured

__all__ = [
    "addbmm", "addmm", "addmv", "addr", "baddbmm", "bmm", "chain_matmul", "dot", "ger",
    "inner", "matmul", "matrix_power", "mm", "mv", "outer", "vdot",
]

HALF = frozenset({D.float16, D.bfloat16})
INTEGRAL = frozenset({D.uint8, D.int8, D.int16, D.int32, D.int64})
INVERTIBLE = frozenset({D.float32, D.float64, D.complex64, D.complex128})

# C++ type names, as PyTorch's out= and dtype messages print them.
_CPP_NAMES = {
    D.bool: "bool", D.uint8: "unsigned char", D.int8: "signed char", D.int16: "short int",
    D.int32: "int", D.int64: "long int", D.float16: "c10::Half",
    D.bfloat16: "c10::BFloat16", D.float32: "float", D.float64: "double",
    D.complex64: "c10::complex<float>", D.complex128: "c10::complex<double>",
}
# ... and as its scalar conversions name them ("value cannot be converted to type float").
_CONVERSION_NAMES = {**_CPP_NAMES, D.uint8: "uint8_t", D.int8: "int8_t", D.int16: "int16_t",
                     D.int32: "int", D.int64: "int64_t", D.float16: "float",
                     D.bfloat16: "float"}


def _reftorch():
    import reftorch
    return reftorch


# --- NumPy kernels ---------------------------------------------------------------------------

def _is_half(np_dtype):
    return np_dtype == np.float16 or np_dtype == D.bfloat16.numpy_dtype


def _compute_dtype(np_dtype):
    """The NumPy dtype a product is accumulated in: float32 for half types, int64 for
    integers (narrowing the result afterwards wraps exactly like C integer arithmetic)."""
    if _is_half(np_dtype):
        return np.dtype(np.float32)
    if np_dtype.kind in "iu":
        return np.dtype(np.int64)
    return np_dtype


def _product(a, b):
    """a @ b (NumPy's matmul semantics) in the accumulation dtype of a's dtype."""
    wide = _compute_dtype(a.dtype)
    return np.matmul(a.astype(wide, copy=False), b.astype(wide, copy=False))


def _scaled_sum(input, product, beta, alpha, dtype):
    """beta * input + alpha * product, rounded once to `dtype`.

    beta == 0 means `input` is not read (BLAS convention), so its NaN and inf do not reach
    the result; integers are widened so the final narrowing wraps like PyTorch."""
    result = product if alpha == 1 else product * alpha
    if beta != 0:
        wide = input.astype(result.dtype, copy=False)
        result = result + (wide if beta == 1 else wide * beta)
    return np.asarray(result).astype(dtype)


def _mm_kernel(a, b):
    return _product(a, b).astype(a.dtype)


def _dot_kernel(a, b):
    return np.asarray(_product(a, b)).astype(a.dtype)


def _vdot_kernel(a, b):
    return np.asarray(_product(np.conj(a), b)).astype(a.dtype)


def _addmm_kernel(input, a, b, beta, alpha, skip_zero_alpha):
    """beta * input + alpha * (a @ b): addmm, baddbmm and addmv (NumPy's matmul batches and
    handles matrix @ vector)."""
    if alpha == 0 and skip_zero_alpha:     # BLAS does not read a and b when alpha is 0
        shape = a.shape[:-1] + (b.shape[-1:] if b.ndim == 2 else ())
        product = np.zeros(shape, _compute_dtype(a.dtype))
    else:
        product = _product(a, b)
    return _scaled_sum(input, product, beta, alpha, a.dtype)


def _addbmm_kernel(input, batch1, batch2, beta, alpha, skip_zero_alpha):
    """beta * input + alpha * sum_i batch1[i] @ batch2[i]: one (n, b*k) @ (b*k, p) product."""
    b, n, k = batch1.shape
    p = batch2.shape[2]
    if alpha == 0 and skip_zero_alpha:
        product = np.zeros((n, p), _compute_dtype(batch1.dtype))
    elif _is_half(batch1.dtype) and b:
        # Half types: PyTorch adds one matrix product at a time, rounding to the half type
        # after each (one addmm per batch element); the rounding is visible, so do the same.
        result = _scaled_sum(input, _product(batch1[0], batch2[0]), beta, alpha, batch1.dtype)
        for i in range(1, b):
            result = _scaled_sum(result, _product(batch1[i], batch2[i]), 1, alpha,
                                 batch1.dtype)
        return result
    else:
        # Summing the batch of products is one matrix product over the joined (batch, k) dim.
        product = _product(batch1.transpose(1, 0, 2).reshape(n, b * k),
                           batch2.reshape(b * k, p))
    return _scaled_sum(input, product, beta, alpha, batch1.dtype)


def _addr_kernel(input, vec1, vec2, beta, alpha, dtype):
    """beta * input + alpha * outer(vec1, vec2) in the promoted `dtype` (bool: and/or)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        product = np.logical_and.outer(vec1.astype(bool), vec2.astype(bool)) & alpha
        return product | (input.astype(bool) & beta) if beta else product
    wide = _compute_dtype(dtype)
    product = np.multiply.outer(vec1.astype(wide), vec2.astype(wide))
    return _scaled_sum(input.astype(wide), product, beta, alpha, dtype)


def _inverse_kernel(a):
    """Inverse of each matrix of a batch (negative matrix powers)."""
    try:
        return np.linalg.inv(a)
    except np.linalg.LinAlgError:
        raise RuntimeError("linalg.inv: The diagonal element of the LU factorization is zero, "
                           "the inversion could not be completed because the input matrix "
                           "is singular.") from None


_FAMILY = "other"
MM = structured.declare("mm", _mm_kernel, family=_FAMILY)
BMM = structured.declare("bmm", _mm_kernel, family=_FAMILY)
MV = structured.declare("mv", _mm_kernel, family=_FAMILY)
DOT = structured.declare("dot", _dot_kernel, family=_FAMILY)
VDOT = structured.declare("vdot", _vdot_kernel, family=_FAMILY)
_SCALED = {"beta": 1, "alpha": 1, "skip_zero_alpha": False}
ADDMM = structured.declare("addmm", _addmm_kernel, family=_FAMILY, params=_SCALED)
BADDBMM = structured.declare("baddbmm", _addmm_kernel, family=_FAMILY, params=_SCALED)
ADDMV = structured.declare("addmv", _addmm_kernel, family=_FAMILY, params=_SCALED)
ADDBMM = structured.declare("addbmm", _addbmm_kernel, family=_FAMILY, params=_SCALED)
ADDR = structured.declare("addr", _addr_kernel, family=_FAMILY,
                          params={"beta": 1, "alpha": 1, "dtype": None})
# Private: the inverse used by matrix_power(A, n < 0) (PyTorch's node: LinalgInvExBackward0).
INVERSE = structured.declare("_matrix_power_inverse", _inverse_kernel, family=_FAMILY,
                             dtypes=INVERTIBLE)


# --- argument checks -------------------------------------------------------------------------

def _tensor_arg(fn, name, position, value):
    if not isinstance(value, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' (position {position}) must be Tensor, not "
                        f"{type(value).__name__}")
    return value


def _check_bool(kernel, dtype, result_numel, contraction):
    """PyTorch has no bool matrix product kernel; only products with nothing to add up
    (an empty result, or an empty contraction that gives zeros) avoid it."""
    if dtype is D.bool and result_numel and contraction:
        raise NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")


def _check_out_dtype(out, dtype):
    """Matrix products write `out=` without casting: it must have the result's dtype."""
    if out is not None and isinstance(out, Tensor) and out.dtype is not dtype:
        raise RuntimeError(f"Expected out tensor to have dtype {_CPP_NAMES[dtype]}, but got "
                           f"{_CPP_NAMES[out.dtype]} instead")


def _write_out(out, result, inputs, op="matmul"):
    """`out=` for the composed ops: the rule `structured.run` applies to primitives (no
    autograd through out=), named after the op PyTorch reports (`op`); op=None allows it
    (inner: PyTorch records the copy into out)."""
    if out is None:
        return result
    if op and is_grad_enabled() and any(t.requires_grad for t in inputs):
        raise RuntimeError(f"{op}(): functions with out=... arguments don't support automatic "
                           f"differentiation, but one of the arguments requires grad.")
    return structured.write_out(out, result)


def _scalar(value, dtype, name):
    """beta / alpha converted as PyTorch converts a Scalar to the tensors' dtype: complex
    only for complex tensors, floats truncated toward zero for integer tensors."""
    if isinstance(value, Tensor) and value.ndim == 0:
        value = value.item()
    if not isinstance(value, numbers.Number):
        raise TypeError(f"argument '{name}' must be Number, not {type(value).__name__}")
    if dtype.is_complex:
        return complex(value)
    if not isinstance(value, numbers.Real):        # a complex number
        if value.imag != 0:
            raise RuntimeError(f"value cannot be converted to type {_CONVERSION_NAMES[dtype]} "
                               f"without overflow")
        value = value.real
    if dtype.is_floating_point:
        return float(value)
    if dtype is D.bool:
        return bool(value)
    value = int(value)
    info = np.iinfo(dtype.numpy_dtype)
    low = -info.max if dtype is D.uint8 else info.min  # PyTorch lets -255..255 into uint8
    if not low <= value <= info.max:
        raise RuntimeError(f"value cannot be converted to type {_CONVERSION_NAMES[dtype]} "
                           f"without overflow")
    return value


def _legacy_warning(name, signature, modern):
    # stacklevel: the caller of the public function (public -> _addmm & co -> _split_legacy).
    warnings.warn(f"This overload of {name} is deprecated:\n\t{name}({signature})\nConsider "
                  f"using one of the following signatures instead:\n\t{name}({modern})",
                  UserWarning, stacklevel=5)


def _split_legacy(name, args, beta, alpha, names, method):
    """(input, x, y, beta, alpha) from the modern call or a deprecated positional one.

    Modern:        fn(input, x, y, *, beta=1, alpha=1)        Tensor.fn(x, y, *, beta, alpha)
    Deprecated:    fn(beta, input, alpha, x, y), fn(beta, input, x, y)
                   Tensor.fn(beta, alpha, x, y), Tensor.fn(beta, x, y)
    `method` is False for torch.fn, "method" for Tensor.fn and "inplace" for Tensor.fn_;
    `args` includes self for the method forms.
    """
    rest = args[1:] if method else args
    if rest and isinstance(rest[0], numbers.Number) and not isinstance(rest[0], Tensor):
        if beta != 1 or alpha != 1:
            raise TypeError(f"{name}(): beta and alpha cannot be given both positionally and "
                            f"as keywords")
        x, y = names
        modern = (f"Tensor {x}, Tensor {y}, *, Number beta = 1, Number alpha = 1"
                  if method else
                  f"Tensor input, Tensor {x}, Tensor {y}, *, Number beta = 1, "
                  f"Number alpha = 1, Tensor out = None")
        tail = "" if method else ", *, Tensor out = None"
        if method and len(rest) == 4:
            beta, alpha, tensors = rest[0], rest[1], (args[0],) + tuple(rest[2:])
            signature = f"Number beta, Number alpha, Tensor {x}, Tensor {y}"
        elif method and len(rest) == 3:
            beta, tensors = rest[0], (args[0],) + tuple(rest[1:])
            signature = f"Number beta, Tensor {x}, Tensor {y}"
        elif not method and len(rest) == 5:
            beta, alpha, tensors = rest[0], rest[2], (rest[1], rest[3], rest[4])
            signature = f"Number beta, Tensor input, Number alpha, Tensor {x}, Tensor {y}{tail}"
        elif not method and len(rest) == 4:
            beta, tensors = rest[0], tuple(rest[1:])
            signature = f"Number beta, Tensor input, Tensor {x}, Tensor {y}{tail}"
        else:
            raise TypeError(f"{name}() received an invalid combination of arguments")
        _legacy_warning(name + ("_" if method == "inplace" else ""), signature, modern)
    else:
        tensors = tuple(args)
        if len(tensors) != 3:
            raise TypeError(f"{name}() received an invalid combination of arguments - got "
                            f"{len(rest)} positional arguments")
    labels = ("input",) + tuple(names)
    for position, (label, t) in enumerate(zip(labels, tensors), start=1):
        _tensor_arg(name, label, position, t)
    return tensors + (beta, alpha)


# --- the primitive products ------------------------------------------------------------------

def _check_mm(a, b):
    # (the plain shape tuples: .shape builds a Size per read, a noticeable share of a small mm)
    a_shape, b_shape = a._shape, b._shape
    if len(a_shape) != 2:
        raise RuntimeError("self must be a matrix")
    if len(b_shape) != 2:
        raise RuntimeError("mat2 must be a matrix")
    if a_shape[1] != b_shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a_shape[0]}x"
                           f"{a_shape[1]} and {b_shape[0]}x{b_shape[1]})")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: "
                           f"{_CPP_NAMES[a.dtype]} != {_CPP_NAMES[b.dtype]}")
    _check_bool("addmm_impl_cpu_", a.dtype, a_shape[0] * b_shape[1], a_shape[1])


def mm(input, mat2, *, out=None):
    """Matrix product of an (n, m) and an (m, p) matrix (no broadcasting)."""
    _tensor_arg("mm", "input", 1, input)
    _tensor_arg("mm", "mat2", 2, mat2)
    _check_mm(input, mat2)
    _check_out_dtype(out, input.dtype)
    return structured.run(MM, (input, mat2), out=out)


def _check_bmm(a, b):
    if a.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if b.ndim != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{a.shape[0]}, {a.shape[2]}] but got: [{b.shape[0]}, "
                           f"{b.shape[1]}].")
    # (PyTorch's bmm picks its kernel by the first operand's dtype before comparing dtypes.)
    _check_bool("bmm", a.dtype, a.shape[0] * a.shape[1] * b.shape[2], a.shape[2])
    if a.dtype is not b.dtype:
        raise RuntimeError(f"expected scalar type {a.dtype.scalar_name} but found "
                           f"{b.dtype.scalar_name}")


def bmm(input, mat2, *, out=None):
    """Batched matrix product of (b, n, m) and (b, m, p) tensors (no broadcasting)."""
    _tensor_arg("bmm", "input", 1, input)
    _tensor_arg("bmm", "mat2", 2, mat2)
    _check_bmm(input, mat2)
    _check_out_dtype(out, input.dtype)
    return structured.run(BMM, (input, mat2), out=out)


def _check_mv(input, mat, vec):
    """Checks of addmv (and of mv, with input=None: the result stands in for it)."""
    size = mat.shape[0] if mat.ndim else 1
    input_ndim = 1 if input is None else input.ndim
    if mat.ndim != 2 or vec.ndim != 1 or input_ndim > 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {input_ndim}, {mat.ndim}, "
                           f"{vec.ndim}")
    if input is not None and input.ndim == 1:
        size = input.shape[0]
    if mat.shape[1] != vec.shape[0] or size not in (1, mat.shape[0]):
        raise RuntimeError(f"size mismatch, got input ({size}), mat ({mat.shape[0]}x"
                           f"{mat.shape[1]}), vec ({vec.shape[0]})")
    dtypes = (mat.dtype if input is None else input.dtype, mat.dtype, vec.dtype)
    if len(set(dtypes)) > 1:
        raise RuntimeError(f"addmv input tensors must have the same dtype, but got "
                           f"{dtypes[0].scalar_name}, {dtypes[1].scalar_name}, and "
                           f"{dtypes[2].scalar_name}")
    _check_bool("addmv_impl_cpu", mat.dtype, mat.shape[0], mat.shape[1])


def mv(input, vec, *, out=None):
    """Matrix-vector product of an (n, m) matrix and an m-vector."""
    _tensor_arg("mv", "input", 1, input)
    _tensor_arg("mv", "vec", 2, vec)
    _check_mv(None, input, vec)
    _check_out_dtype(out, input.dtype)
    return structured.run(MV, (input, vec), out=out)


def _check_dot(a, b):
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found "
                           f"{a.dtype.scalar_name} and {b.dtype.scalar_name}")
    if a.shape[0] != b.shape[0]:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{a.shape[0]}] and src "
                           f"[{b.shape[0]}] to have the same number of elements, but got "
                           f"{a.shape[0]} and {b.shape[0]} elements respectively")
    if a.dtype is D.bool:
        raise NotImplementedError("\"dot\" not implemented for 'Bool'")


def _check_dot_out(out, dtype):
    if out is not None and isinstance(out, Tensor) and out.dtype is not dtype:
        raise RuntimeError(f"result dtype {out.dtype.scalar_name} does not match input dtype "
                           f"{dtype.scalar_name}")


def dot(input, tensor, *, out=None):
    """Inner product of two 1-D tensors of equal length and dtype (no conjugation)."""
    _tensor_arg("dot", "input", 1, input)
    _tensor_arg("dot", "tensor", 2, tensor)
    _check_dot(input, tensor)
    _check_dot_out(out, input.dtype)
    return structured.run(DOT, (input, tensor), out=out)


def vdot(input, other, *, out=None):
    """Inner product that conjugates the first vector: sum(conj(input) * other)."""
    _tensor_arg("vdot", "input", 1, input)
    _tensor_arg("vdot", "other", 2, other)
    _check_dot(input, other)
    _check_dot_out(out, input.dtype)
    return structured.run(VDOT, (input, other), out=out)


# --- beta * input + alpha * product ----------------------------------------------------------

def _check_input_broadcast(input, shape):
    """`input` must expand to the product's shape (PyTorch's expand message on failure)."""
    input.expand(*shape)


# The dtypes for which PyTorch hands an add* product to BLAS, which does not read the
# operands when alpha is 0 (so their NaN does not propagate); its other kernels compute them.
_BLAS_DTYPES = {"addmm": INVERTIBLE, "addbmm": INVERTIBLE, "addmv": {D.float32, D.float64},
                "baddbmm": set()}


def _run_scaled(op, input, x, y, beta, alpha, out, inplace, result_shape):
    """Shared tail of addmm / baddbmm / addbmm / addmv: scalars, out= and in-place forms."""
    dtype = x.dtype
    params = {"beta": _scalar(beta, dtype, "beta"), "alpha": _scalar(alpha, dtype, "alpha"),
              "skip_zero_alpha": dtype in _BLAS_DTYPES[op.name]}
    if inplace and op is ADDBMM and tuple(input.shape) != tuple(result_shape):
        # PyTorch writes addbmm_ through its out= path, which resizes self to the result.
        _check_input_broadcast(input, result_shape)
        return structured.write_out(input, structured.run(op, (input, x, y), params))
    if inplace:
        if tuple(input.shape) != tuple(result_shape):
            raise RuntimeError(f"Bad in-place call: input tensor size {list(input.shape)} and "
                               f"output tensor size {list(result_shape)} should match")
        return structured.run_inplace(op, (input, x, y), params)
    _check_input_broadcast(input, result_shape)
    _check_out_dtype(out, dtype)
    return structured.run(op, (input, x, y), params, out=out)


def _check_same_dtype(input, other):
    if input.dtype is not other.dtype:
        raise RuntimeError(f"self and mat2 must have the same dtype, but got "
                           f"{input.dtype.scalar_name} and {other.dtype.scalar_name}")


def _check_add_bool(dtype, result_numel, contraction, kernel):
    """Bool add* products: PyTorch's kernel is missing, and an empty contraction fails when
    it adds the integer zero product to the bool input."""
    if dtype is D.bool and result_numel:
        if contraction:
            raise NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")
        raise RuntimeError("result type Long can't be cast to the desired output type Bool")


def _addmm(args, beta, alpha, out=None, inplace=False, method=False):
    input, mat1, mat2, beta, alpha = _split_legacy("addmm", args, beta, alpha,
                                                   ("mat1", "mat2"), method)
    if mat1.ndim != 2 or mat2.ndim != 2:
        which, t = ("mat1", mat1) if mat1.ndim != 2 else ("mat2", mat2)
        raise RuntimeError(f"{which} must be a matrix, got {t.ndim}-D tensor")
    if mat1.shape[1] != mat2.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({mat1.shape[0]}x"
                           f"{mat1.shape[1]} and {mat2.shape[0]}x{mat2.shape[1]})")
    _check_same_dtype(input, mat2)
    if mat1.dtype is not mat2.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: "
                           f"{_CPP_NAMES[mat1.dtype]} != {_CPP_NAMES[mat2.dtype]}")
    shape = (mat1.shape[0], mat2.shape[1])
    _check_add_bool(mat1.dtype, shape[0] * shape[1], mat1.shape[1], "addmm_impl_cpu_")
    return _run_scaled(ADDMM, input, mat1, mat2, beta, alpha, out, inplace, shape)


def addmm(input, mat1, mat2=None, *legacy, beta=1, alpha=1, out=None):
    """beta * input + alpha * (mat1 @ mat2); input broadcasts to the product's shape.

    With beta == 0 `input` is ignored (its NaN and inf do not propagate)."""
    return _addmm((input, mat1, mat2) + legacy, beta, alpha, out)


def _check_batches(batch1, batch2):
    if batch1.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if batch2.ndim != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    if batch1.shape[0] != batch2.shape[0]:
        raise RuntimeError(f"batch1 and batch2 must have same number of batches, got "
                           f"{batch1.shape[0]} and {batch2.shape[0]}")
    if batch1.shape[2] != batch2.shape[1]:
        raise RuntimeError(f"Incompatible matrix sizes for bmm ({batch1.shape[1]}x"
                           f"{batch1.shape[2]} and {batch2.shape[1]}x{batch2.shape[2]})")


def _baddbmm(args, beta, alpha, out=None, inplace=False, method=False):
    input, batch1, batch2, beta, alpha = _split_legacy("baddbmm", args, beta, alpha,
                                                       ("batch1", "batch2"), method)
    _check_batches(batch1, batch2)
    if not input.dtype is batch1.dtype is batch2.dtype:
        raise RuntimeError(f"Input dtypes must be the same, got: input {_CPP_NAMES[input.dtype]}"
                           f", batch1: {_CPP_NAMES[batch1.dtype]}, batch2: "
                           f"{_CPP_NAMES[batch2.dtype]}")
    shape = (batch1.shape[0], batch1.shape[1], batch2.shape[2])
    _check_add_bool(batch1.dtype, shape[0] * shape[1] * shape[2], batch1.shape[2], "baddbmm")
    return _run_scaled(BADDBMM, input, batch1, batch2, beta, alpha, out, inplace,
                       shape)


def baddbmm(input, batch1, batch2=None, *legacy, beta=1, alpha=1, out=None):
    """beta * input + alpha * bmm(batch1, batch2), matrix by matrix of the batch."""
    return _baddbmm((input, batch1, batch2) + legacy, beta, alpha, out)


def _addbmm(args, beta, alpha, out=None, inplace=False, method=False):
    input, batch1, batch2, beta, alpha = _split_legacy("addbmm", args, beta, alpha,
                                                       ("batch1", "batch2"), method)
    _check_batches(batch1, batch2)
    _check_same_dtype(input, batch2)
    if batch1.dtype is not batch2.dtype:
        raise RuntimeError(f"expected scalar type {batch1.dtype.scalar_name} but found "
                           f"{batch2.dtype.scalar_name}")
    shape = (batch1.shape[1], batch2.shape[2])
    if batch1.dtype is D.bool and shape[0] * shape[1] and batch1.shape[0] == 0:
        _check_add_bool(D.bool, 1, 0, "")      # an empty batch: the integer zero product
    _check_add_bool(batch1.dtype, shape[0] * shape[1], batch1.shape[2], "addmm_impl_cpu_")
    return _run_scaled(ADDBMM, input, batch1, batch2, beta, alpha, out, inplace,
                       shape)


def addbmm(input, batch1, batch2=None, *legacy, beta=1, alpha=1, out=None):
    """beta * input + alpha * (sum of batch1[i] @ batch2[i] over the batch)."""
    return _addbmm((input, batch1, batch2) + legacy, beta, alpha, out)


def _addmv(args, beta, alpha, out=None, inplace=False, method=False):
    input, mat, vec, beta, alpha = _split_legacy("addmv", args, beta, alpha, ("mat", "vec"),
                                                 method)
    _check_mv(input, mat, vec)
    shape = (mat.shape[0],)
    if mat.dtype is D.bool and not mat.shape[1]:
        return _bool_without_product(input, shape, beta, out, inplace)
    return _run_scaled(ADDMV, input, mat, vec, beta, alpha, out, inplace, shape)


def _bool_without_product(input, shape, beta, out, inplace):
    """Bool addmv over an empty contraction: no product to add up, the result is
    beta * input alone (PyTorch gets there without its missing bool kernel)."""
    beta = bool(beta)
    value = input.expand(*shape) if beta else _reftorch().zeros(shape, dtype=D.bool)
    if inplace:
        return input.copy_(value)
    return _write_out(out, value.clone(), (input,), op="addmv")


def addmv(input, mat, vec=None, *legacy, beta=1, alpha=1, out=None):
    """beta * input + alpha * (mat @ vec); input broadcasts to the result's length."""
    return _addmv((input, mat, vec) + legacy, beta, alpha, out)


def _addr_scalar(value, dtype, name):
    """addr's own rules for beta / alpha (stricter than the other add* ops)."""
    if isinstance(value, Tensor) and value.ndim == 0:
        value = value.item()
    if isinstance(value, bool) and dtype is not D.bool:
        raise RuntimeError(f"Boolean {name} only supported for Boolean results.")
    if dtype is D.bool or dtype in INTEGRAL:
        if not isinstance(value, numbers.Integral):
            raise RuntimeError(f"For integral input tensors, argument {name} must not be a "
                               f"floating point number.")
    return _scalar(value, dtype, name)


def _addr(args, beta, alpha, out=None, inplace=False, method=False):
    input, vec1, vec2, beta, alpha = _split_legacy("addr", args, beta, alpha,
                                                   ("vec1", "vec2"), method)
    for name, v in (("vec1", vec1), ("vec2", vec2)):
        if v.ndim != 1:
            raise RuntimeError(f"addr: Expected 1-D argument {name}, but got {v.ndim}-D")
    shape = (vec1.shape[0], vec2.shape[0])
    dtype = result_dtype([input, vec1, vec2])   # addr promotes like an elementwise op
    params = {"beta": _addr_scalar(beta, dtype, "beta"),
              "alpha": _addr_scalar(alpha, dtype, "alpha"), "dtype": dtype.numpy_dtype}
    if inplace:
        if input.ndim != 2:
            raise RuntimeError(f"2D tensor expected, got {input.ndim}D tensor for input")
        if tuple(input.shape) != shape:
            raise RuntimeError(f"size mismatch, input: {list(input.shape)}, v1: "
                               f"{list(vec1.shape)}, v2: {list(vec2.shape)}")
        check_output_cast(dtype, input.dtype)
        return structured.run_inplace(ADDR, (input, vec1, vec2), params)
    _check_input_broadcast(input, shape)
    return structured.run(ADDR, (input, vec1, vec2), params, out=out, dtype=dtype)


def addr(input, vec1, vec2=None, *legacy, beta=1, alpha=1, out=None):
    """beta * input + alpha * outer(vec1, vec2), with elementwise type promotion."""
    return _addr((input, vec1, vec2) + legacy, beta, alpha, out)


# --- compositions ----------------------------------------------------------------------------

def matmul(input, other, *, out=None):
    """Matrix product with NumPy-style rules by the operands' ndim:

    1-D @ 1-D  dot product (a 0-dim result)
    2-D @ 1-D  matrix-vector product;      1-D @ 2-D  the vector as a row, result squeezed
    2-D @ 2-D  matrix product
    N-D        batched: the dims before the last two broadcast; a 1-D operand becomes a
               row (first) or a column (second) matrix and that dim is removed afterwards.
    Built from dot / mv / mm / bmm and views (see the module docstring)."""
    _tensor_arg("matmul", "input", 1, input)
    _tensor_arg("matmul", "other", 2, other)
    a, b = input, other
    a_dims, b_dims = len(a._shape), len(b._shape)
    if a_dims == 0 or b_dims == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are "
                           f"{a_dims}D and {b_dims}D")
    if a_dims == 1 and b_dims == 1:
        _check_dot_out(out, a.dtype)
        result = dot(a, b)
    else:
        _check_out_dtype(out, a.dtype)
        result = _matmul_nd(a, b)
    return _write_out(out, result, (a, b))


def _rows(t):
    """`t` as a matrix: every leading dim folded into the rows (the last dim kept)."""
    return t.reshape(int(np.prod(t.shape[:-1])), t.shape[-1])


def _unfold_rows(result, shape):
    """A fresh product reshaped back to the batch's shape. PyTorch records this reshape as
    `_unsafe_view` (the product has no other users), and the result is not a view."""
    from .._shape import contiguous_strides
    unfolded = result._view(shape, contiguous_strides(shape), op="unsafe_view",
                            self_shape=result._shape)
    unfolded._base = None
    return unfolded


def _matmul_nd(a, b):
    a_dims, b_dims = len(a._shape), len(b._shape)
    if b_dims == 1 and a_dims == 2:
        return mv(a, b)
    if b_dims == 1:
        # matrix (or a batch of them, folded into the rows) @ vector
        return _unfold_rows(mv(_rows(a), b), a.shape[:-1])
    if a_dims == 1 and b_dims == 2:
        return mm(a.unsqueeze(0), b).squeeze_(0)
    if b_dims == 2:
        # A batch of matrices @ one matrix: fold the batch into the rows, one mm.
        if a_dims == 2:
            return mm(a, b)
        return _unfold_rows(mm(_rows(a), b), a.shape[:-1] + b.shape[-1:])
    # Batched: a 1-D `a` becomes a row; batch dims broadcast; one bmm over the flattened batch.
    row = a_dims == 1
    if row:
        a = a.unsqueeze(0)
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    n, k = a.shape[-2:]
    k2, p = b.shape[-2:]
    count = int(np.prod(batch))
    a3 = a.expand(*batch, n, k).reshape(count, n, k)
    b3 = b.expand(*batch, k2, p).reshape(count, k2, p)
    # (the row's dim of size 1 goes in the same reshape)
    return _unfold_rows(bmm(a3, b3), batch + ((p,) if row else (n, p)))


def inner(input, other, *, out=None):
    """Sum of products over the last dim of both (a multiply when either is 0-dim)."""
    _tensor_arg("inner", "input", 1, input)
    _tensor_arg("inner", "other", 2, other)
    torch = _reftorch()
    if input.ndim == 0 or other.ndim == 0:
        return torch.mul(input, other, out=out)
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but "
                           f"got shapes {list(input.shape)} and {list(other.shape)}")
    if input.dtype is not other.dtype:
        raise RuntimeError("both inputs should have same dtype")
    if out is not None and out.dtype is not input.dtype:
        raise RuntimeError(f"tensordot: Expected the output tensor to have dtype "
                           f"{input.dtype.scalar_name}, but got an output tensor with dtype "
                           f"{out.dtype.scalar_name}")
    flat = mm(_rows(input), _rows(other).t())
    result = flat.reshape(input.shape[:-1] + other.shape[:-1])
    return _write_out(out, result, (input, other), op=None)


def _check_vector(name, label, t):
    if t.ndim != 1:
        raise RuntimeError(f"{name}: Expected 1-D argument {label}, but got {t.ndim}-D")


def outer(input, vec2, *, out=None):
    """Outer product of two vectors: input[i] * vec2[j] (promotes like multiplication)."""
    _tensor_arg("outer", "input", 1, input)
    _tensor_arg("outer", "vec2", 2, vec2)
    _check_vector("outer", "self", input)
    _check_vector("outer", "vec2", vec2)
    # The product is computed in the promoted dtype, then cast into out= (as PyTorch does).
    result = _reftorch().mul(input.reshape(-1, 1), vec2)
    return _write_out(out, result, (input, vec2), op="mul")


def ger(input, vec2, *, out=None):
    """Deprecated alias of `outer`."""
    warnings.warn("torch.ger is deprecated and will be removed in a future PyTorch release. "
                  "Use torch.outer instead.", UserWarning, stacklevel=2)
    return outer(input, vec2, out=out)


def chain_matmul(*matrices, out=None):
    """Product of two or more matrices, multiplied in the cheapest order (deprecated:
    use torch.linalg.multi_dot)."""
    warnings.warn("torch.chain_matmul is deprecated and will be removed in a future PyTorch "
                  "release. Use torch.linalg.multi_dot instead, which accepts a list of two or "
                  "more tensors rather than multiple parameters.", UserWarning, stacklevel=2)
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for i, m in enumerate(matrices):
        _tensor_arg("chain_matmul", "matrices", 1, m)
        if m.ndim != 2:
            raise RuntimeError(f"Tensor dimension is {m.ndim}, expected 2 instead.")
    if len(matrices) == 1:
        return _write_out(out, matrices[0].clone(), matrices, op="mm")
    for i, m in enumerate(matrices[1:], start=1):
        if m.dtype is not matrices[0].dtype:
            raise RuntimeError(f"multi_dot(): all tensors must have be the same dtype but "
                               f"tensor 0 is {_CPP_NAMES[matrices[0].dtype]} and tensor {i} "
                               f"{_CPP_NAMES[m.dtype]}")
        if matrices[i - 1].shape[1] != m.shape[0]:
            raise RuntimeError(f"multi_dot(): tensors {i - 1} and {i} with shapes "
                               f"{list(matrices[i - 1].shape)} and {list(m.shape)} cannot be "
                               f"multiplied")
    _check_out_dtype(out, matrices[0].dtype)
    order = _chain_order([m.shape[0] for m in matrices] + [matrices[-1].shape[1]])
    result = _multiply_in_order(matrices, order, 0, len(matrices) - 1)
    return _write_out(out, result, matrices, op="mm")


def _chain_order(dims):
    """split[i][j]: where the cheapest product of matrices i..j splits (matrix i is
    dims[i] x dims[i + 1]); the classic O(n^3) dynamic programme over the chain."""
    count = len(dims) - 1
    cost = [[0] * count for _ in range(count)]
    split = [[0] * count for _ in range(count)]
    for length in range(1, count):
        for i in range(count - length):
            j = i + length
            options = [(cost[i][s] + cost[s + 1][j] + dims[i] * dims[s + 1] * dims[j + 1], s)
                       for s in range(i, j)]
            cost[i][j], split[i][j] = min(options)
    return split


def _multiply_in_order(matrices, split, i, j):
    if i == j:
        return matrices[i]
    s = split[i][j]
    return mm(_multiply_in_order(matrices, split, i, s),
              _multiply_in_order(matrices, split, s + 1, j))


def matrix_power(input, n, *, out=None):
    """The n-th power of square matrices (batched): n = 0 gives the identity; a negative n
    raises the inverse to -n (singular matrices raise)."""
    _tensor_arg("matrix_power", "input", 1, input)
    if isinstance(n, bool) or not isinstance(n, (numbers.Integral, Tensor)):
        raise TypeError(f"matrix_power(): argument 'n' (position 2) must be int, not "
                        f"{type(n).__name__}")
    n = operator.index(n)
    if input.ndim < 2:
        raise RuntimeError("linalg.matrix_power: The input tensor A must have at least 2 "
                           "dimensions.")
    if input.shape[-1] != input.shape[-2]:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but "
                           f"they are {input.shape[-2]} by {input.shape[-1]} matrices")
    _check_out_dtype(out, input.dtype)
    return _write_out(out, _matrix_power(input, n), (input,))


def _matrix_power(a, n):
    torch = _reftorch()
    if n == 0:
        # The identity, written into a copy of `a` so the result stays connected to `a` in
        # the graph (with a zero gradient), as PyTorch's is.
        eye = torch.eye(a.shape[-1], dtype=a.dtype, device=a.device)
        return a.clone().copy_(eye.expand(*a.shape))
    if n < 0:
        a, n = _inverse(a), -n
    if n == 1:
        return a.clone()
    if n == 3:   # PyTorch's association for n = 3 (visible in half precision)
        return matmul(matmul(a, a), a)
    # Repeated squaring: a^n = product of a^(2^i) over the set bits of n.
    result, square = None, a
    while n:
        if n & 1:
            result = square if result is None else matmul(result, square)
        n >>= 1
        if n:
            square = matmul(square, square)
    return result


def _inverse(a):
    if a.dtype in HALF:
        raise RuntimeError(f"linalg.inv: Low precision dtypes not supported. Got "
                           f"{a.dtype.scalar_name}")
    if a.dtype not in INVERTIBLE:
        raise RuntimeError(f"linalg.inv: Expected a floating point or complex tensor as input. "
                           f"Got {a.dtype.scalar_name}")
    return structured.run(INVERSE, (a,))


# --- Tensor methods --------------------------------------------------------------------------

def _method(impl, names, inplace=False):
    """Tensor.addmm and the like (`inplace`: Tensor.addmm_): the two operands positionally
    or by their keyword `names`, or a deprecated positional beta/alpha form."""
    def method(self, *args, beta=1, alpha=1, **operands):
        for name in names:
            if name in operands:
                args += (operands.pop(name),)
        if operands:
            raise TypeError(f"{impl.__name__[1:]}() got an unexpected keyword argument "
                            f"'{next(iter(operands))}'")
        return impl((self,) + args, beta, alpha, inplace=inplace,
                    method="inplace" if inplace else "method")
    return method


def _matmul_operator(self, other):
    return matmul(self, other) if isinstance(other, Tensor) else NotImplemented


def _rmatmul_operator(self, other):
    return matmul(other, self) if isinstance(other, Tensor) else NotImplemented


Tensor.mm = mm
Tensor.bmm = bmm
Tensor.mv = mv
Tensor.dot = dot
Tensor.vdot = vdot
Tensor.matmul = matmul
Tensor.inner = inner
Tensor.outer = outer
Tensor.ger = ger
Tensor.matrix_power = matrix_power
Tensor.__matmul__ = _matmul_operator
Tensor.__rmatmul__ = _rmatmul_operator
# No __imatmul__, as in PyTorch: `a @= b` rebinds `a` to the new product.
for _name, _impl, _operands in (("addmm", _addmm, ("mat1", "mat2")),
                                ("baddbmm", _baddbmm, ("batch1", "batch2")),
                                ("addbmm", _addbmm, ("batch1", "batch2")),
                                ("addmv", _addmv, ("mat", "vec")),
                                ("addr", _addr, ("vec1", "vec2"))):
    setattr(Tensor, _name, _method(_impl, _operands))
    setattr(Tensor, _name + "_", _method(_impl, _operands, inplace=True))
