"""RMSprop: divide the gradient by a running root-mean-square of recent gradients."""
import reftorch

from .optimizer import (Optimizer, _check_capturable, _check_lr, _evaluate_closure,
                        _maybe_negated, _new_step_counter, _params_with_grad, _real_view,
                        _sparse_check, _use_grad_for_differentiable, _value)


class RMSprop(Optimizer):
    """RMSprop:  v <- alpha * v + (1 - alpha) * g * g
    centered: also m <- lerp(m, g, 1 - alpha) and the denominator is sqrt(v - m * m) + eps;
    momentum: b <- momentum * b + g / denom, p <- p - lr * b; else p <- p - lr * g / denom.
    """

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        _check_lr(lr)
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach,
                        maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for key, default in (("momentum", 0), ("centered", False), ("foreach", None),
                                 ("maximize", False), ("differentiable", False),
                                 ("capturable", False)):
                group.setdefault(key, default)

    @_use_grad_for_differentiable
    def step(self, closure=None):
        loss = _evaluate_closure(closure)
        for group in self.param_groups:
            lr, alpha, eps = _value(group["lr"]), group["alpha"], group["eps"]
            weight_decay, momentum = group["weight_decay"], group["momentum"]
            params = _params_with_grad(group)
            _check_capturable(group, params)
            for p in params:
                _sparse_check(p, "RMSprop")
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _new_step_counter()
                    state["square_avg"] = reftorch.zeros_like(p)
                    if momentum > 0:
                        state["momentum_buffer"] = reftorch.zeros_like(p)
                    if group["centered"]:
                        state["grad_avg"] = reftorch.zeros_like(p)
                state["step"] += 1
                grad = _maybe_negated(p.grad, group["maximize"])
                if weight_decay != 0:
                    grad = grad.add(p, alpha=weight_decay)
                param, grad = _real_view(p), _real_view(grad)
                square_avg = _real_view(state["square_avg"])
                square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
                if group["centered"]:
                    grad_avg = _real_view(state["grad_avg"])
                    grad_avg.lerp_(grad, 1 - alpha)
                    avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
                else:
                    avg = square_avg.sqrt()
                avg = avg.add_(eps)
                if momentum > 0:
                    buf = _real_view(state["momentum_buffer"])
                    buf.mul_(momentum).addcdiv_(grad, avg)
                    param.add_(buf, alpha=-lr)
                else:
                    param.addcdiv_(grad, avg, value=-lr)
        return loss
