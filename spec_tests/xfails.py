"""Known differences from PyTorch, each with its reason. Runners consult this table only."""

# (op, lhs dtype, rhs dtype, rhs shape) -> reason
MIXED_DTYPE_XFAILS = {
    (op, "float16", rhs, ()): "reftorch has no complex32: float16 with a 0-dim complex tensor "
                              "gives complex64 here, complex32 (ComplexHalf) in PyTorch"
    for op in ("add", "sub", "mul", "div", "pow", "eq", "ne")
    for rhs in ("complex64", "complex128")
}

MIXED_DTYPE_XFAILS[("remainder", "bfloat16", "float32", ())] = (
    "PyTorch's bfloat16 remainder with a 0-dim float32 operand rounds intermediate results; "
    "the reference rounds once")
