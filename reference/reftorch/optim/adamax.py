"""Adamax: Adam with the infinity norm in place of the second moment."""
import reftorch

from .optimizer import (Optimizer, _check_capturable, _check_lr, _evaluate_closure,
                        _maybe_negated, _new_step_counter, _params_with_grad, _real_view,
                        _sparse_check, _use_grad_for_differentiable, _value)


class Adamax(Optimizer):
    """Adamax:  m <- lerp(m, g, 1 - beta1);  u <- max(beta2 * u, |g| + eps)
                p <- p - lr / (1 - beta1^t) * m / u
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        _check_lr(lr)
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        for index in (0, 1):
            if not 0.0 <= betas[index] < 1.0:
                raise ValueError(f"Invalid beta parameter at index {index}: {betas[index]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for key, default in (("foreach", None), ("maximize", False),
                                 ("differentiable", False), ("capturable", False)):
                group.setdefault(key, default)

    @_use_grad_for_differentiable
    def step(self, closure=None):
        loss = _evaluate_closure(closure)
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, eps, weight_decay = _value(group["lr"]), group["eps"], group["weight_decay"]
            params = _params_with_grad(group)
            _check_capturable(group, params)
            for p in params:
                _sparse_check(p, "Adamax")
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _new_step_counter()
                    state["exp_avg"] = reftorch.zeros_like(p)
                    state["exp_inf"] = reftorch.zeros_like(p)
                state["step"] += 1
                grad = _maybe_negated(p.grad, group["maximize"])
                if weight_decay != 0:
                    grad = grad.add(p, alpha=weight_decay)
                param, grad = _real_view(p), _real_view(grad)
                exp_avg, exp_inf = _real_view(state["exp_avg"]), _real_view(state["exp_inf"])
                exp_avg.lerp_(grad, 1 - beta1)
                exp_inf.copy_(reftorch.maximum(exp_inf.mul_(beta2), grad.abs().add_(eps)))
                clr = lr / (1 - beta1 ** state["step"].item())
                param.addcdiv_(exp_avg, exp_inf, value=-clr)
        return loss
