"""Op-database entries: loss functions, through their torch.nn.functional spellings.

Every entry has samples over several shapes (0-dim, empty, non-contiguous), each reduction,
the loss's options (weights, ignore_index, label smoothing, margins, ...) and error cases
(torch raising: the runner checks reftorch raises the same type). Class weights and integer
targets never require grad; floating targets do wherever PyTorch differentiates them.
"""
from __future__ import annotations

import numpy as np

from . import FLOATING
from .core import OpInfo, Sample, TensorArg, tensor

SINGLE_DOUBLE = ("float32", "float64")


def _f(name):
    return lambda m, *a, **k: getattr(m.nn.functional, name)(*a, **k)


def _int(values, dtype="int64"):
    return TensorArg(np.asarray(values), dtype, requires_grad=False)


def _const(shape, dtype, rng, **kw):
    """A floating argument that does not require grad (class weights, +-1 targets)."""
    return tensor(shape, dtype, rng, requires_grad=False, **kw)


def _signs(shape, dtype, rng):
    return TensorArg(np.where(rng.standard_normal(shape) > 0, 1.0, -1.0), dtype,
                     requires_grad=False)


def _probs(shape, dtype, rng, layout="contiguous", requires_grad=True):
    return tensor(shape, dtype, rng, layout, requires_grad=requires_grad, domain=(0.05, 0.95))


REDUCTIONS = ({"reduction": "none"}, {}, {"reduction": "sum"})


def _pairwise(extra=(), target=None):
    """input/target pairs of equal shapes, every reduction, layouts, extra keyword sets."""
    target = target or (lambda shape, dtype, rng, layout="contiguous":
                        tensor(shape, dtype, rng, layout))

    def samples(dtype, rng):
        plan = [((3, 4), "contiguous"), ((5,), "contiguous"), ((), "contiguous"),
                ((0, 3), "contiguous"), ((3, 4), "transposed"), ((2, 6), "strided"),
                ((2, 3, 2), "contiguous")]
        for i, (shape, layout) in enumerate(plan):
            kw = REDUCTIONS[i % 3]
            yield Sample((tensor(shape, dtype, rng, layout), target(shape, dtype, rng, layout)),
                         dict(kw), f"{shape} {layout} {kw}")
        for kw in extra:
            yield Sample((tensor((2, 3), dtype, rng), target((2, 3), dtype, rng)), dict(kw),
                         f"{kw}")
        yield Sample((tensor((2, 3), dtype, rng), target((2, 3), dtype, rng)),
                     {"reduction": "bad"}, "bad reduction")
    return samples


def _weighted_pairwise(name):
    """l1/mse/huber's per-element weight= argument, and its size check."""
    base = _pairwise(extra=({"reduction": "sum"},))

    def samples(dtype, rng):
        yield from base(dtype, rng)
        for kw in REDUCTIONS:
            yield Sample((tensor((2, 3), dtype, rng), tensor((2, 3), dtype, rng)),
                         {"weight": _const((2, 3), dtype, rng, domain=(0.1, 2)), **kw},
                         f"weight {kw}")
        yield Sample((tensor((2, 3), dtype, rng), tensor((2, 3), dtype, rng)),
                     {"weight": _const((3,), dtype, rng)}, "weight size mismatch")
    return samples


def _nll(dtype, rng):
    yield Sample((tensor((4, 5), dtype, rng), _int([1, 0, 4, 2])), {}, "(4,5)")
    yield Sample((tensor((5,), dtype, rng), _int(3)), {"reduction": "none"}, "unbatched")
    yield Sample((tensor((5, 4), dtype, rng, "transposed"), _int([1, 0, 3, 2, 3])),
                 {"weight": _const((4,), dtype, rng, domain=(0.2, 2)), "ignore_index": 3},
                 "transposed weight ignore_index")
    yield Sample((tensor((4, 3), dtype, rng), _int([1, 0, -100, 2])),
                 {"reduction": "sum"}, "ignored -100 sum")
    yield Sample((tensor((2, 3, 4), dtype, rng), _int([[0, 1, 2, 1], [2, 2, 0, 1]])),
                 {"reduction": "none"}, "3-d none")
    yield Sample((tensor((2, 3, 2, 2), dtype, rng, "strided"),
                  _int(rng.integers(0, 3, (2, 2, 2)))),
                 {"weight": _const((3,), dtype, rng, domain=(0.2, 2))}, "4-d weight")
    yield Sample((tensor((0, 3), dtype, rng), _int(np.zeros(0, np.int64))), {}, "empty")
    yield Sample((tensor((4, 5), dtype, rng), _int([1, 0, 5, 2])), {}, "target out of bounds")
    yield Sample((tensor((4, 5), dtype, rng), tensor((4,), dtype, rng, requires_grad=False)),
                 {}, "floating target")
    yield Sample((tensor((4, 5), dtype, rng), _int([1, 0, 2])), {}, "batch mismatch")


