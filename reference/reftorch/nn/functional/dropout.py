"""torch.nn.functional: dropout.

During training each element (or, for the feature forms, each channel) is zeroed with
probability p and the survivors are scaled by 1 / (1 - p); in evaluation the input is
returned unchanged. The masks come from the torch-level ops in reftorch._ops.nn_activation.
"""
from __future__ import annotations

import warnings

from ..._ops import nn_activation as _act

__all__ = ["dropout", "alpha_dropout", "dropout1d", "dropout2d", "dropout3d",
           "feature_alpha_dropout"]


def _check_p(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def dropout(input, p=0.5, training=True, inplace=False):
    _check_p(p)
    return _act.dropout_(input, p, training) if inplace else _act.dropout(input, p, training)


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout for SELU networks: dropped values become SELU's saturation value and an affine
    map keeps the mean and variance."""
    _check_p(p)
    if inplace:
        return _act.alpha_dropout_(input, p, training)
    return _act.alpha_dropout(input, p, training)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    _check_p(p)
    if inplace:
        return _act.feature_alpha_dropout_(input, p, training)
    return _act.feature_alpha_dropout(input, p, training)


def _feature(input, p, training, inplace):
    if inplace:
        return _act.feature_dropout_(input, p, training)
    return _act.feature_dropout(input, p, training)


def _unbatched(input, p, training, inplace):
    """Feature dropout of an input without a batch dimension: add one, then remove it."""
    input = input.unsqueeze_(0) if inplace else input.unsqueeze(0)
    result = _feature(input, p, training, inplace)
    return result.squeeze_(0) if inplace else result.squeeze(0)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, L) or (C, L) input."""
    _check_p(p)
    ndim = input.dim()
    if ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {ndim}D input. "
                           f"Note that dropout1d exists to provide channel-wise dropout on inputs "
                           f"with 1 spatial dimension, a channel dimension, and an optional batch "
                           f"dimension (i.e. 2D or 3D inputs).")
    if ndim == 2:
        return _unbatched(input, p, training, inplace)
    return _feature(input, p, training, inplace)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, H, W) input (3-D input is taken as (N, C, L))."""
    _check_p(p)
    ndim = input.dim()
    if ndim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {ndim}-D input to dropout2d, which is deprecated "
                      f"and will result in an error in a future release. To retain the behavior "
                      f"and silence this warning, please use dropout instead. Note that "
                      f"dropout2d exists to provide channel-wise dropout on inputs with 2 "
                      f"spatial dimensions, a channel dimension, and an optional batch dimension "
                      f"(i.e. 3D or 4D inputs).", stacklevel=2)
    if ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise "
                      "1D dropout behavior is desired - input is interpreted as shape (N, C, L), "
                      "where C is the channel dim. This behavior will change in a future release "
                      "to interpret the input as one without a batch dimension, i.e. shape "
                      "(C, H, W). To maintain the 1D channel-wise dropout behavior, please "
                      "switch to using dropout1d instead.", stacklevel=2)
    return _feature(input, p, training, inplace)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) input."""
    _check_p(p)
    ndim = input.dim()
    if ndim not in (4, 5):
        warnings.warn(f"dropout3d: Received a {ndim}-D input to dropout3d, which is deprecated "
                      f"and will result in an error in a future release. To retain the behavior "
                      f"and silence this warning, please use dropout instead. Note that "
                      f"dropout3d exists to provide channel-wise dropout on inputs with 3 "
                      f"spatial dimensions, a channel dimension, and an optional batch dimension "
                      f"(i.e. 4D or 5D inputs).", stacklevel=2)
    if ndim != 5:
        return _unbatched(input, p, training, inplace)
    return _feature(input, p, training, inplace)
