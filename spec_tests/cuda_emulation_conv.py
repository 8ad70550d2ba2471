"""NumPy emulation of reftorch-cuda's convolutions (kernels/conv.cu: conv_kernel<T, Kind>),
registered with `cuda_kernel_emulation.emulates`.

The parameters are decoded from the raw bytes of `ConvArgs` with the layout written out here
(not taken from the plugin). The launch is checked against the kernel's tiles, and the product
sizes against the convolution they must describe (so a host-side mistake in the output size,
the groups or the depth fails here). Every operand is a NumPy view of device memory over
exactly the elements the convolution reads or writes, through the strides the host passed,
so an index outside a buffer fails the view. The values are computed independently of the
kernel's addressing: forward and weight gradient from a zero-padded copy of the image and
its windows, the transposed convolution by scattering each tap's products into the full
output and cropping the padding. The sums run in the kernel's computation type (float64 for
double, float32 for the rest) but in NumPy's order, not the kernel's FMA chains: tests
compare within a rounding bound, as they do on a GPU.
"""
from __future__ import annotations

import ctypes
import struct

import numpy as np

from spec_tests.cuda_kernel_emulation import STORAGE, compute_type, emulates, pointer, slots

# ConvArgs: int64 batch, m, n, k, groups, group_in, group_out, in_h, in_w, out_h, out_w,
# kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, x_strides[4],
# f_strides[4], out_strides[4], bias_stride; int32 has_bias, int32 unused.
LAYOUT = struct.Struct("<32q2i")
THREADS = 256
TILES = {"float": (128, 128), "double": (64, 64), "rt_float16": (128, 128),
         "rt_bfloat16": (128, 128)}
FIELDS = ("batch m n k groups group_in group_out in_h in_w out_h out_w kernel_h kernel_w "
          "stride_h stride_w pad_h pad_w dil_h dil_w").split()


def decode(address):
    values = LAYOUT.unpack(ctypes.string_at(address, LAYOUT.size))
    args = dict(zip(FIELDS, values[:19]))
    args["x_strides"], args["f_strides"], args["out_strides"] = \
        (tuple(values[19 + 4 * i:23 + 4 * i]) for i in range(3))
    args["bias_stride"], has_bias, unused = values[31:]
    assert unused == 0 and has_bias in (0, 1)
    args["has_bias"] = bool(has_bias)
    return args


def window_count(size, kernel, stride, pad, dil):
    return (size + 2 * pad - dil * (kernel - 1) - 1) // stride + 1


def windows(x, a, out_h, out_w):
    """(N, C, KH, KW, out_h, out_w): the zero-padded image's element under each tap of each
    window, from a padded copy."""
    n, c, h, w = x.shape
    padded = np.zeros((n, c, h + 2 * a["pad_h"], w + 2 * a["pad_w"]), x.dtype)
    padded[:, :, a["pad_h"]:a["pad_h"] + h, a["pad_w"]:a["pad_w"] + w] = x
    cols = np.zeros((n, c, a["kernel_h"], a["kernel_w"], out_h, out_w), x.dtype)
    for i in range(a["kernel_h"]):
        for j in range(a["kernel_w"]):
            y0, x0 = i * a["dil_h"], j * a["dil_w"]
            cols[:, :, i, j] = padded[:, :, y0:y0 + a["stride_h"] * (out_h - 1) + 1:a["stride_h"],
                                      x0:x0 + a["stride_w"] * (out_w - 1) + 1:a["stride_w"]]
    return cols


def forward(x, f, a, c):
    """out[n, g*Og + o] = sum over (c, kh, kw) of f[g*Og + o, c, kh, kw] * window."""
    groups, cg, og = a["groups"], a["group_in"], a["group_out"]
    n = x.shape[0]
    cols = windows(x, a, a["out_h"], a["out_w"]).reshape(
        n, groups, cg * a["kernel_h"] * a["kernel_w"], a["out_h"] * a["out_w"])
    weights = f.reshape(groups, og, cg * a["kernel_h"] * a["kernel_w"])
    out = np.einsum("gok,ngkp->ngop", weights, cols)
    return out.reshape(n, groups * og, a["out_h"], a["out_w"])


def transposed(x, f, a, c):
    """Each input element times each tap, added at input * stride + tap * dilation of the
    uncropped output, then the padding cropped."""
    groups, cg, og = a["groups"], a["group_in"], a["group_out"]
    n, _, h, w = x.shape
    full_h = max((h - 1) * a["stride_h"] + a["dil_h"] * (a["kernel_h"] - 1) + 1,
                 a["pad_h"] + a["out_h"])
    full_w = max((w - 1) * a["stride_w"] + a["dil_w"] * (a["kernel_w"] - 1) + 1,
                 a["pad_w"] + a["out_w"])
    full = np.zeros((n, groups, og, full_h, full_w), c)
    xs = x.reshape(n, groups, cg, h, w)
    weights = f.reshape(groups, cg, og, a["kernel_h"], a["kernel_w"])
    for i in range(a["kernel_h"]):
        for j in range(a["kernel_w"]):
            taps = np.einsum("gco,ngchw->ngohw", weights[..., i, j], xs)
            y0, x0 = i * a["dil_h"], j * a["dil_w"]
            full[:, :, :, y0:y0 + a["stride_h"] * (h - 1) + 1:a["stride_h"],
                 x0:x0 + a["stride_w"] * (w - 1) + 1:a["stride_w"]] += taps
    out = full[..., a["pad_h"]:a["pad_h"] + a["out_h"], a["pad_w"]:a["pad_w"] + a["out_w"]]
    return out.reshape(n, groups * og, a["out_h"], a["out_w"])