def _nll_backward_call(m, *args):
    """torch.ops.aten.nll_loss_backward / nll_loss2d_backward(grad_output, self, target,
    weight, reduction, ignore_index, total_weight); reftorch's op of the same signature."""
    import reftorch
    if m is reftorch:
        from reftorch._ops import nn_loss
        return nn_loss.nll_loss_backward(*args)
    name = "nll_loss2d_backward" if args[1].dim() == 4 else "nll_loss_backward"
    return getattr(m.ops.aten, name)(*args)


def _total_weight(target, ignore_index=-100, weight=None):
    """The total weight nll_loss's forward returns for these targets (a consistent value, so
    that finite differences agree with the formula that recomputes it)."""
    t = np.asarray(target.array).reshape(-1)
    kept = t[t != ignore_index]
    total = kept.size if weight is None else float(np.sum(weight.array[kept]))
    return lambda dtype: TensorArg(np.asarray(total, dtype=np.float64), dtype,
                                   requires_grad=False)


def _nll_backward(dtype, rng):
    """Reductions as PyTorch's enum (0 none, 1 mean, 2 sum)."""
    def sample(grad_shape, x, target, weight, reduction, ignore_index, label):
        total = _total_weight(target, ignore_index, weight)(dtype)
        return Sample((tensor(grad_shape, dtype, rng), x, target, weight, reduction,
                       ignore_index, total), {}, label)
    weight3, weight4 = (_const((n,), dtype, rng, domain=(0.2, 2)) for n in (3, 4))
    yield sample((), tensor((4, 5), dtype, rng), _int([1, 0, 4, 2]), None, 1, -100,
                 "(4,5) mean")
    yield sample((), tensor((5,), dtype, rng), _int(3), None, 0, -100, "unbatched none")
    yield sample((), tensor((5, 4), dtype, rng, "transposed"), _int([1, 0, 3, 2, 3]), weight4,
                 2, 3, "transposed weight ignore_index sum")
    yield sample((4,), tensor((4, 3), dtype, rng), _int([1, 0, -100, 2]), None, 0, -100,
                 "ignored -100 none")
    yield sample((), tensor((4, 3), dtype, rng), _int([1, 0, 2, 2]), weight3, 1, 0,
                 "weight mean ignore_index 0")
    yield sample((0,), tensor((0, 3), dtype, rng), _int(np.zeros(0, np.int64)), None, 0, -100,
                 "empty none")
    yield sample((), tensor((4, 5), dtype, rng), _int([1, 0, 5, 2]), None, 1, -100,
                 "target out of bounds")
    yield sample((2,), tensor((4, 5), dtype, rng), _int([1, 0, 3, 2]), None, 1, -100,
                 "mean with a grad of two elements")


def _nll2d_backward(dtype, rng):
    targets = _int(rng.integers(0, 3, (2, 2, 2)))
    weight = _const((3,), dtype, rng, domain=(0.2, 2))
    yield Sample((tensor((), dtype, rng), tensor((2, 3, 2, 2), dtype, rng), targets, None, 1,
                  -100, _total_weight(targets)(dtype)), {}, "mean")
    yield Sample((tensor((2, 2, 2), dtype, rng, "strided"), tensor((2, 3, 2, 2), dtype, rng),
                  targets, weight, 0, 1, _total_weight(targets, 1, weight)(dtype)), {},
                 "none weight ignore_index")
    yield Sample((tensor((), dtype, rng), tensor((2, 3, 2, 2), dtype, rng),
                  _int(np.full((2, 2, 2), 7)), None, 2, -100, _total_weight(targets)(dtype)),
                 {}, "target out of bounds")


