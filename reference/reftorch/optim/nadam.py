"""NAdam: Adam with Nesterov momentum (Dozat), with PyTorch's momentum-decay schedule."""
import reftorch

from .optimizer import (Optimizer, _check_capturable, _check_lr, _evaluate_closure,
                        _maybe_negated, _new_step_counter, _params_with_grad, _real_view,
                        _sparse_check, _use_grad_for_differentiable, _value)


class NAdam(Optimizer):
    """NAdam. mu_t = beta1 * (1 - 0.5 * 0.96^(t * momentum_decay)); the running product of
    the mu_t is kept as a float32 (default-dtype) tensor in the state, like PyTorch."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):
        _check_lr(lr)
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        for index in (0, 1):
            if not 0.0 <= betas[index] < 1.0:
                raise ValueError(f"Invalid beta parameter at index {index}: {betas[index]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for key, default in (("maximize", False), ("foreach", None), ("capturable", False),
                                 ("differentiable", False), ("decoupled_weight_decay", False)):
                group.setdefault(key, default)

    @_use_grad_for_differentiable
    def step(self, closure=None):
        loss = _evaluate_closure(closure)
        for group in self.param_groups:
            params = _params_with_grad(group)
            _check_capturable(group, params)
            for p in params:
                _sparse_check(p, "NAdam")
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _new_step_counter()
                    state["mu_product"] = _new_step_counter(1.0)
                    state["exp_avg"] = reftorch.zeros_like(p)
                    state["exp_avg_sq"] = reftorch.zeros_like(p)
                self._update(p, state, group)
        return loss

    @staticmethod
    def _update(p, state, group):
        beta1, beta2 = group["betas"]
        lr, eps, weight_decay = _value(group["lr"]), group["eps"], group["weight_decay"]
        momentum_decay = group["momentum_decay"]
        grad = _maybe_negated(p.grad, group["maximize"])
        param, grad = _real_view(p), _real_view(grad)
        exp_avg, exp_avg_sq = _real_view(state["exp_avg"]), _real_view(state["exp_avg_sq"])
        mu_product = state["mu_product"]

        state["step"] += 1
        step = state["step"].item()
        bias_correction2 = 1 - beta2 ** step
        if weight_decay != 0:
            if group["decoupled_weight_decay"]:
                param.mul_(1 - lr * weight_decay)
            else:
                grad = grad.add(param, alpha=weight_decay)

        mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
        mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
        mu_product *= mu   # in the state tensor's (float32) precision, as PyTorch

        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denom = exp_avg_sq.div(bias_correction2).sqrt()
        mu_product_value = mu_product.item()
        mu_product_next = mu_product_value * mu_next
        denom.add_(eps)
        param.addcdiv_(grad, denom, value=(-lr * (1.0 - mu) / (1.0 - mu_product_value)))
        param.addcdiv_(exp_avg, denom, value=(-lr * mu_next) / (1.0 - mu_product_next))
