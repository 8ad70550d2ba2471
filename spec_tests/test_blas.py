"""Matrix products (BLAS): what the op-database runners do not cover.

Node names, deprecation warnings, the beta == 0 / alpha == 0 rules over NaN and inf, error
messages, the @ operator (and that @= rebinds rather than writes in place), singular
matrix_power, integer wrap-around, half-precision accumulation, scalar conversion rules,
out= identity, and second derivatives.
"""
from __future__ import annotations

import functools
import math
import warnings

import numpy as np
import pytest

import reftorch
from reftorch.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(11)


def _pair(array, dtype="float64", requires_grad=False):
    """The same values as a reftorch and a torch tensor (bfloat16 through float32)."""
    array = np.asarray(array)
    if dtype == "bfloat16":
        r = reftorch.tensor(array.astype(np.float32)).to(reftorch.bfloat16)
        t = torch.tensor(array.astype(np.float32)).to(torch.bfloat16)
        return r.requires_grad_(requires_grad), t.requires_grad_(requires_grad)
    r = reftorch.tensor(array, dtype=getattr(reftorch, dtype), requires_grad=requires_grad)
    t = torch.tensor(array, dtype=getattr(torch, dtype), requires_grad=requires_grad)
    return r, t


def _values(t):
    """A float64 (or complex128) NumPy array of either library's tensor."""
    t = t.detach()
    if hasattr(t, "_host_array"):
        values = np.asarray(t._host_array())
    else:
        t = t.resolve_conj()
        values = (t.float() if t.dtype == torch.bfloat16 else t).numpy()
    return values.astype(np.complex128 if values.dtype.kind == "c" else np.float64)


def _assert_close(r, t, rtol=1e-9, atol=1e-9):
    assert tuple(r.shape) == tuple(t.shape)
    assert str(r.dtype) == str(t.dtype)
    np.testing.assert_allclose(_values(r), _values(t), rtol=rtol, atol=atol)


def _both(fn, *arrays, dtype="float64", requires_grad=False):
    """fn(module, *tensors) on both libraries with the same values."""
    pairs = [_pair(a, dtype, requires_grad) for a in arrays]
    return (fn(reftorch, *(p[0] for p in pairs)), fn(torch, *(p[1] for p in pairs)))


def _raises_alike(fn, *arrays, dtype="float64"):
    """Both libraries raise, with the same exception type; returns both messages."""
    caught = []
    for module in (torch, reftorch):
        tensors = [_pair(a, dtype)[0 if module is reftorch else 1] for a in arrays]
        with pytest.raises(Exception) as info:
            fn(module, *tensors)
        caught.append(info)
    expected, got = caught
    assert isinstance(got.value, expected.type) or \
        issubclass(expected.type, RuntimeError) and isinstance(got.value, RuntimeError)
    return str(got.value), str(expected.value)


M23, M34, M32 = RNG.standard_normal((2, 3)), RNG.standard_normal((3, 4)), \
    RNG.standard_normal((3, 2))
V2, V3 = RNG.standard_normal(2), RNG.standard_normal(3)
B223, B234 = RNG.standard_normal((2, 2, 3)), RNG.standard_normal((2, 3, 4))


# --- node names ------------------------------------------------------------------------------

