"""NumPy emulation of reftorch-cuda's convolutions (kernels/conv.cu: conv_kernel<T, Kind>),
registered with `cuda_kernel_emulation.emulates`.

The parameters are decoded from the raw bytes of `ConvArgs` with the layout written out here
(not taken from the plugin): every problem is 3-D, (depth, height, width), with unit leading
dims for 1-D and 2-D convolutions. The launch is checked against the kernel's tiles, and the
product sizes against the convolution they must describe (so a host-side mistake in the
output size, the groups or the depth fails here). Every operand is a NumPy view of device
memory over exactly the elements the convolution reads or writes, through the strides the
host passed, so an index outside a buffer fails the view. The values are computed
independently of the kernel's addressing: forward and weight gradient from a zero-padded copy
of the image and its windows, the transposed convolution by scattering each tap's products
into the full output and cropping the padding. The sums run in the kernel's computation type
(float64 for double, float32 for the rest) but in NumPy's order, not the kernel's FMA chains:
tests compare within a rounding bound, as they do on a GPU.
"""
from __future__ import annotations

import ctypes
import itertools
import math
import struct

import numpy as np

from spec_tests.cuda_kernel_emulation import STORAGE, compute_type, emulates, pointer, slots

# ConvArgs: int64 batch, m, n, k, groups, group_in, group_out, in_size[3], out_size[3],
# kernel[3], stride[3], pad[3], dil[3], x_strides[5], f_strides[5], out_strides[5],
# bias_stride; int32 has_bias, int32 unused. Spatial triples are (depth, height, width).
LAYOUT = struct.Struct("<41q2i")
THREADS = 256
TILES = {"float": (128, 128), "double": (64, 64), "rt_float16": (128, 128),
         "rt_bfloat16": (128, 128)}
SCALARS = "batch m n k groups group_in group_out".split()
TRIPLES = "in_size out_size kernel stride pad dil".split()
STRIDES = "x_strides f_strides out_strides".split()


def decode(address):
    values = list(LAYOUT.unpack(ctypes.string_at(address, LAYOUT.size)))
    args = {name: values.pop(0) for name in SCALARS}
    for name in TRIPLES:
        args[name], values = tuple(values[:3]), values[3:]
    for name in STRIDES:
        args[name], values = tuple(values[:5]), values[5:]
    args["bias_stride"], has_bias, unused = values
    assert unused == 0 and has_bias in (0, 1)
    args["has_bias"] = bool(has_bias)
    return args


def window_count(size, kernel, stride, pad, dil):
    return (size + 2 * pad - dil * (kernel - 1) - 1) // stride + 1


def dims(a, *names):
    """Per spatial dim, the tuple of the named triples' entries."""
    return list(zip(*(a[name] for name in names)))


def windows(x, a, out_size):
    """(N, C, KD, KH, KW, OD, OH, OW): the zero-padded image's element under each tap of each
    window, from a padded copy."""
    n, c = x.shape[:2]
    padded = np.zeros((n, c) + tuple(s + 2 * p for s, p in zip(x.shape[2:], a["pad"])),
                      x.dtype)
    padded[(slice(None),) * 2 + tuple(slice(p, p + s) for s, p in
                                      zip(x.shape[2:], a["pad"]))] = x
    cols = np.zeros((n, c) + a["kernel"] + tuple(out_size), x.dtype)
    for taps in itertools.product(*(range(k) for k in a["kernel"])):
        pick = tuple(slice(t * d, t * d + s * (o - 1) + 1, s) for t, d, s, o in
                     zip(taps, a["dil"], a["stride"], out_size))
        cols[(slice(None),) * 2 + taps] = padded[(slice(None),) * 2 + pick]
    return cols


def forward(x, f, a, c):
    """out[n, g*Og + o] = sum over (c, kd, kh, kw) of f[g*Og + o, c, kd, kh, kw] * window."""
    groups, cg, og = a["groups"], a["group_in"], a["group_out"]
    n, taps, positions = x.shape[0], math.prod(a["kernel"]), math.prod(a["out_size"])
    cols = windows(x, a, a["out_size"]).reshape(n, groups, cg * taps, positions)
    weights = f.reshape(groups, og, cg * taps)
    out = np.einsum("gok,ngkp->ngop", weights, cols)
    return out.reshape((n, groups * og) + a["out_size"])


