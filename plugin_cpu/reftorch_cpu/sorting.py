"""reftorch_cpu kernels: sorting (work in progress)."""


def register(registrar):
    """Register this group's kernels with reftorch (called by reftorch_cpu.register)."""
