"""Convolution, transposed convolution, fold/unfold and padding layers against real PyTorch.

Each layer is built in both libraries, torch's parameters are copied into reftorch's, and the
output, the input gradient and every parameter gradient are compared (float64 and float32),
for every option: stride, padding (ints, 'same', 'valid'), dilation, groups, bias,
padding_mode, output_padding and output_size. Seeded default initialisation must equal
torch's bit for bit; reprs must match; bad input must raise torch's exception type.
"""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from .oracle import compare, compare_values

torch = pytest.importorskip("torch")

TOL = {"float64": (1e-9, 1e-9), "float32": (2e-4, 2e-5)}


def _close(got, expected, dtype_name):
    rtol, atol = TOL[dtype_name]
    got = got.detach()._host_array() if hasattr(got, "_host_array") else got
    expected = expected.detach().numpy()
    assert got.shape == expected.shape, (got.shape, expected.shape)
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)


def _copy_params(ours, theirs):
    state = {k: reftorch.from_numpy(v.detach().numpy().copy()) for k, v in
             theirs.state_dict().items()}
    ours.load_state_dict(state)


def _check_module(name, args, kwargs, in_shape, dtype_name="float64", forward_kw=None,
                  seed=0):
    """Build `name` in both libraries with the same parameters, run forward and backward
    on the same input and cotangent, and compare everything."""
    forward_kw = forward_kw or {}
    np_dtype = np.float64 if dtype_name == "float64" else np.float32
    theirs = getattr(torch.nn, name)(*args, **kwargs).to(getattr(torch, dtype_name))
    ours = getattr(reftorch.nn, name)(*args, **kwargs).to(getattr(reftorch, dtype_name))
    _copy_params(ours, theirs)
    rng = np.random.default_rng(seed)
    x_np = rng.standard_normal(in_shape).astype(np_dtype)
    xt = torch.from_numpy(x_np.copy()).requires_grad_()
    xr = reftorch.from_numpy(x_np.copy()).requires_grad_()
    yt = theirs(xt, **forward_kw)
    yr = ours(xr, **forward_kw)
    _close(yr, yt, dtype_name)
    cot = rng.standard_normal(tuple(yt.shape)).astype(np_dtype)
    yt.backward(torch.from_numpy(cot.copy()))
    yr.backward(reftorch.from_numpy(cot.copy()))
    _close(xr.grad, xt.grad, dtype_name)
    for (pname, pt), (qname, pr) in zip(theirs.named_parameters(), ours.named_parameters()):
        assert pname == qname
        _close(pr.grad, pt.grad, dtype_name)
    assert type(yr.grad_fn).__name__ == type(yt.grad_fn).__name__
    return ours, theirs


CONV_CASES = [
    ("Conv1d", (3, 4, 3), {}, (2, 3, 9)),
    ("Conv1d", (4, 6, 2), dict(stride=2, padding=1, dilation=2, groups=2), (2, 4, 11)),
    ("Conv1d", (3, 4, 4), dict(padding="same", padding_mode="reflect"), (2, 3, 8)),
    ("Conv1d", (3, 4, 3), dict(padding=2, padding_mode="circular", bias=False), (3, 7)),
    ("Conv1d", (2, 2, 3), dict(padding="valid", dilation=3), (1, 2, 10)),
    ("Conv2d", (3, 4, 3), {}, (2, 3, 7, 5)),
    ("Conv2d", (4, 6, (2, 3)), dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2,
                                    bias=False), (2, 4, 7, 6)),
    ("Conv2d", (3, 4, 3), dict(padding="same", padding_mode="replicate"), (2, 3, 6, 5)),
    ("Conv2d", (3, 4, (2, 4)), dict(padding="same", dilation=(3, 1)), (2, 3, 7, 6)),
    ("Conv2d", (3, 4, 3), dict(padding=(1, 2), padding_mode="reflect", stride=2), (2, 3, 7, 6)),
    ("Conv2d", (3, 4, 3), dict(padding=(2, 1), padding_mode="circular"), (3, 5, 4)),
    ("Conv2d", (4, 8, 3), dict(groups=4, stride=3, padding=1), (2, 4, 8, 9)),
    ("Conv2d", (2, 3, (3, 1)), dict(padding="same", padding_mode="zeros"), (1, 2, 4, 3)),
    ("Conv3d", (2, 4, 2), dict(stride=(1, 2, 1), padding=1), (2, 2, 4, 5, 3)),
    ("Conv3d", (4, 4, (1, 2, 3)), dict(groups=4, dilation=(2, 1, 1), padding=1,
                                       padding_mode="circular"), (1, 4, 3, 4, 5)),
    ("Conv3d", (2, 3, 2), dict(padding="same", padding_mode="reflect"), (2, 3, 4, 3)),
]

