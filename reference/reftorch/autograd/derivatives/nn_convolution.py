"""Derivative rows: neural-network ops (convolution).

Every formula is written with differentiable reftorch ops, so double backward works:

  convolution      input:  the transposed convolution of the gradient (for a transposed
                           convolution: the plain one), narrowed to the input's size
                   weight: a convolution that correlates input and gradient (batch and
                           channel dims swapped, stride and dilation exchanged)
                   bias:   the gradient summed over batch and spatial dims
  im2col/col2im    each other's adjoint
  constant_pad_nd  the same op with negated amounts (crop what was padded, and vice versa)
  reflection/replication pads  their `_backward` ops (scatter-add), whose own derivative is
                   the forward pad again
"""
from __future__ import annotations

from ._table import _conj, derivative, not_differentiable, op_module, torch


def _narrow_to(t, sizes, first_dim=2):
    """Keep the leading `sizes[i]` elements of dim first_dim+i (drop extra trailing ones)."""
    for i, size in enumerate(sizes):
        if t.shape[first_dim + i] != size:
            t = t.narrow(first_dim + i, 0, size)
    return t


def _conv_input_grad(grad, weight, input_size, stride, padding, dilation, groups):
    """Gradient of a plain convolution with respect to its input: the transposed
    convolution of `grad`, whose output_padding restores the rows the stride skipped."""
    nd = len(stride)
    kernel = weight.shape[2:]
    out_size = grad.shape[2:]
    # The stride may skip the last few input rows; output_padding (always < stride) restores
    # them as zeros.
    output_padding = [input_size[i] - 1 - ((out_size[i] - 1) * stride[i] - 2 * padding[i]
                                           + dilation[i] * (kernel[i] - 1))
                      for i in range(nd)]
    return torch.convolution(grad, weight, None, stride, padding, dilation, True,
                             output_padding, groups)


def _conv_weight_grad(input, grad, weight_shape, stride, padding, dilation, groups):
    """Gradient of a plain convolution with respect to its weight: in a first-order backward
    its own op (one pass, which a plugin can serve), else (create_graph) as below.

    weight_grad[o, c, k] = sum over n, p of grad[n, o, p] * padded_input[n, c, p*stride + k*dilation]
    is itself a convolution: input channels become the batch, the batch becomes channels, the
    gradient plays the kernel (its taps `stride` apart: the dilation), and the kernel offsets
    `dilation` apart become the output positions (the stride). Groups stay groups.
    """
    if not torch.is_grad_enabled():
        return op_module("nn_convolution").convolution_backward_weight(
            input, grad, weight_shape, stride, padding, dilation, groups)
    nd = len(stride)
    n, channels = input.shape[0], input.shape[1]
    out_channels = grad.shape[1]
    cg, og = channels // groups, out_channels // groups
    spatial = tuple(range(3, 3 + nd))
    # input (N, G*Cg, *S) -> (Cg, G*N, *S): batch = Cg, channels = (group, sample)
    x = input.reshape((n, groups, cg) + tuple(input.shape[2:]))
    x = x.permute((2, 1, 0) + spatial).reshape((cg, groups * n) + tuple(input.shape[2:]))
    # grad (N, G*Og, *O) -> (G*Og, N, *O): one kernel per output channel, over the samples
    g = grad.reshape((n, groups, og) + tuple(grad.shape[2:]))
    g = g.permute((1, 2, 0) + spatial).reshape((groups * og, n) + tuple(grad.shape[2:]))
    corr = torch.convolution(x, g, None, dilation, padding, stride, False, [0] * nd, groups)
    corr = _narrow_to(corr, weight_shape[2:])                  # (Cg, G*Og, *k)
    corr = corr.reshape((cg, groups, og) + tuple(weight_shape[2:]))
    return corr.permute((1, 2, 0) + spatial).reshape(tuple(weight_shape))


# Called only in a first-order backward (grad mode off); a backward being differentiated
# writes the weight gradient as a convolution (_conv_weight_grad).
not_differentiable("convolution_backward_weight")


@derivative("convolution", "ConvolutionBackward0", inputs=("input", "weight", "bias"),
            saves=("input", "weight", "stride", "padding", "dilation", "transposed",
                   "output_padding", "groups"))
def _convolution(ctx, grad):
    needs = ctx.needs_input_grad
    # Complex tensors: the conjugate of the other factor, as for any product.
    x, w = _conj(ctx.input), _conj(ctx.weight)
    stride, padding, dilation = ctx.stride, ctx.padding, ctx.dilation
    groups = ctx.groups
    grad_input = grad_weight = grad_bias = None
    if ctx.transposed:
        # y = conv_transpose(x, w) is the adjoint of x' = conv(y', w): swap the roles.
        if needs[0]:
            grad_input = torch.convolution(grad, w, None, stride, padding, dilation, False,
                                           [0] * len(stride), groups)
            grad_input = _narrow_to(grad_input, x.shape[2:])
        if needs[1]:
            grad_weight = _conv_weight_grad(grad, x, w.shape, stride, padding, dilation,
                                            groups)
    else:
        if needs[0]:
            grad_input = _conv_input_grad(grad, w, x.shape[2:], stride, padding, dilation,
                                          groups)
        if needs[1]:
            grad_weight = _conv_weight_grad(x, grad, w.shape, stride, padding, dilation,
                                            groups)
    if len(needs) > 2 and needs[2]:
        grad_bias = grad.sum([0] + list(range(2, grad.dim())))
    return grad_input, grad_weight, grad_bias


@derivative("im2col", "Im2ColBackward0",
            saves=("kernel_size", "dilation", "padding", "stride"))
def _im2col(ctx, grad):
    from ...nn.functional.fold import fold
    size = ctx.shape(0)[-2:]
    return fold(grad, size, ctx.kernel_size, ctx.dilation, ctx.padding, ctx.stride)


@derivative("col2im", "Col2ImBackward0",
            saves=("kernel_size", "dilation", "padding", "stride"))
def _col2im(ctx, grad):
    from ...nn.functional.fold import unfold
    return unfold(grad, ctx.kernel_size, ctx.dilation, ctx.padding, ctx.stride)


@derivative("constant_pad_nd", "ConstantPadNdBackward0", saves=("pad",))
def _constant_pad_nd(ctx, grad):
    return torch.constant_pad_nd(grad, [-p for p in ctx.pad])


def _index_pad_rows():
    for prefix, mode in (("reflection", "reflect"), ("replication", "replicate")):
        for nd in (1, 2, 3):
            name = f"{prefix}_pad{nd}d"
            node = f"{prefix.capitalize()}Pad{nd}DBackward0"

            @derivative(name, node, saves=("padding",))
            def _forward(ctx, grad, _name=name):
                from ..._ops.nn_convolution import index_pad_backward
                return index_pad_backward(grad, ctx.shape(0), ctx.padding, _name)

            @derivative(name + "_backward", f"{prefix.capitalize()}Pad{nd}DBackwardBackward0",
                        saves=("padding",))
            def _backward(ctx, grad, _mode=mode):
                from ..._ops.nn_convolution import index_pad
                return index_pad(grad, ctx.padding, _mode)


_index_pad_rows()
