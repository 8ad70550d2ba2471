"""reftorch.autograd: grad mode, the recorded graph and the backward engine."""
from .grad_mode import (enable_grad, inference_mode, is_grad_enabled, no_grad,
                        set_grad_enabled)
from .graph import Node
from .engine import backward, grad
from .anomaly_mode import detect_anomaly, set_detect_anomaly, is_anomaly_enabled
from . import graph
from .function import Function, once_differentiable
from .variable import Variable
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from . import function, profiler  # noqa: F401

__all__ = ["enable_grad", "is_grad_enabled", "no_grad", "set_grad_enabled", "Node",
           "backward", "grad", "detect_anomaly", "set_detect_anomaly", "inference_mode",
           "Function", "once_differentiable", "Variable", "gradcheck", "gradgradcheck",
           "GradcheckError", "function", "profiler"]