def weight_grad(x, grad, a, c):
    """out[g*Og + o, c, kh, kw] = sum over (n, oy, ox) of grad * the window element."""
    groups, cg, og = a["groups"], a["group_in"], a["group_out"]
    n = x.shape[0]
    cols = windows(x, a, a["out_h"], a["out_w"]).reshape(
        n, groups, cg, a["kernel_h"], a["kernel_w"], a["out_h"] * a["out_w"])
    g = grad.reshape(n, groups, og, a["out_h"] * a["out_w"])
    out = np.einsum("ngop,ngcijp->gocij", g, cols)
    return out.reshape(groups * og, cg, a["kernel_h"], a["kernel_w"])


@emulates(r"conv_kernel<(\w+), Conv(Forward|Transposed|WeightGrad)>")
def conv(driver, match, grid, block, shared, params):
    p = slots(params, 5)      # (ConvArgs, out, x, f, bias)
    a = decode(p[0])
    kind, storage = match.group(2), STORAGE[match.group(1)]
    c = compute_type(storage)
    tile_m, tile_n = TILES[match.group(1)]
    assert block == (THREADS, 1, 1) and shared == 0
    assert grid == (-(-a["n"] // tile_n), -(-a["m"] // tile_m), min(a["batch"], 65535)), grid
    assert min(a["batch"], a["m"], a["n"]) > 0 and a["k"] >= 0
    groups, cg, og = a["groups"], a["group_in"], a["group_out"]
    kh, kw, taps = a["kernel_h"], a["kernel_w"], a["kernel_h"] * a["kernel_w"]
    assert a["m"] == og
    if kind == "WeightGrad":
        positions = a["out_h"] * a["out_w"]
        images = a["k"] // positions if positions else 0
        assert a["batch"] == groups and a["n"] == cg * taps and a["k"] == images * positions
        assert a["out_h"] <= window_count(a["in_h"], kh, a["stride_h"], a["pad_h"], a["dil_h"])
        assert a["out_w"] <= window_count(a["in_w"], kw, a["stride_w"], a["pad_w"], a["dil_w"])
        f_shape = (images, groups * og, a["out_h"], a["out_w"])
        out_shape = (groups * og, cg, kh, kw)
        assert not a["has_bias"]
    else:
        images = a["batch"] // groups
        assert a["batch"] == images * groups and a["k"] == cg * taps
        assert a["n"] == a["out_h"] * a["out_w"]
        if kind == "Forward":
            sizes = [window_count(a["in_" + d], a["kernel_" + d], a["stride_" + d],
                                  a["pad_" + d], a["dil_" + d]) for d in "hw"]
            f_shape = (groups * og, cg, kh, kw)
        else:     # the output_padding is what is left: at most max(stride, dilation) - 1
            least = [(a["in_" + d] - 1) * a["stride_" + d] - 2 * a["pad_" + d]
                     + a["dil_" + d] * (a["kernel_" + d] - 1) + 1 for d in "hw"]
            sizes = [a["out_" + d] if 0 <= a["out_" + d] - low <
                     max(a["stride_" + d], a["dil_" + d]) else None
                     for d, low in zip("hw", least)]
            f_shape = (groups * cg, og, kh, kw)
        assert sizes == [a["out_h"], a["out_w"]], (sizes, a)
        out_shape = (images, groups * og, a["out_h"], a["out_w"])
    x_shape = (images, groups * cg, a["in_h"], a["in_w"])
    out = driver.view(pointer(p[1]), storage, out_shape, a["out_strides"])
    if a["k"] == 0:           # no tile of x or f is loaded
        value = np.zeros(out_shape, c)
    else:
        x = driver.view(pointer(p[2]), storage, x_shape, a["x_strides"]).astype(c)
        f = driver.view(pointer(p[3]), storage, f_shape, a["f_strides"]).astype(c)
        model = {"Forward": forward, "Transposed": transposed, "WeightGrad": weight_grad}[kind]
        with np.errstate(all="ignore"):
            value = model(x, f, a, c).astype(c)
    if a["has_bias"]:
        bias = driver.view(pointer(p[4]), storage, (groups * og,), (a["bias_stride"],))
        with np.errstate(all="ignore"):
            value = value + bias.astype(c)[:, None, None]
    out[...] = value.astype(storage)
