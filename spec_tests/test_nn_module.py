"""torch.nn foundations against PyTorch: Module registration, traversal, state dicts, hooks,
printing, containers, nn.init and the linear layers.

Each check builds the same structure in both libraries (the `nn` fixture runs a test body
once per library) and compares what the user sees: reprs, key orders, values, gradients and
exception types.
"""
from __future__ import annotations

import math
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import reftorch

torch = pytest.importorskip("torch")


def both(fn):
    """fn(library) for reftorch and torch."""
    return fn(reftorch), fn(torch)


def as_numpy(t):
    return t.detach().numpy()


def copy_into(ours, theirs):
    """Copy a torch module's state into ours, through NumPy."""
    ours.load_state_dict({k: reftorch.from_numpy(v.detach().numpy().copy())
                          for k, v in theirs.state_dict().items()})


def raised(fn):
    try:
        fn()
    except Exception as error:  # the type and message are what the tests compare
        return type(error), str(error)
    return None


# --- registration, traversal and printing -------------------------------------------------

def _tree(lib):
    nn = lib.nn
    lib.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.Sequential(nn.Linear(4, 4), nn.Identity(),
                                                         nn.Linear(4, 4, bias=False)),
                         nn.Linear(4, 2))


def test_nested_repr_and_state_dict_keys_match():
    ours, theirs = both(_tree)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert dict(ours.state_dict()._metadata) == dict(theirs.state_dict()._metadata)
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert [type(c).__name__ for c in ours.children()] == \
        [type(c).__name__ for c in theirs.children()]


def test_seeded_default_init_is_pytorch_bit_for_bit():
    ours, theirs = both(_tree)
    for (name, a), (_, b) in zip(ours.state_dict().items(), theirs.state_dict().items()):
        assert np.array_equal(as_numpy(a), as_numpy(b)), name


def test_state_dict_prefix_keep_vars_and_buffers():
    def build(lib):
        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = lib.nn.Linear(2, 2)
                self.register_buffer("running", lib.zeros(2))
                self.register_buffer("scratch", lib.ones(1), persistent=False)
                self.register_buffer("empty", None)
        return M()
    ours, theirs = both(build)
    for kwargs in ({}, {"prefix": "model."}, {"keep_vars": True}):
        a, b = ours.state_dict(**kwargs), theirs.state_dict(**kwargs)
        assert list(a) == list(b)
        assert [type(v).__name__ for v in a.values()] == [type(v).__name__ for v in b.values()]
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]


def test_load_state_dict_reports_missing_unexpected_and_shape_errors():
    ours, theirs = both(lambda lib: lib.nn.Linear(3, 2))
    for lib, module in ((reftorch, ours), (torch, theirs)):
        module._probe = [
            repr(module.load_state_dict(OrderedDict(weight=lib.zeros(2, 3), bias=lib.ones(2)))),
            repr(module.load_state_dict({"weight": lib.zeros(2, 3), "extra": lib.zeros(1)},
                                        strict=False)),
            raised(lambda: module.load_state_dict({"weight": lib.zeros(3, 3),
                                                   "extra": lib.zeros(1)})),
            raised(lambda: module.load_state_dict([1, 2])),
        ]
    assert ours._probe == theirs._probe
    assert as_numpy(ours.weight).tolist() == [[0.0] * 3] * 2


def test_load_state_dict_copies_in_place_and_assign_replaces():
    lin = reftorch.nn.Linear(2, 2)
    weight = lin.weight
    lin.load_state_dict({"weight": reftorch.ones(2, 2), "bias": reftorch.zeros(2)})
    assert lin.weight is weight and as_numpy(weight).tolist() == [[1.0, 1.0]] * 2
    new = reftorch.full((2, 2), 3.0)
    lin.load_state_dict({"weight": new, "bias": reftorch.zeros(2)}, assign=True)
    assert lin.weight is not weight and isinstance(lin.weight, reftorch.nn.Parameter)
    assert lin.weight.data_ptr() == new.data_ptr()


@pytest.mark.parametrize("case", ["non_parameter_to_parameter", "bad_buffer_name",
                                  "non_module_child", "tensor_as_parameter",
                                  "empty_parameter_name", "existing_attribute",
                                  "non_leaf_parameter", "module_to_int_dtype"])