NODE_CASES = {
    "mm": (lambda m, a, b: m.mm(a, b), (M23, M34)),
    "bmm": (lambda m, a, b: m.bmm(a, b), (B223, B234)),
    "mv": (lambda m, a, v: m.mv(a, v), (M23, V3)),
    "dot": (lambda m, a, b: m.dot(a, b), (V3, V3)),
    "vdot": (lambda m, a, b: m.vdot(a, b), (V3, V3)),
    "addmm": (lambda m, c, a, b: m.addmm(c, a, b), (M23 @ M32, M23, M32)),
    "addbmm": (lambda m, c, a, b: m.addbmm(c, a, b), (M23 @ M34[:, :3], B223, B234[..., :3])),
    "baddbmm": (lambda m, c, a, b: m.baddbmm(c, a, b), (B223 @ B234, B223, B234)),
    "addmv": (lambda m, c, a, v: m.addmv(c, a, v), (V2, M23, V3)),
    "addr": (lambda m, c, a, b: m.addr(c, a, b), (M23, V2, V3)),
    "matmul 2-d": (lambda m, a, b: m.matmul(a, b), (M23, M34)),
    "matmul 1-d": (lambda m, a, b: m.matmul(a, b), (V3, V3)),
    "matmul 2-d @ 1-d": (lambda m, a, v: m.matmul(a, v), (M23, V3)),
    "operator @": (lambda m, a, b: a @ b, (M23, M34)),
    "outer": (lambda m, a, b: m.outer(a, b), (V2, V3)),
    "matrix_power 2": (lambda m, a: m.matrix_power(a, 2), (M23 @ M32,)),
}


@pytest.mark.parametrize("name", sorted(NODE_CASES))
def test_node_names_match_torch(name):
    fn, arrays = NODE_CASES[name]
    got, expected = _both(fn, *arrays, requires_grad=True)
    assert got.grad_fn.name() == expected.grad_fn.name()


# --- deprecations ----------------------------------------------------------------------------

def test_ger_warns_like_torch_and_names_outer():
    rv, tv = _pair(V3)
    with pytest.warns(UserWarning, match=r"torch\.ger is deprecated.*Use torch\.outer"):
        got = reftorch.ger(rv, rv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _assert_close(got, torch.ger(tv, tv))
    with pytest.warns(UserWarning, match="torch.outer"):
        rv.ger(rv)


def test_chain_matmul_warns_and_names_multi_dot():
    matrices = [RNG.standard_normal(s) for s in ((2, 5), (5, 1), (1, 4))]
    pairs = [_pair(m) for m in matrices]
    with pytest.warns(UserWarning, match=r"torch\.linalg\.multi_dot"):
        got = reftorch.chain_matmul(*(p[0] for p in pairs))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = torch.chain_matmul(*(p[1] for p in pairs))
    _assert_close(got, expected)
    _assert_close(got, torch.linalg.multi_dot([p[1] for p in pairs]))


def test_chain_matmul_multiplies_in_the_cheapest_order():
    from reftorch._ops.blas import _chain_order
    # (10x100)(100x5)(5x50): (AB)C costs 7500 multiplications, A(BC) 75000.
    assert _chain_order([10, 100, 5, 50])[0][2] == 1
    # (50x5)(5x100)(100x10): A(BC) is the cheap one.
    assert _chain_order([50, 5, 100, 10])[0][2] == 0


@pytest.mark.parametrize("name,args", [
    ("addmm", (0.5, "input", 2, "x", "y")), ("addmm", (0.5, "input", "x", "y")),
    ("addmv", (0.5, "v2", 2, "x", "v")), ("addr", (0.5, "m", 2, "v2", "v3")),
    ("baddbmm", (0.5, "b", 2, "bx", "by")), ("addbmm", (0.5, "input", "bx", "by")),
])
def test_deprecated_positional_beta_alpha_warn_and_agree(name, args):
    arrays = {"input": M23 @ M32, "x": M23, "y": M32, "v": V3, "m": M23, "v2": V2, "v3": V3,
              "b": B223 @ B234[..., :2], "bx": B223, "by": B234[..., :2]}
    results = []
    for module in (reftorch, torch):
        built = [_pair(arrays[a])[0 if module is reftorch else 1] if isinstance(a, str) else a
                 for a in args]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            results.append(getattr(module, name)(*built))
        if module is reftorch:
            assert any(issubclass(w.category, UserWarning) and
                       f"This overload of {name} is deprecated" in str(w.message)
                       for w in caught)
    _assert_close(*results)


# --- beta == 0 and alpha == 0 ----------------------------------------------------------------

SCALED = {
    "addmm": (lambda m, c, a, b, **k: m.addmm(c, a, b, **k), ((2, 2), (2, 3), (3, 2))),
    "addbmm": (lambda m, c, a, b, **k: m.addbmm(c, a, b, **k), ((2, 2), (2, 2, 3), (2, 3, 2))),
    "baddbmm": (lambda m, c, a, b, **k: m.baddbmm(c, a, b, **k),
                ((2, 2, 2), (2, 2, 3), (2, 3, 2))),
    "addmv": (lambda m, c, a, b, **k: m.addmv(c, a, b, **k), ((2,), (2, 3), (3,))),
    "addr": (lambda m, c, a, b, **k: m.addr(c, a, b, **k), ((2, 3), (2,), (3,))),
}


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128", "bfloat16"])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("name", sorted(SCALED))
def test_beta_zero_ignores_nan_and_inf_in_input(name, bad, dtype):
    fn, (c, a, b) = SCALED[name]
    inputs = (np.full(c, bad), RNG.standard_normal(a), RNG.standard_normal(b))
    got, expected = _both(lambda m, *t: fn(m, *t, beta=0, alpha=1.5), *inputs, dtype=dtype)
    assert np.isfinite(_values(expected)).all()
    tol = 1e-2 if dtype == "bfloat16" else 1e-5
    _assert_close(got, expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "float16", "bfloat16"])
