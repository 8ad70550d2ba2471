"""MultiheadAttention, F.multi_head_attention_forward and F.scaled_dot_product_attention
against PyTorch (outputs, attention weights, gradients, every option, bool and float masks,
seeded dropout, seeded default init, reprs, errors); also AdaptiveLogSoftmaxWithLoss and
DataParallel (on a machine without accelerators)."""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from reftorch.nn.functional import attention as our_attention
from reftorch.nn.modules.adaptive import AdaptiveLogSoftmaxWithLoss
from reftorch.nn.modules.attention import MultiheadAttention
from reftorch.nn.parallel import DataParallel

torch = pytest.importorskip("torch")
F = torch.nn.functional

TOL = {"float64": 1e-11, "float32": 2e-5}
OURS = {"MultiheadAttention": MultiheadAttention,
        "AdaptiveLogSoftmaxWithLoss": AdaptiveLogSoftmaxWithLoss}


def _np(t):
    return t.detach().numpy()


def _close(ours, theirs, dtype="float64"):
    np.testing.assert_allclose(_np(ours), _np(theirs), rtol=TOL[dtype], atol=TOL[dtype])


def _pair(array, requires_grad=False):
    ours, theirs = reftorch.from_numpy(array.copy()), torch.from_numpy(array.copy())
    if requires_grad:
        ours.requires_grad_()
        theirs.requires_grad_()
    return ours, theirs


def _modules(name, *args, dtype="float64", **kwargs):
    theirs = getattr(torch.nn, name)(*args, dtype=getattr(torch, dtype), **kwargs)
    ours = OURS[name](*args, dtype=getattr(reftorch, dtype), **kwargs)
    ours.load_state_dict({k: reftorch.from_numpy(v.detach().numpy().copy())
                          for k, v in theirs.state_dict().items()})
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    return ours, theirs


def _backward(ours, theirs, rng):
    grad = rng.standard_normal(tuple(theirs.shape)).astype(_np(theirs).dtype)
    (ours * reftorch.from_numpy(grad.copy())).sum().backward()
    (theirs * torch.from_numpy(grad.copy())).sum().backward()


E, HEADS, L, S, N = 8, 2, 4, 5, 3

MHA_CASES = [
    ({}, {}),
    ({"bias": False}, {"average_attn_weights": False}),
    ({"add_bias_kv": True}, {"key_padding_mask": "bool"}),
    ({"add_zero_attn": True}, {"attn_mask": "float2d"}),
    ({"add_bias_kv": True, "add_zero_attn": True}, {"attn_mask": "bool3d",
                                                   "key_padding_mask": "bool"}),
    ({"kdim": 6, "vdim": 3}, {"key_padding_mask": "float"}),
    ({"batch_first": True}, {"attn_mask": "bool2d"}),
    ({"batch_first": True, "kdim": 6, "vdim": 7}, {"need_weights": False,
                                                   "attn_mask": "bool2d"}),
    ({}, {"need_weights": False, "key_padding_mask": "bool"}),
    ({}, {"need_weights": False, "attn_mask": "causal", "is_causal": True}),
    ({}, {"attn_mask": "causal", "is_causal": True}),
]


def _masks(spec, rng, batched=True):
    """Both frameworks' versions of a named mask recipe."""
    if spec == "bool":       # key_padding_mask (N, S): True = ignore that key
        mask = rng.random((N, S)) < 0.3
        mask[:, 0] = False
        return _pair(mask if batched else mask[0])
    if spec == "float":
        return _pair(rng.standard_normal((N, S)) if batched else rng.standard_normal(S))
    if spec == "float2d":
        return _pair(rng.standard_normal((L, S)))
    if spec == "bool2d":
        mask = rng.random((L, S)) < 0.3
        mask[:, 0] = False
        return _pair(mask)
    if spec == "bool3d":
        mask = rng.random((N * HEADS, L, S)) < 0.3
        mask[..., 0] = False
        return _pair(mask)
    if spec == "causal":
        return _pair(np.triu(np.ones((L, S), dtype=bool), 1))
    raise ValueError(spec)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("ctor,call", MHA_CASES)