def _cross_entropy(dtype, rng):
    yield Sample((tensor((4, 5), dtype, rng), _int([1, 0, 4, 2])), {}, "(4,5)")
    yield Sample((tensor((5,), dtype, rng), _int(2)), {}, "unbatched")
    yield Sample((tensor((3, 4), dtype, rng), _probs((3, 4), dtype, rng)), {}, "probabilities")
    yield Sample((tensor((3, 4), dtype, rng, "transposed"), _int([1, 3, 0])),
                 {"label_smoothing": 0.2, "reduction": "sum"}, "label smoothing")
    yield Sample((tensor((4, 3), dtype, rng), _int([1, 0, 1, 2])),
                 {"weight": _const((3,), dtype, rng, domain=(0.2, 2)), "ignore_index": 1,
                  "label_smoothing": 0.1}, "weight ignore_index smoothing")
    yield Sample((tensor((2, 3, 4), dtype, rng), _int(rng.integers(0, 3, (2, 4)))),
                 {"reduction": "none"}, "k-dim none")
    yield Sample((tensor((2, 3, 4), dtype, rng, "strided"), _probs((2, 3, 4), dtype, rng)),
                 {"weight": _const((3,), dtype, rng, domain=(0.2, 2)), "label_smoothing": 0.3},
                 "k-dim probabilities weight smoothing")
    yield Sample((tensor((4, 5), dtype, rng), _int([1, 0, 4, 2])), {"label_smoothing": 1.5},
                 "bad label smoothing")
    yield Sample((tensor((4, 5), dtype, rng), _probs((4, 5), dtype, rng)), {"ignore_index": 0},
                 "probabilities with ignore_index")


def _bce(dtype, rng):
    for i, (shape, layout) in enumerate([((3, 4), "contiguous"), ((5,), "contiguous"),
                                         ((), "contiguous"), ((3, 4), "transposed"),
                                         ((2, 6), "strided"), ((0, 2), "contiguous")]):
        yield Sample((_probs(shape, dtype, rng, layout), _probs(shape, dtype, rng, layout)),
                     dict(REDUCTIONS[i % 3]), f"{shape} {layout}")
    yield Sample((_probs((2, 3), dtype, rng), _probs((2, 3), dtype, rng)),
                 {"weight": _const((3,), dtype, rng, domain=(0.2, 2))}, "broadcast weight")
    yield Sample((_probs((2, 3), dtype, rng), _probs((3,), dtype, rng)), {}, "size mismatch")
    yield Sample((tensor((2, 3), dtype, rng, domain=(1.5, 2)), _probs((2, 3), dtype, rng)), {},
                 "input out of range")


def _bce_logits(dtype, rng):
    for i, (shape, layout) in enumerate([((3, 4), "contiguous"), ((5,), "contiguous"),
                                         ((), "contiguous"), ((3, 4), "transposed"),
                                         ((2, 6), "strided"), ((0, 2), "contiguous")]):
        yield Sample((tensor(shape, dtype, rng, layout), _probs(shape, dtype, rng, layout)),
                     dict(REDUCTIONS[i % 3]), f"{shape} {layout}")
    yield Sample((tensor((2, 3), dtype, rng), _probs((2, 3), dtype, rng)),
                 {"weight": _const((2, 1), dtype, rng, domain=(0.2, 2)),
                  "pos_weight": _const((3,), dtype, rng, domain=(0.2, 3))}, "weight pos_weight")
    yield Sample((tensor((2, 3), dtype, rng), _probs((2, 3), dtype, rng)),
                 {"pos_weight": _const((3,), dtype, rng, domain=(0.2, 3)), "reduction": "none"},
                 "pos_weight none")
    yield Sample((tensor((2, 3), dtype, rng), _probs((3,), dtype, rng)), {}, "size mismatch")


def _kl_div(dtype, rng):
    for i, (shape, layout) in enumerate([((3, 4), "contiguous"), ((5,), "contiguous"),
                                         ((), "contiguous"), ((3, 4), "transposed"),
                                         ((0, 2), "contiguous")]):
        kw = ({"reduction": "batchmean"}, {"reduction": "sum"}, {"reduction": "none"},
              {"reduction": "batchmean", "log_target": True}, {"reduction": "sum"})[i]
        target = tensor(shape, dtype, rng, layout) if kw.get("log_target") else \
            _probs(shape, dtype, rng, layout)
        yield Sample((tensor(shape, dtype, rng, layout), target), kw, f"{shape} {kw}")
    yield Sample((tensor((2, 3), dtype, rng), tensor((2, 3), dtype, rng)),
                 {"log_target": True, "reduction": "none"}, "log_target none")