TRANSPOSED_CASES = [
    ("ConvTranspose1d", (3, 4, 3), dict(stride=2, output_padding=1), (2, 3, 5), {}),
    ("ConvTranspose1d", (4, 2, 2), dict(groups=2, padding=1, dilation=3), (4, 6), {}),
    ("ConvTranspose2d", (4, 6, (3, 2)), dict(stride=(2, 3), padding=(1, 0),
                                             output_padding=(1, 2), groups=2,
                                             dilation=(1, 2)), (2, 4, 3, 4), {}),
    ("ConvTranspose2d", (3, 2, 3), dict(dilation=2, output_padding=1, bias=False),
     (2, 3, 4, 3), {}),
    ("ConvTranspose2d", (3, 2, 3), dict(stride=2, padding=1), (2, 3, 4, 3),
     {"output_size": (8, 6)}),
    ("ConvTranspose2d", (3, 2, 3), dict(stride=3), (3, 4, 3),
     {"output_size": (2, 13, 10)}),
    ("ConvTranspose3d", (2, 4, 2), dict(stride=2), (2, 2, 3, 2, 3), {}),
    ("ConvTranspose3d", (2, 2, (1, 2, 3)), dict(stride=(1, 2, 2), padding=(0, 1, 1),
                                                output_padding=(0, 1, 0)), (1, 2, 2, 3, 3), {}),
]


@pytest.mark.parametrize("dtype_name", ["float64", "float32"])
@pytest.mark.parametrize("case", CONV_CASES, ids=[f"{c[0]}-{i}" for i, c in
                                                   enumerate(CONV_CASES)])
def test_conv_module_matches_torch(case, dtype_name):
    name, args, kwargs, in_shape = case
    _check_module(name, args, kwargs, in_shape, dtype_name)


@pytest.mark.parametrize("dtype_name", ["float64", "float32"])
@pytest.mark.parametrize("case", TRANSPOSED_CASES, ids=[f"{c[0]}-{i}" for i, c in
                                                         enumerate(TRANSPOSED_CASES)])
def test_conv_transpose_module_matches_torch(case, dtype_name):
    name, args, kwargs, in_shape, forward_kw = case
    _check_module(name, args, kwargs, in_shape, dtype_name, forward_kw)


INIT_CASES = [("Conv1d", (3, 4, 3), {}), ("Conv2d", (4, 6, (2, 3)), {"groups": 2}),
              ("Conv3d", (2, 3, 2), {"bias": False}), ("ConvTranspose1d", (3, 4, 3), {}),
              ("ConvTranspose2d", (4, 6, 3), {"groups": 2}), ("ConvTranspose3d", (2, 3, 2), {})]


@pytest.mark.parametrize("case", INIT_CASES, ids=[c[0] for c in INIT_CASES])
def test_default_init_equals_torch(case):
    name, args, kwargs = case
    torch.manual_seed(7)
    theirs = getattr(torch.nn, name)(*args, **kwargs)
    reftorch.manual_seed(7)
    ours = getattr(reftorch.nn, name)(*args, **kwargs)
    expected = theirs.state_dict()
    got = ours.state_dict()
    assert list(got) == list(expected)
    for key in expected:
        np.testing.assert_array_equal(got[key]._host_array(), expected[key].numpy())
        assert str(got[key].dtype) == str(expected[key].dtype)


