"""reftorch_cpu: C kernels (OpenMP, AVX2/AVX-512 dispatch) for reftorch's float32 and float64
`add`, `sub`, `mul`, `div` and `copy_` on cpu. See the README for what runs where.

`register` is the plugin's entry point (group `reftorch.plugins`, name `cpu`); reftorch calls
it when it is imported. The kernels live in `reftorch_cpu.kernels`, the C loops in
`reftorch_cpu._C`.
"""


def register(registrar):
    """Plugin entry point: register every kernel with reftorch."""
    # Imported here, not above: reftorch calls this while `import reftorch` is still running.
    from . import kernels
    kernels.register(registrar)


# Importing this package first must still load the plugin: import reftorch now that
# `register` exists (importing it loads the installed plugins, this one included).
import reftorch  # noqa: E402,F401
