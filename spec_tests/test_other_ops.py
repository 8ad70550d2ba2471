"""Other operations: what the op-database runners do not cover (node names, warnings,
higher-order gradients, in-place forms, vander's gradient)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import reftorch

torch = pytest.importorskip("torch")


def _pair(array, requires_grad=False):
    r = reftorch.tensor(array, dtype=reftorch.float64, requires_grad=requires_grad)
    t = torch.tensor(array, dtype=torch.float64, requires_grad=requires_grad)
    return r, t


def _close(r, t):
    np.testing.assert_allclose(np.asarray(r.detach().tolist()), t.detach().numpy(),
                               rtol=1e-9, atol=1e-9)


RNG = np.random.default_rng(7)
A = RNG.standard_normal((3, 3))
B = RNG.standard_normal((3, 3))
V = RNG.standard_normal(3)

NODE_CASES = {
    "flip": lambda m, a, b, v: m.flip(a, [0]),
    "fliplr": lambda m, a, b, v: m.fliplr(a),
    "roll": lambda m, a, b, v: m.roll(a, 1),
    "rot90": lambda m, a, b, v: m.rot90(a, 1, [0, 1]),
    "tril": lambda m, a, b, v: m.tril(a),
    "triu": lambda m, a, b, v: m.triu(a, 1),
    "trace": lambda m, a, b, v: m.trace(a),
    "diag vector": lambda m, a, b, v: m.diag(v),
    "diag_embed": lambda m, a, b, v: m.diag_embed(a),
    "cross": lambda m, a, b, v: m.cross(a, b, dim=0),
    "block_diag": lambda m, a, b, v: m.block_diag(a, b),
    "cdist": lambda m, a, b, v: m.cdist(a, b),
    "renorm": lambda m, a, b, v: m.renorm(a, 2, 0, 1.0),
}


@pytest.mark.parametrize("name", sorted(NODE_CASES))
def test_node_names_match_torch(name):
    ra, ta = _pair(A, True)
    rb, tb = _pair(B, True)
    rv, tv = _pair(V, True)
    got = NODE_CASES[name](reftorch, ra, rb, rv).grad_fn.name()
    expected = NODE_CASES[name](torch, ta, tb, tv).grad_fn.name()
    assert got == expected


def test_cross_without_dim_warns_and_uses_first_dim_of_size_3():
    ra, ta = _pair(RNG.standard_normal((4, 3)))
    rb, tb = _pair(RNG.standard_normal((4, 3)))
    with pytest.warns(UserWarning, match="without specifying the dim"):
        got = reftorch.cross(ra, rb)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = torch.cross(ta, tb)
    _close(got, expected)


def test_meshgrid_without_indexing_warns():
    r = reftorch.arange(3)
    with pytest.warns(UserWarning, match="indexing"):
        reftorch.meshgrid(r, r)


@pytest.mark.parametrize("equation,shapes", [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ii,i->i", [(3, 3), (3,)]),
    ("ij,ij->", [(2, 3), (2, 3)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
])
def test_einsum_double_backward_matches_torch(equation, shapes):
    arrays = [RNG.standard_normal(s) for s in shapes]
    results = []
    for module in (reftorch, torch):
        xs = [module.tensor(a, dtype=module.float64, requires_grad=True) for a in arrays]
        out = module.einsum(equation, *xs)
        cot = module.tensor(np.linspace(-1, 1, out.numel()).reshape(tuple(out.shape)),
                            dtype=module.float64)
        grads = module.autograd.grad(out, xs, cot, create_graph=True)
        total = sum((g * g).sum() if hasattr(g, "sum") else g for g in grads)
        results.append(module.autograd.grad(total, xs))
    for got, expected in zip(*results):
        _close(got, expected)


def test_einsum_gradient_passes_gradcheck():
    a = reftorch.tensor(RNG.standard_normal((3, 3)), dtype=reftorch.float64,
                        requires_grad=True)
    b = reftorch.tensor(RNG.standard_normal((3, 2)), dtype=reftorch.float64,
                        requires_grad=True)
    assert reftorch.autograd.gradcheck(lambda x, y: reftorch.einsum("ii,ij->j", x, y), (a, b))


def test_tril_inplace_gradient_matches_torch():
    got = []
    for module in (reftorch, torch):
        x = module.tensor(A, dtype=module.float64, requires_grad=True)
        y = x * 2
        y.tril_(-1)
        y.backward(module.tensor(B, dtype=module.float64))
        got.append(x.grad)
    _close(*got)


def test_vander_gradient_matches_power_formulation():
    # torch.vander itself cannot be differentiated (PyTorch 2.x raises an in-place error in
    # its backward), so the reference is the same matrix built from powers of x.
    x = np.array([0.5, -1.5, 2.0, 3.0])
    cot = RNG.standard_normal((4, 3))
    r = reftorch.tensor(x, dtype=reftorch.float64, requires_grad=True)
    reftorch.vander(r, 3).backward(reftorch.tensor(cot, dtype=reftorch.float64))
    t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    torch.stack([t ** 2, t, torch.ones_like(t)], dim=1).backward(torch.tensor(cot))
    _close(r.grad, t.grad)


def test_out_argument_is_resized_and_written():
    r, t = _pair(A)
    r_out, t_out = reftorch.empty(0, dtype=reftorch.float64), torch.empty(0, dtype=torch.float64)
    assert reftorch.tril(r, out=r_out) is r_out
    torch.tril(t, out=t_out)
    _close(r_out, t_out)


# out= tensors of the wrong shape: (name, call(module, out_of_5_elements)). Structured ops,
# pointwise ops, reductions, products, index ops, linalg, tuples of outs and arange warn
# (PyTorch's resize_output); the other factories and the samplers resize silently.
_RESIZED_OUTS = {
    "add": lambda m, o: m.add(m.ones(3), 1, out=o),
    "mul": lambda m, o: m.mul(m.ones(3), m.ones(3), out=o),
    "exp": lambda m, o: m.exp(m.ones(3), out=o),
    "clamp": lambda m, o: m.clamp(m.ones(3), 0, 1, out=o),
    "where": lambda m, o: m.where(m.ones(3) > 0, m.ones(3), m.zeros(3), out=o),
    "special.erf": lambda m, o: m.special.erf(m.ones(3), out=o),
    "special.ndtr": lambda m, o: m.special.ndtr(m.ones(3), out=o),
    "sum": lambda m, o: m.sum(m.ones(3, 3), 0, out=o),
    "logsumexp": lambda m, o: m.logsumexp(m.ones(3, 3), 0, out=o),
    "cumsum": lambda m, o: m.cumsum(m.ones(3), 0, out=o),
    "mm": lambda m, o: m.mm(m.ones(2, 2), m.ones(2, 2), out=o),
    "addmm": lambda m, o: m.addmm(m.ones(2, 2), m.ones(2, 2), m.ones(2, 2), out=o),
    "cat": lambda m, o: m.cat([m.ones(3)], out=o),
    "gather": lambda m, o: m.gather(m.ones(3), 0, m.zeros(2, dtype=m.int64), out=o),
    "linalg.inv": lambda m, o: m.linalg.inv(m.eye(2), out=o),
    "max with dim": lambda m, o: m.max(m.ones(3, 3), 0,
                                       out=(o, m.empty(o.numel(), dtype=m.int64))),
    "arange": lambda m, o: m.arange(3.0, out=o),
    "zeros": lambda m, o: m.zeros(3, out=o),
    "linspace": lambda m, o: m.linspace(0, 1, 3, out=o),
    "randn": lambda m, o: m.randn(3, out=o),
    "bernoulli": lambda m, o: m.bernoulli(m.full((3,), 0.5), out=o),
}


@pytest.mark.parametrize("name", sorted(_RESIZED_OUTS))
def test_resizing_a_non_empty_out_warns_as_torch_does(name):
    """Where PyTorch warns that a non-empty out= tensor was resized, so do we (and nowhere
    else); an empty out= never warns; either way the result has the new shape."""
    call = _RESIZED_OUTS[name]
    outcomes = []
    for lib in (reftorch, torch):
        for out in (lib.empty(5), lib.empty(0)):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                call(lib, out)
            resized = [w for w in caught if issubclass(w.category, UserWarning) and (
                "was resized since it had shape" in str(w.message) or
                "does not match the computed number of elements" in str(w.message))]
            outcomes.append((bool(resized), out.numel() != 5))
    assert outcomes[:2] == outcomes[2:]
    assert outcomes[1][0] is False     # an empty out: no warning


def test_arange_keeps_an_out_of_the_right_size_in_its_shape():
    for lib in (reftorch, torch):
        out = lib.empty(2, 2)
        lib.arange(4.0, out=out)
        assert tuple(out.shape) == (2, 2) and out.tolist() == [[0.0, 1.0], [2.0, 3.0]]


def test_flip_returns_a_copy():
    r = reftorch.arange(4.0)
    flipped = reftorch.flip(r, [0])
    flipped[0] = 100.0
    assert r.tolist() == [0.0, 1.0, 2.0, 3.0]