def _poisson(dtype, rng):
    counts = lambda shape: TensorArg(rng.integers(0, 5, shape).astype(float), dtype,  # noqa
                                     requires_grad=False)
    yield Sample((tensor((3, 4), dtype, rng), counts((3, 4))), {}, "log_input")
    yield Sample((tensor((5,), dtype, rng, domain=(0.2, 3)), counts((5,))),
                 {"log_input": False, "full": True, "reduction": "sum"}, "full, rates")
    yield Sample((tensor((3, 4), dtype, rng, "transposed"), counts((3, 4))),
                 {"full": True, "reduction": "none"}, "transposed full none")
    yield Sample((tensor((0, 2), dtype, rng), counts((0, 2))), {"reduction": "sum"}, "empty")
    yield Sample((tensor((3,), dtype, rng), counts((3,))), {"reduction": "avg"},
                 "bad reduction")


def _gaussian(dtype, rng):
    var = lambda shape: tensor(shape, dtype, rng, domain=(0.2, 2))  # noqa: E731
    yield Sample((tensor((3, 4), dtype, rng), tensor((3, 4), dtype, rng), var((3, 4))), {},
                 "same shapes")
    yield Sample((tensor((3, 4), dtype, rng), tensor((3, 4), dtype, rng), var((3,))),
                 {"full": True, "reduction": "sum"}, "var without last dim, full")
    yield Sample((tensor((3, 4), dtype, rng), tensor((3, 4), dtype, rng), var((3, 1))),
                 {"reduction": "none", "eps": 0.1}, "var broadcast, eps")
    yield Sample((tensor((3, 4), dtype, rng), tensor((3, 4), dtype, rng), 0.7), {}, "float var")
    yield Sample((tensor((3, 4), dtype, rng), tensor((3, 4), dtype, rng), var((2,))), {},
                 "var of incorrect size")


def _margin_ranking(dtype, rng):
    for i, shape in enumerate([(5,), (), (0,), (2, 3)]):
        yield Sample((tensor(shape, dtype, rng), tensor(shape, dtype, rng),
                      _signs(shape, dtype, rng)), {"margin": 0.2 * i, **REDUCTIONS[i % 3]},
                     f"{shape}")
    yield Sample((tensor((2, 3), dtype, rng), tensor((2, 3), dtype, rng),
                  _signs((3,), dtype, rng)), {}, "dims differ")


def _hinge(dtype, rng):
    for i, (shape, layout) in enumerate([((3, 4), "contiguous"), ((5,), "contiguous"),
                                         ((), "contiguous"), ((3, 4), "transposed"),
                                         ((0, 2), "contiguous")]):
        yield Sample((tensor(shape, dtype, rng, layout), _signs(shape, dtype, rng)),
                     {"margin": 0.5 + i, **REDUCTIONS[i % 3]}, f"{shape} {layout}")


def _multilabel_margin(dtype, rng):
    yield Sample((tensor((3, 4), dtype, rng), _int([[3, 0, -1, 1], [0, 1, 2, 3],
                                                    [-1, 2, 0, 0]])), {}, "(3,4)")
    yield Sample((tensor((4,), dtype, rng), _int([2, 2, -1, 0])), {"reduction": "none"},
                 "unbatched duplicate label")
    yield Sample((tensor((4, 2), dtype, rng, "transposed"), _int([[1, -1], [0, 1], [-1, 0],
                                                                  [1, 0]])),
                 {"reduction": "none"}, "transposed none")
    yield Sample((tensor((2, 3), dtype, rng), _int([[2, 1, -1], [0, -1, 2]])),
                 {"reduction": "sum"}, "sum")
    yield Sample((tensor((2, 3), dtype, rng), _int([[3, -1, 0], [0, 1, 2]])), {},
                 "target out of range")
    yield Sample((tensor((2, 3), dtype, rng), _int([[0, -1], [0, 1]])), {}, "target shape")


def _soft_margin(dtype, rng):
    for i, (shape, layout) in enumerate([((3, 4), "contiguous"), ((5,), "contiguous"),
                                         ((), "contiguous"), ((3, 4), "transposed"),
                                         ((2, 6), "strided"), ((0, 2), "contiguous")]):
        yield Sample((tensor(shape, dtype, rng, layout), _signs(shape, dtype, rng)),
                     dict(REDUCTIONS[i % 3]), f"{shape} {layout}")


