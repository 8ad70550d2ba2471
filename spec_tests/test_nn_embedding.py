"""Embedding, EmbeddingBag and one_hot against PyTorch: lookups, weight gradients (padding_idx,
scale_grad_by_freq), max_norm's in-place renormalisation, every bag mode/offsets combination,
per_sample_weights, seeded init, reprs and errors."""
from __future__ import annotations


import numpy as np
import pytest

import reftorch

torch = pytest.importorskip("torch")

TOL = {"float64": 1e-12, "float32": 1e-5}


def _close(ours, theirs, dtype="float64"):
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(),
                               rtol=TOL[dtype], atol=TOL[dtype])


def _modules(name, *args, dtype="float64", **kwargs):
    """Our module and torch's, with torch's weight copied into ours."""
    theirs = getattr(torch.nn, name)(*args, dtype=getattr(torch, dtype), **kwargs)
    ours = getattr(reftorch.nn, name)(*args, dtype=getattr(reftorch, dtype), **kwargs)
    ours.load_state_dict({k: reftorch.from_numpy(v.detach().numpy().copy())
                          for k, v in theirs.state_dict().items()})
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    return ours, theirs


def _indices(values):
    return reftorch.tensor(values, dtype=reftorch.int64), torch.tensor(values, dtype=torch.int64)