REPR_CASES = [
    ("Conv2d", (3, 4, 3), {}),
    ("Conv2d", (4, 6, (2, 3)), dict(stride=2, padding=1, dilation=2, groups=2, bias=False,
                                    padding_mode="reflect")),
    ("Conv1d", (3, 4, 4), dict(padding="same")),
    ("Conv3d", (3, 4, 3), dict(padding="valid", padding_mode="circular")),
    ("ConvTranspose2d", (3, 4, 3), dict(stride=2, output_padding=1)),
    ("ConvTranspose1d", (4, 4, 3), dict(groups=2, dilation=2, padding=1)),
    ("ConvTranspose2d", (2, 2, 3), dict(padding="same")),
    ("Unfold", (3,), dict(dilation=2, padding=1, stride=2)),
    ("Fold", ((4, 5), 2), {}),
    ("ReflectionPad1d", (2,), {}), ("ReflectionPad2d", ((1, 2, 0, 1),), {}),
    ("ReflectionPad3d", (1,), {}), ("ReplicationPad1d", ((1, 2),), {}),
    ("ReplicationPad2d", (2,), {}), ("ReplicationPad3d", (1,), {}),
    ("ZeroPad1d", (2,), {}), ("ZeroPad2d", ((1, 2, 3, 4),), {}), ("ZeroPad3d", (1,), {}),
    ("ConstantPad1d", (2, 3.5), {}), ("ConstantPad2d", ((1, 0, 2, 1), -1), {}),
    ("ConstantPad3d", (1, 0.0), {}), ("CircularPad1d", (1,), {}),
    ("CircularPad2d", ((1, 2, 1, 0),), {}), ("CircularPad3d", (1,), {}),
]


@pytest.mark.parametrize("case", REPR_CASES, ids=[c[0] for c in REPR_CASES])
def test_repr_and_state_dict_keys_match_torch(case):
    name, args, kwargs = case
    theirs = getattr(torch.nn, name)(*args, **kwargs)
    ours = getattr(reftorch.nn, name)(*args, **kwargs)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())


PAD_MODULE_CASES = [
    ("ReflectionPad1d", (2,), (2, 3, 5)), ("ReflectionPad1d", ((3, -1),), (3, 5)),
    ("ReflectionPad2d", ((1, 2, 0, 3),), (2, 3, 4, 5)), ("ReflectionPad2d", (1,), (2, 3, 3)),
    ("ReflectionPad3d", ((1, 0, 2, 1, 1, 1),), (1, 2, 3, 4, 3)),
    ("ReplicationPad1d", ((3, 1),), (2, 3, 2)), ("ReplicationPad2d", ((2, -1, 1, 3),), (2, 4, 3)),
    ("ReplicationPad3d", (2,), (1, 2, 2, 3, 2)),
    ("ZeroPad1d", ((1, -2),), (2, 4)), ("ZeroPad2d", (2,), (1, 2, 3, 3)),
    ("ZeroPad3d", ((1, 0, 0, 2, -1, 1),), (2, 3, 2, 2)),
    ("ConstantPad1d", (2, 1.5), (3, 4)), ("ConstantPad2d", ((1, 2, -1, 0), -2.0), (2, 3, 3, 3)),
    ("ConstantPad3d", (1, 3.0), (1, 2, 2, 3)),
    ("CircularPad1d", ((2, 3),), (2, 3, 4)), ("CircularPad2d", ((1, 2, 2, -1),), (2, 3, 4)),
    ("CircularPad3d", ((1, 1, 0, 2, 2, 1),), (1, 2, 3, 3, 2)),
]


@pytest.mark.parametrize("case", PAD_MODULE_CASES, ids=[f"{c[0]}-{i}" for i, c in
                                                         enumerate(PAD_MODULE_CASES)])
def test_padding_module_matches_torch(case):
    name, args, in_shape = case
    _check_module(name, args, {}, in_shape)


FOLD_CASES = [
    ("Unfold", (3,), dict(dilation=2, padding=1, stride=2), (2, 3, 7, 6)),
    ("Unfold", ((2, 3),), dict(stride=(1, 2)), (3, 5, 7)),
    ("Unfold", (2,), {}, (0, 2, 3, 3)),
    ("Fold", ((4, 5), 2), {}, (2, 12, 12)),
    ("Fold", ((7, 6), (3, 2)), dict(dilation=(1, 2), padding=1, stride=2), (2, 12, 12)),
    ("Fold", ((3, 3), 2), dict(stride=1), (8, 4)),
]


@pytest.mark.parametrize("dtype_name", ["float64", "float32"])
@pytest.mark.parametrize("case", FOLD_CASES, ids=[f"{c[0]}-{i}" for i, c in
                                                   enumerate(FOLD_CASES)])
