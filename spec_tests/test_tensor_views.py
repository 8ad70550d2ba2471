"""Views share storage and have PyTorch's exact sizes, strides and offsets."""
from __future__ import annotations

import numpy as np
import pytest

import reftorch

torch = pytest.importorskip("torch")

VIEWS = [
    ("view", lambda t: t.view(6, 4)), ("view -1", lambda t: t.view(-1, 2)),
    ("view scalar dims", lambda t: t.view(2, 1, 3, 4)),
    ("reshape", lambda t: t.reshape(4, 6)), ("transpose", lambda t: t.transpose(0, 2)),
    ("t", lambda t: t[0].t()), ("permute", lambda t: t.permute(2, 0, 1)),
    ("expand", lambda t: t[:, :1].expand(2, 5, 4)), ("expand new dims",
                                                     lambda t: t[0, 0].expand(3, 2, 4)),
    ("narrow", lambda t: t.narrow(2, 1, 2)), ("select", lambda t: t.select(1, -1)),
    ("squeeze", lambda t: t[:, :1].squeeze()), ("squeeze dim", lambda t: t[:, :1].squeeze(1)),
    ("unsqueeze", lambda t: t.unsqueeze(1)), ("unsqueeze end", lambda t: t.unsqueeze(-1)),
    ("unfold", lambda t: t.unfold(2, 2, 1)), ("diagonal", lambda t: t.diagonal(0, 1, 2)),
    ("diagonal offset", lambda t: t.diagonal(1, 1, 2)),
    ("diagonal negative", lambda t: t.diagonal(-1, 2, 1)),
    ("as_strided", lambda t: t.as_strided((3, 3), (2, 5), 1)),
    ("slicing", lambda t: t[1:, ::2, None, 1]), ("ellipsis", lambda t: t[..., 1:3]),
    ("view of transposed", lambda t: t.transpose(1, 2).reshape(2, 4, 3)),
    ("flatten", lambda t: t.flatten(1)), ("T", lambda t: t.T),
    ("contiguous of permuted", lambda t: t.permute(2, 1, 0).contiguous()),
]


@pytest.mark.parametrize("name,fn", VIEWS, ids=[v[0] for v in VIEWS])
def test_view_geometry_matches_torch(name, fn):
    r = fn(reftorch.arange(24).reshape(2, 3, 4))
    t = fn(torch.arange(24).reshape(2, 3, 4))
    assert tuple(r.shape) == tuple(t.shape)
    assert r.stride() == t.stride()
    assert r.storage_offset() == t.storage_offset()
    assert r.is_contiguous() == t.is_contiguous()
    assert r.tolist() == t.tolist()


def test_views_share_storage_and_version_counter():
    base = reftorch.zeros(3, 4)
    view = base.t()[1:]
    v0 = base._version
    view.add_(1)
    assert base._np.sum() == 9.0
    assert base._version == view._version > v0


def test_reshape_copies_only_when_it_must():
    base = reftorch.arange(12).reshape(3, 4)
    assert base.reshape(4, 3).data_ptr() == base.data_ptr()
    copied = base.t().reshape(12)
    assert copied.data_ptr() != base.data_ptr() and copied.is_contiguous()


def test_view_errors_match_torch():
    for fn in (lambda m: m.arange(12).reshape(3, 4).t().view(12),
               lambda m: m.arange(6).view(4, 2), lambda m: m.arange(6).view(-1, -1),
               lambda m: m.arange(6).expand(2, 3), lambda m: m.arange(6).transpose(0, 2),
               lambda m: m.arange(6).select(0, 6), lambda m: m.zeros(2, 3).permute(0)):
        with pytest.raises(Exception) as expected:
            fn(torch)
        with pytest.raises(type(expected.value)):
            fn(reftorch)


def test_numpy_interop_shares_memory():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = reftorch.from_numpy(a)
    a[0, 0] = 42
    assert t[0, 0].item() == 42
    t.add_(1)
    assert a[1, 2] == 6
    back = t.numpy()
    back[0, 1] = -1
    assert t[0, 1].item() == -1
    strided = reftorch.from_numpy(a[:, ::2])
    assert strided.stride() == (3, 2) and strided.tolist() == a[:, ::2].tolist()
    with pytest.raises(ValueError):
        reftorch.from_numpy(a[:, ::-1])
    with pytest.raises(TypeError):
        reftorch.from_numpy(np.zeros(2, dtype=np.uint16))
    assert np.asarray(t).shape == (2, 3)


def test_python_conversions():
    t = reftorch.tensor([[1.5]])
    assert float(t) == 1.5 and int(t) == 1 and bool(t) and t.item() == 1.5
    assert [3, 4][reftorch.tensor(1)] == 4
    assert len(reftorch.zeros(5, 2)) == 5
    assert [x.tolist() for x in reftorch.tensor([[1, 2], [3, 4]])] == [[1, 2], [3, 4]]
    assert reftorch.tensor([1.0, 2.0], dtype=reftorch.bfloat16).tolist() == [1.0, 2.0]
    with pytest.raises(RuntimeError):
        bool(reftorch.zeros(2))
    with pytest.raises(TypeError):
        len(reftorch.tensor(1.0))
    with pytest.raises(TypeError):
        [1][reftorch.tensor(0.0)]
    with pytest.raises(RuntimeError):
        reftorch.tensor([1.0], requires_grad=True).numpy()


