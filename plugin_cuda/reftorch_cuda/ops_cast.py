"""(Kernels of this family come in the next commits.)"""
PROGRAMS = ()


def register_kernels(registrar):
    pass


def cast(out, src):
    return NotImplemented