@pytest.mark.parametrize("name", sorted(SCALED))
def test_alpha_zero_with_nan_operands_like_torch(name, dtype):
    """PyTorch hands addmm, addmv and addbmm in float32/64/complex to BLAS, which does not
    read the operands when alpha is 0; its other kernels compute 0 * NaN = NaN."""
    fn, (c, a, b) = SCALED[name]
    inputs = (RNG.standard_normal(c), np.full(a, math.nan), RNG.standard_normal(b))
    got, expected = _both(lambda m, *t: fn(m, *t, alpha=0), *inputs, dtype=dtype)
    np.testing.assert_array_equal(np.isnan(_values(got)), np.isnan(_values(expected)))


def test_beta_zero_gradient_of_input_is_zero_like_torch():
    grads = []
    for module in (reftorch, torch):
        leaf = module.ones(2, 2, dtype=module.float64, requires_grad=True)
        ones = module.ones(2, 3, dtype=module.float64)
        module.addmm(leaf, ones, ones.t(), beta=0).sum().backward()
        grads.append(leaf.grad)
    _assert_close(*grads)


# --- scalar conversion rules -----------------------------------------------------------------

@pytest.mark.parametrize("name", ["addmm", "addbmm", "baddbmm", "addmv"])
@pytest.mark.parametrize("kwargs", [{"alpha": 0.5}, {"beta": 0.5}, {"beta": 1.5, "alpha": 2.7},
                                    {"beta": True}, {"alpha": -3}])
def test_integer_tensors_truncate_float_scalars_like_torch(name, kwargs):
    fn, shapes = SCALED[name]
    arrays = [RNG.integers(-5, 6, size=s) for s in shapes]
    got, expected = _both(lambda m, *t: fn(m, *t, **kwargs), *arrays, dtype="int64")
    _assert_close(got, expected)


@pytest.mark.parametrize("case", [
    ("addmm", "float32", {"alpha": 1j}), ("addmv", "int64", {"beta": 1j}),
    ("addmm", "int8", {"alpha": 1000}), ("addr", "int64", {"alpha": 0.5}),
    ("addr", "int64", {"beta": True}), ("addr", "float64", {"alpha": True}),
    ("baddbmm", "float64", {"beta": 2j}),
])
def test_invalid_scalars_raise_like_torch(case):
    name, dtype, kwargs = case
    fn, shapes = SCALED[name]
    arrays = [RNG.integers(-3, 4, size=s) for s in shapes]
    _raises_alike(lambda m, *t: fn(m, *t, **kwargs), *arrays, dtype=dtype)


