"""Adagrad: per-element learning rates from the running sum of squared gradients."""
import reftorch

from .optimizer import (Optimizer, _check_lr, _evaluate_closure, _maybe_negated,
                        _new_step_counter, _params_with_grad, _real_view,
                        _use_grad_for_differentiable, _value)


class Adagrad(Optimizer):
    """Adagrad:  sum <- sum + g * g;  p <- p - clr * g / (sqrt(sum) + eps)
    with clr = lr / (1 + (t - 1) * lr_decay). Unlike the other optimizers, the state of
    every parameter is created at construction (sum = initial_accumulator_value)."""

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0,
                 initial_accumulator_value=0, eps=1e-10, foreach=None, *, maximize=False,
                 differentiable=False, fused=None):
        _check_lr(lr)
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError("Invalid initial_accumulator_value value: "
                             f"{initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        if fused:
            if differentiable:
                raise RuntimeError("`fused` does not support `differentiable`")
            if foreach:
                raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p)

    def _init_state(self, p):
        state = self.state[p]
        state["step"] = _new_step_counter()
        value = self.defaults["initial_accumulator_value"]
        if p.is_complex():
            value = complex(value, value)
        state["sum"] = reftorch.full_like(p, value)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("foreach", None)
            group.setdefault("maximize", False)
            group.setdefault("differentiable", False)
            group.setdefault("fused", None)

    @_use_grad_for_differentiable
    def step(self, closure=None):
        loss = _evaluate_closure(closure)
        for group in self.param_groups:
            lr, lr_decay = _value(group["lr"]), group["lr_decay"]
            weight_decay, eps = group["weight_decay"], group["eps"]
            for p in _params_with_grad(group):
                if getattr(p.grad, "is_sparse", False):
                    raise RuntimeError("Adagrad with sparse gradients is not supported by "
                                       "reftorch")
                state = self.state[p]
                if len(state) == 0:   # a parameter added later with add_param_group
                    self._init_state(p)
                state["step"] += 1
                step = state["step"].item()
                grad = _maybe_negated(p.grad, group["maximize"])
                if weight_decay != 0:
                    grad = grad.add(p, alpha=weight_decay)
                clr = lr / (1 + (step - 1) * lr_decay)
                param, grad, state_sum = _real_view(p), _real_view(grad), _real_view(state["sum"])
                state_sum.addcmul_(grad, grad, value=1)
                std = state_sum.sqrt().add_(eps)
                param.addcdiv_(grad, std, value=-clr)
        return loss
