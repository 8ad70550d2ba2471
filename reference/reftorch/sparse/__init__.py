"""torch.sparse: sparse COO tensors (layout `torch.sparse_coo`).

    s = torch.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3., 4., 5.], (2, 3))
    s.to_dense(); s.coalesce(); s + s; torch.mm(s, dense); torch.sparse.sum(s, 0)

The tensor itself lives in `_coo` (with conversions and printing), arithmetic in `_arith`,
matrix products in `_products`, sums in `_reductions`, the legacy `torch.sparse.FloatTensor`
types in `_legacy`. This module gives the public functions, attaches the sparse tensor's
methods, and (through `accept_sparse_operands`) lets `torch.add`, `torch.mm`, ... and the
dense tensor's methods take a sparse operand where PyTorch does.
"""
from __future__ import annotations

import functools

from .._device import sparse_coo
from .._tensor import Tensor
from . import _arith as A
from . import _products as M
from . import _reductions as R
from ._coo import SparseTensor, narrow_copy, sparse_coo_tensor, sparse_mask, to_sparse
from ._legacy import (BFloat16Tensor, ByteTensor, CharTensor, DoubleTensor, FloatTensor,
                      HalfTensor, IntTensor, LongTensor, ShortTensor)

__all__ = ["mm", "addmm", "sum", "check_sparse_tensor_invariants", "FloatTensor",
           "DoubleTensor", "HalfTensor", "BFloat16Tensor", "ByteTensor", "CharTensor",
           "ShortTensor", "IntTensor", "LongTensor"]


# --- torch.sparse functions ------------------------------------------------------------------

def mm(mat1, mat2, reduce=None):
    """Matrix product with a sparse operand: sparse @ dense and dense @ sparse give dense
    results, sparse @ sparse a sparse one. The gradient of a sparse operand is sparse."""
    if reduce is not None:
        raise NotImplementedError("Could not run 'aten::_sparse_mm_reduce_impl' with arguments "
                                  "from the 'SparseCPU' backend: reduce= is supported for "
                                  "sparse CSR tensors only")
    return M.sparse_mm(mat1, mat2)


def addmm(mat, mat1, mat2, beta=1., alpha=1.):
    """beta * mat + alpha * (mat1 @ mat2) for a sparse mat1 and dense mat and mat2."""
    return M.addmm(mat, mat1, mat2, beta=beta, alpha=alpha)


def sum(input, dim=None, dtype=None):
    """Sum over `dim` (all dims when None): a dense tensor when every sparse dim is reduced,
    otherwise a sparse one."""
    return R.sparse_sum(input, dim, dtype)


class check_sparse_tensor_invariants:
    """Check indices against the size in sparse_coo_tensor (off by default, as in PyTorch):
    a context manager / decorator, or globally with `enable()` / `disable()`."""

    _enabled = False

    def __init__(self, enable=True):
        self.state = enable
        self.saved_state = None

    @staticmethod
    def is_enabled():
        return check_sparse_tensor_invariants._enabled

    @staticmethod
    def enable():
        check_sparse_tensor_invariants._enabled = True

    @staticmethod
    def disable():
        check_sparse_tensor_invariants._enabled = False

    def __enter__(self):
        self.saved_state = check_sparse_tensor_invariants._enabled
        check_sparse_tensor_invariants._enabled = self.state

    def __exit__(self, *exc):
        check_sparse_tensor_invariants._enabled = self.saved_state

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return wrapper


# --- the sparse tensor's methods -----------------------------------------------------------------

def _sub(self, other, *, alpha=1):
    return A.add(self, other, alpha, name="sub")


def _sub_(self, other, *, alpha=1):
    return A.add_(self, other, alpha, name="sub")


def _radd(self, other):
    if not isinstance(other, Tensor):  # PyTorch treats number + sparse as sparse + dense
        raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) "
                           "instead.")
    return A.add(other, self)