def test_registration_errors_match(case):
    def attempt(lib):
        lin = lib.nn.Linear(3, 2)
        lin.thing = 1
        action = {
            "non_parameter_to_parameter": lambda: setattr(lin, "weight", lib.zeros(2)),
            "bad_buffer_name": lambda: lin.register_buffer("a.b", None),
            "non_module_child": lambda: lin.add_module("x", 3),
            "tensor_as_parameter": lambda: lin.register_parameter("b2", lib.zeros(1)),
            "empty_parameter_name": lambda: lin.register_parameter("", None),
            "existing_attribute": lambda: lin.register_buffer("thing", None),
            "non_leaf_parameter": lambda: lin.register_parameter(
                "p", lib.nn.Parameter(lib.ones(1)) * 2),
            "module_to_int_dtype": lambda: lin.to(lib.int32),
        }[case]
        return raised(action)
    ours, theirs = both(attempt)
    assert ours[0] is theirs[0]
    if case != "non_leaf_parameter":       # PyTorch's message names its own tensor type
        assert ours[1] == theirs[1]


def test_train_eval_zero_grad_requires_grad_and_apply():
    def run(lib):
        model = _tree(lib)
        model.eval()
        modes = [m.training for m in model.modules()]
        model.train()
        model(lib.ones(1, 3)).sum().backward()
        had_grads = all(p.grad is not None for p in model.parameters())
        model.zero_grad()
        cleared = all(p.grad is None for p in model.parameters())
        model.requires_grad_(False)
        names = []
        model.apply(lambda m: names.append(type(m).__name__))
        return modes, had_grads, cleared, [p.requires_grad for p in model.parameters()], names
    ours, theirs = both(run)
    assert ours == theirs


def test_conversions_keep_parameter_identity():
    model = _tree(reftorch)
    params = list(model.parameters())
    model.double()
    assert all(p.dtype is reftorch.float64 for p in model.parameters())
    assert [id(p) for p in model.parameters()] == [id(p) for p in params]
    model.to(reftorch.float32)
    model.to("cpu", dtype=reftorch.float64)
    assert all(p.dtype is reftorch.float64 for p in model.parameters())
    model.to(reftorch.zeros(1, dtype=reftorch.float32))
    assert all(p.dtype is reftorch.float32 for p in model.parameters())
    model.half().float()
    assert model[0].weight.dtype is reftorch.float32


def test_get_submodule_parameter_buffer():
    model = _tree(reftorch)
    assert model.get_submodule("1.2") is model[1][2]
    assert model.get_parameter("1.0.bias") is model[1][0].bias
    with pytest.raises(AttributeError):
        model.get_submodule("1.7")
    with pytest.raises(AttributeError):
        model.get_parameter("0.missing")


# --- hooks -----------------------------------------------------------------------------------

def test_forward_hooks_can_replace_input_and_output():
    def run(lib):
        lib.manual_seed(3)
        lin = lib.nn.Linear(3, 2)
        pre = lin.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
        post = lin.register_forward_hook(lambda mod, args, out: out + 1)
        kw = lin.register_forward_pre_hook(lambda mod, args, kwargs: ((args[0] - 1,), kwargs),
                                           with_kwargs=True, prepend=True)
        x = lib.ones(4, 3)
        hooked = as_numpy(lin(x)).copy()
        kw.remove()
        without_kwargs_hook = as_numpy(lin(x)).copy()
        pre.remove()
        post.remove()
        return hooked, without_kwargs_hook, as_numpy(lin(x)).copy()
    ours, theirs = both(run)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert not np.allclose(ours[0], ours[2])    # the hooks did change the result


def test_full_backward_hooks_see_module_gradients_and_can_replace_them():
    def run(lib):
        lib.manual_seed(0)
        model = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Linear(4, 2))
        seen = []

        def hook(module, grad_input, grad_output):
            seen.append([None if g is None else as_numpy(g).copy() for g in grad_input] +
                        [as_numpy(g).copy() for g in grad_output])
            return (grad_input[0] * 3,)
        model[1].register_full_backward_hook(hook)
        model[1].register_full_backward_pre_hook(lambda m, go: (go[0] * 2,))
        x = lib.ones(5, 3, requires_grad=True)
        model(x).pow(2).sum().backward()
        return seen, as_numpy(x.grad), as_numpy(model[0].weight.grad)
    ours, theirs = both(run)
    for a, b in zip(ours[0][0], theirs[0][0]):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-6)