def test_in_place_ops_bump_the_version_counter():
    t = reftorch.zeros(3)
    before = t._version
    t.add_(1)
    t.mul_(2)
    t[0] = 5
    t.fill_(1)
    assert t._version == before + 4


def test_in_place_shape_and_dtype_rules_match_torch():
    for fn in (lambda m: m.zeros(3).add_(m.zeros(2, 3)),
               lambda m: m.zeros(3, dtype=m.int64).add_(1.5),
               lambda m: m.zeros(3, dtype=m.int64).div_(2),
               lambda m: m.zeros(3, dtype=m.bool).add_(1)):
        with pytest.raises(Exception) as expected:
            fn(torch)
        with pytest.raises(type(expected.value)):
            fn(reftorch)


def test_requires_grad_and_grad_fn_names():
    x = reftorch.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2 + 1
    assert y.requires_grad and type(y.grad_fn).__name__ == "AddBackward0"
    assert type((x * 2).grad_fn).__name__ == "MulBackward0"
    assert repr(y) == repr(torch.tensor([1.0, 2.0], requires_grad=True) * 2 + 1)
    with reftorch.no_grad():
        assert not (x * 2).requires_grad
    with pytest.raises(RuntimeError):
        x.add_(1)
    with pytest.raises(RuntimeError):
        reftorch.tensor([1, 2], requires_grad=True)


def test_views_see_storage_that_moved():
    """resize_ and share_memory_ move a storage's elements to new memory: views made (and
    read) before the move must write to and read from the new memory."""
    import reftorch
    t = reftorch.zeros(4)
    v, square = t[1:3], t.view(2, 2)
    v.numpy(), square.numpy()                # build the views' cached NumPy arrays
    t.share_memory_()
    v.fill_(5.0)
    assert t.tolist() == [0.0, 5.0, 5.0, 0.0] and square.tolist() == [[0.0, 5.0], [5.0, 0.0]]
    grown = reftorch.zeros(3)
    head = grown[:2]
    head.numpy()
    grown.resize_(10)
    head.fill_(1.0)
    assert grown[:3].tolist() == [1.0, 1.0, 0.0]


def test_view_as_real_and_complex_share_memory_and_differentiate():
    import reftorch
    import torch

    def run(lib):
        x = lib.arange(12.0, dtype=lib.float64).reshape(3, 2, 2).requires_grad_()
        z = lib.view_as_complex(x)
        w = lib.view_as_real(z * (1 + 2j))
        (w * lib.arange(12.0, dtype=lib.float64).reshape(3, 2, 2)).sum().backward()
        c = lib.zeros(2, 3, dtype=lib.complex64)
        r = lib.view_as_real(c.t())
        r[0, 1, 1] = 5.0                     # writes the imaginary part of c[1, 0]
        return [tuple(z.shape), z.stride(), type(z.grad_fn).__name__,
                type(w.grad_fn).__name__, x.grad.numpy().tolist(), r.stride(),
                c.numpy().tolist()]
    assert run(reftorch) == run(torch)


@pytest.mark.parametrize("make", [
    lambda lib: lib.ones(3), lambda lib: lib.ones(3, 2).t(),
    lambda lib: lib.ones(5)[1:].view(2, 2), lambda lib: lib.zeros(3, 2, dtype=lib.int64),
    lambda lib: lib.ones(4, 3)[:, :2], lambda lib: lib.ones(2, 3, 2)[:, 1:],
])
def test_view_as_complex_layout_rules(make):
    import reftorch
    import torch

    def outcome(lib):
        try:
            return tuple(lib.view_as_complex(make(lib)).shape)
        except RuntimeError as error:
            return str(error)
    assert outcome(reftorch) == outcome(torch)


def test_pin_memory_without_accelerator_matches_pytorch():
    import reftorch
    import torch
    for lib in (reftorch, torch):
        t = lib.ones(2)
        assert t.is_pinned() is False
        if not lib.cuda.is_available():
            with pytest.raises(RuntimeError, match="accelerator"):
                t.pin_memory()


@pytest.mark.parametrize("args", ["empty", "sizes", "data", "size", "same"])
def test_tensor_new_follows_the_legacy_constructor(args):
    import warnings

    import reftorch
    import torch

    def run(lib):
        x = lib.ones(2, dtype=lib.float64)
        call_args = {"empty": (), "sizes": (2, 3), "data": ([1, 2],),
                     "size": (lib.Size([2, 1]),), "same": (x,)}[args]
        made = x.new(*call_args)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            storage_name = x.storage_type().__name__
        shares = made.numel() > 0 and made.data_ptr() == x.data_ptr()
        return made.dtype == x.dtype, tuple(made.shape), made is x, shares, storage_name
    assert run(reftorch) == run(torch)


def test_variable_is_the_tensor_api():
    import reftorch
    from reftorch.autograd import Variable
    t = Variable(reftorch.ones(2), requires_grad=True)
    assert type(t) is reftorch.Tensor and isinstance(t, Variable) and t.requires_grad
    (t * 3).sum().backward()
    assert t.grad.tolist() == [3.0, 3.0] and Variable.backward is reftorch.Tensor.backward