def test_multihead_attention(ctor, call, dtype):
    rng = np.random.default_rng(1)
    ours, theirs = _modules("MultiheadAttention", E, HEADS, dtype=dtype, **ctor)
    kdim, vdim = ctor.get("kdim", E), ctor.get("vdim", E)
    first = ctor.get("batch_first", False)

    def shape(length, dim):
        return (N, length, dim) if first else (length, N, dim)
    q, q_t = _pair(rng.standard_normal(shape(L, E)).astype(dtype), requires_grad=True)
    k, k_t = _pair(rng.standard_normal(shape(S, kdim)).astype(dtype), requires_grad=True)
    v, v_t = _pair(rng.standard_normal(shape(S, vdim)).astype(dtype), requires_grad=True)
    kwargs, kwargs_t = {}, {}
    for name, value in call.items():
        if name in ("key_padding_mask", "attn_mask"):
            mask, mask_t = _masks(value, rng)
            if mask.dtype.is_floating_point:
                mask, mask_t = mask.to(getattr(reftorch, dtype)), mask_t.to(getattr(torch, dtype))
            kwargs[name], kwargs_t[name] = mask, mask_t
        else:
            kwargs[name] = kwargs_t[name] = value
    out, weights = ours(q, k, v, **kwargs)
    out_t, weights_t = theirs(q_t, k_t, v_t, **kwargs_t)
    _close(out, out_t, dtype)
    assert (weights is None) == (weights_t is None)
    if weights is not None:
        _close(weights, weights_t, dtype)
    _backward(out, out_t, rng)
    for o, t in ((q, q_t), (k, k_t), (v, v_t)):
        _close(o.grad, t.grad, dtype)
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        _close(p.grad, theirs_params[name].grad, dtype)


def test_multihead_attention_self_attention_unbatched_and_dropout():
    rng = np.random.default_rng(2)
    ours, theirs = _modules("MultiheadAttention", E, HEADS, dropout=0.3)
    x, x_t = _pair(rng.standard_normal((L, E)), requires_grad=True)
    kpm, kpm_t = _masks("bool", rng, batched=False)
    kpm, kpm_t = kpm[:L], kpm_t[:L]
    for need_weights in (True, False):
        reftorch.manual_seed(5)
        torch.manual_seed(5)
        out, weights = ours(x, x, x, key_padding_mask=kpm, need_weights=need_weights)
        out_t, weights_t = theirs(x_t, x_t, x_t, key_padding_mask=kpm_t,
                                  need_weights=need_weights)
        _close(out, out_t)
        if need_weights:
            _close(weights, weights_t)
        _backward(out, out_t, rng)
        _close(x.grad, x_t.grad)
    ours.eval()
    theirs.eval()
    _close(ours(x, x, x)[0], theirs(x_t, x_t, x_t)[0])


@pytest.mark.parametrize("ctor", [{}, {"kdim": 3, "vdim": 5}, {"add_bias_kv": True}])
def test_multihead_attention_seeded_init(ctor):
    for dtype in ("float64", "float32"):
        reftorch.manual_seed(9)
        torch.manual_seed(9)
        ours = MultiheadAttention(E, HEADS, dtype=getattr(reftorch, dtype), **ctor)
        theirs = torch.nn.MultiheadAttention(E, HEADS, dtype=getattr(torch, dtype), **ctor)
        assert repr(ours) == repr(theirs)
        theirs_params = dict(theirs.named_parameters())
        assert [n for n, _ in ours.named_parameters()] == list(theirs_params)
        for name, p in ours.named_parameters():
            # xavier_normal_ (bias_k/bias_v) may differ in the last float32 bit
            _close(p, theirs_params[name], dtype)


def _same_error(call):
    try:
        call(torch.nn, F, torch)
    except Exception as exc:  # noqa: BLE001
        expected = type(exc)
    else:
        raise AssertionError("torch did not raise")

    class OurNN:
        MultiheadAttention = MultiheadAttention
        AdaptiveLogSoftmaxWithLoss = AdaptiveLogSoftmaxWithLoss
    with pytest.raises(expected):
        call(OurNN, our_attention, reftorch)


