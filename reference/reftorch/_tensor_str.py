"""Printing tensors: the text of repr()/str(), identical to PyTorch's, and the print options.

A tensor prints as `tensor(<body>, <suffixes>)`. The body is a nested bracket layout of the
elements; the suffixes say what the values alone cannot (device, dtype, size, autograd state).

How the body is made:
  1. Summarise: when the tensor has more than `threshold` elements, every dimension longer
     than 2*edgeitems keeps only its first and last `edgeitems` entries (the rest become "...").
  2. Choose a number style from the values that will be shown (integer-valued floats print as
     `1.`, otherwise fixed `1.2500` or scientific `1.2500e+08`) and one column width, so that
     every element lines up.
  3. Lay the formatted elements out row by row, wrapping long rows at `linewidth`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math

import numpy as np

from ._dtype import by_name, default_complex_dtype, get_default_dtype

__all__ = ["set_printoptions", "get_printoptions", "printoptions", "tensor_repr"]


# ---------------------------------------------------------------------------------------------
# Print options


@dataclasses.dataclass
class _PrintOptions:
    precision: int = 4      # digits after the decimal point
    threshold: float = 1000  # more elements than this: summarise
    edgeitems: int = 3      # entries kept at each end of a summarised dimension
    linewidth: int = 80     # characters per line before wrapping
    sci_mode: bool | None = None  # None: choose fixed/scientific from the values


_OPTS = _PrintOptions()

_PROFILES = {
    "default": dict(precision=4, threshold=1000, edgeitems=3, linewidth=80),
    "short": dict(precision=2, threshold=1000, edgeitems=2, linewidth=80),
    "full": dict(precision=4, threshold=math.inf, edgeitems=3, linewidth=80),
}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None):
    """Set how tensors print. A profile sets everything first; explicit arguments then win.

    As in PyTorch, `sci_mode` is always assigned: leaving it out resets it to None (automatic),
    and an unknown profile name is silently ignored.
    """
    if profile in _PROFILES:
        for name, value in _PROFILES[profile].items():
            setattr(_OPTS, name, value)
    for name, value in (("precision", precision), ("threshold", threshold),
                        ("edgeitems", edgeitems), ("linewidth", linewidth)):
        if value is not None:
            setattr(_OPTS, name, value)
    _OPTS.sci_mode = sci_mode


def get_printoptions():
    """The current print options, as a dict of set_printoptions' keyword arguments."""
    return dataclasses.asdict(_OPTS)


@contextlib.contextmanager
def printoptions(**kwargs):
    """Use these print options inside a `with` block, then restore the previous ones."""
    saved = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        set_printoptions(**saved)


# ---------------------------------------------------------------------------------------------
# Element formatters: one style and one column width for all the values that will be shown


class _IntFormatter:
    """Integers and bools: `str()` of each value, right-aligned to the widest one."""

    def __init__(self, shown):
        values = shown.ravel().tolist()
        self.width = max(len(str(v)) for v in values)

    def format(self, value):
        return str(value).rjust(self.width)


class _FloatFormatter:
    """Real floating values (float64 array of the values that will be shown).

    The style is picked from the finite nonzero values only: zeros, nan and inf print in
    whatever style the others chose, and do not count towards the column width.
    """

    def __init__(self, shown):
        finite = shown[np.isfinite(shown) & (shown != 0)]
        # With nothing finite and nonzero, everything prints as `0.`, `-0.`, `nan`, `inf`,
        # even when sci_mode is forced.
        self.int_mode = True
        self.sci_mode = False
        self.width = 1
        if not finite.size:
            return
        self.int_mode = bool(np.all(finite == np.ceil(finite)))
        big, small = np.abs(finite).max(), np.abs(finite).min()
        # A wide range of magnitudes, or very large/small ones, only read well as x.xxe+yy.
        with np.errstate(over="ignore"):  # 1e300 / 1e-300 is inf, which is fine here
            self.sci_mode = bool(big / small > 1000.0 or big > 1.0e8
                                 or (not self.int_mode and small < 1.0e-4))
        if _OPTS.sci_mode is not None:
            self.sci_mode = _OPTS.sci_mode  # a forced style overrides the automatic one
        # The width depends only on the distinct values; zeros, nan and inf don't count.
        self.width = max(len(self._text(v)) for v in np.unique(finite).tolist())

    def _text(self, value):
        """The value in the chosen style, unpadded."""
        if self.sci_mode:
            return f"{value:.{_OPTS.precision}e}"
        if self.int_mode:
            text = f"{value:.0f}"
            return text + "." if math.isfinite(value) else text  # `1.`: an integral float
        return f"{value:.{_OPTS.precision}f}"

    def format(self, value):
        return self._text(value).rjust(self.width)


