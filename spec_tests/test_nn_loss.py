"""Loss modules (torch.nn.*Loss) and their functional forms against real PyTorch.

Each case builds the same arguments for both libraries, runs the loss, and compares the value
(shape, dtype, values), the autograd node name, and the gradients of every floating argument
that requires grad (input, and target where PyTorch differentiates it). Reprs, state_dict
keys, the legacy size_average/reduce mapping, warnings and error types are compared too.
The functional forms are also in the op database (opdb/nn_loss.py) for the generic runners.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import reftorch
from .oracle import compare, compare_values

torch = pytest.importorskip("torch")

REDUCTIONS = ("none", "mean", "sum")
rng = np.random.default_rng(1234)


# --- arguments built identically for both libraries -------------------------------------------

class Arg:
    """A tensor argument: values, dtype ('float' = the case's floating dtype), grad flag."""

    def __init__(self, values, dtype=None, grad=False):
        self.values, self.grad = np.asarray(values), grad
        self.dtype = dtype or ("int64" if self.values.dtype.kind in "iu" else "float")

    def build(self, module, float_dtype):
        name = float_dtype if self.dtype == "float" else self.dtype
        x = module.tensor(self.values, dtype=getattr(module, name))
        return x.requires_grad_() if self.grad else x


def normal(*shape, grad=True):
    return Arg(rng.standard_normal(shape), grad=grad)


def probs(*shape, grad=True):
    return Arg(rng.uniform(0.05, 0.95, shape), grad=grad)


def positive(*shape, grad=False):
    return Arg(rng.uniform(0.2, 3.0, shape), grad=grad)


def signs(*shape):
    return Arg(np.where(rng.standard_normal(shape) > 0, 1.0, -1.0))


def classes(num_classes, *shape, dtype="int64"):
    return Arg(rng.integers(0, num_classes, shape), dtype=dtype)


def build(args, module, float_dtype):
    return [a.build(module, float_dtype) if isinstance(a, Arg) else a for a in args]


def run_both(call, args, float_dtype="float64"):
    """(reftorch result, torch result, reftorch leaves, torch leaves)."""
    ours, theirs = build(args, reftorch, float_dtype), build(args, torch, float_dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return (call(reftorch, *ours), call(torch, *theirs),
                [a for a in ours if getattr(a, "requires_grad", False)],
                [a for a in theirs if getattr(a, "requires_grad", False)])


def check(call, args, float_dtype="float64", node=True):
    """Value, dtype, node name and gradients agree with torch."""
    got, expected, ours, theirs = run_both(call, args, float_dtype)
    msg = compare_values(got.detach(), expected.detach())
    assert msg is None, msg
    if not theirs:
        return
    if node:
        assert type(got.grad_fn).__name__ == expected.grad_fn.name(), \
            (type(got.grad_fn).__name__, expected.grad_fn.name())
    cotangent = rng.standard_normal(tuple(expected.shape))
    g_ours = reftorch.autograd.grad(got, ours, reftorch.tensor(cotangent, dtype=got.dtype))
    g_theirs = torch.autograd.grad(expected, theirs, torch.tensor(cotangent,
                                                                  dtype=expected.dtype))
    for k, (g, e) in enumerate(zip(g_ours, g_theirs)):
        msg = compare_values(g, e)
        assert msg is None, f"gradient of argument {k}: {msg}"


def raises_like_torch(call, args, float_dtype="float64"):
    ours, theirs = build(args, reftorch, float_dtype), build(args, torch, float_dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        msg = compare(lambda: call(reftorch, *ours), lambda: call(torch, *theirs))
    assert msg is None, msg
    with pytest.raises(Exception):
        call(torch, *theirs)


def module(name, **options):
    return lambda m, *args: getattr(m.nn, name)(**options)(*args)


def functional(name, **options):
    return lambda m, *args: getattr(m.nn.functional, name)(*args, **options)


# --- value and gradient cases -----------------------------------------------------------------

def _pointwise_cases():
    for name in ("L1Loss", "MSELoss", "SmoothL1Loss", "HuberLoss"):
        for reduction in REDUCTIONS:
            yield f"{name}-{reduction}", module(name, reduction=reduction), \
                [normal(3, 4), normal(3, 4)]
    yield "SmoothL1Loss-beta0.5", module("SmoothL1Loss", beta=0.5), [normal(3, 4), normal(3, 4)]
    yield "SmoothL1Loss-beta0", module("SmoothL1Loss", beta=0.0), [normal(5), normal(5)]
    yield "HuberLoss-delta2", module("HuberLoss", delta=2.0, reduction="sum"), \
        [Arg(rng.standard_normal((2, 3, 4)) * 3, grad=True), normal(2, 3, 4)]
    yield "MSELoss-0d", module("MSELoss"), [normal(), normal()]
    yield "MSELoss-empty", module("MSELoss", reduction="sum"), [normal(0, 3), normal(0, 3)]
    yield "MSELoss-broadcast", module("MSELoss"), [normal(3, 4), normal(4)]
    for reduction in REDUCTIONS:
        for name in ("l1_loss", "mse_loss", "huber_loss"):
            yield f"{name}-weight-{reduction}", \
                (lambda n, r: lambda m, x, t, w: getattr(m.nn.functional, n)(
                    x, t, reduction=r, weight=w))(name, reduction), \
                [normal(3, 4), normal(3, 4), positive(3, 4)]
    for reduction in REDUCTIONS:
        yield f"SoftMarginLoss-{reduction}", module("SoftMarginLoss", reduction=reduction), \
            [normal(4, 5), signs(4, 5)]


def _classification_cases():
    for reduction in REDUCTIONS:
        yield f"NLLLoss-{reduction}", module("NLLLoss", reduction=reduction), \
            [normal(6, 5), classes(5, 6)]
        yield f"NLLLoss-weight-ignore-{reduction}", \
            (lambda r: lambda m, x, t, w: m.nn.NLLLoss(weight=w, ignore_index=2,
                                                       reduction=r)(x, t))(reduction), \
            [normal(6, 5), Arg([2, 0, 4, 2, 1, 3]), positive(5)]
        yield f"NLLLoss-4d-{reduction}", module("NLLLoss", reduction=reduction), \
            [normal(2, 3, 4, 2), classes(3, 2, 4, 2)]
        yield f"NLLLoss-3d-{reduction}", module("NLLLoss", reduction=reduction), \
            [normal(2, 3, 4), classes(3, 2, 4)]
        yield f"NLLLoss-5d-{reduction}", module("NLLLoss", reduction=reduction), \
            [normal(2, 3, 2, 2, 2), classes(3, 2, 2, 2, 2)]
        yield f"NLLLoss-unbatched-{reduction}", module("NLLLoss", reduction=reduction), \
            [normal(5), Arg(3)]
        yield f"CrossEntropyLoss-{reduction}", module("CrossEntropyLoss", reduction=reduction), \
            [normal(6, 5), classes(5, 6)]
        yield f"CrossEntropyLoss-smoothing-{reduction}", \
            (lambda r: lambda m, x, t, w: m.nn.CrossEntropyLoss(
                weight=w, ignore_index=1, label_smoothing=0.2, reduction=r)(x, t))(reduction), \
            [normal(6, 5), Arg([1, 0, 4, 2, 1, 3]), positive(5)]
        yield f"CrossEntropyLoss-smoothing-noweight-{reduction}", \
            module("CrossEntropyLoss", label_smoothing=0.1, reduction=reduction, ignore_index=0), \
            [normal(2, 4, 3), classes(4, 2, 3)]
        yield f"CrossEntropyLoss-probs-{reduction}", \
            (lambda r: lambda m, x, t, w: m.nn.CrossEntropyLoss(
                weight=w, label_smoothing=0.3, reduction=r)(x, t))(reduction), \
            [normal(4, 5), probs(4, 5), positive(5)]
        yield f"CrossEntropyLoss-probs-kdim-{reduction}", \
            module("CrossEntropyLoss", reduction=reduction), [normal(2, 3, 4), probs(2, 3, 4)]
    yield "CrossEntropyLoss-weight-4d", \
        lambda m, x, t, w: m.nn.CrossEntropyLoss(weight=w)(x, t), \
        [normal(2, 3, 2, 2), classes(3, 2, 2, 2), positive(3)]
    yield "CrossEntropyLoss-unbatched", module("CrossEntropyLoss"), [normal(5), Arg(2)]
    yield "CrossEntropyLoss-unbatched-probs", module("CrossEntropyLoss"), [normal(5), probs(5)]
    yield "CrossEntropyLoss-all-ignored", module("CrossEntropyLoss", ignore_index=1), \
        [normal(3, 4), Arg([1, 1, 1])]
    yield "CrossEntropyLoss-byte-target", module("CrossEntropyLoss"), \
        [normal(3, 4), Arg([1, 3, 0], dtype="uint8")]
    for reduction in REDUCTIONS:
        yield f"BCELoss-{reduction}", module("BCELoss", reduction=reduction), \
            [probs(3, 4), probs(3, 4)]
        yield f"BCELoss-weight-{reduction}", \
            (lambda r: lambda m, x, t, w: m.nn.BCELoss(weight=w, reduction=r)(x, t))(reduction), \
            [probs(3, 4), probs(3, 4), positive(4)]
        yield f"BCEWithLogitsLoss-{reduction}", module("BCEWithLogitsLoss", reduction=reduction), \
            [Arg(rng.standard_normal((3, 4)) * 20, grad=True), probs(3, 4)]
        yield f"BCEWithLogitsLoss-weights-{reduction}", \
            (lambda r: lambda m, x, t, w, pw: m.nn.BCEWithLogitsLoss(
                weight=w, pos_weight=pw, reduction=r)(x, t))(reduction), \
            [normal(3, 4), probs(3, 4), positive(3, 1), positive(4)]
    yield "BCELoss-saturated", module("BCELoss"), \
        [Arg([0.0, 1.0, 1e-30, 0.5]), Arg([1.0, 0.0, 1.0, 0.5])]
    for reduction in REDUCTIONS:
        yield f"MultiMarginLoss-{reduction}", module("MultiMarginLoss", reduction=reduction), \
            [normal(4, 5), classes(5, 4)]
        yield f"MultiMarginLoss-p2-weight-{reduction}", \
            (lambda r: lambda m, x, t, w: m.nn.MultiMarginLoss(
                p=2, margin=0.7, weight=w, reduction=r)(x, t))(reduction), \
            [normal(4, 5), classes(5, 4), positive(5)]
        yield f"MultiLabelMarginLoss-{reduction}", \
            module("MultiLabelMarginLoss", reduction=reduction), \
            [normal(3, 4), Arg([[3, 0, -1, 1], [0, 1, 2, 3], [-1, 2, 0, 0]])]
        yield f"MultiLabelSoftMarginLoss-{reduction}", \
            (lambda r: lambda m, x, t, w: m.nn.MultiLabelSoftMarginLoss(
                weight=w, reduction=r)(x, t))(reduction), \
            [normal(3, 4), Arg(rng.integers(0, 2, (3, 4)).astype(float)), positive(4)]
    yield "MultiMarginLoss-unbatched", module("MultiMarginLoss"), [normal(5), Arg(3)]
    yield "MultiLabelMarginLoss-unbatched", module("MultiLabelMarginLoss", reduction="none"), \
        [normal(4), Arg([2, 2, -1, 0])]


def _distribution_cases():
    for reduction in REDUCTIONS + ("batchmean",):
        yield f"KLDivLoss-{reduction}", module("KLDivLoss", reduction=reduction), \
            [normal(3, 4), probs(3, 4)]
        yield f"KLDivLoss-logtarget-{reduction}", \
            module("KLDivLoss", reduction=reduction, log_target=True), [normal(3, 4), normal(3, 4)]
    yield "KLDivLoss-zero-target", module("KLDivLoss", reduction="sum"), \
        [normal(4), Arg([0.0, 0.5, 0.0, 0.5], grad=True)]
    for reduction in REDUCTIONS:
        yield f"PoissonNLLLoss-{reduction}", module("PoissonNLLLoss", reduction=reduction), \
            [normal(3, 4), Arg(rng.integers(0, 5, (3, 4)).astype(float))]
        yield f"PoissonNLLLoss-full-{reduction}", \
            module("PoissonNLLLoss", log_input=False, full=True, reduction=reduction), \
            [positive(3, 4, grad=True), Arg(rng.integers(0, 5, (3, 4)).astype(float))]
        yield f"GaussianNLLLoss-{reduction}", module("GaussianNLLLoss", reduction=reduction), \
            [normal(3, 4), normal(3, 4), positive(3, 4, grad=True)]
    yield "GaussianNLLLoss-full-var-lastdim", module("GaussianNLLLoss", full=True, eps=0.5), \
        [normal(3, 4), normal(3, 4), positive(3, grad=True)]
    yield "GaussianNLLLoss-var-broadcast", module("GaussianNLLLoss"), \
        [normal(3, 4), normal(3, 4), positive(3, 1, grad=True)]
    yield "GaussianNLLLoss-float-var", lambda m, x, t: m.nn.GaussianNLLLoss()(x, t, 0.5), \
        [normal(3, 4), normal(3, 4)]


def _embedding_cases():
    for reduction in REDUCTIONS:
        yield f"MarginRankingLoss-{reduction}", \
            module("MarginRankingLoss", margin=0.3, reduction=reduction), \
            [normal(6), normal(6), signs(6)]
        yield f"HingeEmbeddingLoss-{reduction}", \
            module("HingeEmbeddingLoss", margin=0.8, reduction=reduction), \
            [normal(3, 4), signs(3, 4)]
        yield f"CosineEmbeddingLoss-{reduction}", \
            module("CosineEmbeddingLoss", margin=0.2, reduction=reduction), \
            [normal(4, 5), normal(4, 5), signs(4)]
        yield f"TripletMarginLoss-{reduction}", \
            module("TripletMarginLoss", margin=1.5, reduction=reduction), \
            [normal(4, 5), normal(4, 5), normal(4, 5)]
        yield f"TripletMarginWithDistanceLoss-{reduction}", \
            module("TripletMarginWithDistanceLoss", margin=2.0, reduction=reduction), \
            [normal(4, 5), normal(4, 5), normal(4, 5)]
    yield "CosineEmbeddingLoss-unbatched", module("CosineEmbeddingLoss"), \
        [normal(5), normal(5), Arg(-1)]
    yield "TripletMarginLoss-p1-swap", module("TripletMarginLoss", p=1.0, swap=True, eps=0.1), \
        [normal(4, 5), normal(4, 5), normal(4, 5)]
    yield "TripletMarginLoss-3d", module("TripletMarginLoss", p=3.0), \
        [normal(2, 3, 4), normal(2, 3, 4), normal(2, 3, 4)]
    yield "TripletMarginWithDistanceLoss-custom-swap", \
        lambda m, a, p, n: m.nn.TripletMarginWithDistanceLoss(
            distance_function=lambda x, y: (x - y).abs().sum(-1), swap=True)(a, p, n), \
        [normal(4, 5), normal(4, 5), normal(4, 5)]


CASES = [*_pointwise_cases(), *_classification_cases(), *_distribution_cases(),
         *_embedding_cases()]


# PyTorch's C++ divides the class-probability 'mean' by a Scalar (DivBackward1); a Python
# division by a number records DivBackward0 in torch as in reftorch, so those nodes differ.
SCALAR_DIVISION_NODE = {"CrossEntropyLoss-probs-mean", "CrossEntropyLoss-probs-kdim-mean",
                        "CrossEntropyLoss-unbatched-probs"}


@pytest.mark.parametrize("label,call,args", CASES, ids=[c[0] for c in CASES])
def test_loss_matches_torch_float64(label, call, args):
    check(call, args, "float64", node=label not in SCALAR_DIVISION_NODE)


FLOAT32_CASES = [c for c in CASES if c[0].endswith("-mean")]


@pytest.mark.parametrize("label,call,args", FLOAT32_CASES, ids=[c[0] for c in FLOAT32_CASES])
def test_loss_matches_torch_float32(label, call, args):
    check(call, args, "float32", node=False)


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
                                  "binary_cross_entropy", "nll_loss", "cross_entropy"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_reduced_precision_like_torch(name, dtype):
    if name in ("nll_loss", "cross_entropy"):
        args = [normal(4, 5, grad=False), classes(5, 4)]
    elif name == "binary_cross_entropy":
        args = [probs(4, 5, grad=False), probs(4, 5, grad=False)]
    else:
        args = [normal(4, 5, grad=False), normal(4, 5, grad=False)]
    got, expected, _, _ = run_both(functional(name), args, dtype)
    msg = compare_values(got, expected)
    assert msg is None, msg


# --- CTC --------------------------------------------------------------------------------------

def _ctc_args(steps=7, batch=3, num_classes=5, max_target=3, concatenated=False,
              target_dtype="int64", seed=0, blank=0):
    local = np.random.default_rng(seed)
    logits = local.standard_normal((steps, batch, num_classes))
    target_lengths = local.integers(0, max_target + 1, batch)
    target_lengths[0] = max_target
    input_lengths = local.integers(max(2 * max_target, 1), steps + 1, batch)
    input_lengths[0] = steps
    padded = local.integers(1, num_classes, (batch, max_target))
    padded = np.where(padded == blank, 0, padded)        # labels never equal the blank
    padded[0, 1] = padded[0, 0]                   # a repeated label needs a blank between
    if concatenated:
        targets = np.concatenate([padded[i, :n] for i, n in enumerate(target_lengths)])
    else:
        targets = padded
    return [Arg(logits, grad=True), Arg(targets, dtype=target_dtype),
            Arg(input_lengths), Arg(target_lengths)]


def _ctc_call(**options):
    def call(m, logits, targets, input_lengths, target_lengths):
        log_probs = logits.log_softmax(-1)
        return m.nn.functional.ctc_loss(log_probs, targets, input_lengths, target_lengths,
                                        **options)
    return call


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("concatenated", [False, True])
def test_ctc_loss_matches_torch(reduction, concatenated):
    check(_ctc_call(reduction=reduction), _ctc_args(concatenated=concatenated), node=False)


def test_ctc_loss_node_and_raw_log_probs_gradient():
    """With reduction='none' the node is CtcLossBackward0; its gradient with respect to the
    log_probs themselves is PyTorch's (exp(log_probs) - posterior), not the plain chain rule."""
    args = _ctc_args(seed=3)
    call = lambda m, lp, *rest: m.nn.functional.ctc_loss(lp, *rest, reduction="none")  # noqa
    check(call, args)


def test_ctc_loss_options_and_forms():
    check(_ctc_call(blank=2, reduction="sum"), _ctc_args(seed=4, max_target=2, blank=2), node=False)
    check(_ctc_call(), _ctc_args(seed=5, target_dtype="int32"), node=False)
    check(_ctc_call(), _ctc_args(seed=5, target_dtype="float64"), node=False)
    check(_ctc_call(reduction="none"), [Arg(np.zeros((4, 2, 3)), grad=True), Arg([[1], [2]]),
                                       Arg([0, 4]), Arg([0, 1])], node=False)
    check(_ctc_call(), _ctc_args(steps=6, batch=4, seed=6, max_target=2), "float32", node=False)
    # unbatched (T, C) log_probs with (S,) targets
    local = np.random.default_rng(7)
    check(_ctc_call(), [Arg(local.standard_normal((6, 4)), grad=True), Arg([1, 2, 2]),
                        Arg(6), Arg(3)], node=False)
    # lengths given as tuples of ints (torch.ctc_loss's IntArrayRef form)
    args = _ctc_args(seed=8)
    lengths = [tuple(int(v) for v in a.values) for a in args[2:]]
    check(lambda m, lp, t: m.ctc_loss(lp.log_softmax(-1), t, *lengths),
          args[:2], node=False)


@pytest.mark.parametrize("zero_infinity", [False, True])
def test_ctc_loss_impossible_alignment(zero_infinity):
    """A target longer than the input can emit: inf loss, or 0 with zero_infinity."""
    local = np.random.default_rng(9)
    args = [Arg(local.standard_normal((3, 2, 4)), grad=True), Arg([[1, 1, 2], [1, 2, 3]]),
            Arg([3, 3]), Arg([3, 1])]
    check(_ctc_call(reduction="none", zero_infinity=zero_infinity), args, node=False)


def test_ctc_loss_errors():
    call = _ctc_call()
    args = _ctc_args()
    args[2] = Arg([7.0, 6.0, 6.0])                  # lengths must be integers
    raises_like_torch(call, args)
    args = _ctc_args()
    args[3] = Arg([3, -1, 1])
    raises_like_torch(call, args)
    raises_like_torch(call, _ctc_args(concatenated=True)[:3] + [Arg([3, 3, 3])])
    raises_like_torch(lambda m, lp, *rest: m.nn.functional.ctc_loss(lp.to(m.float16), *rest),
                      _ctc_args())
    args = _ctc_args()
    args[2] = Arg([8, 7, 7])                       # longer than T=7
    raises_like_torch(call, args)
    raises_like_torch(_ctc_call(blank=5), _ctc_args())
    with pytest.raises(ValueError):
        reftorch.nn.functional.ctc_loss(*build(_ctc_args(), reftorch, "float64"),
                                        reduction="bad")


# --- modules: repr, state_dict, options, legacy arguments -------------------------------------

MODULE_FORMS = [
    ("L1Loss", {}), ("MSELoss", {"reduction": "sum"}),
    ("CrossEntropyLoss", {"label_smoothing": 0.1}),
    ("NLLLoss", {"ignore_index": 3}), ("CTCLoss", {"blank": 1, "zero_infinity": True}),
    ("PoissonNLLLoss", {"full": True}), ("GaussianNLLLoss", {"eps": 0.1}),
    ("KLDivLoss", {"log_target": True}), ("BCELoss", {}), ("BCEWithLogitsLoss", {}),
    ("MarginRankingLoss", {"margin": 0.5}), ("HingeEmbeddingLoss", {}),
    ("MultiLabelMarginLoss", {}), ("HuberLoss", {"delta": 0.5}), ("SmoothL1Loss", {"beta": 2.0}),
    ("SoftMarginLoss", {}), ("MultiLabelSoftMarginLoss", {}), ("CosineEmbeddingLoss", {}),
    ("MultiMarginLoss", {"p": 2}), ("TripletMarginLoss", {"swap": True}),
    ("TripletMarginWithDistanceLoss", {}),
]


@pytest.mark.parametrize("name,options", MODULE_FORMS, ids=[m[0] for m in MODULE_FORMS])
def test_module_repr_attributes_and_state_dict(name, options):
    ours, theirs = getattr(reftorch.nn, name)(**options), getattr(torch.nn, name)(**options)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for attr in ("reduction", "ignore_index", "label_smoothing", "blank", "zero_infinity",
                 "log_input", "full", "eps", "log_target", "margin", "delta", "beta", "p",
                 "swap"):
        assert getattr(ours, attr, None) == getattr(theirs, attr, None), attr
    assert isinstance(ours, reftorch.nn.Module)


@pytest.mark.parametrize("name", ["CrossEntropyLoss", "NLLLoss", "BCELoss", "MultiMarginLoss",
                                  "MultiLabelSoftMarginLoss", "BCEWithLogitsLoss"])
def test_weight_buffers_in_state_dict(name):
    w = np.array([1.0, 2.0, 0.5])
    ours = getattr(reftorch.nn, name)(weight=reftorch.tensor(w))
    theirs = getattr(torch.nn, name)(weight=torch.tensor(w))
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["weight"]
    assert [n for n, _ in ours.named_buffers()] == ["weight"]
    np.testing.assert_array_equal(ours.weight.numpy(), w)
    if name == "BCEWithLogitsLoss":
        ours = reftorch.nn.BCEWithLogitsLoss(pos_weight=reftorch.tensor(w))
        theirs = torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor(w))
        assert list(ours.state_dict()) == list(theirs.state_dict()) == ["pos_weight"]


LEGACY = [(None, None), (True, None), (False, None), (None, True), (None, False),
          (True, True), (False, True), (True, False), (False, False)]


@pytest.mark.parametrize("size_average,reduce", LEGACY)
def test_legacy_size_average_reduce(size_average, reduce):
    with warnings.catch_warnings(record=True) as ours_w:
        warnings.simplefilter("always")
        ours = reftorch.nn.MSELoss(size_average=size_average, reduce=reduce)
    with warnings.catch_warnings(record=True) as theirs_w:
        warnings.simplefilter("always")
        theirs = torch.nn.MSELoss(size_average=size_average, reduce=reduce)
    assert ours.reduction == theirs.reduction
    assert [str(w.message) for w in ours_w] == [str(w.message) for w in theirs_w]
    legacy = {"size_average": size_average, "reduce": reduce}
    for name, args in [("mse_loss", [normal(3, 4), normal(3, 4)]),
                       ("l1_loss", [normal(3, 4), normal(3, 4)]),
                       ("nll_loss", [normal(3, 4), classes(4, 3)]),
                       ("cross_entropy", [normal(3, 4), classes(4, 3)]),
                       ("binary_cross_entropy", [probs(3, 4), probs(3, 4)]),
                       ("kl_div", [normal(3, 4), probs(3, 4)]),
                       ("poisson_nll_loss", [normal(3, 4), positive(3, 4)]),
                       ("soft_margin_loss", [normal(3, 4), signs(3, 4)]),
                       ("multilabel_soft_margin_loss", [normal(3, 4), probs(3, 4)]),
                       ("margin_ranking_loss", [normal(4), normal(4), signs(4)]),
                       ("triplet_margin_loss", [normal(2, 3), normal(2, 3), normal(2, 3)])]:
        check(functional(name, **legacy), args, node=False)


def test_deprecation_warnings_like_torch():
    for module_ in (reftorch, torch):
        with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
            module_.nn.functional.mse_loss(module_.ones(2), module_.ones(2), size_average=False)
        with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):
            module_.nn.functional.kl_div(module_.zeros(2), module_.ones(2))
        with pytest.warns(UserWarning, match="Using a target size"):
            module_.nn.functional.mse_loss(module_.ones(2, 3), module_.ones(3))
        with pytest.warns(FutureWarning, match="NLLLoss2d"):
            module_.nn.NLLLoss2d()


def test_torch_level_names():
    for name in ("ctc_loss", "binary_cross_entropy_with_logits", "cosine_embedding_loss",
                 "hinge_embedding_loss", "kl_div", "margin_ranking_loss", "poisson_nll_loss",
                 "triplet_margin_loss"):
        assert hasattr(reftorch, name), name
    for name in ("nll_loss", "mse_loss", "cross_entropy", "l1_loss", "binary_cross_entropy"):
        assert hasattr(reftorch, name) == hasattr(torch, name), name
    x, t = normal(3, 4), probs(3, 4)
    check(lambda m, a, b: m.kl_div(a, b, 2, log_target=False), [x, t], node=False)
    check(lambda m, a, b: m.binary_cross_entropy_with_logits(a, b, None, None, 0), [x, t])
    check(lambda m, a, b: m.poisson_nll_loss(a, b, True, True, 1e-8, 1), [x, t], node=False)
    check(lambda m, a, b, c: m.triplet_margin_loss(a, b, c, 1.0, 2, 1e-6, True, 2),
          [normal(3, 4), normal(3, 4), normal(3, 4)], node=False)
    check(lambda m, a, b, c: m.margin_ranking_loss(a, b, c, 0.1, 0),
          [normal(4), normal(4), signs(4)], node=False)
    check(lambda m, a, b: m.hinge_embedding_loss(a, b, 1.0, 1), [x, signs(3, 4)], node=False)
    check(lambda m, a, b, c: m.cosine_embedding_loss(a, b, c, 0.0, 2),
          [normal(3, 4), normal(3, 4), signs(3)], node=False)


def test_double_backward_matches_torch():
    """The formulas are differentiable: grad of a gradient agrees with torch."""
    for call, args in [(functional("mse_loss"), [normal(3, 4), normal(3, 4)]),
                       (functional("binary_cross_entropy_with_logits"),
                        [normal(3, 4), probs(3, 4)]),
                       (functional("smooth_l1_loss", beta=0.5), [normal(3, 4), normal(3, 4)]),
                       (functional("soft_margin_loss"), [normal(3, 4), signs(3, 4)]),
                       (functional("binary_cross_entropy"), [probs(3, 4), probs(3, 4)])]:
        results = []
        for m in (reftorch, torch):
            built = build(args, m, "float64")
            leaves = [a for a in built if getattr(a, "requires_grad", False)]
            (g,) = m.autograd.grad(call(m, *built), leaves[:1], create_graph=True)
            results.append(m.autograd.grad((g * g).sum(), leaves))
        for g, e in zip(*results):
            assert compare_values(g, e) is None


# --- errors -----------------------------------------------------------------------------------

ERROR_CASES = [
    ("nll-float-target", functional("nll_loss"), [normal(4, 5), normal(4)]),
    ("nll-int32-target", functional("nll_loss"), [normal(4, 5), classes(5, 4, dtype="int32")]),
    ("nll-out-of-bounds", functional("nll_loss"), [normal(4, 5), Arg([1, 0, 5, 2])]),
    ("nll-negative", functional("nll_loss", reduction="none"), [normal(4, 5), Arg([1, -1, 0, 2])]),
    ("nll-batch-mismatch", functional("nll_loss"), [normal(4, 5), classes(5, 3)]),
    ("nll-0d-input", functional("nll_loss"), [normal(), Arg(0)]),
    ("nll-weight-size", lambda m, x, t, w: m.nn.functional.nll_loss(x, t, w),
     [normal(4, 5), classes(5, 4), positive(3)]),
    ("nll-kdim-target", functional("nll_loss"), [normal(2, 3, 4), classes(3, 2, 5)]),
    ("nll-4d-target", functional("nll_loss"), [normal(2, 3, 4, 4), classes(3, 2, 5, 4)]),
    ("nll-bad-reduction", functional("nll_loss", reduction="bad"), [normal(4, 5), classes(5, 4)]),
    ("nll-integer-input", functional("nll_loss"), [Arg(np.ones((4, 5)), dtype="int64"),
                                                   classes(5, 4)]),
    ("nll-weight-grad", lambda m, x, t, w: m.nn.functional.nll_loss(x, t, w),
     [normal(4, 5), classes(5, 4), positive(5, grad=True)]),
    ("ce-target-2d-float", functional("cross_entropy"), [normal(4, 5), probs(4, 4)]),
    ("ce-label-smoothing", functional("cross_entropy", label_smoothing=1.5),
     [normal(4, 5), classes(5, 4)]),
    ("ce-probs-ignore-index", functional("cross_entropy", ignore_index=1),
     [normal(4, 5), probs(4, 5)]),
    ("ce-integer-input", functional("cross_entropy"), [Arg(np.ones((4, 5)), dtype="int64"),
                                                       classes(5, 4)]),
    ("ce-out-of-bounds", functional("cross_entropy"), [normal(4, 5), Arg([0, 7, 1, 1])]),
    ("mse-bad-reduction", functional("mse_loss", reduction="bad"), [normal(3), normal(3)]),
    ("mse-integer", functional("mse_loss"), [classes(5, 3), classes(5, 3)]),
    ("mse-weight-size", lambda m, x, t, w: m.nn.functional.mse_loss(x, t, weight=w),
     [normal(3, 4), normal(3, 4), positive(4)]),
    ("l1-bad-reduction", functional("l1_loss", reduction="mean!"), [normal(3), normal(3)]),
    ("smooth-l1-negative-beta", functional("smooth_l1_loss", beta=-1.0), [normal(3), normal(3)]),
    ("huber-zero-delta", functional("huber_loss", delta=0.0), [normal(3), normal(3)]),
    ("bce-size", functional("binary_cross_entropy"), [probs(3, 4), probs(4)]),
    ("bce-range", functional("binary_cross_entropy"), [Arg([0.5, 1.5]), probs(2)]),
    ("bce-dtype", lambda m, x, t: m.nn.functional.binary_cross_entropy(x, t.float()),
     [probs(3), probs(3)]),
    ("bce-weight-grad", lambda m, x, t, w: m.nn.functional.binary_cross_entropy(x, t, w),
     [probs(3), probs(3), positive(3, grad=True)]),
    ("bce-logits-size", functional("binary_cross_entropy_with_logits"), [normal(3, 4), probs(4)]),
    ("bce-logits-pos-weight", lambda m, x, t, w: m.nn.functional.binary_cross_entropy_with_logits(
        x, t, pos_weight=w), [normal(3, 4), probs(3, 4), positive(3)]),
    ("soft-margin-target-grad", functional("soft_margin_loss"), [normal(3), normal(3)]),
    ("multi-margin-p3", functional("multi_margin_loss", p=3), [normal(3, 4), classes(4, 3)]),
    ("multi-margin-range", functional("multi_margin_loss"), [normal(3, 4), Arg([0, 4, 1])]),
    ("multi-margin-target-dtype", functional("multi_margin_loss"), [normal(3, 4), normal(3)]),
    ("multi-margin-3d", functional("multi_margin_loss"), [normal(2, 3, 4), classes(3, 2)]),
    ("multi-margin-weight-2d", lambda m, x, t, w: m.nn.functional.multi_margin_loss(
        x, t, weight=w), [normal(3, 4), classes(4, 3), positive(4, 1)]),
    ("multi-margin-weight-size", lambda m, x, t, w: m.nn.functional.multi_margin_loss(
        x, t, weight=w), [normal(3, 4), classes(4, 3), positive(3)]),
    ("multilabel-margin-range", functional("multilabel_margin_loss"),
     [normal(2, 3), Arg([[3, -1, 0], [0, 1, 2]])]),
    ("multilabel-margin-shape", functional("multilabel_margin_loss"),
     [normal(2, 3), Arg([[0, -1], [0, 1]])]),
    ("multilabel-margin-dtype", functional("multilabel_margin_loss"),
     [normal(2, 3), classes(3, 2, 3, dtype="int32")]),
    ("multilabel-soft-margin-reduction", functional("multilabel_soft_margin_loss",
                                                    reduction="x"), [normal(2, 3), probs(2, 3)]),
    ("kl-div-integral", functional("kl_div", reduction="sum"),
     [classes(3, 4, dtype="int64"), classes(3, 4, dtype="int64")]),
    ("poisson-reduction", functional("poisson_nll_loss", reduction="avg"),
     [normal(3), positive(3)]),
    ("gaussian-negative-var", functional("gaussian_nll_loss"),
     [normal(3, 4), normal(3, 4), Arg(-np.ones((3, 4)))]),
    ("gaussian-var-size", functional("gaussian_nll_loss"),
     [normal(3, 4), normal(3, 4), positive(2)]),
    ("gaussian-reduction", functional("gaussian_nll_loss", reduction="avg"),
     [normal(3, 4), normal(3, 4), positive(3, 4)]),
    ("margin-ranking-dims", functional("margin_ranking_loss"), [normal(3, 4), normal(3, 4),
                                                                signs(3)]),
    ("cosine-target-2d", functional("cosine_embedding_loss"), [normal(3, 4), normal(3, 4),
                                                               signs(3, 4)]),
    ("cosine-input-1d", functional("cosine_embedding_loss"), [normal(4), normal(4), signs(3)]),
    ("cosine-input-2d-0d-target", functional("cosine_embedding_loss"),
     [normal(3, 4), normal(3, 4), Arg(1.0)]),
    ("triplet-dims", functional("triplet_margin_loss"), [normal(3, 4), normal(3, 4), normal(4)]),
    ("triplet-margin", functional("triplet_margin_loss", margin=0.0),
     [normal(3, 4), normal(3, 4), normal(3, 4)]),
    ("triplet-distance-reduction", functional("triplet_margin_with_distance_loss",
                                              reduction="avg"),
     [normal(3, 4), normal(3, 4), normal(3, 4)]),
    ("triplet-distance-margin", functional("triplet_margin_with_distance_loss", margin=-1.0),
     [normal(3, 4), normal(3, 4), normal(3, 4)]),
    ("triplet-distance-dims", functional("triplet_margin_with_distance_loss"),
     [normal(3, 4), normal(3, 4), normal(4)]),
    ("module-bad-reduction", module("L1Loss", reduction="avg"), [normal(3), normal(3)]),
    ("module-multimargin-p", lambda m: m.nn.MultiMarginLoss(p=3), []),
    ("module-triplet-margin", lambda m: m.nn.TripletMarginLoss(margin=0), []),
    ("module-triplet-distance-margin", lambda m: m.nn.TripletMarginWithDistanceLoss(margin=0),
     []),
]


@pytest.mark.parametrize("label,call,args", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_errors_like_torch(label, call, args):
    raises_like_torch(call, args)


def test_error_messages_like_torch():
    for module_, expected in ((reftorch, None), (torch, None)):
        with pytest.raises(IndexError, match="Target 5 is out of bounds."):
            module_.nn.functional.nll_loss(module_.zeros(2, 5), module_.tensor([5, 0]))
        with pytest.raises(ValueError, match=r"Using a target size .* that is different to the "
                                             r"input size"):
            module_.nn.functional.binary_cross_entropy(module_.rand(2, 3), module_.rand(3))
        with pytest.raises(RuntimeError, match="expected target dtype to be Long or Byte"):
            module_.nn.functional.nll_loss(module_.zeros(2, 5), module_.zeros(2))
        with pytest.raises(ValueError, match="bad is not a valid value for reduction"):
            module_.nn.functional.mse_loss(module_.zeros(2), module_.zeros(2), reduction="bad")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("target_grad", [False, True])
def test_mse_loss_gradients_are_pytorchs_bit_for_bit(reduction, target_grad):
    """2 (x - t) g with the 2 applied to the gradient first gives PyTorch's bits; a target
    that needs no gradient gets none."""
    rng = np.random.default_rng(12)
    x, t = rng.standard_normal((50, 7)), rng.standard_normal((50, 7))
    grads = []
    for m in (reftorch, torch):
        a = m.tensor(x, dtype=m.float32, requires_grad=True)
        b = m.tensor(t, dtype=m.float32, requires_grad=target_grad)
        loss = m.nn.functional.mse_loss(a, b, reduction=reduction)
        (loss.sum() if reduction == "none" else loss).backward()
        grads.append((a.grad.numpy(), None if b.grad is None else b.grad.numpy()))
    (ours_a, ours_b), (theirs_a, theirs_b) = grads
    np.testing.assert_array_equal(ours_a, theirs_a)
    assert (ours_b is None) == (theirs_b is None) == (not target_grad)
    if target_grad:
        np.testing.assert_array_equal(ours_b, theirs_b)