@pytest.mark.parametrize("call", [
    lambda nn, f, m: nn.MultiheadAttention(0, 2),
    lambda nn, f, m: nn.MultiheadAttention(6, 4),
    lambda nn, f, m: nn.MultiheadAttention(4, 2)(m.zeros(3, 4), m.zeros(2, 3, 4),
                                                  m.zeros(2, 3, 4)),
    lambda nn, f, m: nn.MultiheadAttention(4, 2)(m.zeros(3, 2, 4), m.zeros(5, 2, 4),
                                                  m.zeros(5, 2, 4), attn_mask=m.zeros(3, 4)),
    lambda nn, f, m: nn.MultiheadAttention(4, 2)(m.zeros(3, 2, 4), m.zeros(5, 2, 4),
                                                  m.zeros(5, 2, 4), attn_mask=m.zeros(2, 3, 5)),
    lambda nn, f, m: nn.MultiheadAttention(4, 2)(m.zeros(3, 2, 4), m.zeros(5, 2, 4),
                                                  m.zeros(5, 2, 4),
                                                  key_padding_mask=m.zeros(2, 4)),
    lambda nn, f, m: nn.MultiheadAttention(4, 2)(m.zeros(3, 2, 4), m.zeros(5, 2, 4),
                                                  m.zeros(5, 2, 4),
                                                  key_padding_mask=m.zeros(2, 5, dtype=m.int64)),
    lambda nn, f, m: nn.MultiheadAttention(4, 2)(m.zeros(3, 2, 4), m.zeros(5, 2, 4),
                                                  m.zeros(5, 2, 4), is_causal=True),
    lambda nn, f, m: nn.MultiheadAttention(4, 2)(m.zeros(3, 2, 4), m.zeros(5, 2, 4),
                                                  m.zeros(4, 2, 4)),
    lambda nn, f, m: nn.MultiheadAttention(4, 2)(m.zeros(2, 3, 2, 4), m.zeros(5, 2, 4),
                                                  m.zeros(5, 2, 4)),
    lambda nn, f, m: f.scaled_dot_product_attention(m.zeros(2, 3, 4), m.zeros(2, 3, 4,
                                                    dtype=m.float64), m.zeros(2, 3, 4)),
    lambda nn, f, m: f.scaled_dot_product_attention(m.zeros(4), m.zeros(4), m.zeros(4)),
    lambda nn, f, m: f.scaled_dot_product_attention(m.zeros(2, 3, 4), m.zeros(2, 3, 5),
                                                    m.zeros(2, 3, 5)),
    lambda nn, f, m: f.scaled_dot_product_attention(m.zeros(2, 3, 4, dtype=m.int64),
                                                    m.zeros(2, 3, 4, dtype=m.int64),
                                                    m.zeros(2, 3, 4, dtype=m.int64)),
    lambda nn, f, m: nn.AdaptiveLogSoftmaxWithLoss(8, 10, []),
    lambda nn, f, m: nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4, 2]),
    lambda nn, f, m: nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4, 10]),
    lambda nn, f, m: nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4, 4]),
    lambda nn, f, m: nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3])(m.zeros(2, 8),
                                                               m.tensor([1, 10])),
    lambda nn, f, m: nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3])(m.zeros(2, 8), m.tensor([1])),
    lambda nn, f, m: nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3])(m.zeros(2, 8), m.tensor(1)),
    lambda nn, f, m: nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3])(m.zeros(1, 2, 8),
                                                               m.tensor([1])),
    lambda nn, f, m: nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3])(m.zeros(2, 8),
                                                               m.zeros(2, 1, dtype=m.int64)),
])
def test_errors(call):
    _same_error(call)


# ----------------------------------------------------------------------------------------------
# scaled_dot_product_attention