def _multilabel_soft_margin(dtype, rng):
    labels = lambda shape: TensorArg(rng.integers(0, 2, shape).astype(float), dtype,  # noqa
                                     requires_grad=False)
    yield Sample((tensor((3, 4), dtype, rng), labels((3, 4))), {}, "(3,4)")
    yield Sample((tensor((3, 4), dtype, rng, "transposed"), labels((3, 4))),
                 {"weight": _const((4,), dtype, rng, domain=(0.2, 2)), "reduction": "none"},
                 "weight none")
    yield Sample((tensor((2, 3), dtype, rng), _probs((2, 3), dtype, rng)),
                 {"reduction": "sum"}, "soft labels sum")
    yield Sample((tensor((2, 3), dtype, rng), labels((2, 3))), {"reduction": "x"},
                 "bad reduction")


def _cosine_embedding(dtype, rng):
    yield Sample((tensor((4, 5), dtype, rng), tensor((4, 5), dtype, rng),
                  _signs((4,), dtype, rng)), {"margin": 0.2}, "(4,5)")
    yield Sample((tensor((5,), dtype, rng), tensor((5,), dtype, rng), _int(1)),
                 {"reduction": "none"}, "unbatched")
    yield Sample((tensor((5, 3), dtype, rng, "transposed"), tensor((3, 5), dtype, rng),
                  _signs((3,), dtype, rng)), {"reduction": "sum", "margin": -0.3},
                 "transposed sum")
    yield Sample((tensor((3, 4), dtype, rng), tensor((3, 4), dtype, rng),
                  _signs((3, 4), dtype, rng)), {}, "2-d target")


def _multi_margin(dtype, rng):
    yield Sample((tensor((4, 5), dtype, rng), _int([1, 0, 4, 2])), {}, "(4,5)")
    yield Sample((tensor((5,), dtype, rng), _int(3)), {"p": 2, "reduction": "none"},
                 "unbatched p=2")
    yield Sample((tensor((4, 3), dtype, rng, "transposed"), _int([1, 0, 2, 2])),
                 {"weight": _const((3,), dtype, rng, domain=(0.2, 2)), "margin": 0.5,
                  "reduction": "none"}, "transposed weight margin")
    yield Sample((tensor((3, 4), dtype, rng), _int([3, 0, 1])),
                 {"p": 2, "weight": _const((4,), dtype, rng, domain=(0.2, 2)),
                  "reduction": "sum"}, "p=2 weight sum")
    yield Sample((tensor((3, 4), dtype, rng), _int([0, 4, 1])), {}, "target out of range")
    yield Sample((tensor((3, 4), dtype, rng), _int([0, 1, 1])), {"p": 3}, "bad p")


def _triplet(dtype, rng):
    def triple(shape, layout="contiguous"):
        return tuple(tensor(shape, dtype, rng, layout) for _ in range(3))
    yield Sample(triple((3, 4)), {}, "(3,4)")
    yield Sample(triple((4,)), {"p": 1.0, "reduction": "none"}, "unbatched p=1")
    yield Sample(triple((3, 4), "transposed"), {"swap": True, "margin": 2.0,
                                                "reduction": "sum"}, "swap")
    yield Sample(triple((2, 2, 3)), {"p": 3.0, "eps": 0.1, "reduction": "none"}, "3-d p=3")
    yield Sample(triple((3, 4)), {"margin": 0.0}, "non-positive margin")
    yield Sample(triple((3, 4))[:2] + (tensor((4,), dtype, rng),), {}, "dims differ")


def _triplet_distance(dtype, rng):
    def triple(shape, layout="contiguous"):
        return tuple(tensor(shape, dtype, rng, layout) for _ in range(3))
    yield Sample(triple((2, 4)), {}, "(2,4)")
    yield Sample(triple((3, 4), "strided"), {"swap": True, "margin": 2.0, "reduction": "none"},
                 "swap none")
    yield Sample(triple((2, 2, 3)), {"reduction": "sum"}, "3-d sum")
    yield Sample(triple((3, 4)), {"reduction": "avg"}, "bad reduction")


def _ctc_call(m, logits, targets, input_lengths, target_lengths, **kwargs):
    """ctc_loss of log_softmax(logits): PyTorch's CTC gradient is defined for normalised
    log-probabilities, so the samples normalise them (with ops both libraries have)."""
    log_probs = logits - logits.logsumexp(-1, keepdim=True)
    return m.nn.functional.ctc_loss(log_probs, targets, input_lengths, target_lengths, **kwargs)


