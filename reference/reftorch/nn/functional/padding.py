"""torch.nn.functional: padding.

`pad(input, pad, mode, value)`: `pad` lists amounts for the last dims, last dim first:
(left, right, top, bottom, front, back). Modes:

  constant   any number of dims; negative amounts crop; `value` fills (default 0)
  reflect    mirror about the edge element (which is not repeated); amounts < the size
  replicate  repeat the edge element
  circular   wrap around (at most once)

The non-constant modes pad the last 1, 2 or 3 dims of an input with one or two more dims
(an optional batch dim and a channel dim), as PyTorch requires.
"""
from __future__ import annotations

from ..._ops import nn_convolution as _conv

__all__ = ["pad"]

_MODES = ("constant", "reflect", "replicate", "circular")
_SUPPORTED = ("Supported combinations for non-constant padding:\n"
              "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
              "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
              "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")


def pad(input, pad, mode="constant", value=None):
    if mode not in _MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    amounts = _conv._pad_list(pad)
    _conv._check_pad_length(input, amounts)
    if mode == "constant":
        return _conv.constant_pad_nd(input, amounts, 0 if value is None else value)
    if value is not None and value != 0:
        raise RuntimeError(f"Padding mode \"{mode}\" doesn't take in value argument")
    nd = len(amounts) // 2
    if nd not in (1, 2, 3) or input.dim() not in (nd + 1, nd + 2):
        raise NotImplementedError(f"Padding size {len(amounts)} is not supported for "
                                  f"{input.dim()}D input tensor.\n{_SUPPORTED}")
    if mode == "circular":
        return _conv.circular_pad(input, amounts)
    return _conv.index_pad(input, amounts, mode)
