"""torch.nn: Parameter, the Module base and its containers, every documented layer, the
functional forms (`reftorch.nn.functional`) and weight initialisation (`reftorch.nn.init`)."""
from .parameter import Buffer, Parameter
from .modules import *  # noqa: F401,F403
from .modules import Module
from . import functional, init, modules, parallel, parameter, utils  # noqa: F401
from .parallel import DataParallel  # noqa: F401

__all__ = ["Buffer", "DataParallel", "Module", "Parameter", "functional", "init"]