def test_full_backward_hook_when_input_needs_no_grad():
    def run(lib):
        lin = lib.nn.Linear(3, 2)
        seen = []
        lin.register_full_backward_hook(
            lambda m, gi, go: seen.append((gi, tuple(g.shape for g in go))))
        lin(lib.ones(2, 3)).sum().backward()
        return [(gi, tuple(tuple(s) for s in shapes)) for gi, shapes in seen]
    assert both(run)[0] == both(run)[1]


def test_legacy_backward_hook_sees_last_op_gradients():
    def run(lib):
        lin = lib.nn.Linear(3, 2)
        seen = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lin.register_backward_hook(lambda m, gi, go: seen.append(
                ([None if g is None else tuple(g.shape) for g in gi],
                 [tuple(g.shape) for g in go])))
            lin(lib.ones(4, 3, requires_grad=True)).sum().backward()
        return seen
    ours, theirs = both(run)
    assert ours == theirs


def test_mixing_backward_hook_kinds_raises():
    for lib in (reftorch, torch):
        lin = lib.nn.Linear(1, 1)
        lin.register_full_backward_hook(lambda *a: None)
        with pytest.raises(RuntimeError):
            lin.register_backward_hook(lambda *a: None)


# --- containers ------------------------------------------------------------------------------

def test_sequential_indexing_slicing_and_editing():
    def run(lib):
        nn = lib.nn
        lib.manual_seed(0)
        s = nn.Sequential(OrderedDict(a=nn.Linear(1, 2), b=nn.Identity(), c=nn.Linear(2, 2)))
        out = [repr(s), repr(s[1:]), repr(s[-1]), len(s)]
        del s[0]
        out.append(repr(s))
        s.append(nn.Linear(2, 3))
        s.insert(0, nn.Identity())
        out += [repr(s), repr(s * 2), repr(s + nn.Sequential(nn.Identity()))]
        s[0] = nn.Linear(5, 5)
        out += [repr(s), repr(s.pop(1)), repr(s)]
        out.append(raised(lambda: s[10]))
        return out
    ours, theirs = both(run)
    assert ours == theirs


def test_module_list_operations_and_compressed_repr():
    def run(lib):
        nn = lib.nn
        ml = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)] + [nn.Linear(2, 3)])
        out = [repr(ml), len(ml), repr(ml[1:3]), repr(ml[-1])]
        ml.insert(1, nn.Identity())
        ml.append(nn.Identity())
        ml.extend([nn.Identity()])
        del ml[0]
        out += [repr(ml), [k for k, _ in ml.named_children()], repr(ml + ml[:1])]
        out.append(raised(lambda: ml.extend(5)))
        out.append(raised(lambda: ml[20]))
        out.append(repr(nn.ModuleList()))
        return out
    ours, theirs = both(run)
    assert ours == theirs


def test_module_dict_operations():
    def run(lib):
        nn = lib.nn
        md = nn.ModuleDict({"z": nn.Identity(), "a": nn.Linear(1, 1)})
        md.update([("m", nn.Identity())])
        md["b"] = nn.Linear(2, 2)
        out = [repr(md), list(md.keys()), len(md), "a" in md, repr(md.pop("z")), list(md)]
        out.append(raised(lambda: md.update([("x",)])))
        out.append(raised(lambda: md.update(3)))
        md.clear()
        out.append(len(md))
        return out
    assert both(run)[0] == both(run)[1]


def test_parameter_list_and_dict():
    def run(lib):
        nn = lib.nn
        pl = nn.ParameterList([nn.Parameter(lib.zeros(2, 3)), lib.zeros(3)])
        pl.append(lib.ones(1))
        pd = nn.ParameterDict({"b": nn.Parameter(lib.zeros(2, 3)), "a": lib.zeros(3)})
        pd["c"] = lib.ones(2)
        out = [repr(pl), len(pl), [type(p).__name__ for p in pl], repr(pl[1:]),
               repr(pd), list(pd.keys()), [type(v).__name__ for v in pd.values()],
               repr(pd.pop("a")), list(pd), pd.get("zz") is None,
               [n for n, _ in pl.named_parameters()], [n for n, _ in pd.named_parameters()]]
        out.append(raised(lambda: pl()))
        out.append(raised(lambda: pd[3]))
        return out
    ours, theirs = both(run)
    assert ours == theirs


# --- nn.init ---------------------------------------------------------------------------------