def test_fold_modules_match_torch(case, dtype_name):
    name, args, kwargs, in_shape = case
    _check_module(name, args, kwargs, in_shape, dtype_name)


# --- functional forms: node names, dtypes, double backward -----------------------------------

def _both(fn, *shapes, dtype_name="float64", requires_grad=True, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s) for s in shapes]
    results = []
    for module in (reftorch, torch):
        tensors = [module.from_numpy(a.copy()).to(getattr(module, dtype_name)) for a in arrays]
        if requires_grad:
            tensors = [t.requires_grad_() for t in tensors]
        results.append(fn(module, *tensors))
    return results


NODE_CASES = {
    "conv2d": (lambda m, x, w: m.nn.functional.conv2d(x, w), (2, 3, 5, 5), (4, 3, 3, 3)),
    "conv1d unbatched": (lambda m, x, w: m.conv1d(x, w), (3, 5), (4, 3, 2)),
    "conv same even": (lambda m, x, w: m.conv2d(x, w, padding="same"), (1, 3, 5, 5),
                       (2, 3, 2, 2)),
    "conv_transpose3d": (lambda m, x, w: m.conv_transpose3d(x, w, stride=2), (1, 2, 2, 2, 2),
                         (2, 3, 2, 2, 2)),
    "unfold": (lambda m, x: m.nn.functional.unfold(x, 2), (2, 3, 4, 4)),
    "fold": (lambda m, x: m.nn.functional.fold(x, (3, 3), 2), (2, 8, 4)),
    "pad constant": (lambda m, x: m.nn.functional.pad(x, (1, -1, 2, 0)), (2, 3, 4)),
    "pad reflect 1d": (lambda m, x: m.nn.functional.pad(x, (1, 2), "reflect"), (2, 3, 4)),
    "pad reflect 2d": (lambda m, x: m.nn.functional.pad(x, (1, 2, 1, 1), "reflect"), (3, 4, 4)),
    "pad reflect 3d": (lambda m, x: m.nn.functional.pad(x, (1,) * 6, "reflect"), (1, 3, 3, 3)),
    "pad replicate 1d": (lambda m, x: m.nn.functional.pad(x, (1, 2), "replicate"), (3, 4)),
    "pad replicate 2d": (lambda m, x: m.nn.functional.pad(x, (1, 2, 0, 3), "replicate"),
                         (1, 2, 3, 4)),
    "pad replicate 3d": (lambda m, x: m.nn.functional.pad(x, (1,) * 6, "replicate"),
                         (1, 2, 2, 3, 3)),
    "pad circular": (lambda m, x: m.nn.functional.pad(x, (1, 2, 2, 1), "circular"), (2, 3, 4)),
}


@pytest.mark.parametrize("name", sorted(NODE_CASES))
def test_functional_values_grads_and_node_names(name):
    fn, *shapes = NODE_CASES[name]
    (ours, theirs) = _both(fn, *shapes)
    assert type(ours.grad_fn).__name__ == type(theirs.grad_fn).__name__
    assert compare_values(ours.detach(), theirs.detach()) is None
    grads = []
    for module, out in ((reftorch, ours), (torch, theirs)):
        cot = module.from_numpy(np.linspace(-1, 1, out.numel()).reshape(tuple(out.shape)))
        leaves = [n.variable for n in _leaves(out.grad_fn)]
        grads.append(module.autograd.grad(out, leaves, cot))
    for g, e in zip(*grads):
        assert compare_values(g, e) is None


def _leaves(node, seen=None):
    """AccumulateGrad nodes reachable from `node`, in a stable order."""
    seen = set() if seen is None else seen
    found = []
    for nxt, _ in node.next_functions:
        if nxt is None or id(nxt) in seen:
            continue
        seen.add(id(nxt))
        if hasattr(nxt, "variable"):
            found.append(nxt)
        else:
            found += _leaves(nxt, seen)
    return found


def test_convolution_saved_attributes_like_torch():
    (ours, theirs) = _both(lambda m, x, w: m.conv2d(x, w, stride=2, padding=1, groups=1),
                           (1, 2, 5, 5), (3, 2, 3, 3))
    for attr in ("stride", "padding", "dilation", "transposed", "output_padding", "groups"):
        got, expected = getattr(ours.grad_fn, "_saved_" + attr), \
            getattr(theirs.grad_fn, "_saved_" + attr)
        assert (tuple(got) if isinstance(got, (list, tuple)) else got) == \
            (tuple(expected) if isinstance(expected, (list, tuple)) else expected)


