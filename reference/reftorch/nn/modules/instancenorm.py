"""torch.nn modules: instancenorm (each sample's channels normalized over their own spatial
extent; unbatched inputs are treated as a batch of one)."""
from __future__ import annotations

import warnings

from .. import functional as F
from .batchnorm import _NormBase

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]


class _InstanceNorm(_NormBase):
    _no_batch_dim = 2     # rank of an unbatched input

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False,
                 track_running_stats=False, device=None, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)

    def _check_input_dim(self, input):
        n = self._no_batch_dim
        if input.dim() not in (n, n + 1):
            raise ValueError(f"expected {n}D or {n + 1}D input (got {input.dim()}D input)")

    def _apply_instance_norm(self, input):
        return F.instance_norm(input, self.running_mean, self.running_var, self.weight,
                               self.bias, self.training or not self.track_running_stats,
                               self.momentum if self.momentum is not None else 0.0, self.eps)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        """Checkpoints from before version 0.4 carry running stats this module does not track:
        report them, as PyTorch does."""
        version = local_metadata.get("version", None)
        if version is None and not self.track_running_stats:
            found = [prefix + name for name in ("running_mean", "running_var")
                     if prefix + name in state_dict]
            if found:
                error_msgs.append(
                    f"Unexpected running stats buffer(s) {' and '.join(f'{k!r}' for k in found)}"
                    f" for {type(self).__name__} with track_running_stats=False. If state_dict "
                    f"is a checkpoint saved before 0.4.0, this may be expected because "
                    f"{type(self).__name__} does not track running stats by default since "
                    f"0.4.0. Please remove these keys from state_dict. If the running stats "
                    f"are actually needed, instead set track_running_stats=True in "
                    f"{type(self).__name__} to enable them. See the documentation of "
                    f"{type(self).__name__} for details.")
                for key in found:
                    state_dict.pop(key)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)

    def forward(self, input):
        self._check_input_dim(input)
        feature_dim = input.dim() - self._no_batch_dim
        if input.size(feature_dim) != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim={feature_dim} to match "
                                 f"num_features ({self.num_features}), but got: "
                                 f"{input.size(feature_dim)}.")
            warnings.warn(f"input's size at dim={feature_dim} does not match num_features. "
                          f"You can silence this warning by not passing in num_features, "
                          f"which is not used because affine=False")
        if input.dim() == self._no_batch_dim:
            return self._apply_instance_norm(input.unsqueeze(0)).squeeze(0)
        return self._apply_instance_norm(input)


class InstanceNorm1d(_InstanceNorm):
    _no_batch_dim = 2


class InstanceNorm2d(_InstanceNorm):
    _no_batch_dim = 3


class InstanceNorm3d(_InstanceNorm):
    _no_batch_dim = 4
