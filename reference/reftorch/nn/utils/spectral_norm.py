"""Spectral normalisation: a weight divided by its largest singular value, estimated by power
iteration (one step per training forward, vectors kept in buffers `name_u`, `name_v`)."""
from __future__ import annotations

from ..parameter import Parameter

__all__ = ["spectral_norm", "remove_spectral_norm"]


def _normalize(x, eps, out=None):
    """x / max(||x||, eps), written into `out` when given (as F.normalize does)."""
    import reftorch
    return reftorch.div(x, x.norm().clamp_min(eps), out=out)


class SpectralNorm:
    _version = 1

    def __init__(self, name="weight", n_power_iterations=1, dim=0, eps=1e-12):
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.name, self.dim, self.eps = name, dim, eps
        self.n_power_iterations = n_power_iterations

    def reshape_weight_to_matrix(self, weight):
        """The weight as a matrix whose rows follow dimension `dim`."""
        if self.dim != 0:
            order = [self.dim] + [d for d in range(weight.dim()) if d != self.dim]
            weight = weight.permute(*order)
        return weight.reshape(weight.size(0), -1)

    def compute_weight(self, module, do_power_iteration):
        import reftorch
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        matrix = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with reftorch.no_grad():
                for _ in range(self.n_power_iterations):
                    # The buffers are updated in place, so the next forward continues here.
                    v = _normalize(reftorch.mv(matrix.t(), u), self.eps, out=v)
                    u = _normalize(reftorch.mv(matrix, v), self.eps, out=u)
                # Clones, so that autograd's saved u and v survive the next in-place update.
                u, v = u.clone(), v.clone()
        sigma = reftorch.dot(u, reftorch.mv(matrix, v))
        return weight / sigma

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module, module.training))

    def remove(self, module):
        import reftorch
        with reftorch.no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))

    @staticmethod
    def apply(module, name, n_power_iterations, dim, eps):
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two spectral_norm hooks on the same "
                                   f"parameter {name}")
        import reftorch
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters[name]
        with reftorch.no_grad():
            h, w = fn.reshape_weight_to_matrix(weight).shape
            u = _normalize(weight.new_empty(h).normal_(0, 1), eps)
            v = _normalize(weight.new_empty(w).normal_(0, 1), eps)
        delattr(module, name)
        module.register_parameter(name + "_orig", weight)
        setattr(module, name, weight.data)
        module.register_buffer(name + "_u", u)
        module.register_buffer(name + "_v", v)
        module.register_forward_pre_hook(fn)
        return fn


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    if dim is None:
        # Transposed convolutions keep output channels in dimension 1.
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module, name="weight"):
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")
