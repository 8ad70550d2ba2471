"""Tensor indexing (`t[...]`, `t[...] = v`) compared with real PyTorch: values, shapes,
strides of basic views, errors, and gradients through getitem/setitem."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import reftorch
from .oracle import compare

torch = pytest.importorskip("torch")

BASE = np.arange(2 * 3 * 4, dtype=np.float64).reshape(2, 3, 4)


def both(array=BASE, dtype="float64"):
    return (reftorch.tensor(array, dtype=getattr(reftorch, dtype)),
            torch.tensor(array, dtype=getattr(torch, dtype)))


def index_for(m, spec):
    """Build an index from a spec where ("T", values[, dtype]) marks a tensor."""
    if isinstance(spec, tuple) and spec and spec[0] == "T":
        dtype = spec[2] if len(spec) > 2 else "int64"
        return m.tensor(spec[1], dtype=getattr(m, dtype))
    if isinstance(spec, tuple):
        return tuple(index_for(m, s) for s in spec)
    return spec


BASIC = [0, -1, (1, 2), slice(None, None, 2), (Ellipsis, 1), (None, 0, None),
         (slice(1, None), Ellipsis, slice(None, None, 3)), (0, slice(-2, None))]
ADVANCED = [
    [0, 1], [[0, 1], [1, 0]], ([0, 1], [1, 2]), (slice(None), [0, 2]), (0, slice(None), [0, 1]),
    ([0, 1], slice(None), 0), (slice(None), [0, 1], 0), (None, [0, 1], None, [1, 2]),
    (Ellipsis, [0, 3]), ("T", 1), (("T", 1), slice(None), [0, 1]), ("T", [-1, 0]),
    ("T", [[True, False, True], [False, False, True]], "bool"), ("T", [True, False], "bool"),
    True, False, (0, ("T", [True, False, True, True], "bool")), ("T", [0, 1], "int32"),
    ([0, 1], slice(None), [2, 3]), (slice(None), ("T", [[0], [2]]), ("T", [1, 3])),
    ("T", np.zeros((0,), np.int64)),
]
ERRORS = [5, (0, 3), ("T", [2]), (slice(None), ("T", [-4])), ("T", [1.0], "float32"),
          ([0, 1], [0, 1, 2]), (0, 0, 0, 0),
          ("T", [True, False, True], "bool")]


@pytest.mark.parametrize("spec", BASIC + ADVANCED + ERRORS, ids=repr)
def test_getitem_matches_torch(spec):
    r, t = both()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        msg = compare(lambda: r[index_for(reftorch, spec)], lambda: t[index_for(torch, spec)],
                      check_strides=spec in BASIC)
    assert msg is None, msg


@pytest.mark.parametrize("spec", BASIC)
def test_basic_index_is_a_view(spec):
    r, _ = both()
    view = r[spec]
    assert view._base is r
    view.fill_(-7)
    assert (r.numpy() == -7).any()


VALUES = [5, 2.5, ("T", 1.5), ("T", [1.0, 2.0, 3.0, 4.0]), ("T", [[1.0], [2.0]]),
          ("T", [1, 2, 3, 4], "int64"), ("T", np.ones((1, 1, 4)))]


@pytest.mark.parametrize("spec", [0, (slice(None), 1), [0, 1], (slice(None), [0, 2]),
                                  ("T", [[True, False, True], [False, True, True]], "bool"),
                                  ([0, 1], 1), (Ellipsis, [0, 3]), ("T", [1, 1])], ids=repr)
@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_setitem_matches_torch(spec, value):
    r, t = both()

    def assign(m, x):
        v = index_for(m, value)
        if isinstance(value, tuple) and len(value) == 2:
            v = v.to(m.float64)
        x[index_for(m, spec)] = v
        return x
    msg = compare(lambda: assign(reftorch, r), lambda: assign(torch, t))
    assert msg is None, msg


def test_setitem_dtype_conversion_and_errors():
    r, t = both(dtype="int32")
    r[[0, 1]] = 2.7
    t[[0, 1]] = 2.7
    assert compare(lambda: r, lambda: t) is None
    for m, x in ((reftorch, r), (torch, t)):
        with pytest.raises(RuntimeError):
            x[[0, 1]] = m.ones(3, 3, 4, dtype=m.int32)
        with pytest.raises(IndexError):
            x[[5]] = 1


def test_uint8_mask_warns_like_torch():
    r, t = both()
    with pytest.warns(UserWarning, match="uint8"):
        got = r[reftorch.tensor([1, 0], dtype=reftorch.uint8)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = t[torch.tensor([1, 0], dtype=torch.uint8)]
    assert compare(lambda: got, lambda: expected) is None


GRAD_SPECS = [[0, 1, 1], (slice(None), [0, 2, 0]), (0, slice(None), [1, 1]),
              ("T", [[True, False, True], [False, True, True]], "bool"),
              ([0, 1], slice(None), [2, 3]), (Ellipsis, 1)]


def _grads(m, spec, setitem):
    rng = np.random.default_rng(0)
    x = m.tensor(BASE, dtype=m.float64, requires_grad=True)
    if setitem:
        y = x * 2
        v = m.tensor(rng.standard_normal(()), dtype=m.float64, requires_grad=True)
        y[index_for(m, spec)] = v
        out, leaves = y, (x, v)
    else:
        out, leaves = x[index_for(m, spec)], (x,)
    cot = m.tensor(rng.standard_normal(tuple(out.shape)), dtype=m.float64)
    grads = m.autograd.grad(out, leaves, cot)
    return out.grad_fn.name(), grads


@pytest.mark.parametrize("setitem", [False, True])
@pytest.mark.parametrize("spec", GRAD_SPECS, ids=repr)
def test_gradients_through_indexing(spec, setitem):
    name_r, got = _grads(reftorch, spec, setitem)
    name_t, expected = _grads(torch, spec, setitem)
    if not setitem and not isinstance(spec, tuple) or spec == ("T", [[True, False, True],
                                                                   [False, True, True]],
                                                                  "bool"):
        assert name_r == name_t
    for g, e in zip(got, expected):
        assert compare(lambda: g, lambda: e) is None


def test_double_backward_through_gather_and_index():
    def run(m):
        x = m.tensor(BASE[0], dtype=m.float64, requires_grad=True)
        index = m.tensor([[0, 2, 1, 0]])
        y = (x.gather(0, index) ** 2)[0, [0, 1, 1]]
        (g,) = m.autograd.grad(y, x, m.ones(3, dtype=m.float64), create_graph=True)
        (gg,) = m.autograd.grad(g, x, m.ones(3, 4, dtype=m.float64))
        return g, gg
    for got, expected in zip(run(reftorch), run(torch)):
        assert compare(lambda: got.detach(), lambda: expected.detach()) is None


def test_inplace_index_ops_through_autograd():
    def run(m):
        x = m.tensor(BASE[0], dtype=m.float64, requires_grad=True)
        y = x * 1
        y.index_add_(0, m.tensor([2, 0, 2]), x[:3] * 3)
        y.masked_fill_(y > 10, 0.5)
        y.put_(m.tensor([1, 1]), m.tensor([1.0, 2.0], dtype=m.float64), accumulate=True)
        (g,) = m.autograd.grad(y, x, m.ones(3, 4, dtype=m.float64))
        return y.grad_fn.name(), y.detach(), g
    (nr, yr, gr), (nt, yt, gt) = run(reftorch), run(torch)
    assert nr == nt
    assert compare(lambda: yr, lambda: yt) is None
    assert compare(lambda: gr, lambda: gt) is None


def test_leaf_inplace_refused():
    x = reftorch.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        x[[0]] = 2.0


def test_new_factories_and_map_apply():
    r, t = both(BASE[0])
    for fn in (lambda x: x.new_zeros(2, 3), lambda x: x.new_ones((2,)),
               lambda x: x.new_full((2, 2), 3), lambda x: x.new_tensor([1, 2]),
               lambda x: x.new_empty(0, 2)):
        assert compare(lambda: fn(r), lambda: fn(t)) is None
    o_r, o_t = both(BASE[0] * -1)
    assert compare(lambda: r.clone().map_(o_r, lambda a, b: a * b + 1),
                   lambda: t.clone().map_(o_t, lambda a, b: a * b + 1)) is None
    assert compare(lambda: r.clone().apply_(lambda a: a % 5),
                   lambda: t.clone().apply_(lambda a: a % 5)) is None


def test_removed_index_and_masked_copy_warn_and_act_like_their_modern_forms():
    values = np.arange(12.0).reshape(3, 4)
    mask = values % 3 == 0
    source = -np.arange(12.0)
    r, t = reftorch.tensor(values), torch.tensor(values)
    for key in (1, slice(0, 2), (reftorch.tensor(mask), torch.tensor(mask))):
        r_key, t_key = key if isinstance(key, tuple) else (key, key)
        with pytest.warns(DeprecationWarning, match=r"tensor\[m\]"):
            got = r.index(r_key)
        np.testing.assert_array_equal(got.numpy(), t[t_key].numpy())
    with pytest.warns(DeprecationWarning, match="masked_scatter_"):
        r.masked_copy_(reftorch.tensor(mask), reftorch.tensor(source))
    t.masked_scatter_(torch.tensor(mask), torch.tensor(source))
    np.testing.assert_array_equal(r.numpy(), t.numpy())


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_index_add_rounds_alpha_and_the_product_to_the_element_type(dtype):
    """alpha * source is computed in the element type (alpha rounded to it first), then
    added: bit for bit PyTorch's, whatever the ml_dtypes version's promotion of a bfloat16
    array times a Python float."""
    rng = np.random.default_rng(9)
    a, source = rng.standard_normal((40, 3)), rng.standard_normal((60, 3))
    index = rng.integers(0, 40, 60)

    def run(m):
        t = m.tensor(a, dtype=getattr(m, dtype))
        s = m.tensor(source, dtype=getattr(m, dtype))
        return m.index_add(t, 0, m.tensor(index), s, alpha=0.3).float().numpy()
    with reftorch.plugins.use_reference_kernels():
        ours = run(reftorch)
    np.testing.assert_array_equal(ours, run(torch))
