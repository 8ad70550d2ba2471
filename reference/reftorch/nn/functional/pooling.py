"""torch.nn.functional: pooling.

Thin argument handling over the ops in reftorch._ops.nn_pooling, with F's signatures: the
`return_indices` flag picks the `*_with_indices` form (PyTorch's boolean_dispatch), a
stride of None means the kernel size, adaptive output sizes may hold None (keep that input
size), and fractional max pooling draws its samples from reftorch's generator exactly as
PyTorch does (`torch.rand(N, C, n, dtype=input.dtype)`), so seeded runs agree.
"""
from __future__ import annotations

from ..._ops import nn_pooling as P

__all__ = ["avg_pool1d", "avg_pool2d", "avg_pool3d", "max_pool1d", "max_pool2d", "max_pool3d",
           "max_pool1d_with_indices", "max_pool2d_with_indices", "max_pool3d_with_indices",
           "max_unpool1d", "max_unpool2d", "max_unpool3d", "lp_pool1d", "lp_pool2d",
           "lp_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d",
           "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
           "adaptive_max_pool3d_with_indices", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
           "adaptive_avg_pool3d", "fractional_max_pool2d", "fractional_max_pool3d",
           "fractional_max_pool2d_with_indices", "fractional_max_pool3d_with_indices"]


def _tuple(value, n):
    """PyTorch's _single/_pair/_triple: an int repeated n times; sequences kept."""
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return (value,) * n


def _stride(stride):
    """F's stride=None means 'the kernel size', spelled as the ops' empty list."""
    return () if stride is None else stride


# --- average pooling ---------------------------------------------------------------------------

def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    return P.avg_pool1d(input, kernel_size, _stride(stride), padding, ceil_mode,
                        count_include_pad)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    return P.avg_pool(2, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                      divisor_override)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    return P.avg_pool(3, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                      divisor_override)


# --- max pooling -------------------------------------------------------------------------------

def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    return P.max_pool1d_with_indices(input, kernel_size, _stride(stride), padding, dilation,
                                     ceil_mode)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    return tuple(P.max_pool_with_indices(2, input, kernel_size, _stride(stride), padding,
                                         dilation, ceil_mode))


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    return tuple(P.max_pool_with_indices(3, input, kernel_size, _stride(stride), padding,
                                         dilation, ceil_mode))


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    result = max_pool1d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return result if return_indices else result[0]


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    result = max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return result if return_indices else result[0]


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    result = max_pool3d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return result if return_indices else result[0]


# --- max unpooling -----------------------------------------------------------------------------

def _unpool_output_size(input, kernel_size, stride, padding, output_size):
    """The default size (in - 1) * stride + kernel - 2 * padding, or the requested one, which
    may include the batch and channel dims and must lie strictly within one stride of it."""
    n = len(kernel_size)
    default = [(input.size(input.dim() - n + d) - 1) * stride[d] + kernel_size[d]
               - 2 * padding[d] for d in range(n)]
    if output_size is None:
        result = default
    else:
        output_size = list(output_size)
        if len(output_size) == n + 2:
            output_size = output_size[2:]
        if len(output_size) != n:
            raise ValueError(f"output_size should be a sequence containing {n} or {n + 2} "
                             f"elements, but it has a length of '{len(output_size)}'")
        for d in range(n):
            low, high = default[d] - stride[d], default[d] + stride[d]
            if not low < output_size[d] < high:
                raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be '
                                 f'between {low} and {high})')
        result = output_size
    for d in range(n):
        if result[d] < 0:
            raise ValueError(f"max_unpooling: output_size must contain non-negative spatial "
                             f"dimensions, but got output_size[{d}]={result[d]}")
    return [int(s) for s in result]