def test_addr_bool_uses_and_or_like_torch():
    arrays = (RNG.integers(0, 2, (2, 3)), RNG.integers(0, 2, 2), RNG.integers(0, 2, 3))
    for kwargs in ({}, {"beta": False}, {"alpha": False}, {"beta": 2}):
        got, expected = _both(lambda m, c, a, b: m.addr(c, a, b, **kwargs), *arrays,
                              dtype="bool")
        _assert_close(got, expected)


# --- error messages --------------------------------------------------------------------------

@pytest.mark.parametrize("fn,arrays", [
    (lambda m, a, b: m.mm(a, b), (np.ones((2, 3)), np.ones((4, 5)))),
    (lambda m, a, b: m.matmul(a, b), (np.ones((2, 3)), np.ones((4, 5)))),
    (lambda m, a, b: m.mm(a, b), (np.ones((2, 3, 1)), np.ones((4, 5)))),
    (lambda m, a, b: m.bmm(a, b), (np.ones((2, 2, 3)), np.ones((2, 4, 5)))),
    (lambda m, a, b: m.bmm(a, b), (np.ones((2, 3)), np.ones((3, 5)))),
    (lambda m, a, b: m.mv(a, b), (np.ones((2, 3)), np.ones(4))),
    (lambda m, a, b: m.dot(a, b), (np.ones(2), np.ones(3))),
    (lambda m, a, b: m.dot(a, b), (np.ones((2, 2)), np.ones((2, 2)))),
    (lambda m, a, b: m.matmul(a, b), (np.ones(()), np.ones(3))),
    (lambda m, a, b: m.matmul(a, b), (np.ones((5, 2, 2)), np.ones((5, 3, 4)))),
    (lambda m, a, b: m.matmul(a, b), (np.ones((5, 2, 3)), np.ones((4, 3, 4)))),
    (lambda m, a, b: m.outer(a, b), (np.ones((2, 2)), np.ones(3))),
    (lambda m, a, b: m.inner(a, b), (np.ones((2, 3)), np.ones((5, 4)))),
    (lambda m, c, a, b: m.addmm(c, a, b), (np.ones((3, 4)), np.ones((2, 3)), np.ones((3, 4)))),
    (lambda m, c, a, b: m.addr(c, a, b), (np.ones((2, 3)), np.ones((2, 1)), np.ones(3))),
    (lambda m, c, a, b: m.addbmm(c, a, b),
     (np.ones((2, 4)), np.ones((5, 2, 3)), np.ones((4, 3, 4)))),
    (lambda m, a: m.matrix_power(a, 2), (np.ones((2, 3)),)),
    (lambda m, a: m.matrix_power(a, 2), (np.ones(3),)),
    (lambda m, a, b: m.chain_matmul(a, b), (np.ones((2, 3)), np.ones((2, 3)))),
])
def test_shape_errors_have_torch_messages(fn, arrays):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got, expected = _raises_alike(fn, *arrays)
    assert got == expected


def test_dtype_mismatch_messages_match_torch():
    a32 = _pair(M23, "float32")
    b64 = _pair(M34, "float64")
    with pytest.raises(RuntimeError) as got:
        reftorch.mm(a32[0], b64[0])
    with pytest.raises(RuntimeError) as expected:
        torch.mm(a32[1], b64[1])
    assert str(got.value) == str(expected.value)
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype float"):
        reftorch.mm(a32[0], a32[0].t(), out=reftorch.empty(0, dtype=reftorch.float64))


def test_non_tensor_arguments_raise_type_error():
    for module in (reftorch, torch):
        with pytest.raises(TypeError):
            module.mm(module.ones(2, 2), [[1.0, 2.0], [3.0, 4.0]])
        with pytest.raises(TypeError):
            module.matrix_power(module.ones(2, 2), 2.0)


