"""Rprop: resilient backpropagation, per-element step sizes driven by gradient signs only."""
import reftorch

from .optimizer import (Optimizer, _check_capturable, _check_lr, _evaluate_closure,
                        _maybe_negated, _new_step_counter, _params_with_grad, _real_view,
                        _sparse_check, _use_grad_for_differentiable, _value)


class Rprop(Optimizer):
    """Rprop. Where the gradient keeps its sign the step size grows by etaplus, where it
    flips the step size shrinks by etaminus and that element is not moved this step (its
    gradient is then remembered as 0); step sizes stay within step_sizes."""

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        _check_lr(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach,
                        maximize=maximize, differentiable=differentiable,
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
            etaminus, etaplus = group["etas"]
            step_size_min, step_size_max = group["step_sizes"]
            params = _params_with_grad(group)
            _check_capturable(group, params)
            for p in params:
                _sparse_check(p, "Rprop")
                state = self.state[p]
                if len(state) == 0:
                    lr = _value(group["lr"])
                    state["step"] = _new_step_counter()
                    state["prev"] = reftorch.zeros_like(p)
                    state["step_size"] = reftorch.full_like(
                        p.grad, complex(lr, lr) if p.is_complex() else lr)
                state["step"] += 1
                grad = _real_view(_maybe_negated(p.grad, group["maximize"]))
                prev = _real_view(state["prev"])
                step_size = _real_view(state["step_size"])

                # Per-element factor: etaplus where the sign held, etaminus where it
                # flipped, 1 where either gradient is zero.
                sign = grad.mul(prev).sign()
                factor = reftorch.ones_like(sign)
                factor[sign.gt(0)] = etaplus
                factor[sign.lt(0)] = etaminus
                step_size.mul_(factor).clamp_(step_size_min, step_size_max)
                grad = grad.clone()
                grad[sign.lt(0)] = 0
                _real_view(p).addcmul_(grad.sign(), step_size, value=-1)
                prev.copy_(grad)
        return loss