def _unpool_args(n, kernel_size, stride, padding):
    kernel = _tuple(kernel_size, n)
    return kernel, kernel if stride is None else _tuple(stride, n), _tuple(padding, n)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    kernel, step, pad = _unpool_args(1, kernel_size, stride, padding)
    size = _unpool_output_size(input, kernel, step, pad, output_size)
    return P.max_unpool(2, input.unsqueeze(-1), indices.unsqueeze(-1), size + [1]).squeeze(-1)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    kernel, step, pad = _unpool_args(2, kernel_size, stride, padding)
    size = _unpool_output_size(input, kernel, step, pad, output_size)
    return P.max_unpool(2, input, indices, size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    kernel, step, pad = _unpool_args(3, kernel_size, stride, padding)
    size = _unpool_output_size(input, kernel, step, pad, output_size)
    return P.max_unpool(3, input, indices, size)


# --- power-average pooling ------------------------------------------------------------------

def _lp_pool(n, avg, max_pool, input, norm_type, kernel_size, stride, ceil_mode):
    """(sum over the window of x^p)^(1/p), computed like PyTorch: an average pool of x^p
    scaled back by the kernel volume (so ceil_mode's clipped windows scale the same way), the
    sign kept and negatives clipped before the root; p = +-inf are max pools of |x|."""
    import math
    if isinstance(norm_type, (int, float)):
        if norm_type == float("inf"):
            return max_pool(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
        if norm_type == -float("inf"):
            return -max_pool(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if stride is not None:
        out = avg(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    else:
        out = avg(input.pow(norm_type), kernel_size, padding=0, ceil_mode=ceil_mode)
    volume = math.prod(_tuple(kernel_size, n))
    return (out.sign() * out.abs().clamp_min(0)).mul(volume).pow(1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return _lp_pool(1, avg_pool1d, max_pool1d, input, norm_type, kernel_size, stride,
                    ceil_mode)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return _lp_pool(2, avg_pool2d, max_pool2d, input, norm_type, kernel_size, stride,
                    ceil_mode)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return _lp_pool(3, avg_pool3d, max_pool3d, input, norm_type, kernel_size, stride,
                    ceil_mode)


# --- adaptive pooling ----------------------------------------------------------------------

def _list_with_default(output_size, input):
    """An int stays; a sequence's None entries take the input's size along that dim."""
    if isinstance(output_size, int):
        return output_size
    output_size = list(output_size)
    if input.dim() <= len(output_size):
        raise ValueError(f"Input dimension should be at least {len(output_size) + 1}")
    defaults = input.shape[input.dim() - len(output_size):]
    return [d if v is None else v for v, d in zip(output_size, defaults)]


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    return P.adaptive_max_pool1d(input, output_size)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    return tuple(P.adaptive_max_pool(2, input, _list_with_default(output_size, input)))


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    return tuple(P.adaptive_max_pool(3, input, _list_with_default(output_size, input)))


def adaptive_max_pool1d(input, output_size, return_indices=False):
    result = adaptive_max_pool1d_with_indices(input, output_size)
    return result if return_indices else result[0]


def adaptive_max_pool2d(input, output_size, return_indices=False):
    result = adaptive_max_pool2d_with_indices(input, output_size)
    return result if return_indices else result[0]


def adaptive_max_pool3d(input, output_size, return_indices=False):
    result = adaptive_max_pool3d_with_indices(input, output_size)
    return result if return_indices else result[0]


def adaptive_avg_pool1d(input, output_size):
    return P.adaptive_avg_pool1d(input, output_size)


def adaptive_avg_pool2d(input, output_size):
    return P.adaptive_avg_pool(2, input, _list_with_default(output_size, input))


def adaptive_avg_pool3d(input, output_size):
    return P.adaptive_avg_pool(3, input, _list_with_default(output_size, input))


# --- fractional max pooling ------------------------------------------------------------------

def _fractional(n, input, kernel_size, output_size, output_ratio, random_samples):
    import reftorch
    fn = f"fractional_max_pool{n}d"
    if output_size is None and output_ratio is None:
        raise ValueError(f"{fn} requires specifying either an output_size or an output_ratio")
    if output_size is None:
        if n == 2 and isinstance(output_ratio, (list, tuple)) and len(output_ratio) > 2:
            raise ValueError(f"{fn} requires output_ratio to either be a single Int or tuple "
                             f"of Ints.")
        ratio = _tuple(output_ratio, n)
        output_size = [int(input.size(input.dim() - n + d) * ratio[d]) for d in range(n)]
    if random_samples is None:
        batch = 1 if input.dim() == n + 1 else input.size(0)
        random_samples = reftorch.rand(batch, input.size(input.dim() - n - 1), n,
                                       dtype=input.dtype, device=input.device)
    return tuple(P.fractional_max_pool(n, input, kernel_size, output_size, random_samples))


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=False, _random_samples=None):
    return _fractional(2, input, kernel_size, output_size, output_ratio, _random_samples)


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=False, _random_samples=None):
    return _fractional(3, input, kernel_size, output_size, output_ratio, _random_samples)


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None):
    result = _fractional(2, input, kernel_size, output_size, output_ratio, _random_samples)
    return result if return_indices else result[0]


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None):
    result = _fractional(3, input, kernel_size, output_size, output_ratio, _random_samples)
    return result if return_indices else result[0]
