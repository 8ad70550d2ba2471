"""dtype -> C type names, shared by the C and CUDA plugins' kernel templates."""
from __future__ import annotations

C_TYPES = {
    "bool": "bool", "uint8": "uint8_t", "int8": "int8_t", "int16": "int16_t",
    "int32": "int32_t", "int64": "int64_t", "float32": "float", "float64": "double",
}
# CUDA adds the half types it computes in float.
CUDA_TYPES = dict(C_TYPES, float16="__half", bfloat16="__nv_bfloat16")


def c_type(dtype, table=C_TYPES):
    """The C type for a reftorch dtype, or TypeError when the plugin has none."""
    try:
        return table[dtype.name]
    except KeyError:
        raise TypeError(f"no C type for {dtype}") from None
