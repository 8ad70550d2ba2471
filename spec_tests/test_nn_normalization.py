"""Normalization layers and their functional forms against PyTorch: outputs, input and
parameter gradients, running statistics over several training steps, eval outputs, state
dicts, reprs and errors."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import reftorch

torch = pytest.importorskip("torch")

TOL = {"float64": 1e-9, "float32": 1e-5}


def _close(ours, theirs, dtype="float64"):
    np.testing.assert_allclose(ours.detach().float().numpy() if dtype != "float64"
                               else ours.detach().numpy(),
                               theirs.detach().float().numpy() if dtype != "float64"
                               else theirs.detach().numpy(), rtol=TOL.get(dtype, 2e-2),
                               atol=TOL.get(dtype, 2e-2))


def _copy_state(ours, theirs):
    """Load torch's parameters and buffers into our module (perturbed weights)."""
    with torch.no_grad():
        for p in theirs.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    state = {k: reftorch.from_numpy(v.detach().numpy().copy())
             for k, v in theirs.state_dict().items()}
    ours.load_state_dict(state)


def _check_module(ours, theirs, shape, dtype="float64", steps=3, seed=0):
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    torch.manual_seed(seed)
    _copy_state(ours, theirs)
    ours.to(getattr(reftorch, dtype))
    theirs.to(getattr(torch, dtype))
    rng = np.random.default_rng(seed)
    for step in range(steps + 1):
        if step == steps:
            ours.eval()
            theirs.eval()
        values = rng.standard_normal(shape) * 2 + 1
        x = reftorch.tensor(values, dtype=getattr(reftorch, dtype), requires_grad=True)
        xt = torch.tensor(values, dtype=getattr(torch, dtype), requires_grad=True)
        out, out_t = ours(x), theirs(xt)
        _close(out, out_t, dtype)
        assert type(out.grad_fn).__name__ == type(out_t.grad_fn).__name__
        grad = rng.standard_normal(shape)
        out.backward(reftorch.tensor(grad, dtype=getattr(reftorch, dtype)))
        out_t.backward(torch.tensor(grad, dtype=getattr(torch, dtype)))
        _close(x.grad, xt.grad, dtype)
        for (name, p), (_, pt) in zip(ours.named_parameters(), theirs.named_parameters()):
            _close(p.grad, pt.grad, dtype)
        for (name, b), (_, bt) in zip(ours.named_buffers(), theirs.named_buffers()):
            assert b.dtype.is_floating_point == bt.dtype.is_floating_point, name
            if b.dtype == reftorch.int64:
                assert b.item() == bt.item(), name
            else:
                _close(b, bt, dtype)