def test_bool_products_raise_not_implemented_unless_nothing_to_add_up():
    for module in (reftorch, torch):
        b = module.ones(2, 3, dtype=module.bool)
        with pytest.raises(NotImplementedError):
            module.mm(b, b.t())
        with pytest.raises(NotImplementedError):
            module.dot(b[0], b[0])
        empty = module.mm(module.ones(2, 0, dtype=module.bool),
                          module.ones(0, 3, dtype=module.bool))
        assert empty.dtype is module.bool and not empty.any()


# --- the @ operator ----------------------------------------------------------------------------

def test_matmul_operator_and_reflected_form():
    got, expected = _both(lambda m, a, b: a @ b, M23, M34)
    _assert_close(got, expected)
    got, expected = _both(lambda m, a, b: b.__rmatmul__(a), M23, M34)
    _assert_close(got, expected)


def test_matmul_operator_rejects_numbers_and_lists_like_torch():
    for module in (reftorch, torch):
        t = module.ones(3)
        for other in (3, [1.0, 2.0, 3.0]):
            with pytest.raises(TypeError):
                t @ other
            with pytest.raises(TypeError):
                other @ t


def test_imatmul_rebinds_instead_of_writing_in_place_like_torch():
    """PyTorch defines no __imatmul__: `a @= b` makes a new tensor (even for a non-square
    product) and leaves the original object unchanged."""
    assert not hasattr(torch.Tensor, "__imatmul__")
    assert not hasattr(reftorch.Tensor, "__imatmul__")
    for module in (reftorch, torch):
        a = module.tensor(M23, dtype=module.float64)
        original, before = a, a.clone()
        a @= module.tensor(M34, dtype=module.float64)
        assert a is not original and tuple(a.shape) == (2, 4)
        assert bool((original == before).all())


# --- values ------------------------------------------------------------------------------------

def test_integer_products_wrap_around_like_torch():
    for dtype, value in (("int8", 100), ("uint8", 200), ("int16", 300), ("int32", 70000),
                         ("int64", 2 ** 40)):
        a = np.full((2, 3), value)
        got, expected = _both(lambda m, x, y: m.mm(x, y), a, a.T, dtype=dtype)
        _assert_close(got, expected, rtol=0, atol=0)
        got, expected = _both(lambda m, x: m.dot(x, x), a[0], dtype=dtype)
        _assert_close(got, expected, rtol=0, atol=0)


@pytest.mark.parametrize("dtype,tol", [("float16", 2e-3), ("bfloat16", 1.6e-2)])
def test_half_precision_accumulates_in_float32(dtype, tol):
    """A long contraction: rounding every partial sum to the half type would be far off."""
    a = RNG.uniform(0.5, 1.5, (4, 512))
    b = RNG.uniform(0.5, 1.5, (512, 3))
    got, expected = _both(lambda m, x, y: m.mm(x, y), a, b, dtype=dtype)
    _assert_close(got, expected, rtol=tol, atol=tol)
    exact = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(_values(got), exact, rtol=tol)


def test_complex_dot_and_vdot_conjugation_like_torch():
    x = RNG.standard_normal(4) + 1j * RNG.standard_normal(4)
    y = RNG.standard_normal(4) + 1j * RNG.standard_normal(4)
    for name in ("dot", "vdot", "inner"):
        got, expected = _both(lambda m, a, b: getattr(m, name)(a, b), x, y, dtype="complex128")
        _assert_close(got, expected)


def test_out_is_returned_resized_and_written():
    for module in (reftorch, torch):
        a, b = module.tensor(M23), module.tensor(M34)
        out = module.empty(0, dtype=a.dtype)
        assert module.mm(a, b, out=out) is out and tuple(out.shape) == (2, 4)
        out = module.empty(5, dtype=a.dtype)
        assert module.matmul(a[0], b[:, 0], out=out) is out and out.shape == ()
    got, expected = _both(lambda m, a, b: m.mm(a, b, out=m.empty(7, dtype=a.dtype)), M23, M34)
    _assert_close(got, expected)