DOUBLE_BACKWARD = {
    "conv2d": (lambda m, x, w, b: m.conv2d(x, w, b, stride=2, padding=1, dilation=(1, 2),
                                           groups=2), (2, 4, 5, 5), (4, 2, 2, 3), (4,)),
    "conv_transpose1d": (lambda m, x, w, b: m.conv_transpose1d(x, w, b, stride=2, padding=1,
                                                               output_padding=1, groups=2),
                         (2, 4, 4), (4, 1, 3), (2,)),
    "conv_transpose2d dilated": (lambda m, x, w, b: m.conv_transpose2d(
        x, w, b, dilation=2, output_padding=1), (1, 2, 3, 3), (2, 3, 2, 2), (3,)),
}


@pytest.mark.parametrize("name", sorted(DOUBLE_BACKWARD))
def test_convolution_double_backward_matches_torch(name):
    """Second derivatives: grad of a weighted sum of first gradients, compared with torch."""
    fn, *shapes = DOUBLE_BACKWARD[name]
    results = []
    for module in (reftorch, torch):
        rng = np.random.default_rng(3)
        leaves = [module.from_numpy(rng.standard_normal(s)).requires_grad_() for s in shapes]
        out = fn(module, *leaves)
        cot = module.from_numpy(rng.standard_normal(tuple(out.shape))).requires_grad_()
        first = module.autograd.grad(out, leaves, cot, create_graph=True)
        total = sum((g * module.from_numpy(rng.standard_normal(tuple(g.shape)))).sum()
                    for g in first)
        second = module.autograd.grad(total, leaves + [cot], allow_unused=True)
        results.append([module.zeros_like(x) if g is None else g
                        for x, g in zip(leaves + [cot], second)])
    for g, e in zip(*results):
        assert compare_values(g, e) is None


def test_gradgradcheck_convolution_and_pads():
    from reftorch.autograd import gradcheck, gradgradcheck
    rng = np.random.default_rng(0)

    def leaf(*shape):
        return reftorch.from_numpy(rng.standard_normal(shape)).requires_grad_()
    x, w, b = leaf(1, 2, 4, 3), leaf(2, 1, 2, 2), leaf(2)
    conv = lambda x, w, b: reftorch.conv2d(x, w, b, stride=(2, 1), padding=1, groups=2)  # noqa
    assert gradcheck(conv, (x, w, b))
    assert gradgradcheck(conv, (x, w, b))
    xt, wt = leaf(1, 2, 3, 2), leaf(2, 1, 2, 3)
    convt = lambda x, w: reftorch.conv_transpose2d(x, w, stride=2, output_padding=1)  # noqa
    assert gradcheck(convt, (xt, wt))
    assert gradgradcheck(convt, (xt, wt))
    p = leaf(1, 2, 3, 4)
    for mode in ("reflect", "replicate", "circular", "constant"):
        fn = lambda x, mode=mode: reftorch.nn.functional.pad(x, (2, 1, 1, 2), mode)  # noqa
        assert gradgradcheck(fn, (p,))
    u = leaf(1, 2, 4, 4)
    assert gradgradcheck(lambda x: reftorch.nn.functional.unfold(x, 2, stride=1), (u,))


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16", "int64", "complex64"])
def test_convolution_other_dtypes(dtype_name):
    rng = np.random.default_rng(1)
    x = rng.integers(-3, 4, (2, 4, 5, 6)).astype(np.float64)
    w = rng.integers(-3, 4, (4, 2, 3, 2)).astype(np.float64)
    tol = {"float16": 1e-2, "bfloat16": 5e-2}.get(dtype_name, 1e-6)
    cases = [lambda m, x, w: m.conv2d(x, w, groups=2, stride=(1, 2), padding=1),
             lambda m, x, w: m.conv_transpose2d(x, w, stride=2)]
    for case in cases:
        outs = []
        for module in (reftorch, torch):
            dt = getattr(module, dtype_name)
            outs.append(case(module, module.from_numpy(x.copy()).to(dt),
                             module.from_numpy(w.copy()).to(dt)))
        assert str(outs[0].dtype) == str(outs[1].dtype)
        got = outs[0].to(reftorch.complex128 if "complex" in dtype_name else reftorch.float64)
        exp = outs[1].to(torch.complex128 if "complex" in dtype_name else torch.float64)
        np.testing.assert_allclose(got._host_array(), exp.numpy(), rtol=tol, atol=tol)


