"""RAdam: Adam whose adaptive term is switched on (and rectified) once the variance of the
adaptive learning rate is tractable (rho_t > 5)."""
import reftorch

from .optimizer import (Optimizer, _check_capturable, _check_lr, _evaluate_closure,
                        _maybe_negated, _new_step_counter, _params_with_grad, _real_view,
                        _sparse_check, _use_grad_for_differentiable, _value)


class RAdam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False):
        _check_lr(lr)
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        for index in (0, 1):
            if not 0.0 <= betas[index] < 1.0:
                raise ValueError(f"Invalid beta parameter at index {index}: {betas[index]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for key, default in (("foreach", None), ("maximize", False),
                                 ("differentiable", False), ("capturable", False),
                                 ("decoupled_weight_decay", False)):
                group.setdefault(key, default)

    @_use_grad_for_differentiable
    def step(self, closure=None):
        loss = _evaluate_closure(closure)
        for group in self.param_groups:
            params = _params_with_grad(group)
            _check_capturable(group, params)
            for p in params:
                _sparse_check(p, "RAdam")
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _new_step_counter()
                    state["exp_avg"] = reftorch.zeros_like(p)
                    state["exp_avg_sq"] = reftorch.zeros_like(p)
                self._update(p, state, group)
        return loss

    @staticmethod
    def _update(p, state, group):
        beta1, beta2 = group["betas"]
        lr, eps, weight_decay = _value(group["lr"]), group["eps"], group["weight_decay"]
        grad = _maybe_negated(p.grad, group["maximize"])
        param, grad = _real_view(p), _real_view(grad)
        exp_avg, exp_avg_sq = _real_view(state["exp_avg"]), _real_view(state["exp_avg_sq"])

        state["step"] += 1
        step = state["step"].item()
        if weight_decay != 0:
            if group["decoupled_weight_decay"]:
                param.mul_(1 - lr * weight_decay)
            else:
                grad = grad.add(param, alpha=weight_decay)

        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        bias_corrected_exp_avg = exp_avg / bias_correction1

        # Length of the approximated simple moving average (rho_inf is its limit).
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
        if rho_t > 5.0:
            rect = ((rho_t - 4) * (rho_t - 2) * rho_inf
                    / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
            adaptive_lr = (bias_correction2 ** 0.5) / exp_avg_sq.sqrt().add_(eps)
            param.add_(bias_corrected_exp_avg * lr * adaptive_lr * rect, alpha=-1.0)
        else:
            param.add_(bias_corrected_exp_avg * lr, alpha=-1.0)