class _ComplexFormatter:
    """Complex values: real and imaginary parts each get their own float formatter.

    The real parts line up in a column; the imaginary part follows directly, with its
    sign (or a "+") and a "j", so it is not padded.
    """

    def __init__(self, shown):
        self.real = _FloatFormatter(shown.real.astype(np.float64))
        self.imag = _FloatFormatter(shown.imag.astype(np.float64))
        self.width = self.real.width + self.imag.width + 1  # +1 for the "j"

    def format(self, value):
        real = self.real.format(value.real)
        imag = (self.imag.format(value.imag) + "j").lstrip()
        if imag[0] not in "+-":
            imag = "+" + imag
        return real + imag


def _make_formatter(shown, dtype):
    if dtype.is_complex:
        return _ComplexFormatter(shown.astype(np.complex128))
    if dtype.is_floating_point:
        # float16 and bfloat16 widen exactly to float64, which is what gets printed.
        return _FloatFormatter(shown.astype(np.float64))
    return _IntFormatter(shown)


# ---------------------------------------------------------------------------------------------
# Summarising and laying out the body


def _summarise(values, cut, edgeitems):
    """Keep the first and last `edgeitems` entries along each dimension marked in `cut`."""
    for axis, is_cut in enumerate(cut):
        if is_cut:
            n = values.shape[axis]
            keep = np.r_[0:edgeitems, n - edgeitems:n]
            values = np.take(values, keep, axis=axis)
    return values


def _layout(cells, cut, indent, element_length):
    """Bracketed text of an ndarray of already formatted elements (strings).

    `cut[i]` says dimension i was summarised: an ellipsis goes between its two halves.
    `indent` is the column of the opening bracket; nested rows start one column further in.
    """
    edgeitems = _OPTS.edgeitems
    if cells.ndim == 1:
        items = cells.tolist()
        if cut[0]:
            items.insert(edgeitems, " ...")
        # Wrap using the nominal element width (", " included), not the actual strings.
        per_line = max(1, int(math.floor((_OPTS.linewidth - indent) / element_length)))
        lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"
    rows = [_layout(row, cut[1:], indent + 1, element_length) for row in cells]
    if cut[0]:
        rows.insert(edgeitems, "...")
    # Rows of a matrix are on consecutive lines; blocks of higher dims get blank lines between.
    separator = "," + "\n" * (cells.ndim - 1) + " " * (indent + 1)
    return "[" + separator.join(rows) + "]"


def _tensor_body(values, dtype, indent):
    """The text between `tensor(` and the suffixes, for a non-empty ndarray."""
    summarise = values.size > _OPTS.threshold
    edgeitems = _OPTS.edgeitems
    if summarise and values.ndim > 0 and not edgeitems:
        return "[...]"  # nothing kept at either end: the whole tensor is an ellipsis
    cut = tuple(summarise and n > 2 * edgeitems for n in values.shape)
    shown = _summarise(values, cut, edgeitems)
    formatter = _make_formatter(shown, dtype)
    if dtype.is_floating_point:
        shown = shown.astype(np.float64)  # so tolist() gives Python floats, bfloat16 included
    cells = np.array([formatter.format(v) for v in shown.ravel().tolist()],
                     dtype=object).reshape(shown.shape)
    if shown.ndim == 0:
        return cells.item()
    return _layout(cells, cut, indent, formatter.width + 2)


# ---------------------------------------------------------------------------------------------
# The whole repr


def _add_suffixes(text, suffixes, indent):
    """Append `, suffix` items, moving one to a new line when the line would get too long.

    PyTorch measures the body's last line as two characters longer than it is; a suffix
    moved to a new line is indented under the body and measured exactly.
    """
    parts = [text]
    line_len = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if line_len + len(suffix) + 2 > _OPTS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            line_len = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            line_len += len(suffix) + 2
    parts.append(")")
    return "".join(parts)


def tensor_repr(t, tensor_contents=None):
    """`repr(t)` as PyTorch prints it, e.g. `tensor([1., 2.], dtype=torch.float64)`.

    `tensor_contents`, when given, replaces the bracketed body (the suffixes are kept).
    """
    prefix = "tensor("
    indent = len(prefix)
    shape = tuple(t.shape)
    dtype = t.dtype
    suffixes = []
    if t.device.type != "cpu":
        suffixes.append(f"device='{t.device}'")
    empty = math.prod(shape) == 0
    if empty:
        # Nothing to infer the dtype from, so anything but the default float dtype is named;
        # the shape is named too unless it is the plain (0,).
        if len(shape) != 1:
            suffixes.append(f"size={shape}")
        if dtype != get_default_dtype():
            suffixes.append(f"dtype={dtype!r}")
    else:
        if not _OPTS.edgeitems:
            suffixes.append(f"size={shape}")  # summaries show no elements, so name the shape
        # The dtype is named unless torch.tensor() would infer it from the printed values.
        if dtype not in (get_default_dtype(), default_complex_dtype(), by_name("int64"),
                         by_name("bool")):
            suffixes.append(f"dtype={dtype!r}")
    if tensor_contents is not None:
        body = tensor_contents
    elif empty:
        body = "[]"
    else:
        body = _tensor_body(t._host_array(), dtype, indent)
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{type(t.grad_fn).__name__}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)
