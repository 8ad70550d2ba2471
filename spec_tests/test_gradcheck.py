"""Finite-difference checks of every differentiable op's derivative (reftorch's gradcheck).

test_gradients.py compares reftorch's gradients with torch's; this file checks them against
the function itself: a new op whose derivative row is wrong (or missing) fails here even if
no torch comparison exists. Only small float64 samples are used, to keep it quick.
"""
from __future__ import annotations

import zlib

import numpy as np
import pytest

import reftorch
from reftorch.autograd import gradcheck, gradgradcheck
from reftorch.autograd.gradcheck import GradcheckError
from .opdb import differentiable_ops
from .opdb.core import build_sample, grad_leaves

torch = pytest.importorskip("torch")

MAX_ELEMENTS = 30       # total input elements of one sample (finite differences are O(n^2))
MAX_SAMPLES = 3         # samples checked per op

GRADCHECK_OPS = [e for e in differentiable_ops() if e.gradcheck and "float64" in e.dtypes]


def _small_samples(entry, dtype_name="float64"):
    """(label, args, kwargs, leaves) of up to MAX_SAMPLES samples that run and are small."""
    rng = np.random.default_rng(zlib.crc32(f"gradcheck {entry.name}".encode()))
    chosen = []
    for sample in entry.samples(dtype_name, rng):
        args, kwargs = build_sample(sample, reftorch, requires_grad=True)
        leaves = grad_leaves(args, kwargs)
        if not leaves or sum(x.numel() for x in leaves) > MAX_ELEMENTS:
            continue
        torch_args, torch_kwargs = build_sample(sample, torch, requires_grad=True)
        try:
            entry.call(torch, *torch_args, **torch_kwargs)
        except Exception:  # noqa: BLE001 - an error sample: nothing to differentiate
            continue
        if not _finite(entry.call(reftorch, *args, **kwargs)):
            continue     # outside the op's domain (pow of a negative base): no derivative
        chosen.append((sample.label, args, kwargs, leaves))
        if len(chosen) == MAX_SAMPLES:
            break
    return chosen


def _finite(result):
    outputs = result if isinstance(result, (tuple, list)) else (result,)
    for out in outputs:
        if hasattr(out, "_shape") and out.dtype.is_floating_point and \
                not np.isfinite(out.detach()._host_array()).all():
            return False
    return True


@pytest.mark.parametrize("entry", GRADCHECK_OPS, ids=[e.name for e in GRADCHECK_OPS])
def test_gradcheck_op(entry):
    samples = _small_samples(entry)
    if not samples:
        pytest.skip(f"{entry.name}: no small float64 sample that torch can run")
    failures = []
    for label, args, kwargs, leaves in samples:
        def func(*_inputs, args=args, kwargs=kwargs):
            # The leaves are perturbed in place, so calling on the same objects suffices.
            return entry.call(reftorch, *args, **kwargs)
        try:
            gradcheck(func, tuple(leaves), eps=1e-6, atol=1e-5, rtol=1e-3)
        except Exception as exc:  # noqa: BLE001 - collect every failing sample
            failures.append(f"[{label}] {type(exc).__name__}: {str(exc)[:400]}")
    assert not failures, "\n".join(failures)


# --- gradgradcheck on a representative set ----------------------------------------------------

def _x(values):
    return reftorch.tensor(values, dtype=reftorch.float64, requires_grad=True)


SECOND_ORDER = {
    "add": lambda a, b: reftorch.add(a, b, alpha=2),
    "sub": lambda a, b: reftorch.sub(a, b),
    "mul": lambda a, b: a * b * a,
    "div": lambda a, b: a / b,
    "pow": lambda a, b: reftorch.pow(a, b),
    "exp": lambda a, b: reftorch.exp(a) * b,
    "log": lambda a, b: reftorch.log(a * a + 1) * b,
    "sin": lambda a, b: reftorch.sin(a) * b,
    "tanh": lambda a, b: reftorch.tanh(a) * b,
    "sigmoid": lambda a, b: reftorch.sigmoid(a) * b,
    "sqrt": lambda a, b: reftorch.sqrt(a * a + 1) * b,
    "sum": lambda a, b: reftorch.sum(a * a * b, 0),
    "mean": lambda a, b: reftorch.mean(a * b * a),
}
_PRESENT = {name: fn for name, fn in SECOND_ORDER.items() if hasattr(reftorch, name)}


@pytest.mark.parametrize("name", sorted(_PRESENT))
def test_gradgradcheck_representative(name):
    a = _x([[0.7, 1.3, 2.1], [1.1, 0.4, 1.9]])
    b = _x([[1.2, 0.6, 1.5]])
    assert gradgradcheck(_PRESENT[name], (a, b))


def test_gradgradcheck_covers_the_basic_arithmetic():
    """The representative set must not silently shrink to nothing."""
    assert {"add", "mul", "div"} <= set(_PRESENT)


# --- gradcheck itself ------------------------------------------------------------------------

def test_gradcheck_reports_mismatch_like_torch():
    def wrong(module):
        return lambda x: x * 2 + x.detach()
    results = []
    for module, check in ((reftorch, gradcheck), (torch, torch.autograd.gradcheck)):
        x = module.tensor([1.0, 2.0], dtype=module.float64, requires_grad=True)
        with pytest.raises(RuntimeError) as info:
            check(wrong(module), (x,))
        results.append(str(info.value).split("\n")[0])
        assert check(wrong(module), (x,), raise_exception=False) is False
    assert results[0] == results[1] == \
        "Jacobian mismatch for output 0 with respect to input 0,"
    with pytest.raises(GradcheckError):
        gradcheck(wrong(reftorch), (_x([1.0]),))


def test_gradcheck_without_inputs_requiring_grad_raises_value_error():
    for module, check in ((reftorch, gradcheck), (torch, torch.autograd.gradcheck)):
        x = module.tensor([1.0], dtype=module.float64)
        with pytest.raises(ValueError):
            check(lambda t: t * 2, (x,))


def test_gradcheck_detects_output_that_should_depend_on_input():
    for module, check in ((reftorch, gradcheck), (torch, torch.autograd.gradcheck)):
        x = module.tensor([1.0, 3.0], dtype=module.float64, requires_grad=True)
        assert check(lambda t: t.detach() * 2, (x,), raise_exception=False) is False


def test_gradcheck_custom_function_with_wrong_backward():
    class Wrong(reftorch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * x          # should be 2x

    assert not gradcheck(Wrong.apply, (_x([1.0, 2.0]),), raise_exception=False)


# --- every declared op has a derivative row --------------------------------------------------

def _declared_ops():
    from reftorch._dispatch import all_ops
    families = ("pointwise", "reduction", "sorting", "indexing", "joining", "other", "nn")
    return sorted(name for name, op in all_ops().items()
                  if op.family in families and not name.startswith("_"))


@pytest.mark.parametrize("name", _declared_ops())
def test_declared_op_has_derivative_row(name):
    from reftorch.autograd.derivatives import row_for
    assert row_for(name) is not None, (
        f"op '{name}' has no derivative row: add one to its section in autograd/derivatives/ "
        f"or mark it with not_differentiable(...)")