def test_float32_stays_float32():
    x = reftorch.randn(2, 3, 6, 6)
    w = reftorch.randn(4, 3, 3, 3)
    assert reftorch.conv2d(x, w, padding=1).dtype == reftorch.float32
    assert reftorch.nn.functional.unfold(x, 2).dtype == reftorch.float32


def test_padding_same_warns_for_even_kernels():
    # PyTorch warns once per process (from C++), so only reftorch's warning is checked here.
    x = reftorch.zeros(1, 1, 5, 5)
    with pytest.warns(UserWarning, match="padding='same' with even kernel"):
        reftorch.conv2d(x, reftorch.zeros(1, 1, 2, 2), padding="same")


def test_pad_values_for_integers_and_bool():
    for dtype_name, value in (("int64", 2.7), ("bool", 2), ("int32", -1)):
        outs = [module.nn.functional.pad(module.arange(1, 4).to(getattr(module, dtype_name)),
                                         (1, 2), value=value) for module in (reftorch, torch)]
        assert compare_values(*outs) is None


# --- errors ------------------------------------------------------------------------------------

def _x(m, *shape, dtype="float32"):
    return m.zeros(*shape, dtype=getattr(m, dtype))


ERRORS = {
    "conv wrong rank": lambda m: m.nn.functional.conv2d(_x(m, 5, 5), _x(m, 4, 3, 3, 3)),
    "conv kernel too big": lambda m: m.conv2d(_x(m, 1, 3, 5, 5), _x(m, 4, 3, 6, 6)),
    "conv channels": lambda m: m.conv2d(_x(m, 1, 3, 5, 5), _x(m, 4, 2, 3, 3)),
    "conv groups channels": lambda m: m.conv2d(_x(m, 1, 3, 5, 5), _x(m, 3, 1, 3, 3), groups=2),
    "conv zero stride": lambda m: m.conv1d(_x(m, 1, 3, 5), _x(m, 4, 3, 3), stride=0),
    "conv negative padding": lambda m: m.conv1d(_x(m, 1, 3, 5), _x(m, 4, 3, 3), padding=-1),
    "conv same strided": lambda m: m.conv1d(_x(m, 1, 3, 5), _x(m, 4, 3, 3), padding="same",
                                            stride=2),
    "conv bad padding string": lambda m: m.conv1d(_x(m, 1, 3, 5), _x(m, 4, 3, 3), padding="x"),
    "conv bias size": lambda m: m.conv1d(_x(m, 1, 3, 5), _x(m, 4, 3, 3), _x(m, 3)),
    "conv dtype mismatch": lambda m: m.conv1d(_x(m, 1, 3, 5), _x(m, 4, 3, 3, dtype="float64")),
    "conv stride length": lambda m: m.conv2d(_x(m, 1, 3, 5, 5), _x(m, 4, 3, 3, 3),
                                             stride=(1, 1, 1)),
    "conv bool": lambda m: m.conv1d(_x(m, 1, 3, 5, dtype="bool"), _x(m, 4, 3, 3, dtype="bool")),
    "conv int32 transposed": lambda m: m.conv_transpose1d(_x(m, 1, 3, 5, dtype="int32"),
                                                          _x(m, 3, 3, 3, dtype="int32")),
    "conv int32 dilated": lambda m: m.conv1d(_x(m, 1, 3, 5, dtype="int32"),
                                             _x(m, 3, 3, 2, dtype="int32"), dilation=2),
    "conv_t output_padding": lambda m: m.conv_transpose2d(_x(m, 1, 3, 4, 4), _x(m, 3, 2, 3, 3),
                                                          output_padding=1),
    "conv_t channels": lambda m: m.conv_transpose2d(_x(m, 1, 3, 4, 4), _x(m, 4, 2, 3, 3)),
    "module padding_mode": lambda m: m.nn.Conv2d(3, 4, 3, padding_mode="foo"),
    "module groups in": lambda m: m.nn.Conv2d(3, 4, 3, groups=2),
    "module groups out": lambda m: m.nn.Conv2d(4, 3, 3, groups=2),
    "module groups zero": lambda m: m.nn.Conv1d(4, 4, 3, groups=0),
    "module same strided": lambda m: m.nn.Conv2d(4, 4, 3, padding="same", stride=2),
    "module bad padding string": lambda m: m.nn.Conv2d(4, 4, 3, padding="sam"),
    "module transposed reflect": lambda m: m.nn.ConvTranspose2d(4, 4, 3, padding_mode="reflect"),
    "module transposed same forward": lambda m: m.nn.ConvTranspose2d(2, 2, 3, padding="same")(
        _x(m, 1, 2, 4, 4)),
    "module wrong channels": lambda m: m.nn.Conv2d(3, 4, 3)(_x(m, 1, 2, 5, 5)),
    "module reflect too big": lambda m: m.nn.Conv2d(3, 4, 3, padding=2,
                                                    padding_mode="reflect")(_x(m, 1, 3, 2, 2)),
    "output_size out of range": lambda m: m.nn.ConvTranspose2d(3, 2, 3, stride=2)(
        _x(m, 1, 3, 4, 4), output_size=(12, 9)),
    "output_size length": lambda m: m.nn.ConvTranspose2d(3, 2, 3)(_x(m, 1, 3, 4, 4),
                                                                  output_size=(6,)),
    "unfold rank": lambda m: m.nn.functional.unfold(_x(m, 1, 1, 3, 5, 5), 2),
    "unfold too big": lambda m: m.nn.functional.unfold(_x(m, 3, 5, 5), 6),
    "unfold zero stride": lambda m: m.nn.functional.unfold(_x(m, 3, 5, 5), 2, stride=0),
    "unfold kernel len": lambda m: m.nn.functional.unfold(_x(m, 3, 5, 5), (2, 2, 2)),
    "unfold int": lambda m: m.nn.functional.unfold(_x(m, 1, 3, 5, 5, dtype="int64"), 2),
    "fold blocks": lambda m: m.nn.functional.fold(_x(m, 2, 12, 17), (5, 5), 2),
    "fold divisible": lambda m: m.nn.functional.fold(_x(m, 2, 13, 16), (5, 5), 2),
    "fold rank": lambda m: m.nn.functional.fold(_x(m, 1, 2, 12, 16), (5, 5), 2),
    "pad odd length": lambda m: m.nn.functional.pad(_x(m, 2, 3), (1,)),
    "pad too long": lambda m: m.nn.functional.pad(_x(m, 2, 3), (1,) * 6),
    "pad crop negative": lambda m: m.nn.functional.pad(_x(m, 2, 3), (-2, -2)),
    "pad mode": lambda m: m.nn.functional.pad(_x(m, 2, 3), (1, 1), mode="foo"),
    "pad reflect too big": lambda m: m.nn.functional.pad(_x(m, 1, 2, 3), (3, 1), "reflect"),
    "pad reflect 2d too big": lambda m: m.nn.functional.pad(_x(m, 1, 2, 3, 3), (1, 1, 3, 0),
                                                            "reflect"),
    "pad reflect rank": lambda m: m.nn.functional.pad(_x(m, 1, 2, 3, 3), (1, 1), "reflect"),
    "pad replicate value": lambda m: m.nn.functional.pad(_x(m, 1, 2, 3), (1, 1), "replicate",
                                                         value=2),
    "pad circular twice": lambda m: m.nn.functional.pad(_x(m, 1, 2, 3), (4, 1), "circular"),
    "pad circular empty": lambda m: m.nn.functional.pad(_x(m, 1, 2, 3), (-3, -1), "circular"),
    "pad reflect empty dim": lambda m: m.nn.functional.pad(_x(m, 2, 0, 3), (1, 1), "reflect"),
    "pad reflect bool": lambda m: m.nn.functional.pad(_x(m, 2, 3, dtype="bool"), (1, 1),
                                                      "reflect"),
    "circular module rank": lambda m: m.nn.CircularPad2d(1)(_x(m, 2, 3)),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_bad_input_raises_like_torch(name):
    fn = ERRORS[name]
    with pytest.raises(Exception):      # the case must be an error in torch
        fn(torch)
    message = compare(lambda: fn(reftorch), lambda: fn(torch))
    assert message is None, message
