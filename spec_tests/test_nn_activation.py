"""torch.nn activations, dropout and distances against real PyTorch.

The op database (opdb/nn_activation.py) covers the functional forms' values and gradients for
every dtype; this file covers the modules (output, input and parameter gradients, repr,
state_dict), the random forms seed for seed (rrelu slopes, dropout masks, gumbel noise), the
torch-level and Tensor-method spellings, autograd node names, double backward and errors.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import reftorch
from reftorch.autograd import gradgradcheck

torch = pytest.importorskip("torch")


def _pair(array, dtype="float64", requires_grad=False):
    """The same values as a reftorch and a torch tensor."""
    array = np.asarray(array, dtype=np.float64)
    r = reftorch.tensor(array).to(getattr(reftorch, dtype))
    t = torch.tensor(array).to(getattr(torch, dtype))
    if requires_grad:
        r.requires_grad_(True)
        t.requires_grad_(True)
    return r, t


def _np(x):
    x = x.detach()
    if isinstance(x, reftorch.Tensor):
        return x.to(reftorch.float64).numpy() if x.dtype.is_floating_point else x.numpy()
    return x.double().numpy() if x.dtype.is_floating_point else x.numpy()


def _close(r, t, rtol=1e-6, atol=1e-6):
    assert tuple(r.shape) == tuple(t.shape)
    assert str(r.dtype) == str(t.dtype)
    np.testing.assert_allclose(_np(r), _np(t), rtol=rtol, atol=atol)


def _equal(r, t):
    assert tuple(r.shape) == tuple(t.shape)
    assert str(r.dtype) == str(t.dtype)
    np.testing.assert_array_equal(_np(r), _np(t))


def _values(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape) * 3


# --- modules: output, input grad, parameter grads, repr --------------------------------------

MODULES = [
    ("Threshold", (0.1, 20.0), {}), ("Threshold", (-1.0, 2.0), {"inplace": True}),
    ("ReLU", (), {}), ("ReLU", (), {"inplace": True}),
    ("RReLU", (), {}), ("RReLU", (0.1, 0.3), {"inplace": True}),
    ("Hardtanh", (), {}), ("Hardtanh", (-2.0, 3.0), {"inplace": True}),
    ("ReLU6", (), {}), ("ReLU6", (), {"inplace": True}),
    ("Sigmoid", (), {}), ("Tanh", (), {}), ("LogSigmoid", (), {}), ("Softsign", (), {}),
    ("Tanhshrink", (), {}),
    ("Hardsigmoid", (), {}), ("Hardsigmoid", (), {"inplace": True}),
    ("Hardswish", (), {}), ("Hardswish", (), {"inplace": True}),
    ("SiLU", (), {}), ("SiLU", (), {"inplace": True}),
    ("Mish", (), {}), ("Mish", (), {"inplace": True}),
    ("ELU", (), {}), ("ELU", (0.5,), {"inplace": True}),
    ("CELU", (), {}), ("CELU", (2.0,), {"inplace": True}),
    ("SELU", (), {}), ("SELU", (), {"inplace": True}),
    ("GLU", (), {}), ("GLU", (0,), {}),
    ("GELU", (), {}), ("GELU", ("tanh",), {}),
    ("Hardshrink", (), {}), ("Hardshrink", (1.5,), {}),
    ("Softshrink", (), {}), ("Softshrink", (1.5,), {}),
    ("LeakyReLU", (), {}), ("LeakyReLU", (0.2,), {"inplace": True}),
    ("Softplus", (), {}), ("Softplus", (2.0, 1.0), {}),
    ("PReLU", (), {}), ("PReLU", (4, 0.1), {}),
    ("Softmin", (1,), {}), ("Softmax", (0,), {}), ("Softmax", (-1,), {}),
    ("LogSoftmax", (1,), {}), ("Softmax2d", (), {}),
    ("Dropout", (), {}), ("Dropout", (0.2,), {"inplace": True}), ("Dropout1d", (), {}),
    ("Dropout2d", (0.3,), {}), ("Dropout3d", (), {}), ("AlphaDropout", (0.1,), {}),
    ("FeatureAlphaDropout", (), {"inplace": True}),
]


def _module_ids():
    return [f"{name}{args}{kwargs}" for name, args, kwargs in MODULES]


def _build(name, args, kwargs):
    ours = getattr(reftorch.nn, name)(*args, **kwargs)
    theirs = getattr(torch.nn, name)(*args, **kwargs)
    state = {k: reftorch.from_numpy(v.detach().numpy().copy())
             for k, v in theirs.state_dict().items()}
    ours.load_state_dict(state)
    return ours, theirs


def _input_shape(name):
    if name == "Softmax2d":
        return (2, 4, 3, 2)
    if name == "Dropout3d":
        return (2, 4, 2, 3, 2)
    return (2, 4, 6)


@pytest.mark.parametrize("name,args,kwargs", MODULES, ids=_module_ids())
def test_module_repr_and_state_dict(name, args, kwargs):
    ours, theirs = _build(name, args, kwargs)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,args,kwargs", MODULES, ids=_module_ids())
def test_module_matches_torch(name, args, kwargs, dtype):
    """Evaluation mode (random modules are deterministic there): output, grads."""
    ours, theirs = _build(name, args, kwargs)
    if dtype == "float64":
        ours, theirs = ours.double(), theirs.double()
    ours.eval()
    theirs.eval()
    values = _values(_input_shape(name))
    r_leaf, t_leaf = _pair(values, dtype, requires_grad=True)
    # in-place modules must not write into a leaf: feed them a non-leaf copy
    r_out, t_out = ours(r_leaf * 1), theirs(t_leaf * 1)
    tol = 1e-5 if dtype == "float32" else 1e-10
    _close(r_out, t_out, tol, tol)
    grad = _values(tuple(t_out.shape), seed=1)
    r_out.backward(reftorch.tensor(grad).to(r_out.dtype))
    t_out.backward(torch.tensor(grad).to(t_out.dtype))
    _close(r_leaf.grad, t_leaf.grad, tol, tol)
    for (key, r_param), (_, t_param) in zip(ours.named_parameters(), theirs.named_parameters()):
        _close(r_param.grad, t_param.grad, tol, tol)


def test_prelu_default_init_and_factory_kwargs():
    reftorch.manual_seed(0)
    torch.manual_seed(0)
    ours = reftorch.nn.PReLU(3, init=0.3, dtype=reftorch.float64)
    theirs = torch.nn.PReLU(3, init=0.3, dtype=torch.float64)
    _equal(ours.weight, theirs.weight)
    assert isinstance(ours.weight, reftorch.nn.Parameter)
    ours.weight.data.fill_(0.0)
    ours.reset_parameters()
    _equal(ours.weight, theirs.weight)


def test_module_train_eval_switch():
    """Dropout in training mode drops; in eval mode it returns the input itself."""
    m = reftorch.nn.Dropout(0.5)
    x = reftorch.ones(100)
    assert m.eval()(x) is x
    assert (m.train()(x) == 0).any().item()


# --- seeded randomness ------------------------------------------------------------------------

def _seeded(seed, fn_r, fn_t):
    reftorch.manual_seed(seed)
    torch.manual_seed(seed)
    return fn_r(), fn_t()


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
def test_rrelu_training_slopes_equal_torch(dtype):
    values = _values((5, 7), seed=3)
    r_x, t_x = _pair(values, dtype, requires_grad=True)
    r, t = _seeded(11, lambda: reftorch.nn.functional.rrelu(r_x, 0.1, 0.3, training=True),
                   lambda: torch.nn.functional.rrelu(t_x, 0.1, 0.3, training=True))
    _equal(r, t)
    r.sum().backward()
    t.sum().backward()
    _equal(r_x.grad, t_x.grad)          # the gradient is the drawn slope (1 where x > 0)
    # the generator advanced by the same amount (one draw per non-positive element)
    _equal(reftorch.rand(3), torch.rand(3))


def test_rrelu_module_and_inplace_seeded_on_transposed_input():
    values = _values((6, 4), seed=4)
    r_x, t_x = _pair(values)
    r_x, t_x = r_x.t(), t_x.t()
    r, t = _seeded(5, lambda: reftorch.nn.RReLU()(r_x), lambda: torch.nn.RReLU()(t_x))
    _equal(r, t)
    r, t = _seeded(6, lambda: reftorch.rrelu_(r_x.clone(), training=True),
                   lambda: torch.rrelu_(t_x.clone(), training=True))
    _equal(r, t)


def test_rrelu_half_training_unsupported_like_torch():
    for module in (reftorch, torch):
        x = module.ones(3, dtype=module.float16)
        with pytest.raises(NotImplementedError):
            module.nn.functional.rrelu(x, training=True)


DROPOUT_FORMS = [
    ("dropout", (3, 5), {"p": 0.3}),
    ("dropout", (4, 6), {"p": 0.5, "inplace": True}),
    ("dropout1d", (3, 4, 5), {"p": 0.4}),
    ("dropout1d", (4, 5), {"p": 0.4}),
    ("dropout2d", (2, 3, 4, 2), {"p": 0.5}),
    ("dropout3d", (2, 3, 2, 2, 2), {"p": 0.25, "inplace": True}),
    ("dropout3d", (3, 2, 2, 2), {"p": 0.25}),
    ("alpha_dropout", (4, 5), {"p": 0.2, "training": True}),
    ("alpha_dropout", (4, 5), {"p": 0.2, "training": True, "inplace": True}),
    ("feature_alpha_dropout", (2, 6, 3), {"p": 0.5, "training": True}),
]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("name,shape,kwargs", DROPOUT_FORMS,
                         ids=[f"{n}{s}{k}" for n, s, k in DROPOUT_FORMS])
def test_dropout_masks_equal_torch(name, shape, kwargs, dtype):
    r_x, t_x = _pair(_values(shape, seed=7), dtype, requires_grad=True)
    r_in, t_in = r_x * 1, t_x * 1
    r, t = _seeded(21, lambda: getattr(reftorch.nn.functional, name)(r_in, **kwargs),
                   lambda: getattr(torch.nn.functional, name)(t_in, **kwargs))
    _equal(r, t)
    assert (r is r_in) == (t is t_in)
    r.sum().backward()
    t.sum().backward()
    _equal(r_x.grad, t_x.grad)
    assert type(r.grad_fn).__name__ == type(t.grad_fn).__name__


def test_dropout_on_transposed_input_and_modules_equal_torch():
    r_x, t_x = _pair(_values((5, 8), seed=8), "float32")
    r, t = _seeded(2, lambda: reftorch.nn.Dropout(0.3)(r_x.t()),
                   lambda: torch.nn.Dropout(0.3)(t_x.t()))
    _equal(r, t)
    r, t = _seeded(3, lambda: reftorch.dropout(r_x, 0.6, True),
                   lambda: torch.dropout(t_x, 0.6, True))
    _equal(r, t)
    r, t = _seeded(4, lambda: reftorch.feature_dropout(r_x, 0.6, True),
                   lambda: torch.feature_dropout(t_x, 0.6, True))
    _equal(r, t)
    r, t = _seeded(5, lambda: reftorch.feature_alpha_dropout_(r_x.clone(), 0.6, True),
                   lambda: torch.feature_alpha_dropout_(t_x.clone(), 0.6, True))
    _equal(r, t)


@pytest.mark.parametrize("hard", [False, True])
def test_gumbel_softmax_seeded_equals_torch(hard):
    r_x, t_x = _pair(_values((4, 5), seed=9), requires_grad=True)
    r, t = _seeded(13, lambda: reftorch.nn.functional.gumbel_softmax(r_x, tau=0.5, hard=hard),
                   lambda: torch.nn.functional.gumbel_softmax(t_x, tau=0.5, hard=hard))
    _close(r, t, 1e-12, 1e-12)
    weights = _values((4, 5), seed=10)
    (r * reftorch.tensor(weights)).sum().backward()
    (t * torch.tensor(weights)).sum().backward()
    _close(r_x.grad, t_x.grad, 1e-10, 1e-10)
    r, t = _seeded(14, lambda: reftorch.nn.functional.gumbel_softmax(r_x.detach(), dim=0),
                   lambda: torch.nn.functional.gumbel_softmax(t_x.detach(), dim=0))
    _close(r, t, 1e-12, 1e-12)


def test_gumbel_softmax_eps_deprecated():
    for module in (reftorch, torch):
        with pytest.warns(UserWarning, match="eps"):
            module.nn.functional.gumbel_softmax(module.zeros(2, 3), eps=1e-3)


# --- torch-level names, Tensor methods, node names ---------------------------------------------

TORCH_LEVEL = [
    ("relu", lambda m, x: m.relu(x)),
    ("relu_", lambda m, x: m.relu_(x)),
    ("Tensor.relu", lambda m, x: x.relu()),
    ("Tensor.relu_", lambda m, x: x.relu_()),
    ("selu", lambda m, x: m.selu(x)),
    ("selu_", lambda m, x: m.selu_(x)),
    ("celu", lambda m, x: m.celu(x, 0.7)),
    ("celu_", lambda m, x: m.celu_(x, alpha=1.5)),
    ("rrelu eval", lambda m, x: m.rrelu(x, 0.2, 0.4)),
    ("rrelu_ eval", lambda m, x: m.rrelu_(x)),
    ("prelu", lambda m, x: m.prelu(x, m.full((4,), 0.3, dtype=x.dtype))),
    ("Tensor.prelu", lambda m, x: x.prelu(m.full((1,), 0.3, dtype=x.dtype))),
    ("threshold", lambda m, x: m.threshold(x, 0.5, -1.0)),
    ("threshold_", lambda m, x: m.threshold_(x, 0.5, -1.0)),
    ("hardshrink", lambda m, x: m.hardshrink(x, 1.0)),
    ("Tensor.hardshrink", lambda m, x: x.hardshrink()),
    ("softmax", lambda m, x: m.softmax(x, 1)),
    ("softmax dtype", lambda m, x: m.softmax(x, -1, dtype=m.float32)),
    ("log_softmax", lambda m, x: m.log_softmax(x, 0)),
    ("Tensor.softmax", lambda m, x: x.softmax(1)),
    ("Tensor.log_softmax", lambda m, x: x.log_softmax(dim=-1)),
    ("sigmoid_", lambda m, x: m.sigmoid_(x)),
    ("tanh_", lambda m, x: m.tanh_(x)),
    ("elu_", lambda m, x: m.nn.functional.elu_(x, 0.5)),
    ("leaky_relu_", lambda m, x: m.nn.functional.leaky_relu_(x, 0.2)),
    ("hardtanh_", lambda m, x: m.nn.functional.hardtanh_(x, -0.5, 0.5)),
    ("F.threshold_", lambda m, x: m.nn.functional.threshold_(x, 0.1, 0.0)),
    ("F.relu_", lambda m, x: m.nn.functional.relu_(x)),
    ("F.selu_", lambda m, x: m.nn.functional.selu_(x)),
    ("F.celu_", lambda m, x: m.nn.functional.celu_(x)),
    ("F.rrelu_", lambda m, x: m.nn.functional.rrelu_(x)),
    ("cosine_similarity", lambda m, x: m.cosine_similarity(x, x.flip(0), dim=0)),
    ("pairwise_distance", lambda m, x: m.pairwise_distance(x, x.flip(0), 1.0)),
    ("pdist", lambda m, x: m.pdist(x, 3)),
    ("dropout eval", lambda m, x: m.dropout(x, 0.5, False)),
    ("alpha_dropout p=1", lambda m, x: m.alpha_dropout(x, 1.0, True)),
    ("alpha_dropout_ eval", lambda m, x: m.alpha_dropout_(x, 0.3, False)),
    ("feature_dropout_ p=0", lambda m, x: m.feature_dropout_(x, 0.0, True)),
]


# pairwise_distance ends in torch.norm, whose node reftorch names LinalgVectorNormBackward0
# (PyTorch: NormBackward1); the values and gradients still agree.
NODE_NAMES_DIFFER = {"pairwise_distance"}


@pytest.mark.parametrize("name,fn", TORCH_LEVEL, ids=[n for n, _ in TORCH_LEVEL])
def test_torch_level_forms_match(name, fn):
    r_leaf, t_leaf = _pair(_values((3, 4), seed=12), requires_grad=True)
    r_x, t_x = r_leaf * 1, t_leaf * 1
    r, t = fn(reftorch, r_x), fn(torch, t_x)
    tol = 1e-6 if t.dtype == torch.float32 else 1e-10
    _close(r, t, tol, tol)
    assert (r is r_x) == (t is t_x)
    if name not in NODE_NAMES_DIFFER:
        assert type(r.grad_fn).__name__ == type(t.grad_fn).__name__
    grad = _values(tuple(t.shape), seed=2)
    r.backward(reftorch.tensor(grad))
    t.backward(torch.tensor(grad))
    # a float32 result (dtype=) carries float32 rounding into the float64 gradient
    _close(r_leaf.grad, t_leaf.grad, tol * 10, tol * 10)


def test_integer_relu_and_threshold_keep_dtype():
    values = np.array([[-3, 0, 2], [5, -1, 7]])
    for dtype in ("int32", "int64", "int8"):
        r, t = reftorch.tensor(values).to(getattr(reftorch, dtype)), \
            torch.tensor(values).to(getattr(torch, dtype))
        _equal(reftorch.relu(r), torch.relu(t))
        _equal(reftorch.threshold(r, 1, 9), torch.threshold(t, 1, 9))
        _equal(reftorch.nn.functional.relu6(r), torch.nn.functional.relu6(t))


# --- legacy softmax dim, warnings ----------------------------------------------------------------

@pytest.mark.parametrize("shape", [(), (5,), (2, 3), (2, 3, 4), (2, 3, 2, 2)])
@pytest.mark.parametrize("name", ["softmax", "log_softmax", "softmin"])
def test_implicit_softmax_dim(name, shape):
    r_x, t_x = _pair(_values(shape, seed=15))
    results = []
    for module, x in ((reftorch, r_x), (torch, t_x)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            results.append(getattr(module.nn.functional, name)(x))
        assert any("Implicit dimension choice" in str(w.message) for w in caught)
    _close(*results, 1e-12, 1e-12)


def test_softmax_modules_with_implicit_dim():
    r_x, t_x = _pair(_values((2, 3, 4), seed=16))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _close(reftorch.nn.Softmax()(r_x), torch.nn.Softmax()(t_x), 1e-12, 1e-12)


def test_dropout2d_warnings():
    for module in (reftorch, torch):
        with pytest.warns(UserWarning, match="Received a 3D input to dropout2d"):
            module.nn.functional.dropout2d(module.ones(2, 3, 4), training=False)
        with pytest.warns(UserWarning, match="Received a 2-D input to dropout2d"):
            module.nn.functional.dropout2d(module.ones(2, 3), training=False)
        with pytest.warns(UserWarning, match="Received a 3-D input to dropout3d"):
            module.nn.functional.dropout3d(module.ones(2, 3, 4), training=False)


def test_hardtanh_deprecated_keywords():
    for module in (reftorch, torch):
        with pytest.warns(FutureWarning):
            m = module.nn.Hardtanh(min_value=-2.0, max_value=2.0)
        assert (m.min_val, m.max_val) == (-2.0, 2.0)


# --- gelu's tanh form far below 0 -------------------------------------------------------------

def test_float32_gelu_tanh_tail_is_zero_and_an_infinite_gradient_gives_nan():
    """Below about -5.2, tanh(inner) rounds to -1 in float32, so 1 + tanh is 0: PyTorch gives
    gelu = -0.0 and, for an infinite incoming gradient, inf * 0 = nan. (NumPy's float32 tanh,
    an ulp off there, gave -1.6e-7 and inf.)"""
    x = np.array([-5.3, -5.6, -7.0, -9.5, -20.0], dtype=np.float32)
    grad = np.array([np.inf, -np.inf, np.inf, -np.inf, 1.0], dtype=np.float32)
    with reftorch.plugins.use_reference_kernels():
        r_x = reftorch.from_numpy(x).requires_grad_(True)
        r_y = reftorch.nn.functional.gelu(r_x, approximate="tanh")
        r_y.backward(reftorch.from_numpy(grad))
    t_x = torch.from_numpy(x).requires_grad_(True)
    t_y = torch.nn.functional.gelu(t_x, approximate="tanh")
    t_y.backward(torch.from_numpy(grad))
    np.testing.assert_array_equal(r_y.detach().numpy(), t_y.detach().numpy())
    np.testing.assert_array_equal(np.signbit(r_y.detach().numpy()), np.signbit(t_y.detach().numpy()))
    np.testing.assert_array_equal(r_x.grad.numpy(), t_x.grad.numpy())


# --- double backward ----------------------------------------------------------------------------

SECOND_ORDER = {
    "elu": lambda F, x: F.elu(x, 0.7),
    "selu": lambda F, x: F.selu(x),
    "celu": lambda F, x: F.celu(x, 1.3),
    "gelu": lambda F, x: F.gelu(x),
    "gelu tanh": lambda F, x: F.gelu(x, approximate="tanh"),
    "silu": lambda F, x: F.silu(x),
    "mish": lambda F, x: F.mish(x),
    "softplus": lambda F, x: F.softplus(x, beta=2.0),
    "logsigmoid": lambda F, x: F.logsigmoid(x),
    "hardswish": lambda F, x: F.hardswish(x),
    "leaky_relu": lambda F, x: F.leaky_relu(x, 0.2) * x,
    "softmax": lambda F, x: F.softmax(x, 1),
    "log_softmax": lambda F, x: F.log_softmax(x, 0),
    "glu": lambda F, x: F.glu(x, 1),
    "prelu": lambda F, x: F.prelu(x, x[0, :1] * 0 + 0.3) * x,
    "cosine_similarity": lambda F, x: F.cosine_similarity(x, x.flip(1)),
    "pairwise_distance": lambda F, x: F.pairwise_distance(x, x.flip(0)),
    "pdist": lambda F, x: F.pdist(x),
}


@pytest.mark.parametrize("name", sorted(SECOND_ORDER))
def test_double_backward(name):
    x = reftorch.tensor([[0.7, -1.3, 2.1, -0.2], [1.1, -0.4, 0.9, 0.3]],
                        dtype=reftorch.float64, requires_grad=True)
    assert gradgradcheck(lambda t: SECOND_ORDER[name](reftorch.nn.functional, t), (x,))


# --- errors ------------------------------------------------------------------------------------

ERRORS = [
    ("Dropout p", lambda m: m.nn.Dropout(1.5)),
    ("F.dropout p", lambda m: m.nn.functional.dropout(m.ones(3), -0.1)),
    ("torch.dropout p", lambda m: m.dropout(m.ones(3), 1.5, True)),
    ("dropout1d 4-D", lambda m: m.nn.functional.dropout1d(m.ones(1, 2, 3, 4))),
    ("feature_dropout 1-D", lambda m: m.feature_dropout(m.ones(3), 0.5, True)),
    ("dropout int", lambda m: m.nn.functional.dropout(m.ones(3, dtype=m.int64))),
    ("Softmax2d 2-D", lambda m: m.nn.Softmax2d()(m.ones(2, 3))),
    ("Hardtanh bounds", lambda m: m.nn.functional.hardtanh(m.ones(2), 1.0, -1.0)),
    ("softmax int", lambda m: m.softmax(m.ones(3, dtype=m.int64), 0)),
    ("softmax dim", lambda m: m.softmax(m.ones(3), 1)),
    ("relu bool", lambda m: m.relu(m.ones(3, dtype=m.bool))),
    ("relu complex", lambda m: m.relu(m.ones(3, dtype=m.complex64))),
    ("elu int", lambda m: m.nn.functional.elu(m.ones(3, dtype=m.int32))),
    ("gelu approximate", lambda m: m.nn.functional.gelu(m.ones(3), approximate="fast")),
    ("glu odd", lambda m: m.nn.functional.glu(m.ones(2, 3))),
    ("glu 0-dim", lambda m: m.nn.functional.glu(m.ones(()))),
    ("prelu count", lambda m: m.nn.PReLU(3)(m.ones(2, 4))),
    ("prelu weight ndim", lambda m: m.prelu(m.ones(2, 3), m.ones(3, 1))),
    ("celu alpha 0", lambda m: m.celu(m.ones(3), 0.0)),
    ("prelu dtypes", lambda m: m.prelu(m.ones(2, 3, dtype=m.float64), m.ones(3))),
    ("rrelu bounds", lambda m: m.rrelu(m.ones(3), 0.5, 0.1, True)),
    ("softshrink lambd", lambda m: m.nn.functional.softshrink(m.ones(3), -0.5)),
    ("hardtanh uint8", lambda m: m.nn.functional.hardtanh(m.ones(3, dtype=m.uint8))),
    ("threshold overflow", lambda m: m.threshold(m.ones(3, dtype=m.uint8), 1, 300)),
    ("pdist 3-D", lambda m: m.pdist(m.ones(2, 3, 4))),
    ("pdist p", lambda m: m.pdist(m.ones(2, 3), -1)),
    ("pdist int", lambda m: m.pdist(m.ones(2, 3, dtype=m.int64))),
    ("pdist half", lambda m: m.pdist(m.ones(2, 3, dtype=m.float16))),
    ("cosine int", lambda m: m.cosine_similarity(m.ones(2, 3, dtype=m.int64),
                                                 m.ones(2, 3, dtype=m.int64))),
    ("cosine shapes", lambda m: m.cosine_similarity(m.ones(2, 3), m.ones(2, 4))),
    ("pairwise shapes", lambda m: m.pairwise_distance(m.ones(2, 3), m.ones(3, 3))),
    ("gumbel int", lambda m: m.nn.functional.gumbel_softmax(m.ones(2, 3, dtype=m.int64))),
]


@pytest.mark.parametrize("name,fn", ERRORS, ids=[n for n, _ in ERRORS])
def test_errors_match_torch(name, fn):
    with pytest.raises(Exception) as theirs:
        fn(torch)
    with pytest.raises(Exception) as ours:
        fn(reftorch)
    assert type(ours.value) is type(theirs.value), (ours.value, theirs.value)


def test_inplace_on_leaf_requiring_grad_raises():
    for module in (reftorch, torch):
        x = module.ones(3, requires_grad=True)
        with pytest.raises(RuntimeError):
            module.nn.functional.relu(x, inplace=True)