def _rsub(self, other):
    from .._ops.elementwise import scalar_tensor
    from .._promotion import scalar_dtype
    if not isinstance(other, Tensor):
        other = scalar_tensor(other, scalar_dtype(other), self.device)
    return A.add(other, self, name="sub")


def _rtruediv(self, other):
    if isinstance(other, Tensor):
        return A.div(other, self)
    raise NotImplementedError("Could not run 'aten::reciprocal' with arguments from the "
                              "'SparseCPU' backend.")


def _rpow(self, other):
    raise NotImplementedError("Could not run 'aten::pow.Scalar' with arguments from the "
                              "'SparseCPU' backend.")


def _matmul_operator(self, other):
    return M.matmul(self, other) if isinstance(other, Tensor) else NotImplemented


def _rmatmul_operator(self, other):
    return M.matmul(other, self) if isinstance(other, Tensor) else NotImplemented


def _sparse_addmm_method(self, *args, **kwargs):
    raise RuntimeError("expand is unsupported for Sparse tensors")


def _sspaddmm_method(self, mat1, mat2, *, beta=1, alpha=1):
    return M.sspaddmm(self, mat1, mat2, beta=beta, alpha=alpha)


_SPARSE_METHODS = {
    "add": lambda self, other, *, alpha=1: A.add(self, other, alpha),
    "add_": lambda self, other, *, alpha=1: A.add_(self, other, alpha),
    "sub": _sub, "sub_": _sub_, "subtract": _sub, "subtract_": _sub_,
    "mul": A.mul, "mul_": A.mul_, "multiply": A.mul, "multiply_": A.mul_,
    "div": A.div, "div_": A.div_, "divide": A.div, "divide_": A.div_,
    "true_divide": A.div, "true_divide_": A.div_, "floor_divide": A.floor_divide,
    "neg": A.neg, "neg_": A.neg_, "negative": A.neg, "negative_": A.neg_,
    "pow": A.pow, "square": lambda self: A.pow(self, 2),
    "__add__": lambda self, other: A.add(self, other), "__radd__": _radd,
    "__iadd__": lambda self, other: A.add_(self, other),
    "__sub__": lambda self, other: A.add(self, other, name="sub"), "__rsub__": _rsub,
    "__isub__": lambda self, other: A.add_(self, other, name="sub"),
    "__mul__": A.mul, "__rmul__": lambda self, other: A.mul(other, self),
    "__imul__": A.mul_,
    "__truediv__": A.div, "__rtruediv__": _rtruediv, "__itruediv__": A.div_,
    "__floordiv__": A.floor_divide, "__pow__": A.pow, "__rpow__": _rpow,
    "__neg__": A.neg,
    "mm": M.mm, "matmul": M.matmul, "mv": M.mv, "__matmul__": _matmul_operator,
    "__rmatmul__": _rmatmul_operator, "addmm": _sparse_addmm_method,
    "hspmm": M.hspmm, "smm": M.smm, "sspaddmm": _sspaddmm_method,
    "sum": R.tensor_sum,
    # the legacy (0.x) names the old documentation lists for torch.sparse.FloatTensor
    "spmm": M.mm, "sspmm": M.smm, "spadd": lambda self, other, *, alpha=1: A.add(
        self, other, alpha),
}
for _name, _fn in _SPARSE_METHODS.items():
    setattr(SparseTensor, _name, _fn)


# --- methods of dense tensors that concern the sparse layout --------------------------------------

def _strided_only_error(name, kind=RuntimeError):
    def method(self, *args, **kwargs):
        if kind is RuntimeError:
            raise RuntimeError(f"{name} expected sparse coordinate tensor layout but got "
                               f"Strided")
        raise NotImplementedError(f"Could not run 'aten::{name}' with arguments from the "
                                  f"'CPU' backend.")
    method.__name__ = name
    return method