_INIT_CASES = [
    ("uniform_", (2, 5), dict(a=-0.5, b=2.0)),
    ("normal_", (3, 7), dict(mean=1.0, std=0.5)),
    ("constant_", (3, 4), dict(val=0.25)),
    ("ones_", (2, 2), {}),
    ("zeros_", (2, 2), {}),
    ("eye_", (3, 5), {}),
    ("dirac_", (4, 2, 3, 3), dict(groups=2)),
    ("dirac_", (2, 3, 5), {}),
    ("xavier_uniform_", (20, 30), dict(gain=2.0)),
    ("xavier_normal_", (20, 30), {}),
    ("kaiming_uniform_", (16, 8, 3, 3), dict(a=math.sqrt(5))),
    ("kaiming_uniform_", (10, 20), dict(mode="fan_out", nonlinearity="relu")),
    ("kaiming_normal_", (10, 20), dict(nonlinearity="tanh")),
    ("orthogonal_", (6, 4), dict(gain=1.5)),
    ("orthogonal_", (3, 8), {}),
    ("sparse_", (8, 5), dict(sparsity=0.3)),
    ("trunc_normal_", (40, 30), {}),
    ("trunc_normal_", (40, 30), dict(mean=0.0, std=1.0, a=-0.2, b=0.3)),
]


@pytest.mark.parametrize("name,shape,kwargs", _INIT_CASES,
                         ids=[f"{n}-{s}" for n, s, _ in _INIT_CASES])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_init_matches_seeded_pytorch(name, shape, kwargs, dtype):
    def run(lib):
        lib.manual_seed(7)
        t = lib.empty(shape, dtype=getattr(lib, dtype))
        result = getattr(lib.nn.init, name)(t, **kwargs)
        assert result is t
        return as_numpy(t)
    ours, theirs = both(run)
    # Normal samples agree to the last bit or two (see random sampling notes).
    np.testing.assert_allclose(ours, theirs, rtol=1e-6 if dtype == "float32" else 1e-14,
                               atol=1e-7 if dtype == "float32" else 1e-15)
    if "normal" not in name and name not in ("orthogonal_", "sparse_"):
        assert np.array_equal(ours, theirs)


@pytest.mark.parametrize("args", [("linear",), ("conv2d",), ("sigmoid",), ("tanh",),
                                  ("relu",), ("leaky_relu",), ("leaky_relu", 0.2),
                                  ("selu",)])
def test_calculate_gain(args):
    assert reftorch.nn.init.calculate_gain(*args) == torch.nn.init.calculate_gain(*args)


@pytest.mark.parametrize("call", [
    lambda lib: lib.nn.init.calculate_gain("softmax"),
    lambda lib: lib.nn.init.calculate_gain("leaky_relu", "x"),
    lambda lib: lib.nn.init.xavier_uniform_(lib.empty(3)),
    lambda lib: lib.nn.init.eye_(lib.empty(2, 2, 2)),
    lambda lib: lib.nn.init.dirac_(lib.empty(3, 2, 3), groups=2),
    lambda lib: lib.nn.init.kaiming_uniform_(lib.empty(2, 2), mode="fan_avg"),
    lambda lib: lib.nn.init.orthogonal_(lib.empty(3)),
])
def test_init_errors_match(call):
    ours, theirs = both(lambda lib: raised(lambda: call(lib)))
    assert ours is not None and ours[0] is theirs[0]


def test_deprecated_init_aliases_warn_and_work():
    t = reftorch.empty(3, 3)
    with pytest.warns(FutureWarning):
        reftorch.nn.init.constant(t, 2.0)
    assert as_numpy(t).tolist() == [[2.0] * 3] * 3


# --- linear layers -----------------------------------------------------------------------

_LINEAR_INPUTS = [(5, 4), (4,), (2, 3, 4), (0, 4)]


