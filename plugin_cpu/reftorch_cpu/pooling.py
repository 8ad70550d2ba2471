"""reftorch_cpu kernels: pooling (work in progress)."""


def register(registrar):
    """Register this group's kernels with reftorch (called by reftorch_cpu.register)."""
