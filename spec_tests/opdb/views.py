"""Op-database entries: views. Results must match torch's values AND strides (they share
the input's storage), and gradients flow back through each view's own node."""
from __future__ import annotations

from .core import OpInfo, Sample, tensor

VIEW_SHAPES = [((3, 4), "contiguous"), ((3, 4), "transposed"), ((2, 3, 4), "strided"),
               ((2, 0, 3), "contiguous")]


def _each_layout(rng, dtype, fn):
    for shape, layout in VIEW_SHAPES:
        x = tensor(shape, dtype, rng, layout)
        for args, label in fn(shape):
            yield Sample((x,) + args, {}, f"{shape}{layout} {label}")


def _view(name, make_args, call=None):
    def samples(dtype, rng):
        return _each_layout(rng, dtype, make_args)
    return OpInfo(name=name, samples=samples, check_strides=True,
                  call=call or (lambda m, x, *a: getattr(x, name)(*a)))


def _reshape_args(shape):
    n = 1
    for s in shape:
        n *= s
    yield (-1,), "-1"
    yield ((n, 1) if n else (0, 5),), "column"
    yield (shape[::-1],), "reversed"


def _dims(shape):
    yield (0, -1), "0,-1"
    yield (-1, 0), "-1,0"
    yield (0, len(shape)), "out of range"


OPS = [
    _view("view", lambda shape: [((-1,), "-1"), ((2, -1), "2,-1"), ((5, -1), "bad size")]),
    _view("reshape", _reshape_args),
    _view("transpose", _dims),
    _view("permute", lambda shape: [(tuple(reversed(range(len(shape)))), "reversed"),
                                    ((0,) * len(shape), "duplicate")]),
    _view("t", lambda shape: [((), "")]),
    _view("expand", lambda shape: [((2,) + tuple(shape), "new dim"),
                                   ((-1,) * len(shape), "-1s"), ((5, 5), "bad")]),
    _view("narrow", lambda shape: [((0, 1, 1), "0,1,1"), ((-1, 0, 2), "-1,0,2"),
                                   ((0, 0, 9), "too long")]),
    _view("select", lambda shape: [((0, 1), "0,1"), ((-1, -1), "-1,-1"), ((0, 9), "oob")]),
    _view("squeeze", lambda shape: [((), "all"), ((0,), "0")]),
    _view("unsqueeze", lambda shape: [((0,), "0"), ((-1,), "-1"), ((9,), "oob")]),
    _view("unfold", lambda shape: [((-1, 2, 1), "-1,2,1"), ((0, 2, 2), "0,2,2"),
                                   ((0, 9, 1), "too big")]),
    _view("diagonal", lambda shape: [((0, 0, 1), "main"), ((1, 0, -1), "offset 1"),
                                     ((-1, -1, 0), "offset -1")]),
    _view("flatten", lambda shape: [((), "all"), ((1,), "from 1")]),
    _view("movedim", lambda shape: [((0, -1), "0->-1")]),
    _view("getitem", lambda shape: [((1,), "[1]"), ((slice(None, None, 2),), "[::2]"),
                                    (((Ellipsis, None, slice(1, None)),), "[..., None, 1:]"),
                                    ((-1,), "[-1]")],
          call=lambda m, x, index: x[index]),
    _view("as_strided", lambda shape: [(((2, 2), (1, 2)), "overlapping 2x2"),
                                       (((2,), (3,), 1), "offset 1")]),
]


def _functional(name, make_args):
    """The `torch.<name>(input, ...)` spelling of a view method."""
    entry = _view(name, make_args, call=lambda m, x, *a: getattr(m, name)(x, *a))
    entry.name = f"torch.{name}"
    return entry


OPS += [
    _functional("reshape", lambda shape: [(((-1,),), "(-1,)"), ((-1,), "bare int")]),
    _functional("transpose", _dims),
    _functional("swapaxes", _dims),
    _functional("permute", lambda shape: [((tuple(reversed(range(len(shape)))),), "reversed"),
                                          ((0,) * len(shape), "varargs")]),
    _functional("squeeze", lambda shape: [((), "all"), ((0,), "0")]),
    _functional("unsqueeze", lambda shape: [((-1,), "-1")]),
    _functional("narrow", lambda shape: [((0, 1, 1), "0,1,1")]),
    _functional("select", lambda shape: [((-1, 0), "-1,0")]),
    _functional("diagonal", lambda shape: [((0, 0, 1), "main")]),
    _functional("flatten", lambda shape: [((0, -1), "all")]),
    _functional("t", lambda shape: [((), "")]),
    _functional("as_strided", lambda shape: [(((2, 2), (1, 2)), "2x2")]),
    _functional("adjoint", lambda shape: [((), "")]),
]
# reftorch has no conjugate bit: conj() of a complex view is a copy, so adjoint's strides
# differ from torch's for complex inputs (values, shape and gradients still match).
OPS[-1].check_strides = False
