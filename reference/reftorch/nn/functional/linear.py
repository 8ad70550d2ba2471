"""torch.nn.functional: linear maps."""
from __future__ import annotations

__all__ = ["linear", "bilinear"]


def linear(input, weight, bias=None):
    """y = x Wᵀ + b over the last dimension of `input`.

    Recorded like PyTorch's: one addmm for 2-D input with a bias, the batch dimensions
    flattened around it otherwise, and a plain matrix product without a bias."""
    import reftorch as torch
    if bias is None:
        return torch.matmul(input, weight.t())
    if input.dim() == 2:
        return torch.addmm(bias, input, weight.t())
    batch_shape = input.shape[:-1]
    flat = input.reshape(-1, input.shape[-1]) if input.dim() != 1 else input.view(1, -1)
    return torch.addmm(bias, flat, weight.t()).view(*batch_shape, weight.shape[0])


def bilinear(input1, input2, weight, bias=None):
    """y_o = x1ᵀ A_o x2 + b_o for each output feature o (weight A has shape (out, in1, in2))."""
    import reftorch as torch
    if input1.shape[:-1] != input2.shape[:-1]:
        raise RuntimeError(f"bilinear(): input batch dimensions do not match: got "
                           f"{tuple(input1.shape[:-1])} and {tuple(input2.shape[:-1])}")
    if weight.dim() != 3 or weight.shape[1] != input1.shape[-1] \
            or weight.shape[2] != input2.shape[-1]:
        raise RuntimeError(f"bilinear(): weight of shape {tuple(weight.shape)} does not match "
                           f"input sizes {input1.shape[-1]} and {input2.shape[-1]}")
    result = torch.einsum("...i,oij,...j->...o", input1, weight, input2)
    return result if bias is None else result + bias