@pytest.mark.parametrize("shape", _LINEAR_INPUTS)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_linear_matches_pytorch(shape, bias, dtype):
    torch.manual_seed(1)
    theirs = torch.nn.Linear(4, 3, bias=bias, dtype=getattr(torch, dtype))
    ours = reftorch.nn.Linear(4, 3, bias=bias, dtype=getattr(reftorch, dtype))
    copy_into(ours, theirs)
    x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    xr = reftorch.from_numpy(x.copy()).requires_grad_()
    xt = torch.from_numpy(x.copy()).requires_grad_()
    yr, yt = ours(xr), theirs(xt)
    assert type(yr.grad_fn).__name__ == type(yt.grad_fn).__name__
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(as_numpy(yr), as_numpy(yt), **tol)
    yr.pow(2).sum().backward()
    yt.pow(2).sum().backward()
    np.testing.assert_allclose(as_numpy(xr.grad), as_numpy(xt.grad), **tol)
    for (name, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_allclose(as_numpy(p.grad), as_numpy(q.grad), err_msg=name, **tol)
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("bias", [True, False])
def test_bilinear_matches_pytorch(bias):
    torch.manual_seed(2)
    reftorch.manual_seed(2)
    theirs = torch.nn.Bilinear(3, 4, 2, bias=bias, dtype=torch.float64)
    ours = reftorch.nn.Bilinear(3, 4, 2, bias=bias, dtype=reftorch.float64)
    assert all(np.array_equal(as_numpy(p), as_numpy(q))
               for p, q in zip(ours.parameters(), theirs.parameters()))
    rng = np.random.default_rng(1)
    x1, x2 = rng.standard_normal((5, 3)), rng.standard_normal((5, 4))
    r1, r2 = (reftorch.from_numpy(a.copy()).requires_grad_() for a in (x1, x2))
    t1, t2 = (torch.from_numpy(a.copy()).requires_grad_() for a in (x1, x2))
    yr, yt = ours(r1, r2), theirs(t1, t2)
    np.testing.assert_allclose(as_numpy(yr), as_numpy(yt), rtol=1e-12)
    yr.sum().backward()
    yt.sum().backward()
    for a, b in ((r1, t1), (r2, t2), (ours.weight, theirs.weight)):
        np.testing.assert_allclose(as_numpy(a.grad), as_numpy(b.grad), rtol=1e-12)
    assert repr(ours) == repr(theirs)


def test_linear_gradcheck_and_errors():
    w = reftorch.randn(3, 4, dtype=reftorch.float64, requires_grad=True)
    b = reftorch.randn(3, dtype=reftorch.float64, requires_grad=True)
    x = reftorch.randn(2, 4, dtype=reftorch.float64, requires_grad=True)
    F = reftorch.nn.functional
    assert reftorch.autograd.gradcheck(F.linear, (x, w, b))
    assert reftorch.autograd.gradgradcheck(F.linear, (x, w, b))
    assert reftorch.autograd.gradcheck(F.bilinear, (x, x, reftorch.randn(
        2, 4, 4, dtype=reftorch.float64, requires_grad=True), None))
    ours, theirs = both(lambda lib: raised(lambda: lib.nn.Linear(4, 3)(lib.ones(2, 5))))
    assert ours[0] is theirs[0] is RuntimeError


def test_flatten_unflatten_identity():
    def run(lib):
        nn = lib.nn
        x = lib.arange(60.0).reshape(2, 3, 10)
        mods = [nn.Flatten(), nn.Flatten(0, 1), nn.Unflatten(2, (2, 5)), nn.Identity(3, k=1)]
        return [(repr(m), tuple(m(x).shape)) for m in mods]
    assert both(run)[0] == both(run)[1]


def test_parameter_behaviour():
    p = reftorch.nn.Parameter(reftorch.ones(2))
    assert p.requires_grad and p.is_leaf and isinstance(p, reftorch.Tensor)
    assert repr(p) == repr(torch.nn.Parameter(torch.ones(2)))
    assert type(p * 2) is reftorch.Tensor
    assert not reftorch.nn.Parameter(reftorch.ones(1), requires_grad=False).requires_grad
    import copy
    q = copy.deepcopy(p)
    assert isinstance(q, reftorch.nn.Parameter) and q.data_ptr() != p.data_ptr()
    import pickle
    r = pickle.loads(pickle.dumps(p))
    assert isinstance(r, reftorch.nn.Parameter) and as_numpy(r).tolist() == [1.0, 1.0]


def test_module_deepcopy_and_pickle_keep_structure():
    import copy
    import pickle
    model = _tree(reftorch)
    for clone in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        assert repr(clone) == repr(model)
        for a, b in zip(clone.parameters(), model.parameters()):
            assert a.data_ptr() != b.data_ptr()
            assert np.array_equal(as_numpy(a), as_numpy(b))


# --- nn.utils --------------------------------------------------------------------------------

@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm_matches_pytorch(norm_type, max_norm):
    def run(lib):
        model = _tree(lib).double()
        model(lib.ones(3, 3, dtype=lib.float64)).pow(2).sum().backward()
        total = lib.nn.utils.clip_grad_norm_(model.parameters(), max_norm, norm_type)
        return float(total), [as_numpy(p.grad).copy() for p in model.parameters()]
    (total_r, grads_r), (total_t, grads_t) = both(run)
    assert total_r == pytest.approx(total_t, rel=1e-12)
    for a, b in zip(grads_r, grads_t):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_clip_grad_value_and_nonfinite_error():
    def run(lib):
        model = _tree(lib).double()
        model(lib.ones(3, 3, dtype=lib.float64)).pow(2).sum().backward()
        lib.nn.utils.clip_grad_value_(model.parameters(), 0.1)
        grads = [as_numpy(p.grad).copy() for p in model.parameters()]
        model[0].weight.grad[0, 0] = float("nan")
        error = raised(lambda: lib.nn.utils.clip_grad_norm_(model.parameters(), 1.0,
                                                            error_if_nonfinite=True))
        return grads, error[0]
    (grads_r, error_r), (grads_t, error_t) = both(run)
    for a, b in zip(grads_r, grads_t):
        np.testing.assert_allclose(a, b, rtol=1e-12)   # backward rounds differently
        assert np.abs(a).max() <= 0.1
    assert error_r is error_t is RuntimeError


def test_parameters_vector_round_trip():
    def run(lib):
        model = _tree(lib)
        vector = lib.nn.utils.parameters_to_vector(model.parameters())
        lib.nn.utils.vector_to_parameters(vector * 2, model.parameters())
        return as_numpy(vector).copy(), [as_numpy(p).copy() for p in model.parameters()], \
            raised(lambda: lib.nn.utils.vector_to_parameters([1.0], model.parameters()))
    ours, theirs = both(run)
    np.testing.assert_array_equal(ours[0], theirs[0])
    for a, b in zip(ours[1], theirs[1]):
        np.testing.assert_array_equal(a, b)
    assert ours[2] == theirs[2]


@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_matches_pytorch(dim):
    def run(lib):
        lib.manual_seed(4)
        lin = lib.nn.Linear(4, 3).double()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lib.nn.utils.weight_norm(lin, dim=dim)
        keys = list(lin.state_dict())
        x = lib.arange(8.0, dtype=lib.float64).reshape(2, 4)
        y = lin(x)
        y.pow(2).sum().backward()
        grads = [as_numpy(lin.weight_g.grad).copy(), as_numpy(lin.weight_v.grad).copy()]
        lib.nn.utils.remove_weight_norm(lin)
        return keys, as_numpy(y).copy(), grads, list(lin.state_dict()), as_numpy(lin(x))
    ours, theirs = both(run)
    assert ours[0] == theirs[0] and ours[3] == theirs[3]
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-12)
    for a, b in zip(ours[2], theirs[2]):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ours[4], theirs[4], rtol=1e-12)