BATCH_CASES = [
    ("BatchNorm1d", (3,), {}, (5, 3)),
    ("BatchNorm1d", (3,), {"momentum": None}, (4, 3, 6)),
    ("BatchNorm2d", (3,), {}, (4, 3, 5, 6)),
    ("BatchNorm2d", (3,), {"affine": False}, (2, 3, 4, 5)),
    ("BatchNorm2d", (3,), {"track_running_stats": False, "eps": 1e-3}, (2, 3, 4, 5)),
    ("BatchNorm2d", (3,), {"bias": False, "momentum": 0.3}, (2, 3, 4, 5)),
    ("BatchNorm3d", (2,), {}, (2, 2, 3, 4, 5)),
    ("SyncBatchNorm", (3,), {}, (4, 3, 5)),
    ("InstanceNorm1d", (3,), {}, (4, 3, 6)),
    ("InstanceNorm1d", (3,), {"affine": True, "track_running_stats": True}, (3, 7)),
    ("InstanceNorm2d", (3,), {"affine": True}, (2, 3, 4, 5)),
    ("InstanceNorm2d", (3,), {"track_running_stats": True, "momentum": 0.2}, (2, 3, 4, 5)),
    ("InstanceNorm3d", (2,), {"affine": True, "track_running_stats": True}, (2, 2, 3, 4, 3)),
    ("LayerNorm", (6,), {}, (4, 3, 6)),
    ("LayerNorm", ((3, 6),), {"bias": False}, (4, 3, 6)),
    ("LayerNorm", ((4, 5),), {"elementwise_affine": False, "eps": 1e-2}, (2, 4, 5)),
    ("GroupNorm", (2, 4), {}, (3, 4, 5)),
    ("GroupNorm", (3, 6), {"affine": False}, (2, 6, 3, 2)),
    ("GroupNorm", (1, 3), {"bias": False}, (2, 3, 4, 4)),
    ("RMSNorm", (6,), {}, (4, 3, 6)),
    ("RMSNorm", ((3, 6),), {"eps": 1e-3, "elementwise_affine": False}, (4, 3, 6)),
    ("LocalResponseNorm", (3,), {}, (2, 5, 4)),
    ("LocalResponseNorm", (2,), {"alpha": 0.1, "beta": 0.5, "k": 2.0}, (2, 6, 3, 4)),
    ("LocalResponseNorm", (4,), {}, (2, 5, 3, 2, 2)),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,args,kwargs,shape", BATCH_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(BATCH_CASES)])
def test_modules_match_torch(name, args, kwargs, shape, dtype):
    ours = getattr(reftorch.nn, name)(*args, **kwargs)
    theirs = getattr(torch.nn, name)(*args, **kwargs)
    _check_module(ours, theirs, shape, dtype)


def test_half_types_compute_in_float32():
    rng = np.random.default_rng(1)
    values = rng.standard_normal((4, 3, 5)).astype(np.float32) * 3 + 2
    for dtype in ("float16", "bfloat16"):
        x = reftorch.tensor(values).to(getattr(reftorch, dtype))
        xt = torch.tensor(values).to(getattr(torch, dtype))
        for call in (lambda m, t: m.nn.functional.batch_norm(t, None, None, training=True),
                     lambda m, t: m.nn.functional.layer_norm(t, (5,)),
                     lambda m, t: m.nn.functional.group_norm(t, 3),
                     lambda m, t: m.nn.functional.rms_norm(t, (5,)),
                     lambda m, t: m.native_batch_norm(t, m.ones(3), None, m.zeros(3),
                                                      m.ones(3), True, 0.1, 1e-5)):
            ours, theirs = call(reftorch, x), call(torch, xt)
            ours = ours if isinstance(ours, tuple) else (ours,)
            theirs = theirs if isinstance(theirs, tuple) else (theirs,)
            for a, b in zip(ours, theirs):
                assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
                _close(a, b, dtype)


def test_native_ops_return_torch_statistics():
    rng = np.random.default_rng(2)
    values = rng.standard_normal((3, 4, 5))
    x, xt = reftorch.tensor(values), torch.tensor(values)
    pairs = [(reftorch.native_layer_norm(x, (5,), None, None, 1e-5),
              torch.native_layer_norm(xt, (5,), None, None, 1e-5)),
             (reftorch.native_group_norm(x, None, None, 3, 4, 5, 2, 1e-5),
              torch.native_group_norm(xt, None, None, 3, 4, 5, 2, 1e-5)),
             (reftorch.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5),
              torch.native_batch_norm(xt, None, None, None, None, True, 0.1, 1e-5)),
             (reftorch.native_batch_norm(x, None, None, reftorch.zeros(4, dtype=reftorch.float64),
                                         reftorch.ones(4, dtype=reftorch.float64), False, 0.1,
                                         1e-5),
              torch.native_batch_norm(xt, None, None, torch.zeros(4, dtype=torch.float64),
                                      torch.ones(4, dtype=torch.float64), False, 0.1, 1e-5))]
    for ours, theirs in pairs:
        for a, b in zip(ours, theirs):
            assert tuple(a.shape) == tuple(b.shape)
            _close(a, b)


def test_functional_forms():
    rng = np.random.default_rng(3)
    values = rng.standard_normal((3, 4, 5))
    x, xt = reftorch.tensor(values), torch.tensor(values)
    for call in (lambda m, t: m.nn.functional.normalize(t),
                 lambda m, t: m.nn.functional.normalize(t, p=1, dim=-1, eps=0.5),
                 lambda m, t: m.nn.functional.normalize(t, p=float("inf"), dim=0),
                 lambda m, t: m.nn.functional.local_response_norm(t, 2),
                 lambda m, t: m.nn.functional.instance_norm(t),
                 lambda m, t: m.instance_norm(t, None, None, None, None, True, 0.1, 1e-5, False),
                 lambda m, t: m.layer_norm(t, [4, 5]),
                 lambda m, t: m.group_norm(t, 2),
                 lambda m, t: m.rms_norm(t, [5], None, 1e-6)):
        _close(call(reftorch, x), call(torch, xt))
    out = reftorch.empty(0, dtype=reftorch.float64)
    reftorch.nn.functional.normalize(x, out=out)
    _close(out, torch.nn.functional.normalize(xt))


def test_state_dict_version_and_missing_num_batches_tracked():
    ours, theirs = reftorch.nn.BatchNorm2d(3), torch.nn.BatchNorm2d(3)
    assert ours._version == theirs._version == 2
    assert ours.state_dict()._metadata[""]["version"] == 2
    ours.num_batches_tracked.fill_(5)
    theirs.num_batches_tracked.fill_(5)
    for module, lib in ((ours, reftorch), (theirs, torch)):
        state = {k: v for k, v in module.state_dict().items() if k != "num_batches_tracked"}
        module.load_state_dict(state)          # no version metadata: keeps the counter
    assert ours.num_batches_tracked.item() == theirs.num_batches_tracked.item() == 5
    assert ours.num_batches_tracked.dtype == reftorch.int64
    for module in (ours, theirs):
        state = module.state_dict()
        del state["num_batches_tracked"]        # version 2 metadata: the key is missing
        with pytest.raises(RuntimeError):
            module.load_state_dict(state)