def test_out_with_inputs_requiring_grad_raises_like_torch():
    for module in (reftorch, torch):
        a = module.ones(2, 2, dtype=module.float64, requires_grad=True)
        for fn in (lambda: module.mm(a, a, out=module.empty(0, dtype=module.float64)),
                   lambda: module.matmul(a, a, out=module.empty(0, dtype=module.float64))):
            with pytest.raises(RuntimeError, match="out=... arguments"):
                fn()


# --- matrix_power --------------------------------------------------------------------------------

def test_matrix_power_singular_raises_runtime_error_like_torch():
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    batch = np.stack([np.eye(2), singular])
    for array in (singular, batch):
        _raises_alike(lambda m, a: m.matrix_power(a, -1), array)


@pytest.mark.parametrize("dtype", ["int64", "float16", "bool"])
def test_matrix_power_negative_needs_an_invertible_dtype(dtype):
    _raises_alike(lambda m, a: m.matrix_power(a, -2), np.eye(3), dtype=dtype)


def test_matrix_power_zero_is_identity_with_zero_gradient():
    a = RNG.standard_normal((2, 3, 3))
    r, t = _pair(a, requires_grad=True)
    rp, tp = reftorch.matrix_power(r, 0), torch.matrix_power(t, 0)
    _assert_close(rp, tp)
    assert rp.requires_grad == tp.requires_grad
    rp.sum().backward()
    tp.sum().backward()
    _assert_close(r.grad, t.grad)


@pytest.mark.parametrize("n", [-3, -1, 6, 7])
def test_matrix_power_high_and_negative_powers(n):
    a = RNG.uniform(-1, 1, (2, 3, 3)) + 3 * np.eye(3)
    got, expected = _both(lambda m, x: m.matrix_power(x, n), a / 3)
    _assert_close(got, expected, rtol=1e-8, atol=1e-10)


# --- derivatives -----------------------------------------------------------------------------

def _leaf(shape):
    return reftorch.tensor(RNG.standard_normal(shape), dtype=reftorch.float64,
                           requires_grad=True)