def _sspaddmm_on_dense(self, *args, **kwargs):
    raise RuntimeError("tensor.sspaddmm(...) can only be called on sparse tensors")


def _to_dense_of_dense(self, dtype=None, *, masked_grad=None):
    return self if dtype is None else self.to(dtype)


Tensor.to_sparse = to_sparse
Tensor.to_dense = _to_dense_of_dense
Tensor.sparse_mask = sparse_mask
Tensor._sparse_mask = sparse_mask  # the legacy name
Tensor.sparse_dim = lambda self: 0
Tensor.dense_dim = lambda self: self.ndim
Tensor.coalesce = _strided_only_error("coalesce")
Tensor.is_coalesced = _strided_only_error("is_coalesced")
Tensor.indices = _strided_only_error("indices")
Tensor.values = _strided_only_error("values")
Tensor._indices = _strided_only_error("_indices", NotImplementedError)
Tensor._values = _strided_only_error("_values", NotImplementedError)
Tensor._nnz = _strided_only_error("_nnz", NotImplementedError)
Tensor.smm = Tensor.sspaddmm = _sspaddmm_on_dense


# --- dense entry points that take a sparse operand -------------------------------------------------

def _any_sparse(args, kwargs):
    for a in args:
        if a.__class__ is SparseTensor:
            return True
    if kwargs:
        for a in kwargs.values():
            if a.__class__ is SparseTensor:
                return True
    return False


def _sparse_or_dense(dense_fn, sparse_fn):
    """`dense_fn`, except that calls with a sparse operand go to `sparse_fn`."""
    @functools.wraps(dense_fn)
    def fn(*args, **kwargs):
        if _any_sparse(args, kwargs):
            return sparse_fn(*args, **kwargs)
        return dense_fn(*args, **kwargs)
    return fn


def _no_out(out, name):
    if out is not None:
        raise RuntimeError(f"{name}(): reftorch does not support out= with sparse operands")


def _add_fn(input, other, *, alpha=1, out=None):
    _no_out(out, "add")
    return A.add(input, other, alpha)


def _sub_fn(input, other, *, alpha=1, out=None):
    _no_out(out, "sub")
    return A.add(input, other, alpha, name="sub")


def _mul_fn(input, other, *, out=None):
    _no_out(out, "mul")
    return A.mul(input, other)


def _div_fn(input, other, *, rounding_mode=None, out=None):
    _no_out(out, "div")
    return A.div(input, other, rounding_mode)


def _floor_divide_fn(input, other, *, out=None):
    _no_out(out, "floor_divide")
    return A.floor_divide(input, other)


def _neg_fn(input, *, out=None):
    _no_out(out, "neg")
    return A.neg(input)


def _pow_fn(input, exponent, *, out=None):
    _no_out(out, "pow")
    if not isinstance(input, SparseTensor):
        return _rpow(exponent, input)
    return A.pow(input, exponent)


def _square_fn(input, *, out=None):
    _no_out(out, "square")
    return A.pow(input, 2)


def _mm_fn(input, mat2, *, out=None):
    _no_out(out, "mm")
    return M.mm(input, mat2)


def _matmul_fn(input, other, *, out=None):
    _no_out(out, "matmul")
    return M.matmul(input, other)


def _mv_fn(input, vec, *, out=None):
    _no_out(out, "mv")
    if isinstance(input, SparseTensor) and vec.ndim == 1 and input.shape[-1] != vec.shape[0]:
        raise RuntimeError("mv: expected self.size(-1) == vec.size(-1)")
    return M.mv(input, vec)


def _addmm_fn(input, mat1, mat2, *, beta=1, alpha=1, out=None):
    _no_out(out, "addmm")
    return M.dense_addmm(input, mat1, mat2, beta, alpha)


def _sum_fn(input, *args, **kwargs):
    return R.tensor_sum(input, *args, **kwargs)