def test_convert_sync_batchnorm():
    ours = reftorch.nn.Sequential(reftorch.nn.BatchNorm2d(3),
                                  reftorch.nn.Sequential(reftorch.nn.BatchNorm1d(2, bias=False)))
    converted = reftorch.nn.SyncBatchNorm.convert_sync_batchnorm(ours)
    theirs = torch.nn.SyncBatchNorm.convert_sync_batchnorm(
        torch.nn.Sequential(torch.nn.BatchNorm2d(3),
                            torch.nn.Sequential(torch.nn.BatchNorm1d(2, bias=False))))
    assert repr(converted) == repr(theirs)
    assert converted[0].weight is ours[0].weight
    assert converted[0].running_mean is ours[0].running_mean


def test_seeded_default_init_and_factory_kwargs():
    for name, args in (("BatchNorm2d", (4,)), ("LayerNorm", ((2, 3),)), ("GroupNorm", (2, 4)),
                       ("InstanceNorm1d", (3,)), ("RMSNorm", (5,))):
        ours = getattr(reftorch.nn, name)(*args, dtype=reftorch.float64)
        theirs = getattr(torch.nn, name)(*args, dtype=torch.float64)
        for (k, a), (_, b) in zip(ours.state_dict().items(), theirs.state_dict().items()):
            assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1], k
            np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_instance_norm_warns_on_feature_mismatch_without_affine():
    for lib in (reftorch, torch):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            lib.nn.InstanceNorm1d(5)(lib.zeros(2, 3, 4))
        assert any("does not match num_features" in str(w.message) for w in caught)


ERRORS = [
    ("bn rank", lambda m: m.nn.BatchNorm2d(3)(m.zeros(2, 3, 4))),
    ("bn features", lambda m: m.nn.BatchNorm1d(3)(m.zeros(2, 4))),
    ("bn one value", lambda m: m.nn.BatchNorm1d(3)(m.zeros(1, 3))),
    ("bn eval without stats", lambda m: m.batch_norm(m.zeros(2, 3), None, None, None, None,
                                                     False, 0.1, 1e-5, False)),
    ("bn long", lambda m: m.nn.functional.batch_norm(m.zeros(2, 3, dtype=m.int64), None, None,
                                                     training=True)),
    ("sync rank", lambda m: m.nn.SyncBatchNorm(3)(m.zeros(3))),
    ("instance rank", lambda m: m.nn.InstanceNorm2d(3)(m.zeros(3, 4))),
    ("instance affine features", lambda m: m.nn.InstanceNorm1d(3, affine=True)(
        m.zeros(2, 4, 5))),
    ("instance one spatial", lambda m: m.nn.InstanceNorm1d(3)(m.zeros(2, 3, 1))),
    ("layer shape", lambda m: m.nn.LayerNorm(5)(m.zeros(2, 4))),
    ("layer empty shape", lambda m: m.nn.functional.layer_norm(m.zeros(2, 4), [])),
    ("group divisible", lambda m: m.nn.GroupNorm(2, 3)),
    ("group input", lambda m: m.nn.GroupNorm(2, 4)(m.zeros(2, 6, 3))),
    ("group rank", lambda m: m.nn.functional.group_norm(m.zeros(4), 2)),
    ("lrn rank", lambda m: m.nn.LocalResponseNorm(2)(m.zeros(2, 3))),
    ("rms shape", lambda m: m.nn.RMSNorm(4)(m.zeros(2, 5))),
]


@pytest.mark.parametrize("label,make", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_like_torch(label, make):
    with pytest.raises(Exception) as expected:
        make(torch)
    with pytest.raises(expected.type):
        make(reftorch)


def test_gradcheck_and_gradgradcheck():
    rng = np.random.default_rng(4)
    x = reftorch.tensor(rng.standard_normal((3, 4, 2)), requires_grad=True)
    w = reftorch.tensor(rng.standard_normal(4), requires_grad=True)
    b = reftorch.tensor(rng.standard_normal(4), requires_grad=True)
    lw = reftorch.tensor(rng.standard_normal(2), requires_grad=True)
    rm = reftorch.tensor(rng.standard_normal(4))
    rv = reftorch.tensor(rng.uniform(0.5, 2, size=4))
    F = reftorch.nn.functional
    for fn, inputs in ((lambda x, w, b: F.batch_norm(x, None, None, w, b, True), (x, w, b)),
                       (lambda x, w, b: F.batch_norm(x, rm, rv, w, b, False), (x, w, b)),
                       (lambda x, w, b: F.group_norm(x, 2, w, b), (x, w, b)),
                       (lambda x, w: F.layer_norm(x, (2,), w, w * 2), (x, lw)),
                       (lambda x, w, b: F.instance_norm(x, weight=w, bias=b), (x, w, b)),
                       (lambda x, w: F.rms_norm(x, (2,), w), (x, lw)),
                       (lambda x: F.local_response_norm(x, 3), (x,)),
                       (lambda x: F.normalize(x, dim=1), (x,))):
        assert reftorch.autograd.gradcheck(fn, inputs)
        assert reftorch.autograd.gradgradcheck(fn, inputs)
