"""Attach op-derived methods to Tensor: one explicit line per method, all from declarations."""
from __future__ import annotations

import warnings

from ._ops import pointwise as P
from ._ops import variants as V
from ._ops import inplace_meta
from ._tensor import Tensor
from . import _indexing

# Arithmetic
Tensor.add = V.method(P.ADD)
Tensor.add_ = V.inplace(P.ADD)
Tensor.sub = V.method(P.SUB)
Tensor.sub_ = V.inplace(P.SUB)
Tensor.subtract = Tensor.sub
Tensor.subtract_ = Tensor.sub_
Tensor.mul = V.method(P.MUL)
Tensor.mul_ = V.inplace(P.MUL)
Tensor.multiply = Tensor.mul
Tensor.multiply_ = Tensor.mul_
Tensor.div = V.method(P.DIV)
Tensor.div_ = V.inplace(P.DIV)
Tensor.divide = Tensor.div
Tensor.divide_ = Tensor.div_
Tensor.true_divide = Tensor.div
Tensor.true_divide_ = Tensor.div_
Tensor.floor_divide = V.method(P.FLOOR_DIVIDE)
Tensor.floor_divide_ = V.inplace(P.FLOOR_DIVIDE)
Tensor.remainder = V.method(P.REMAINDER)
Tensor.remainder_ = V.inplace(P.REMAINDER)
Tensor.pow = V.method(P.POW)
Tensor.pow_ = V.inplace(P.POW)
Tensor.neg = V.method(P.NEG, arity=1)
Tensor.neg_ = V.inplace(P.NEG, arity=1)
Tensor.negative = Tensor.neg
Tensor.negative_ = Tensor.neg_
Tensor.positive = V.identity(P.POSITIVE)
Tensor.abs = V.method(P.ABS, arity=1)
Tensor.abs_ = V.inplace(P.ABS, arity=1)
Tensor.absolute = Tensor.abs
Tensor.absolute_ = Tensor.abs_

# Comparison
for _name, _op in (("eq", P.EQ), ("ne", P.NE), ("lt", P.LT), ("le", P.LE), ("gt", P.GT),
                   ("ge", P.GE)):
    setattr(Tensor, _name, V.method(_op))
    setattr(Tensor, _name + "_", V.inplace(_op))
Tensor.not_equal, Tensor.not_equal_ = Tensor.ne, Tensor.ne_
Tensor.less, Tensor.less_ = Tensor.lt, Tensor.lt_
Tensor.less_equal, Tensor.less_equal_ = Tensor.le, Tensor.le_
Tensor.greater, Tensor.greater_ = Tensor.gt, Tensor.gt_
Tensor.greater_equal, Tensor.greater_equal_ = Tensor.ge, Tensor.ge_

# Bitwise
Tensor.bitwise_and = V.method(P.BITWISE_AND)
Tensor.bitwise_and_ = V.inplace(P.BITWISE_AND)
Tensor.bitwise_or = V.method(P.BITWISE_OR)
Tensor.bitwise_or_ = V.inplace(P.BITWISE_OR)
Tensor.bitwise_xor = V.method(P.BITWISE_XOR)
Tensor.bitwise_xor_ = V.inplace(P.BITWISE_XOR)
Tensor.bitwise_not = V.method(P.BITWISE_NOT, arity=1)
Tensor.bitwise_not_ = V.inplace(P.BITWISE_NOT, arity=1)
Tensor.bitwise_left_shift = V.method(P.BITWISE_LEFT_SHIFT)
Tensor.bitwise_left_shift_ = V.inplace(P.BITWISE_LEFT_SHIFT)
Tensor.bitwise_right_shift = V.method(P.BITWISE_RIGHT_SHIFT)
Tensor.bitwise_right_shift_ = V.inplace(P.BITWISE_RIGHT_SHIFT)

# Pointwise math: every method derived from its op's declaration
for _name in (
    "acos", "asin", "atan", "acosh", "asinh", "atanh", "cos", "cosh", "sin", "sinh", "tan",
    "tanh", "exp", "exp2", "expm1", "log", "log10", "log1p", "log2", "sigmoid",
    "reciprocal", "rsqrt", "sqrt", "deg2rad", "rad2deg", "ceil", "floor", "trunc", "frac",
    "sign", "sgn", "conj_physical", "logical_not"):
    setattr(Tensor, _name, V.method(getattr(P, _name.upper()), arity=1))
    setattr(Tensor, _name + "_", V.inplace(getattr(P, _name.upper()), arity=1))
for _name in ("signbit", "isnan", "isinf", "isposinf", "isneginf", "isfinite", "isreal"):
    setattr(Tensor, _name, V.method(getattr(P, _name.upper()), arity=1))
for _name in ("copysign", "xlogy", "fmod", "clamp_min", "clamp_max"):
    setattr(Tensor, _name, V.method(getattr(P, _name.upper())))
    setattr(Tensor, _name + "_", V.inplace(getattr(P, _name.upper())))
for _name, (_fn, _method, _inplace) in P.TENSOR_OTHER_FORMS.items():
    setattr(Tensor, _name, _method)
    if _inplace is not None:
        setattr(Tensor, _name + "_", _inplace)
for _alias, _name in (("arccos", "acos"), ("arcsin", "asin"), ("arctan", "atan"),
                      ("arccosh", "acosh"), ("arcsinh", "asinh"), ("arctanh", "atanh"),
                      ("arctan2", "atan2"), ("fix", "trunc")):
    setattr(Tensor, _alias, getattr(Tensor, _name))
    setattr(Tensor, _alias + "_", getattr(Tensor, _name + "_"))
