"""reftorch.autograd: grad mode, the recorded graph and the backward engine."""
from .grad_mode import (enable_grad, inference_mode, is_grad_enabled, no_grad,
                        set_grad_enabled)
from .graph import Node
from .engine import backward, grad
from .anomaly_mode import detect_anomaly, set_detect_anomaly, is_anomaly_enabled
from . import graph

__all__ = ["enable_grad", "is_grad_enabled", "no_grad", "set_grad_enabled", "Node",
           "backward", "grad", "detect_anomaly", "set_detect_anomaly", "inference_mode"]