EMBEDDING_CASES = [
    ({}, [[1, 2, 4, 5], [4, 3, 2, 9]]),
    ({"padding_idx": 2}, [[1, 2, 4, 2], [0, 2, 2, 9]]),
    ({"padding_idx": -3}, [1, 7, 7, 3]),
    ({"scale_grad_by_freq": True}, [[1, 1, 4], [4, 4, 1]]),
    ({"scale_grad_by_freq": True, "padding_idx": 4}, [[1, 1, 4], [4, 4, 0]]),
    ({"max_norm": 1.0}, [[1, 2, 2], [5, 6, 1]]),
    ({"max_norm": 1.5, "norm_type": 1.0}, [0, 3, 8, 3]),
    ({}, 7),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("kwargs,indices", EMBEDDING_CASES)
def test_embedding_module(kwargs, indices, dtype):
    ours, theirs = _modules("Embedding", 10, 3, dtype=dtype, **kwargs)
    idx, idx_t = _indices(indices)
    out, out_t = ours(idx), theirs(idx_t)
    _close(out, out_t, dtype)
    assert type(out.grad_fn).__name__ == type(out_t.grad_fn).__name__ == "EmbeddingBackward0"
    # max_norm rescales the looked-up rows of the weight itself, in place
    _close(ours.weight, theirs.weight, dtype)
    grad = np.random.default_rng(0).standard_normal(tuple(out_t.shape))
    out.backward(reftorch.tensor(grad, dtype=out.dtype))
    out_t.backward(torch.tensor(grad, dtype=out_t.dtype))
    _close(ours.weight.grad, theirs.weight.grad, dtype)


def test_embedding_default_init_matches_torch_seed():
    for dtype in ("float64", "float32"):
        reftorch.manual_seed(11)
        torch.manual_seed(11)
        ours = reftorch.nn.Embedding(7, 5, padding_idx=1, dtype=getattr(reftorch, dtype))
        theirs = torch.nn.Embedding(7, 5, padding_idx=1, dtype=getattr(torch, dtype))
        # float32 normal_ of the shared random module can differ in the last bit
        _close(ours.weight, theirs.weight, dtype)
        assert not ours.weight.detach().numpy()[1].any()


def test_embedding_from_pretrained_and_functional():
    values = np.random.default_rng(1).standard_normal((6, 4))
    ours = reftorch.nn.Embedding.from_pretrained(reftorch.tensor(values), padding_idx=2)
    theirs = torch.nn.Embedding.from_pretrained(torch.tensor(values), padding_idx=2)
    assert repr(ours) == repr(theirs)
    assert ours.weight.requires_grad is theirs.weight.requires_grad is False
    unfrozen = reftorch.nn.Embedding.from_pretrained(reftorch.tensor(values), freeze=False)
    assert unfrozen.weight.requires_grad
    idx, idx_t = _indices([[0, 2], [5, 1]])
    _close(ours(idx), theirs(idx_t))
    w, wt = reftorch.tensor(values), torch.tensor(values)
    _close(reftorch.nn.functional.embedding(idx, w, padding_idx=-1),
           torch.nn.functional.embedding(idx_t, wt, padding_idx=-1))
    _close(reftorch.embedding(w, idx.int()), torch.embedding(wt, idx_t.int()))


def test_embedding_renorm_in_place_like_torch():
    values = np.random.default_rng(2).standard_normal((6, 4)) * 3
    w, wt = reftorch.tensor(values), torch.tensor(values)
    idx, idx_t = _indices([0, 3, 3, 5])
    reftorch.embedding_renorm_(w, idx, 2.0, 3.0)
    torch.embedding_renorm_(wt, idx_t, 2.0, 3.0)
    _close(w, wt)


def test_embedding_sparse_gives_dense_grad_with_warning():
    emb = reftorch.nn.Embedding(5, 2, sparse=True)
    assert "sparse=True" in repr(emb)
    with pytest.warns(UserWarning, match="sparse"):
        out = emb(reftorch.tensor([1, 2]))
    out.sum().backward()
    assert emb.weight.grad.layout == reftorch.strided


@pytest.mark.parametrize("call,args", [
    ("F", ([1, 10], (10, 3), {})),        # index out of range
    ("F", ([-1, 2], (10, 3), {})),
    ("F", ([1.0, 2.0], (10, 3), {})),     # float indices
    ("F", ([1, 2], (10,), {})),           # 1-D weight
    ("F", ([1, 2], (10, 3), {"padding_idx": 10})),
    ("F", ([1, 2], (10, 3), {"padding_idx": -11})),
])
def test_embedding_errors_match_torch(call, args):
    values, wshape, kwargs = args
    is_float = isinstance(values[0], float)
    with pytest.raises(Exception) as theirs:
        torch.nn.functional.embedding(
            torch.tensor(values, dtype=torch.float32 if is_float else torch.int64),
            torch.zeros(wshape), **kwargs)
    with pytest.raises(type(theirs.value)):
        reftorch.nn.functional.embedding(
            reftorch.tensor(values, dtype=reftorch.float32 if is_float else reftorch.int64),
            reftorch.zeros(wshape), **kwargs)


# --- EmbeddingBag ----------------------------------------------------------------------------

BAG_INPUTS = [
    # (input, offsets, include_last_offset)
    ([[1, 2, 4, 5], [4, 3, 2, 9]], None, False),            # 2-D: fixed-length bags
    ([1, 2, 4, 5, 4, 3, 2, 9], [0, 3, 3, 6], False),          # with an empty bag
    ([1, 2, 4, 5, 4, 3, 2, 9], [0, 2, 5, 8], True),           # last offset = end
    ([1, 2, 4, 5, 4, 3, 2, 9], [0, 0, 5, 8], True),           # empty first bag
    # (offsets[-1] < len(input) with include_last_offset is outside the documented contract:
    # torch's float64 path lets the last bag run to the end, its float32 path stops it at
    # offsets[-1]; reftorch does the former)
    ([3, 3, 1], [0], False),
]
BAG_CASES = [(mode, padding_idx, inputs) for mode in ("sum", "mean", "max")
             for padding_idx in (None, 2) for inputs in BAG_INPUTS]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("mode,padding_idx,inputs", BAG_CASES)
def test_embedding_bag_modes(mode, padding_idx, inputs, dtype):
    values, offsets, last = inputs
    ours, theirs = _modules("EmbeddingBag", 10, 3, mode=mode, padding_idx=padding_idx,
                            include_last_offset=last, dtype=dtype)
    idx, idx_t = _indices(values)
    off, off_t = _indices(offsets) if offsets is not None else (None, None)
    out, out_t = ours(idx, off), theirs(idx_t, off_t)
    _close(out, out_t, dtype)
    assert type(out.grad_fn).__name__ == type(out_t.grad_fn).__name__
    grad = np.random.default_rng(3).standard_normal(tuple(out_t.shape))
    out.backward(reftorch.tensor(grad, dtype=out.dtype))
    out_t.backward(torch.tensor(grad, dtype=out_t.dtype))
    _close(ours.weight.grad, theirs.weight.grad, dtype)


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_scale_grad_by_freq(mode):
    # Oracle: torch's Embedding(scale_grad_by_freq=True) followed by the bag reduction.
    # (torch 2.x's own EmbeddingBag backward divides by a wrong count when bags differ, e.g.
    # indices [1, 1, 4, 7, 4, 1], offsets [0, 2, 4] gives row 7 a gradient of 1/3, not 1.)
    values = np.random.default_rng(6).standard_normal((8, 3))
    w, wt = (reftorch.tensor(values, requires_grad=True),
             torch.tensor(values, requires_grad=True))
    idx, idx_t = _indices([1, 1, 4, 7, 4, 1])
    out = reftorch.nn.functional.embedding_bag(idx, w, reftorch.tensor([0, 2, 4]), mode=mode,
                                               scale_grad_by_freq=True)
    rows = torch.nn.functional.embedding(idx_t, wt, scale_grad_by_freq=True).reshape(3, 2, 3)
    out_t = rows.sum(1) if mode == "sum" else rows.mean(1)
    _close(out, out_t)
    grad = np.random.default_rng(7).standard_normal((3, 3))
    out.backward(reftorch.tensor(grad))
    out_t.backward(torch.tensor(grad))
    _close(w.grad, wt.grad)


@pytest.mark.parametrize("kwargs", [{"max_norm": 1.0, "mode": "mean"},
                                    {"max_norm": 0.5, "norm_type": 1.0, "mode": "max"}])
def test_embedding_bag_freq_and_max_norm(kwargs):
    ours, theirs = _modules("EmbeddingBag", 8, 3, **kwargs)
    idx, idx_t = _indices([1, 1, 4, 7, 4, 1])
    off, off_t = _indices([0, 2, 4])
    out, out_t = ours(idx, off), theirs(idx_t, off_t)
    _close(out, out_t)
    _close(ours.weight, theirs.weight)
    out.sum().backward()
    out_t.sum().backward()
    _close(ours.weight.grad, theirs.weight.grad)


@pytest.mark.parametrize("padding_idx", [None, 4])
def test_embedding_bag_per_sample_weights(padding_idx):
    rng = np.random.default_rng(4)
    values = rng.standard_normal((8, 3))
    psw = rng.standard_normal(6)
    w, wt = (reftorch.tensor(values, requires_grad=True),
             torch.tensor(values, requires_grad=True))
    p, pt = reftorch.tensor(psw, requires_grad=True), torch.tensor(psw, requires_grad=True)
    idx, idx_t = _indices([1, 1, 4, 7, 4, 1])
    off, off_t = _indices([0, 2, 2, 4])
    out = reftorch.nn.functional.embedding_bag(idx, w, off, mode="sum", per_sample_weights=p,
                                               padding_idx=padding_idx)
    out_t = torch.nn.functional.embedding_bag(idx_t, wt, off_t, mode="sum",
                                              per_sample_weights=pt, padding_idx=padding_idx)
    _close(out, out_t)
    grad = rng.standard_normal(tuple(out_t.shape))
    out.backward(reftorch.tensor(grad))
    out_t.backward(torch.tensor(grad))
    _close(w.grad, wt.grad)
    _close(p.grad, pt.grad)


def test_embedding_bag_from_pretrained_and_init():
    values = np.random.default_rng(5).standard_normal((6, 2))
    ours = reftorch.nn.EmbeddingBag.from_pretrained(reftorch.tensor(values), mode="max")
    theirs = torch.nn.EmbeddingBag.from_pretrained(torch.tensor(values), mode="max")
    assert repr(ours) == repr(theirs)
    assert not ours.weight.requires_grad
    idx, idx_t = _indices([[0, 3], [5, 1]])
    _close(ours(idx), theirs(idx_t))
    reftorch.manual_seed(4)
    torch.manual_seed(4)
    _close(reftorch.nn.EmbeddingBag(5, 3, dtype=reftorch.float64).weight,
           torch.nn.EmbeddingBag(5, 3, dtype=torch.float64).weight)


BAG_ERRORS = [
    ([[1, 2]], [0], {}),                             # 2-D input with offsets
    ([1, 2], None, {}),                              # 1-D input without offsets
    ([1, 2], [1], {}),                               # offsets[0] != 0
    ([1, 2], [0, 3], {}),                            # offsets past the end
    ([1, 2], [0], {"mode": "median"}),
    ([1, 2], [0], {"mode": "max", "scale_grad_by_freq": True}),
    ([1, 2], [0], {"mode": "mean", "per_sample_weights": [1.0, 2.0]}),
    ([1, 2], [0], {"mode": "sum", "per_sample_weights": [1.0]}),
    ([[[1]]], None, {}),
]


@pytest.mark.parametrize("values,offsets,kwargs", BAG_ERRORS)
def test_embedding_bag_errors_match_torch(values, offsets, kwargs):
    def call(module, F):
        kw = dict(kwargs)
        if "per_sample_weights" in kw:
            kw["per_sample_weights"] = module.tensor(kw["per_sample_weights"],
                                                     dtype=module.float32)
        offs = None if offsets is None else module.tensor(offsets)
        return F.embedding_bag(module.tensor(values), module.zeros(4, 2), offs, **kw)

    with pytest.raises(Exception) as theirs:
        call(torch, torch.nn.functional)
    with pytest.raises(type(theirs.value)):
        call(reftorch, reftorch.nn.functional)


# --- one_hot ----------------------------------------------------------------------------------

@pytest.mark.parametrize("values,num_classes", [([1, 0, 3], -1), ([[2, 2], [0, 1]], 5),
                                                (3, -1), ([], 4)])
def test_one_hot_matches_torch(values, num_classes):
    ours = reftorch.nn.functional.one_hot(reftorch.tensor(values, dtype=reftorch.int64),
                                          num_classes)
    theirs = torch.nn.functional.one_hot(torch.tensor(values, dtype=torch.int64), num_classes)
    assert ours.dtype == reftorch.int64
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.parametrize("values,dtype,num_classes", [
    ([1, 2], "float32", -1), ([1, 2], "int32", -1), ([-1, 2], "int64", -1),
    ([1, 5], "int64", 3), ([], "int64", -1), ([1, 2], "int64", 0)])
def test_one_hot_errors_match_torch(values, dtype, num_classes):
    with pytest.raises(Exception) as theirs:
        torch.nn.functional.one_hot(torch.tensor(values, dtype=getattr(torch, dtype)),
                                    num_classes)
    with pytest.raises(type(theirs.value)):
        reftorch.nn.functional.one_hot(reftorch.tensor(values, dtype=getattr(reftorch, dtype)),
                                       num_classes)