@pytest.mark.parametrize("iterations", [1, 3])
def test_spectral_norm_matches_seeded_pytorch(iterations):
    def run(lib):
        lib.manual_seed(5)
        lin = lib.nn.Linear(5, 4).double()
        lib.nn.utils.spectral_norm(lin, n_power_iterations=iterations)
        keys = list(lin.state_dict())
        x = lib.arange(10.0, dtype=lib.float64).reshape(2, 5)
        outputs = []
        for _ in range(3):                       # u and v advance once per training forward
            y = lin(x)
            outputs.append(as_numpy(y).copy())
        y.pow(2).sum().backward()
        lin.eval()
        outputs.append(as_numpy(lin(x)).copy())
        u = as_numpy(lin.weight_u).copy()
        lib.nn.utils.remove_spectral_norm(lin)
        return keys, outputs, as_numpy(lin.weight_orig.grad if hasattr(lin, "weight_orig")
                                       else lin.weight).copy(), u, list(lin.state_dict())
    ours, theirs = both(run)
    assert ours[0] == theirs[0] and ours[4] == theirs[4]
    for a, b in zip(ours[1], theirs[1]):
        np.testing.assert_allclose(a, b, rtol=1e-10)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-10)
    np.testing.assert_allclose(np.abs(ours[3]), np.abs(theirs[3]), rtol=1e-10)