def _narrow_copy_fn(input, dim, start, length, *, out=None):
    _no_out(out, "narrow_copy")
    return narrow_copy(input, dim, start, length)


def hspmm(mat1, mat2, *, out=None):
    """Sparse (n, k) @ dense (k, p) as a hybrid sparse tensor with one entry per row of mat1
    that has entries."""
    _no_out(out, "hspmm")
    return M.hspmm(mat1, mat2)


def sspaddmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):
    """beta * input + alpha * (mat1 @ mat2) as a sparse tensor (input and mat1 sparse)."""
    _no_out(out, "sspaddmm")
    return M.sspaddmm(input, mat1, mat2, beta=beta, alpha=alpha)


def smm(input, mat2):
    """Sparse @ dense as a sparse tensor."""
    return M.smm(input, mat2)


# --- creation with layout=torch.sparse_coo, and *_like of sparse tensors -------------------------

def _new_empty_sparse(shape, dtype=None, device=None, requires_grad=False, sparse_dim=None):
    from .. import _dtype as D
    from .._storage import normalize_device
    from ._legacy import empty_sparse
    result = empty_sparse(tuple(shape), dtype or D.get_default_dtype(), normalize_device(device),
                          sparse_dim)
    if requires_grad:
        result.requires_grad_()
    return result


def _sparse_layout_factory(dense_fn):
    """torch.zeros / torch.empty: `layout=torch.sparse_coo` makes an empty sparse tensor."""
    @functools.wraps(dense_fn)
    def fn(*size, **kwargs):
        if kwargs.get("layout") is not sparse_coo:
            return dense_fn(*size, **kwargs)
        if kwargs.get("out") is not None:
            raise RuntimeError(f"{dense_fn.__name__}(): out= is not supported with "
                               f"layout=torch.sparse_coo")
        shape = tuple(size[0]) if len(size) == 1 and not isinstance(size[0], int) else size
        return _new_empty_sparse(shape, kwargs.get("dtype"), kwargs.get("device"),
                                 kwargs.get("requires_grad", False))
    return fn


def _sparse_like(dense_fn, fills):
    """zeros_like / empty_like of a sparse tensor (or with layout=torch.sparse_coo) is an
    empty sparse tensor; ones_like / full_like would fill every element, which PyTorch
    refuses for the sparse layout."""
    @functools.wraps(dense_fn)
    def fn(input, *args, **kwargs):
        layout = kwargs.get("layout")
        if not (isinstance(input, SparseTensor) and layout in (None, sparse_coo)
                or layout is sparse_coo):
            return dense_fn(input, *args, **kwargs)
        if fills:
            raise NotImplementedError("Could not run 'aten::fill_.Scalar' with arguments from "
                                      "the 'SparseCPU' backend.")
        return _new_empty_sparse(input.shape, kwargs.get("dtype") or input.dtype,
                                 kwargs.get("device") or input.device,
                                 kwargs.get("requires_grad", False), input.sparse_dim()
                                 if isinstance(input, SparseTensor) else None)
    return fn


def _new_empty_method(self, *size, dtype=None, device=None, requires_grad=False, **kwargs):
    shape = tuple(size[0]) if len(size) == 1 and not isinstance(size[0], int) else size
    return _new_empty_sparse(shape, dtype or self.dtype, device or self.device, requires_grad)


SparseTensor.new_zeros = SparseTensor.new_empty = _new_empty_method


_FUNCTIONS = {
    "add": _add_fn, "sub": _sub_fn, "subtract": _sub_fn,
    "mul": _mul_fn, "multiply": _mul_fn,
    "div": _div_fn, "divide": _div_fn, "true_divide": _div_fn,
    "floor_divide": _floor_divide_fn, "neg": _neg_fn, "negative": _neg_fn,
    "pow": _pow_fn, "square": _square_fn,
    "mm": _mm_fn, "matmul": _matmul_fn, "mv": _mv_fn, "addmm": _addmm_fn,
    "sum": _sum_fn, "narrow_copy": _narrow_copy_fn,
}