def _ctc(dtype, rng):
    yield Sample((tensor((5, 2, 4), dtype, rng), _int([[1, 2, 2], [3, 1, 0]]), _int([5, 4]),
                  _int([3, 2])), {}, "padded targets")
    yield Sample((tensor((4, 3), dtype, rng), _int([1, 2]), _int(4), _int(2)),
                 {"reduction": "sum"}, "unbatched")
    yield Sample((tensor((6, 3, 5), dtype, rng), _int([1, 3, 3, 4, 2, 1]), _int([6, 6, 3]),
                  _int([3, 1, 2])), {"reduction": "none", "blank": 0}, "concatenated targets")
    yield Sample((tensor((6, 2, 5), dtype, rng), _int([[1, 3, 2], [4, 4, 4]], "int32"),
                  (6, 5), (3, 3)), {"blank": 0, "zero_infinity": True, "reduction": "none"},
                 "int32 targets, length tuples, zero_infinity")
    yield Sample((tensor((6, 2, 5), dtype, rng), _int([[0, 3, 1], [3, 2, 2]]), _int([6, 6]),
                  _int([3, 2])), {"blank": 4, "reduction": "sum"}, "blank=4")
    yield Sample((tensor((4, 2, 3), dtype, rng), _int([[1, 2], [1, 1]]), _int([5, 4]),
                  _int([2, 2])), {}, "input length beyond T")
    yield Sample((tensor((4, 2, 3), dtype, rng), _int([[1, 2], [1, 1]]), _int([4, 4]),
                  _int([2, 2])), {"blank": 3}, "blank out of range")


OPS = [
    OpInfo("l1_loss", _f("l1_loss"), _weighted_pairwise("l1_loss"), dtypes=FLOATING),
    OpInfo("mse_loss", _f("mse_loss"), _weighted_pairwise("mse_loss"), dtypes=FLOATING),
    OpInfo("smooth_l1_loss", _f("smooth_l1_loss"),
           _pairwise(extra=({"beta": 0.5}, {"beta": 0.0, "reduction": "sum"}, {"beta": -1.0})),
           dtypes=FLOATING),
    OpInfo("huber_loss", _f("huber_loss"), _weighted_pairwise("huber_loss"), dtypes=FLOATING),
    OpInfo("soft_margin_loss", _f("soft_margin_loss"), _soft_margin, dtypes=FLOATING),
    OpInfo("nll_loss", _f("nll_loss"), _nll, dtypes=FLOATING),
    OpInfo("nll_loss_backward", _nll_backward_call, _nll_backward, dtypes=FLOATING),
    OpInfo("nll_loss2d_backward", _nll_backward_call, _nll2d_backward, dtypes=FLOATING),
    OpInfo("cross_entropy", _f("cross_entropy"), _cross_entropy, dtypes=FLOATING),
    OpInfo("binary_cross_entropy", _f("binary_cross_entropy"), _bce, dtypes=FLOATING),
    OpInfo("binary_cross_entropy_with_logits", _f("binary_cross_entropy_with_logits"),
           _bce_logits, dtypes=FLOATING),
    OpInfo("kl_div", _f("kl_div"), _kl_div, dtypes=FLOATING),
    OpInfo("poisson_nll_loss", _f("poisson_nll_loss"), _poisson, dtypes=SINGLE_DOUBLE),
    OpInfo("gaussian_nll_loss", _f("gaussian_nll_loss"), _gaussian, dtypes=SINGLE_DOUBLE),
    OpInfo("margin_ranking_loss", _f("margin_ranking_loss"), _margin_ranking,
           dtypes=SINGLE_DOUBLE),
    OpInfo("hinge_embedding_loss", _f("hinge_embedding_loss"), _hinge, dtypes=SINGLE_DOUBLE),
    OpInfo("multilabel_margin_loss", _f("multilabel_margin_loss"), _multilabel_margin,
           dtypes=SINGLE_DOUBLE),
    OpInfo("multilabel_soft_margin_loss", _f("multilabel_soft_margin_loss"),
           _multilabel_soft_margin, dtypes=SINGLE_DOUBLE),
    OpInfo("cosine_embedding_loss", _f("cosine_embedding_loss"), _cosine_embedding,
           dtypes=SINGLE_DOUBLE),
    OpInfo("multi_margin_loss", _f("multi_margin_loss"), _multi_margin, dtypes=SINGLE_DOUBLE),
    OpInfo("triplet_margin_loss", _f("triplet_margin_loss"), _triplet, dtypes=SINGLE_DOUBLE),
    OpInfo("triplet_margin_with_distance_loss", _f("triplet_margin_with_distance_loss"),
           _triplet_distance, dtypes=SINGLE_DOUBLE),
    OpInfo("ctc_loss", _ctc_call, _ctc, dtypes=SINGLE_DOUBLE),
]