Tensor.logit, Tensor.logit_ = P.logit_method, P.logit_inplace
Tensor.nan_to_num, Tensor.nan_to_num_ = P.nan_to_num_method, P.nan_to_num_inplace
Tensor.round, Tensor.round_ = P.round_method, P.round_inplace
Tensor.square, Tensor.square_ = P.square_method, P.square_inplace
Tensor.float_power, Tensor.float_power_ = P.float_power_method, P.float_power_inplace
Tensor.angle = P.angle_method
Tensor.conj = P.conj
Tensor.is_conj = P.is_conj
Tensor.resolve_conj = P.resolve_conj
Tensor.real = property(P.real)
Tensor.imag = property(P.imag)
Tensor.clamp, Tensor.clamp_ = P.clamp_method, P.clamp_inplace
Tensor.clip, Tensor.clip_ = Tensor.clamp, Tensor.clamp_
Tensor.lerp, Tensor.lerp_ = P.lerp_method, P.lerp_inplace
Tensor.addcmul, Tensor.addcmul_ = P.addcmul_method, P.addcmul_inplace
Tensor.addcdiv, Tensor.addcdiv_ = P.addcdiv_method, P.addcdiv_inplace
Tensor.where = P.where_method

# Python operators
Tensor.__add__ = V.operator(P.ADD)
Tensor.__radd__ = V.reflected(P.ADD)
Tensor.__iadd__ = Tensor.add_
Tensor.__sub__ = V.operator(P.SUB)
Tensor.__rsub__ = V.reflected(P.SUB)
Tensor.__isub__ = Tensor.sub_
Tensor.__mul__ = V.operator(P.MUL)
Tensor.__rmul__ = V.reflected(P.MUL)
Tensor.__imul__ = Tensor.mul_
Tensor.__truediv__ = V.operator(P.DIV)
Tensor.__rtruediv__ = V.reflected(P.DIV)
Tensor.__itruediv__ = Tensor.div_
Tensor.__floordiv__ = V.operator(P.FLOOR_DIVIDE)
Tensor.__rfloordiv__ = V.reflected(P.FLOOR_DIVIDE)
Tensor.__ifloordiv__ = Tensor.floor_divide_
Tensor.__mod__ = V.operator(P.REMAINDER)
Tensor.__rmod__ = V.reflected(P.REMAINDER)
Tensor.__imod__ = Tensor.remainder_
Tensor.__pow__ = V.operator(P.POW)
Tensor.__rpow__ = V.reflected(P.POW)
Tensor.__ipow__ = Tensor.pow_
Tensor.__neg__ = Tensor.neg
Tensor.__pos__ = Tensor.positive
Tensor.__abs__ = Tensor.abs
Tensor.__invert__ = V.invert_operator(P.BITWISE_NOT)
Tensor.__and__ = V.operator(P.BITWISE_AND)
Tensor.__rand__ = V.reflected(P.BITWISE_AND)
Tensor.__iand__ = Tensor.bitwise_and_
Tensor.__or__ = V.operator(P.BITWISE_OR)
Tensor.__ror__ = V.reflected(P.BITWISE_OR)
Tensor.__ior__ = Tensor.bitwise_or_
Tensor.__xor__ = V.operator(P.BITWISE_XOR)
Tensor.__rxor__ = V.reflected(P.BITWISE_XOR)
Tensor.__ixor__ = Tensor.bitwise_xor_
Tensor.__lshift__ = V.operator(P.BITWISE_LEFT_SHIFT)
Tensor.__rlshift__ = V.reflected(P.BITWISE_LEFT_SHIFT)
Tensor.__ilshift__ = Tensor.bitwise_left_shift_
Tensor.__rshift__ = V.operator(P.BITWISE_RIGHT_SHIFT)
Tensor.__rrshift__ = V.reflected(P.BITWISE_RIGHT_SHIFT)
Tensor.__irshift__ = Tensor.bitwise_right_shift_
Tensor.__eq__ = V.operator(P.EQ)
Tensor.__ne__ = V.operator(P.NE)
Tensor.__lt__ = V.operator(P.LT)
Tensor.__le__ = V.operator(P.LE)
Tensor.__gt__ = V.operator(P.GT)
Tensor.__ge__ = V.operator(P.GE)
Tensor.__hash__ = lambda self: id(self)

# In-place metadata and fills
Tensor.resize_ = inplace_meta.resize_
Tensor.resize_as_ = inplace_meta.resize_as_
Tensor.fill_ = inplace_meta.fill_
Tensor.zero_ = inplace_meta.zero_
Tensor.t_ = inplace_meta.t_
Tensor.transpose_ = inplace_meta.transpose_
Tensor.squeeze_ = inplace_meta.squeeze_
Tensor.unsqueeze_ = inplace_meta.unsqueeze_
Tensor.as_strided_ = inplace_meta.as_strided_
Tensor.set_ = inplace_meta.set_

# Indexing
Tensor.__getitem__ = _indexing.getitem
Tensor.__setitem__ = _indexing.setitem


# Methods PyTorch removed before 1.0, kept with their documented behaviour and a warning that
# names the modern spelling.
def _removed_method(old, modern, fn):
    def method(self, *args, **kwargs):
        warnings.warn(f"Tensor.{old} was removed from PyTorch; use {modern} instead.",
                      DeprecationWarning, stacklevel=2)
        return fn(self, *args, **kwargs)
    method.__name__ = old
    method.__doc__ = f"Removed from PyTorch (0.x): the same as {modern}."
    return method


Tensor.index = _removed_method("index", "tensor[m]", _indexing.getitem)
Tensor.masked_copy_ = _removed_method("masked_copy_", "Tensor.masked_scatter_",
                                      lambda self, mask, source:
                                      self.masked_scatter_(mask, source))