def _dense_self_add(name):
    def sparse_other(self, other, *, alpha=1):
        return A.add(self, other, alpha, name=name)
    return sparse_other


def _dense_self_add_(name):
    def sparse_other(self, other, *, alpha=1):
        return A.add_(self, other, alpha, name=name)
    return sparse_other


def _dense_mul_(self, other):
    """dense *= sparse: the product is zero wherever the sparse operand has no entry."""
    from ..autograd.grad_mode import no_grad
    product = A.mul(self.detach(), other.detach()).to_dense()
    with no_grad():
        self.copy_(product)
    return self


def _sparse_other(dense_method, sparse_method):
    """A dense tensor's method whose operand (`other`, or mm's `mat2`) may be sparse."""
    @functools.wraps(dense_method)
    def method(self, *args, **kwargs):
        # The operand is the only argument these methods take that can be a tensor (the rest
        # are numbers such as alpha), so it alone is tested, in line: x.add_(y, alpha=a) runs
        # several times per optimizer step, and a scan of every argument cost about a
        # microsecond a call.
        operand = args[0] if args else kwargs.get("other", kwargs.get("mat2"))
        if operand.__class__ is SparseTensor:
            return sparse_method(self, *args, **kwargs)
        return dense_method(self, *args, **kwargs)
    return method


def accept_sparse_operands(namespace):
    """Let reftorch's dense entry points take sparse operands, as PyTorch's do.

    `namespace` is the reftorch package's globals: torch.add, torch.mm, torch.sum, ... are
    replaced by functions that send calls with a sparse operand to this package and every
    other call to the dense function unchanged. The dense Tensor's add/sub/mul/mm/matmul
    (and +=, -=) methods get the same treatment for a sparse `other`; operators such as
    `dense + sparse` need nothing, since Python asks the sparse (sub)class first.
    torch.zeros/empty accept layout=torch.sparse_coo, and zeros_like/empty_like of a sparse
    tensor are sparse. Also adds torch.sparse_coo_tensor, hspmm, smm, sspaddmm and spmm."""
    for name, sparse_fn in _FUNCTIONS.items():
        namespace[name] = _sparse_or_dense(namespace[name], sparse_fn)
    for name in ("zeros", "empty"):
        namespace[name] = _sparse_layout_factory(namespace[name])
    for name, fills in (("zeros_like", False), ("empty_like", False), ("ones_like", True),
                        ("full_like", True)):
        namespace[name] = _sparse_like(namespace[name], fills)
    namespace["spmm"] = namespace["mm"]
    namespace.update(sparse_coo_tensor=sparse_coo_tensor, hspmm=hspmm, smm=smm,
                     sspaddmm=sspaddmm)
    for name, sparse_method in (
            ("add", _dense_self_add("add")),
            ("sub", _dense_self_add("sub")),
            ("subtract", _dense_self_add("sub")),
            ("add_", _dense_self_add_("add")), ("sub_", _dense_self_add_("sub")),
            ("subtract_", _dense_self_add_("sub")),
            ("mul", A.mul), ("multiply", A.mul), ("mul_", _dense_mul_),
            ("multiply_", _dense_mul_), ("mm", M.mm), ("matmul", M.matmul)):
        setattr(Tensor, name, _sparse_other(getattr(Tensor, name), sparse_method))
    Tensor.__iadd__ = Tensor.add_
    Tensor.__isub__ = Tensor.sub_
    Tensor.__imul__ = Tensor.mul_
    # The methods above must not shadow the sparse tensor's own.
    for name in ("add", "sub", "subtract", "add_", "sub_", "subtract_", "mul", "multiply",
                 "mul_", "multiply_", "mm", "matmul", "__iadd__", "__isub__", "__imul__"):
        assert name in SparseTensor.__dict__, name