SDPA_CASES = [
    ((2, 3, L, E), (2, 3, S, E), (2, 3, S, 6), {}),
    ((2, 3, L, E), (2, 3, S, E), (2, 3, S, E), {"attn_mask": "bool2d"}),
    ((2, 3, L, E), (2, 3, S, E), (2, 3, S, E), {"attn_mask": "float4d"}),
    ((2, 3, L, E), (2, 3, S, E), (2, 3, S, E), {"is_causal": True, "scale": 0.7}),
    ((2, 3, L, E), (2, 3, S, E), (2, 3, S, E), {"is_causal": True, "attn_mask": "bool2d"}),
    ((2, 3, L, E), (2, 3, S, E), (2, 3, S, E), {"attn_mask": "fully_masked_row"}),
    ((L, E), (S, E), (S, 3), {}),
    ((2, 4, L, E), (2, 2, S, E), (2, 2, S, E), {"enable_gqa": True}),
    ((2, 3, L, E), (2, 1, S, E), (2, 1, S, E), {}),    # broadcast over heads
]


def _sdpa_mask(spec, rng, dtype):
    if spec == "bool2d":
        mask = rng.random((L, S)) < 0.6
        mask[:, 0] = True
        return _pair(mask)
    if spec == "fully_masked_row":
        mask = np.ones((L, S), dtype=bool)
        mask[1] = False
        return _pair(mask)
    return _pair(rng.standard_normal((2, 3, L, S)).astype(dtype))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("qs,ks,vs,kwargs", SDPA_CASES)
def test_scaled_dot_product_attention(qs, ks, vs, kwargs, dtype):
    rng = np.random.default_rng(3)
    q, q_t = _pair(rng.standard_normal(qs).astype(dtype), requires_grad=True)
    k, k_t = _pair(rng.standard_normal(ks).astype(dtype), requires_grad=True)
    v, v_t = _pair(rng.standard_normal(vs).astype(dtype), requires_grad=True)
    kw, kw_t = dict(kwargs), dict(kwargs)
    if "attn_mask" in kwargs:
        kw["attn_mask"], kw_t["attn_mask"] = _sdpa_mask(kwargs["attn_mask"], rng, dtype)
    out = our_attention.scaled_dot_product_attention(q, k, v, **kw)
    out_t = F.scaled_dot_product_attention(q_t, k_t, v_t, **kw_t)
    _close(out, out_t, dtype)
    _backward(out, out_t, rng)
    for o, t in ((q, q_t), (k, k_t), (v, v_t)):
        _close(o.grad, t.grad, dtype)


def test_scaled_dot_product_attention_seeded_dropout():
    rng = np.random.default_rng(4)
    q, q_t = _pair(rng.standard_normal((2, 3, L, E)), requires_grad=True)
    k, k_t = _pair(rng.standard_normal((2, 3, S, E)))
    v, v_t = _pair(rng.standard_normal((2, 3, S, E)))
    reftorch.manual_seed(21)
    torch.manual_seed(21)
    out = our_attention.scaled_dot_product_attention(q, k, v, dropout_p=0.4)
    out_t = F.scaled_dot_product_attention(q_t, k_t, v_t, dropout_p=0.4)
    _close(out, out_t)
    _backward(out, out_t, rng)
    _close(q.grad, q_t.grad)


def test_multi_head_attention_forward_static_kv():
    """The functional form with separate projection weights and static keys/values."""
    rng = np.random.default_rng(5)
    head_dim = E // HEADS
    arrays = {"query": (L, N, E), "key": (S, N, E), "value": (S, N, E),
              "q_w": (E, E), "k_w": (E, E), "v_w": (E, E), "in_b": (3 * E,),
              "out_w": (E, E), "out_b": (E,), "static_k": (N * HEADS, S, head_dim),
              "static_v": (N * HEADS, S, head_dim)}
    pairs = {name: _pair(rng.standard_normal(shape), requires_grad=True)
             for name, shape in arrays.items()}

    def call(f, side):
        t = {name: pair[side] for name, pair in pairs.items()}
        return f.multi_head_attention_forward(
            t["query"], t["key"], t["value"], E, HEADS, None, t["in_b"], None, None, False,
            0.0, t["out_w"], t["out_b"], use_separate_proj_weight=True,
            q_proj_weight=t["q_w"], k_proj_weight=t["k_w"], v_proj_weight=t["v_w"],
            static_k=t["static_k"], static_v=t["static_v"], average_attn_weights=False)
    out, weights = call(our_attention, 0)
    out_t, weights_t = call(F, 1)
    _close(out, out_t)
    _close(weights, weights_t)
    _backward(out, out_t, rng)
    for ours, theirs in pairs.values():
        if theirs.grad is not None:
            _close(ours.grad, theirs.grad)


