"""Adam and AdamW (Adam with decoupled weight decay)."""
import reftorch

from .optimizer import (Optimizer, _check_capturable, _check_lr, _evaluate_closure,
                        _maybe_negated, _new_step_counter, _params_with_grad, _real_view,
                        _use_grad_for_differentiable, _value)


def _check_adam_options(lr, betas, eps, weight_decay):
    _check_lr(lr)
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    for index in (0, 1):
        if not 0.0 <= betas[index] < 1.0:
            raise ValueError(f"Invalid beta parameter at index {index}: {betas[index]}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")
    both_floats = all(isinstance(b, float) for b in betas[:2])
    both_tensors = all(isinstance(b, reftorch.Tensor) for b in betas[:2])
    if not (both_floats or both_tensors):
        raise ValueError("betas must be either both floats or both Tensors")


class Adam(Optimizer):
    """Adam. Per step t, with g the gradient (plus weight_decay * p unless decoupled):
        m <- lerp(m, g, 1 - beta1);  v <- beta2 * v + (1 - beta2) * g * g
        p <- p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
    amsgrad uses the running maximum of v instead of v. decoupled_weight_decay (AdamW)
    first shrinks p by (1 - lr * weight_decay).
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        _check_adam_options(lr, betas, eps, weight_decay)
        betas = tuple(_value(b) for b in betas)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)
        if fused:
            if differentiable:
                raise RuntimeError("`fused` does not support `differentiable`")
            if foreach:
                raise RuntimeError("`fused` and `foreach` cannot be `True` together.")

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for key, default in (("amsgrad", False), ("maximize", False), ("foreach", None),
                                 ("capturable", False), ("differentiable", False),
                                 ("decoupled_weight_decay", False), ("fused", None)):
                group.setdefault(key, default)

    def _state_for(self, p, group):
        state = self.state[p]
        if len(state) == 0:
            state["step"] = _new_step_counter()
            state["exp_avg"] = reftorch.zeros_like(p)
            state["exp_avg_sq"] = reftorch.zeros_like(p)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = reftorch.zeros_like(p)
        return state

    @_use_grad_for_differentiable
    def step(self, closure=None):
        loss = _evaluate_closure(closure)
        for group in self.param_groups:
            params = _params_with_grad(group)
            _check_capturable(group, params)
            for p in params:
                if getattr(p.grad, "is_sparse", False):
                    raise RuntimeError("Adam does not support sparse gradients, please "
                                       "consider SparseAdam instead")
                self._update(p, self._state_for(p, group), group)
        return loss

    @staticmethod
    def _update(p, state, group):
        beta1, beta2 = (_value(b) for b in group["betas"])
        lr, eps, weight_decay = _value(group["lr"]), group["eps"], group["weight_decay"]
        grad = _maybe_negated(p.grad, group["maximize"])
        state["step"] += 1
        if weight_decay != 0:
            if group["decoupled_weight_decay"]:
                p.mul_(1 - lr * weight_decay)
            else:
                grad = grad.add(p, alpha=weight_decay)

        param, grad = _real_view(p), _real_view(grad)
        exp_avg, exp_avg_sq = _real_view(state["exp_avg"]), _real_view(state["exp_avg_sq"])
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)

        step = state["step"].item()
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        step_size = lr / bias_correction1
        bias_correction2_sqrt = bias_correction2 ** 0.5
        if group["amsgrad"]:
            max_exp_avg_sq = _real_view(state["max_exp_avg_sq"])
            max_exp_avg_sq.copy_(reftorch.maximum(max_exp_avg_sq, exp_avg_sq))
            second_moment = max_exp_avg_sq
        else:
            second_moment = exp_avg_sq
        denom = (second_moment.sqrt() / bias_correction2_sqrt).add_(eps)
        param.addcdiv_(exp_avg, denom, value=-step_size)


class AdamW(Adam):
    """Adam with decoupled weight decay (default 1e-2): p <- p * (1 - lr * weight_decay)
    before the Adam update, instead of adding weight_decay * p to the gradient."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
