"""reftorch.autograd: grad mode and the recorded graph."""
from .grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .graph import Node

__all__ = ["enable_grad", "is_grad_enabled", "no_grad", "set_grad_enabled", "Node"]