SECOND_ORDER = {
    "mm": (lambda m, a, b: m.mm(a, b), ((2, 3), (3, 2))),
    "bmm": (lambda m, a, b: m.bmm(a, b), ((2, 2, 2), (2, 2, 2))),
    "mv": (lambda m, a, v: m.mv(a, v), ((2, 3), (3,))),
    "dot": (lambda m, a, b: m.dot(a, b), ((3,), (3,))),
    "vdot": (lambda m, a, b: m.vdot(a, b), ((3,), (3,))),
    "addmm": (lambda m, c, a, b: m.addmm(c, a, b, beta=0.5, alpha=2), ((2,), (2, 3), (3, 2))),
    "addbmm": (lambda m, c, a, b: m.addbmm(c, a, b, alpha=-1), ((2, 2), (2, 2, 2), (2, 2, 2))),
    "baddbmm": (lambda m, c, a, b: m.baddbmm(c, a, b, beta=2), ((2, 2, 2), (2, 2, 2),
                                                               (2, 2, 2))),
    "addmv": (lambda m, c, a, v: m.addmv(c, a, v, alpha=3), ((2,), (2, 3), (3,))),
    "addr": (lambda m, c, a, b: m.addr(c, a, b, beta=2, alpha=0.5), ((2, 3), (2,), (3,))),
    "matmul batched": (lambda m, a, b: m.matmul(a, b), ((2, 1, 2, 2), (2, 2, 1))),
    "matrix_power -2": (lambda m, a: m.matrix_power(a * 0.1 + m.eye(3, dtype=a.dtype), -2),
                        ((3, 3),)),
    "chain_matmul": (lambda m, a, b, c: m.chain_matmul(a, b, c), ((2, 1), (1, 3), (3, 2))),
}
# Complex scalars too, where the formulas conjugate them.
COMPLEX_SCALARS = {
    "addmm": lambda m, c, a, b: m.addmm(c, a, b, beta=0.5 - 1j, alpha=2j),
    "addr": lambda m, c, a, b: m.addr(c, a, b, beta=2j, alpha=0.5 + 1j),
    "baddbmm": lambda m, c, a, b: m.baddbmm(c, a, b, beta=1j, alpha=1 - 1j),
}


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name", sorted(SECOND_ORDER))
def test_complex_gradients_with_complex_cotangents_match_torch(name):
    """The runners pull back real cotangents; a complex one also checks where the formulas
    conjugate the incoming gradient (vdot) and the scalars (alpha, beta)."""
    fn, shapes = SECOND_ORDER[name]
    fn = COMPLEX_SCALARS.get(name, fn)
    values = [RNG.standard_normal(s) + 1j * RNG.standard_normal(s) for s in shapes]
    grads = []
    for module in (reftorch, torch):
        leaves = [module.tensor(v, dtype=module.complex128, requires_grad=True)
                  for v in values]
        out = fn(module, *leaves)
        rng = np.random.default_rng(3)
        shape = tuple(out.shape)
        cotangent = module.tensor(rng.standard_normal(shape) + 1j * rng.standard_normal(shape),
                                  dtype=module.complex128)
        grads.append(module.autograd.grad(out, leaves, cotangent))
    for got, expected in zip(*grads):
        _assert_close(got, expected)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name", sorted(SECOND_ORDER))
def test_gradcheck_and_gradgradcheck(name):
    """First and second derivatives against finite differences (float64; complex gradients
    are compared with torch's by test_gradients.py, whose entries list complex128)."""
    fn, shapes = SECOND_ORDER[name]
    fn = functools.partial(fn, reftorch)
    inputs = tuple(_leaf(s) for s in shapes)
    assert gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3)
    assert gradgradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3)


# --- API surface -------------------------------------------------------------------------------

def test_every_documented_name_exists():
    functions = ["addbmm", "addmm", "addmv", "addr", "baddbmm", "bmm", "chain_matmul", "dot",
                 "vdot", "ger", "inner", "outer", "matmul", "matrix_power", "mm", "mv"]
    methods = ["addbmm", "addbmm_", "addmm", "addmm_", "addmv", "addmv_", "addr", "addr_",
               "baddbmm", "baddbmm_", "bmm", "dot", "vdot", "ger", "inner", "outer", "matmul",
               "matrix_power", "mm", "mv", "__matmul__", "__rmatmul__"]
    for name in functions:
        assert callable(getattr(reftorch, name)) and hasattr(torch, name)
    for name in methods:
        assert callable(getattr(reftorch.Tensor, name)) and hasattr(torch.Tensor, name)


@pytest.mark.parametrize("call", [
    lambda m, v, a: m.addmm(a, mat1=a, mat2=a), lambda m, v, a: a.addmm(mat1=a, mat2=a),
    lambda m, v, a: v.addmv(mat=a, vec=v), lambda m, v, a: a.addr_(vec1=v, vec2=v),
    lambda m, v, a: a.mm(mat2=a), lambda m, v, a: a.mv(vec=v), lambda m, v, a: v.dot(tensor=v),
    lambda m, v, a: m.vdot(v, other=v), lambda m, v, a: m.outer(v, vec2=v),
    lambda m, v, a: m.matmul(a, other=a), lambda m, v, a: m.matrix_power(a, n=3),
    lambda m, v, a: m.baddbmm(a[None], batch1=a[None], batch2=a[None]),
])
def test_operands_by_keyword_like_torch(call):
    got, expected = _both(call, V2, M23 @ M32)
    _assert_close(got, expected)