# ----------------------------------------------------------------------------------------------
# AdaptiveLogSoftmaxWithLoss

@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("kwargs", [{"cutoffs": [3, 7]}, {"cutoffs": [5], "head_bias": True},
                                    {"cutoffs": (2, 4, 8), "div_value": 2.0}])
def test_adaptive_log_softmax(kwargs, dtype):
    rng = np.random.default_rng(6)
    ours, theirs = _modules("AdaptiveLogSoftmaxWithLoss", 16, 12, dtype=dtype, **kwargs)
    x, x_t = _pair(rng.standard_normal((9, 16)).astype(dtype), requires_grad=True)
    target = np.array([0, 11, 3, 7, 2, 5, 8, 1, 10])
    result = ours(x, reftorch.tensor(target))
    result_t = theirs(x_t, torch.tensor(target))
    assert type(result).__name__ == type(result_t).__name__ == "_ASMoutput"
    _close(result.output, result_t.output, dtype)
    _close(result.loss, result_t.loss, dtype)
    result.loss.backward()
    result_t.loss.backward()
    _close(x.grad, x_t.grad, dtype)
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        _close(p.grad, theirs_params[name].grad, dtype)
    _close(ours.log_prob(x), theirs.log_prob(x_t), dtype)
    np.testing.assert_array_equal(_np(ours.predict(x)), _np(theirs.predict(x_t)))
    # unbatched
    single = ours(x[0], reftorch.tensor(target[1]))
    single_t = theirs(x_t[0], torch.tensor(target[1]))
    _close(single.output, single_t.output, dtype)
    _close(single.loss, single_t.loss, dtype)


def test_adaptive_log_softmax_seeded_init_and_predict_branches():
    reftorch.manual_seed(4)
    torch.manual_seed(4)
    ours = AdaptiveLogSoftmaxWithLoss(6, 10, [2, 5], head_bias=True)
    theirs = torch.nn.AdaptiveLogSoftmaxWithLoss(6, 10, [2, 5], head_bias=True)
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_array_equal(_np(p), _np(theirs_params[name]))
    # bias the head towards the shortlist, the clusters, or a mix, to reach all branches
    rng = np.random.default_rng(8)
    x, x_t = _pair(rng.standard_normal((20, 6)))
    for shift in ([5, 5, -5, -5], [-5, -5, 5, 5], [0, 0, 0, 0]):
        with torch.no_grad():
            theirs.head.bias.copy_(torch.tensor(shift, dtype=torch.float32))
        ours.head.bias.detach().numpy()[...] = shift
        np.testing.assert_array_equal(_np(ours.predict(x.float())),
                                      _np(theirs.predict(x_t.float())))


# ----------------------------------------------------------------------------------------------
# DataParallel (no accelerator: it just calls the wrapped module, as PyTorch does)

def test_data_parallel_without_devices():
    if reftorch.cuda.is_available():
        pytest.skip("reference DataParallel without accelerators only")
    rng = np.random.default_rng(9)
    from reftorch.nn.modules.linear import Linear
    inner = Linear(4, 3, dtype=reftorch.float64)
    inner_t = torch.nn.Linear(4, 3, dtype=torch.float64)
    inner.load_state_dict({k: reftorch.from_numpy(v.detach().numpy().copy())
                           for k, v in inner_t.state_dict().items()})
    ours, theirs = DataParallel(inner), torch.nn.DataParallel(inner_t)
    assert ours.module is inner and ours.device_ids == theirs.device_ids == []
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["module.weight",
                                                                    "module.bias"]
    assert repr(ours) == repr(theirs)
    x, x_t = _pair(rng.standard_normal((5, 4)))
    _close(ours(x), theirs(x_t))
