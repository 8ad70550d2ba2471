"""The `reduction=` argument of losses and the legacy `size_average`/`reduce` pair it replaced."""
from __future__ import annotations

import warnings

_REDUCTIONS = ("none", "mean", "sum")


def get_enum(reduction):
    """0 for 'none', 1 for 'mean', 2 for 'sum' (the integer form some kernels take)."""
    if reduction == "elementwise_mean":
        warnings.warn("reduction='elementwise_mean' is deprecated, please use "
                      "reduction='mean' instead.")
        return 1
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return _REDUCTIONS.index(reduction)


def legacy_get_string(size_average, reduce, emit_warning=True):
    """The `reduction` string the deprecated arguments stand for: both default to True;
    reduce=False means no reduction whatever size_average says; otherwise size_average picks
    mean (True) or sum (False)."""
    if emit_warning:
        warnings.warn("size_average and reduce args will be deprecated, please use "
                      "reduction='{}' instead.".format(
                          _legacy_reduction(size_average, reduce)))
    return _legacy_reduction(size_average, reduce)


def _legacy_reduction(size_average, reduce):
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"
