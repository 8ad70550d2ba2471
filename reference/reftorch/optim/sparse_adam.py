"""SparseAdam: the lazy Adam for sparse gradients. reftorch has no sparse tensors yet, so
construction and validation work but a step with a (necessarily dense) gradient raises the
error PyTorch raises for dense gradients."""
import reftorch

from .optimizer import Optimizer, _evaluate_closure, _params_with_grad


class SparseAdam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        if isinstance(lr, reftorch.Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 < lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        for index in (0, 1):
            if not 0.0 <= betas[index] < 1.0:
                raise ValueError(f"Invalid beta parameter at index {index}: {betas[index]}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, maximize=maximize))
        complex_params = [[g, i] for g, group in enumerate(self.param_groups)
                          for i, p in enumerate(group["params"]) if p.is_complex()]
        if complex_params:
            raise ValueError(f"Complex params at indices {complex_params}: SparseAdam does not "
                             "support complex parameters")

    def step(self, closure=None):
        with reftorch.no_grad():
            loss = _evaluate_closure(closure)
            for group in self.param_groups:
                for p in _params_with_grad(group):
                    if not getattr(p.grad, "is_sparse", False):
                        raise RuntimeError("SparseAdam does not support dense gradients, "
                                           "please consider Adam instead")
                    raise NotImplementedError("reftorch has no sparse tensors yet")
        return loss
