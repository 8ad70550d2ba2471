"""ASGD: SGD with a decaying step size and a running (Polyak) average of the iterates."""
import reftorch

from .optimizer import (Optimizer, _check_capturable, _check_lr, _evaluate_closure,
                        _maybe_negated, _new_step_counter, _params_with_grad, _real_view,
                        _sparse_check, _use_grad_for_differentiable, _value)


class ASGD(Optimizer):
    """ASGD. eta (step size) and mu (averaging rate) live in the state as 0-dim tensors of the
    default float dtype, so their values are rounded to float32 as in PyTorch:
        p <- p * (1 - lambd * eta) - eta * g
        ax <- ax + mu * (p - ax)        (ax <- p while mu == 1)
        eta <- lr / (1 + lambd * lr * t)^alpha;   mu <- 1 / max(1, t - t0)
    """

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False, differentiable=False, capturable=False):
        _check_lr(lr)
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
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
            lr, lambd, alpha = _value(group["lr"]), group["lambd"], group["alpha"]
            t0, weight_decay = group["t0"], group["weight_decay"]
            params = _params_with_grad(group)
            _check_capturable(group, params)
            for p in params:
                _sparse_check(p, "ASGD")
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _new_step_counter()
                    state["eta"] = _new_step_counter(lr)
                    state["mu"] = _new_step_counter(1.0)
                    state["ax"] = reftorch.zeros_like(p)
                grad = _maybe_negated(p.grad, group["maximize"])
                param, grad, ax = _real_view(p), _real_view(grad), _real_view(state["ax"])
                state["step"] += 1
                if weight_decay != 0:
                    grad = grad.add(param, alpha=weight_decay)
                eta = state["eta"].item()
                param.mul_(1 - lambd * eta)
                param.add_(grad, alpha=-eta)
                if state["mu"].item() != 1:
                    ax.add_(param.sub(ax).mul_(state["mu"]))
                else:
                    ax.copy_(param)
                step = state["step"].item()
                # New values pass through a default-dtype tensor (float32) even when the
                # state was loaded as float64, as in PyTorch.
                state["eta"].copy_(reftorch.as_tensor(lr / ((1 + lambd * lr * step) ** alpha)))
                state["mu"].copy_(reftorch.as_tensor(1 / max(1, step - t0)))
        return loss