def transposed(x, f, a, c):
    """Each input element times each tap, added at input * stride + tap * dilation of the
    uncropped output, then the padding cropped."""
    groups, cg, og = a["groups"], a["group_in"], a["group_out"]
    n, in_size = x.shape[0], x.shape[2:]
    full_size = tuple(max((i - 1) * s + d * (k - 1) + 1, p + o) for i, s, d, k, p, o in
                      zip(in_size, a["stride"], a["dil"], a["kernel"], a["pad"],
                          a["out_size"]))
    full = np.zeros((n, groups, og) + full_size, c)
    xs = x.reshape((n, groups, cg) + in_size)
    weights = f.reshape((groups, cg, og) + a["kernel"])
    for taps in itertools.product(*(range(k) for k in a["kernel"])):
        products = np.einsum("gco,ngcdhw->ngodhw", weights[(Ellipsis,) + taps], xs)
        put = tuple(slice(t * d, t * d + s * (i - 1) + 1, s) for t, d, s, i in
                    zip(taps, a["dil"], a["stride"], in_size))
        full[(slice(None),) * 3 + put] += products
    crop = tuple(slice(p, p + o) for p, o in zip(a["pad"], a["out_size"]))
    return full[(Ellipsis,) + crop].reshape((n, groups * og) + a["out_size"])


def weight_grad(x, grad, a, c):
    """out[g*Og + o, c, kd, kh, kw] = sum over (n, oz, oy, ox) of grad * the window element."""
    groups, cg, og = a["groups"], a["group_in"], a["group_out"]
    n, positions = x.shape[0], math.prod(a["out_size"])
    cols = windows(x, a, a["out_size"]).reshape((n, groups, cg) + a["kernel"] + (positions,))
    g = grad.reshape(n, groups, og, positions)
    out = np.einsum("ngop,ngcdijp->gocdij", g, cols)
    return out.reshape((groups * og, cg) + a["kernel"])


def check_sizes(kind, a):
    """The product and the spatial sizes describe one convolution of `kind`; returns
    (images, f's shape, out's shape)."""
    groups, cg, og = a["groups"], a["group_in"], a["group_out"]
    taps = math.prod(a["kernel"])
    assert a["m"] == og
    if kind == "WeightGrad":
        positions = math.prod(a["out_size"])
        images = a["k"] // positions if positions else 0
        assert a["batch"] == groups and a["n"] == cg * taps and a["k"] == images * positions
        for size, out, kernel, stride, pad, dil in dims(a, "in_size", "out_size", "kernel",
                                                        "stride", "pad", "dil"):
            assert out <= window_count(size, kernel, stride, pad, dil)
        assert not a["has_bias"]
        return images, (images, groups * og) + a["out_size"], (groups * og, cg) + a["kernel"]
    images = a["batch"] // groups
    assert a["batch"] == images * groups and a["k"] == cg * taps
    assert a["n"] == math.prod(a["out_size"])
    if kind == "Forward":
        sizes = [window_count(*d) for d in dims(a, "in_size", "kernel", "stride", "pad", "dil")]
        f_shape = (groups * og, cg) + a["kernel"]
    else:     # the output_padding is what is left: at most max(stride, dilation) - 1
        sizes = []
        for size, out, kernel, stride, pad, dil in dims(a, "in_size", "out_size", "kernel",
                                                        "stride", "pad", "dil"):
            least = (size - 1) * stride - 2 * pad + dil * (kernel - 1) + 1
            sizes.append(out if 0 <= out - least < max(stride, dil) else None)
        f_shape = (groups * cg, og) + a["kernel"]
    assert tuple(sizes) == a["out_size"], (sizes, a)
    return images, f_shape, (images, groups * og) + a["out_size"]


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
    images, f_shape, out_shape = check_sizes(kind, a)
    x_shape = (images, a["groups"] * a["group_in"]) + a["in_size"]
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
        bias = driver.view(pointer(p[4]), storage, (a["groups"] * a["group_out"],),
                           (a["bias_stride"],))
        with np.errstate(all="ignore"):
            value = value + bias.astype(c)[:, None, None, None]
    out[...] = value.astype(storage)
