"""Recurrent layers (RNN, LSTM, GRU), their cells and torch.nn.utils.rnn against PyTorch:
outputs, final states and gradients (inputs, initial states, every parameter) in float64 and
float32 for every option (layers, bidirectional, batch_first, bias, proj_size, relu), packed
input with unsorted lengths, unbatched input, seeded inter-layer dropout, seeded default
init, reprs, state_dict keys and errors."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import reftorch
from reftorch.nn.modules import rnn as our_rnn
from reftorch.nn.utils import rnn as our_utils

torch = pytest.importorskip("torch")
torch_utils = torch.nn.utils.rnn

TOL = {"float64": 1e-11, "float32": 2e-5}


def _np(t):
    return t.detach().numpy()


def _close(ours, theirs, dtype="float64"):
    np.testing.assert_allclose(_np(ours), _np(theirs), rtol=TOL[dtype], atol=TOL[dtype])


def _pair(array, requires_grad=False):
    """The same values as a reftorch and a torch tensor (leaves)."""
    ours = reftorch.from_numpy(array.copy())
    theirs = torch.from_numpy(array.copy())
    if requires_grad:
        ours.requires_grad_()
        theirs.requires_grad_()
    return ours, theirs


def _modules(name, *args, dtype="float64", **kwargs):
    """Our module and torch's, torch's weights copied into ours; repr and keys must agree."""
    theirs = getattr(torch.nn, name)(*args, dtype=getattr(torch, dtype), **kwargs)
    ours = getattr(our_rnn, name)(*args, dtype=getattr(reftorch, dtype), **kwargs)
    ours.load_state_dict({k: reftorch.from_numpy(v.detach().numpy().copy())
                          for k, v in theirs.state_dict().items()})
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    return ours, theirs


def _flat(result):
    """(output, state) or (output, (h, c)) -> list of tensors (PackedSequence -> its data)."""
    out, state = result
    out = out.data if hasattr(out, "batch_sizes") else out
    return [out] + (list(state) if isinstance(state, tuple) else [state])


def _backward_all(ours_list, theirs_list, rng):
    """Backpropagates the same random cotangent through every output."""
    total_ours, total_theirs = 0, 0
    for o, t in zip(ours_list, theirs_list):
        g = rng.standard_normal(tuple(t.shape)).astype(_np(t).dtype)
        total_ours = total_ours + (o * reftorch.from_numpy(g.copy())).sum()
        total_theirs = total_theirs + (t * torch.from_numpy(g.copy())).sum()
    total_ours.backward()
    total_theirs.backward()


def _compare_params_grads(ours, theirs, dtype):
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        _close(p.grad, theirs_params[name].grad, dtype)


def _states(mode, kwargs, batch, rng, dtype):
    """Random initial state(s) matching the layer's configuration."""
    directions = 2 if kwargs.get("bidirectional") else 1
    layers = kwargs.get("num_layers", 1)
    hidden = HIDDEN
    h_size = kwargs.get("proj_size", 0) or hidden
    shapes = [(layers * directions, batch, h_size)]
    if mode == "LSTM":
        shapes.append((layers * directions, batch, hidden))
    pairs = [_pair(rng.standard_normal(s).astype(dtype), requires_grad=True) for s in shapes]
    if mode == "LSTM":
        return (pairs[0][0], pairs[1][0]), (pairs[0][1], pairs[1][1]), [p for p in pairs]
    return pairs[0][0], pairs[0][1], pairs


INPUT, HIDDEN, STEPS, BATCH = 4, 5, 6, 3

LAYER_CASES = [
    ("LSTM", {}),
    ("LSTM", {"num_layers": 2, "bidirectional": True}),
    ("LSTM", {"proj_size": 3, "num_layers": 2}),
    ("LSTM", {"batch_first": True, "bias": False}),
    ("LSTM", {"proj_size": 2, "bidirectional": True, "batch_first": True}),
    ("GRU", {}),
    ("GRU", {"num_layers": 2, "bidirectional": True, "batch_first": True}),
    ("GRU", {"bias": False, "num_layers": 3}),
    ("RNN", {}),
    ("RNN", {"nonlinearity": "relu", "num_layers": 2, "bidirectional": True}),
    ("RNN", {"bias": False, "batch_first": True}),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("mode,kwargs", LAYER_CASES)
def test_layer_outputs_states_and_grads(mode, kwargs, with_state, dtype):
    rng = np.random.default_rng(len(LAYER_CASES) + hash(mode) % 97)
    ours, theirs = _modules(mode, INPUT, HIDDEN, dtype=dtype, **kwargs)
    shape = (BATCH, STEPS, INPUT) if kwargs.get("batch_first") else (STEPS, BATCH, INPUT)
    x, x_t = _pair(rng.standard_normal(shape).astype(dtype), requires_grad=True)
    leaves = [(x, x_t)]
    if with_state:
        hx, hx_t, state_pairs = _states(mode, kwargs, BATCH, rng, dtype)
        leaves += state_pairs
        result, result_t = ours(x, hx), theirs(x_t, hx_t)
    else:
        result, result_t = ours(x), theirs(x_t)
    outs, outs_t = _flat(result), _flat(result_t)
    for o, t in zip(outs, outs_t):
        assert tuple(o.shape) == tuple(t.shape)
        _close(o, t, dtype)
    _backward_all(outs, outs_t, rng)
    for o, t in leaves:
        _close(o.grad, t.grad, dtype)
    _compare_params_grads(ours, theirs, dtype)


@pytest.mark.parametrize("mode,kwargs", [
    ("LSTM", {"num_layers": 2, "bidirectional": True}),
    ("LSTM", {"proj_size": 3, "batch_first": True}),
    ("GRU", {"num_layers": 2, "bidirectional": True, "batch_first": True}),
    ("RNN", {"nonlinearity": "relu", "bidirectional": True}),
])
@pytest.mark.parametrize("with_state", [False, True])
def test_packed_input_unsorted_lengths(mode, kwargs, with_state):
    """Packed input (unsorted lengths with a tie): packed output, final states in the
    original batch order, gradients through pack_padded_sequence."""
    rng = np.random.default_rng(3)
    batch_first = kwargs.get("batch_first", False)
    lengths = [3, 6, 1, 3, 5]
    batch = len(lengths)
    ours, theirs = _modules(mode, INPUT, HIDDEN, **kwargs)
    shape = (batch, STEPS, INPUT) if batch_first else (STEPS, batch, INPUT)
    x, x_t = _pair(rng.standard_normal(shape), requires_grad=True)
    packed = our_utils.pack_padded_sequence(x, lengths, batch_first=batch_first,
                                            enforce_sorted=False)
    packed_t = torch_utils.pack_padded_sequence(x_t, lengths, batch_first=batch_first,
                                                enforce_sorted=False)
    leaves = [(x, x_t)]
    if with_state:
        hx, hx_t, state_pairs = _states(mode, kwargs, batch, rng, "float64")
        leaves += state_pairs
        result, result_t = ours(packed, hx), theirs(packed_t, hx_t)
    else:
        result, result_t = ours(packed), theirs(packed_t)
    out, out_t = result[0], result_t[0]
    assert isinstance(out, our_utils.PackedSequence)
    for field in ("batch_sizes", "sorted_indices", "unsorted_indices"):
        np.testing.assert_array_equal(_np(getattr(out, field)), _np(getattr(out_t, field)))
    outs, outs_t = _flat(result), _flat(result_t)
    for o, t in zip(outs, outs_t):
        _close(o, t)
    padded, lens = our_utils.pad_packed_sequence(out, batch_first=batch_first)
    padded_t, lens_t = torch_utils.pad_packed_sequence(out_t, batch_first=batch_first)
    _close(padded, padded_t)
    np.testing.assert_array_equal(_np(lens), _np(lens_t))
    _backward_all([padded] + outs[1:], [padded_t] + outs_t[1:], rng)
    for o, t in leaves:
        _close(o.grad, t.grad)
    _compare_params_grads(ours, theirs, "float64")


@pytest.mark.parametrize("mode,kwargs", [("LSTM", {"proj_size": 2}), ("GRU", {"batch_first": True}),
                                         ("RNN", {"num_layers": 2})])
@pytest.mark.parametrize("with_state", [False, True])
def test_unbatched_input(mode, kwargs, with_state):
    rng = np.random.default_rng(5)
    ours, theirs = _modules(mode, INPUT, HIDDEN, **kwargs)
    x, x_t = _pair(rng.standard_normal((STEPS, INPUT)), requires_grad=True)
    if with_state:
        hx, hx_t, _ = _states(mode, kwargs, BATCH, rng, "float64")
        # unbatched states: drop the batch dimension
        if mode == "LSTM":
            hx, hx_t = tuple(h[:, 0] for h in hx), tuple(h[:, 0] for h in hx_t)
        else:
            hx, hx_t = hx[:, 0], hx_t[:, 0]
        result, result_t = ours(x, hx), theirs(x_t, hx_t)
    else:
        result, result_t = ours(x), theirs(x_t)
    for o, t in zip(_flat(result), _flat(result_t)):
        assert tuple(o.shape) == tuple(t.shape)
        _close(o, t)
    _backward_all(_flat(result), _flat(result_t), rng)
    _close(x.grad, x_t.grad)


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_seeded_dropout_between_layers(mode, packed):
    """In training mode the layer outputs (all but the last) are dropped out with masks drawn
    exactly like torch's F.dropout, so seeded runs agree; eval mode applies no dropout."""
    rng = np.random.default_rng(7)
    ours, theirs = _modules(mode, INPUT, HIDDEN, num_layers=3, dropout=0.4,
                            bidirectional=True)
    x, x_t = _pair(rng.standard_normal((STEPS, BATCH, INPUT)), requires_grad=True)
    if packed:
        x_in = our_utils.pack_padded_sequence(x, [6, 2, 4], enforce_sorted=False)
        x_t_in = torch_utils.pack_padded_sequence(x_t, [6, 2, 4], enforce_sorted=False)
    else:
        x_in, x_t_in = x, x_t
    reftorch.manual_seed(123)
    torch.manual_seed(123)
    result, result_t = ours(x_in), theirs(x_t_in)
    for o, t in zip(_flat(result), _flat(result_t)):
        _close(o, t)
    _backward_all(_flat(result), _flat(result_t), rng)
    _close(x.grad, x_t.grad)
    ours.eval()
    theirs.eval()
    for o, t in zip(_flat(ours(x_in)), _flat(theirs(x_t_in))):
        _close(o, t)


@pytest.mark.parametrize("name,args,kwargs", [
    ("LSTM", (3, 6), {"num_layers": 2, "bidirectional": True, "proj_size": 4}),
    ("GRU", (5, 4), {"bias": False, "batch_first": True}),
    ("RNN", (3, 5, 2, "relu"), {}),
    ("RNNCell", (3, 4), {"nonlinearity": "relu"}),
    ("LSTMCell", (3, 4), {"bias": False}),
    ("GRUCell", (3, 4), {}),
])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_seeded_default_init_repr_and_keys(name, args, kwargs, dtype):
    reftorch.manual_seed(17)
    torch.manual_seed(17)
    ours = getattr(our_rnn, name)(*args, dtype=getattr(reftorch, dtype), **kwargs)
    theirs = getattr(torch.nn, name)(*args, dtype=getattr(torch, dtype), **kwargs)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    theirs_params = dict(theirs.named_parameters())
    for key, p in ours.named_parameters():
        assert p.dtype == getattr(reftorch, dtype)
        np.testing.assert_array_equal(_np(p), _np(theirs_params[key]))  # bit for bit


def test_repr_variants_and_weight_lists():
    cases = [("RNN", (2, 3), {"dropout": 0.5, "num_layers": 2, "nonlinearity": "tanh"}),
             ("LSTM", (2, 3), {"bias": False, "batch_first": True}),
             ("GRU", (2, 3), {"bidirectional": True})]
    for name, args, kwargs in cases:
        ours, theirs = _modules(name, *args, **kwargs)
        assert [[tuple(w.shape) for w in ws] for ws in ours.all_weights] == \
            [[tuple(w.shape) for w in ws] for ws in theirs.all_weights]
        ours.flatten_parameters()  # a no-op, accepted like torch's
    assert our_rnn.RNN(2, 3, nonlinearity="relu").nonlinearity == "relu"


@pytest.mark.parametrize("name,kwargs", [("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu"}),
                                         ("LSTMCell", {}), ("GRUCell", {}),
                                         ("GRUCell", {"bias": False})])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("with_state", [False, True])
def test_cells(name, kwargs, dtype, batched, with_state):
    rng = np.random.default_rng(11)
    ours, theirs = _modules(name, INPUT, HIDDEN, dtype=dtype, **kwargs)
    lead = (BATCH,) if batched else ()
    x, x_t = _pair(rng.standard_normal(lead + (INPUT,)).astype(dtype), requires_grad=True)
    leaves = [(x, x_t)]
    if with_state:
        pairs = [_pair(rng.standard_normal(lead + (HIDDEN,)).astype(dtype), requires_grad=True)
                 for _ in range(2 if name == "LSTMCell" else 1)]
        leaves += pairs
        hx = tuple(p[0] for p in pairs) if name == "LSTMCell" else pairs[0][0]
        hx_t = tuple(p[1] for p in pairs) if name == "LSTMCell" else pairs[0][1]
        out, out_t = ours(x, hx), theirs(x_t, hx_t)
    else:
        out, out_t = ours(x), theirs(x_t)
    outs = list(out) if isinstance(out, tuple) else [out]
    outs_t = list(out_t) if isinstance(out_t, tuple) else [out_t]
    for o, t in zip(outs, outs_t):
        assert tuple(o.shape) == tuple(t.shape)
        _close(o, t, dtype)
    _backward_all(outs, outs_t, rng)
    for o, t in leaves:
        _close(o.grad, t.grad, dtype)
    _compare_params_grads(ours, theirs, dtype)


def _same_error(call):
    """call(module_namespace, tensor_factory) must raise the same exception type for both."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            call(torch.nn, torch)
        except Exception as exc:  # noqa: BLE001
            expected = type(exc)
        else:
            raise AssertionError("torch did not raise")

        class OurNN:
            def __getattr__(self, name):
                return getattr(our_rnn, name)
        with pytest.raises(expected):
            call(OurNN(), reftorch)


@pytest.mark.parametrize("call", [
    lambda nn, m: nn.LSTM(4, 5)(m.zeros(6, 3, 3)),                       # input size
    lambda nn, m: nn.GRU(4, 5)(m.zeros(6, 3, 4, 1)),                     # rank
    lambda nn, m: nn.RNN(4, 5)(m.zeros(4)),                              # rank 1
    lambda nn, m: nn.LSTM(4, 5)(m.zeros(6, 3, 4), (m.zeros(1, 3, 5), m.zeros(1, 2, 5))),
    lambda nn, m: nn.LSTM(4, 5)(m.zeros(6, 3, 4), (m.zeros(1, 3, 4), m.zeros(1, 3, 5))),
    lambda nn, m: nn.LSTM(4, 5)(m.zeros(6, 3, 4), (m.zeros(3, 5), m.zeros(3, 5))),
    lambda nn, m: nn.GRU(4, 5)(m.zeros(6, 3, 4), m.zeros(2, 3, 5)),     # hidden size
    lambda nn, m: nn.GRU(4, 5)(m.zeros(6, 4), m.zeros(1, 1, 5)),        # unbatched, 3-D hx
    lambda nn, m: nn.RNN(4, 5)(m.zeros(6, 3, 4), m.zeros(3, 5)),        # batched, 2-D hx
    lambda nn, m: nn.RNN(4, 5)(m.zeros(6, 3, 4, dtype=m.float64)),      # dtype mismatch
    lambda nn, m: nn.LSTM(4, 5, proj_size=5),
    lambda nn, m: nn.LSTM(4, 5, proj_size=-1),
    lambda nn, m: nn.GRU(4, 5, proj_size=2),
    lambda nn, m: nn.RNN(4, 5, nonlinearity="sigmoid"),
    lambda nn, m: nn.RNN(4, 5, dropout=1.5),
    lambda nn, m: nn.RNN(4, 5, dropout=True),
    lambda nn, m: nn.RNN(4, 0),
    lambda nn, m: nn.RNN(4, 5, num_layers=0),
    lambda nn, m: nn.RNN(4.0, 5),
    lambda nn, m: nn.LSTM(4, 5, bias=1),
    lambda nn, m: nn.LSTM(4, 5, batch_first=None),
    lambda nn, m: nn.RNNCell(4, 5)(m.zeros(2, 3)),                      # input size
    lambda nn, m: nn.RNNCell(4, 5)(m.zeros(2, 4), m.zeros(3, 5)),       # batch mismatch
    lambda nn, m: nn.GRUCell(4, 5)(m.zeros(2, 4), m.zeros(2, 4)),       # hidden size
    lambda nn, m: nn.GRUCell(4, 5)(m.zeros(1, 2, 4)),                   # rank
    lambda nn, m: nn.LSTMCell(4, 5)(m.zeros(2, 4), (m.zeros(2, 5), m.zeros(1, 2, 5))),
    lambda nn, m: nn.RNNCell(4, 5, nonlinearity="gelu")(m.zeros(2, 4)),
])
def test_errors(call):
    _same_error(call)


def test_dropout_warning_for_single_layer():
    with pytest.warns(UserWarning, match="dropout option adds dropout"):
        our_rnn.LSTM(3, 4, dropout=0.3)


# ----------------------------------------------------------------------------------------------
# torch.nn.utils.rnn

@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("enforce_sorted,lengths", [(True, [5, 3, 3, 1]),
                                                    (False, [2, 5, 1, 5]),
                                                    (False, [4, 4, 4, 4])])
@pytest.mark.parametrize("lengths_as_tensor", [False, True])
def test_pack_and_pad_roundtrip(batch_first, enforce_sorted, lengths, lengths_as_tensor):
    rng = np.random.default_rng(2)
    shape = (4, 5, 2, 3) if batch_first else (5, 4, 2, 3)
    x, x_t = _pair(rng.standard_normal(shape), requires_grad=True)
    lens = reftorch.tensor(lengths) if lengths_as_tensor else lengths
    lens_t = torch.tensor(lengths) if lengths_as_tensor else lengths
    packed = our_utils.pack_padded_sequence(x, lens, batch_first, enforce_sorted)
    packed_t = torch_utils.pack_padded_sequence(x_t, lens_t, batch_first, enforce_sorted)
    _close(packed.data, packed_t.data)
    for field in ("batch_sizes", "sorted_indices", "unsorted_indices"):
        ours_field, theirs_field = getattr(packed, field), getattr(packed_t, field)
        assert (ours_field is None) == (theirs_field is None)
        if ours_field is not None:
            assert ours_field.dtype == reftorch.int64
            np.testing.assert_array_equal(_np(ours_field), _np(theirs_field))
    for kwargs in ({}, {"padding_value": -2.5, "total_length": 7}):
        padded, out_lens = our_utils.pad_packed_sequence(packed, batch_first, **kwargs)
        padded_t, out_lens_t = torch_utils.pad_packed_sequence(packed_t, batch_first, **kwargs)
        _close(padded, padded_t)
        assert out_lens.dtype == reftorch.int64
        np.testing.assert_array_equal(_np(out_lens), _np(out_lens_t))
    grad = rng.standard_normal(tuple(padded_t.shape))
    (padded * reftorch.from_numpy(grad)).sum().backward()
    (padded_t * torch.from_numpy(grad)).sum().backward()
    _close(x.grad, x_t.grad)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_pad_sequence_and_pack_sequence(batch_first, padding_side):
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal((n, 2)) for n in (3, 5, 1)]
    pairs = [_pair(a, requires_grad=True) for a in arrays]
    ours = our_utils.pad_sequence([p[0] for p in pairs], batch_first, 1.5, padding_side)
    theirs = torch_utils.pad_sequence([p[1] for p in pairs], batch_first, 1.5, padding_side)
    _close(ours, theirs)
    grad = rng.standard_normal(tuple(theirs.shape))
    (ours * reftorch.from_numpy(grad)).sum().backward()
    (theirs * torch.from_numpy(grad)).sum().backward()
    for o, t in pairs:
        _close(o.grad, t.grad)
    # 1-D sequences and pack_sequence / unpack_sequence
    seqs = [rng.standard_normal(n) for n in (2, 4, 3)]
    packed = our_utils.pack_sequence([reftorch.from_numpy(s) for s in seqs],
                                     enforce_sorted=False)
    packed_t = torch_utils.pack_sequence([torch.from_numpy(s) for s in seqs],
                                         enforce_sorted=False)
    _close(packed.data, packed_t.data)
    np.testing.assert_array_equal(_np(packed.batch_sizes), _np(packed_t.batch_sizes))
    for o, t in zip(our_utils.unpack_sequence(packed), torch_utils.unpack_sequence(packed_t)):
        _close(o, t)


def test_unpad_sequence_and_packed_sequence_methods():
    rng = np.random.default_rng(6)
    x, x_t = _pair(rng.standard_normal((5, 3, 2)))
    lengths = [5, 2, 4]
    ours = our_utils.unpad_sequence(x, reftorch.tensor(lengths))
    theirs = torch_utils.unpad_sequence(x_t, torch.tensor(lengths))
    assert len(ours) == len(theirs)
    for o, t in zip(ours, theirs):
        _close(o, t)
    assert tuple(x.shape) == tuple(x_t.shape)  # both transposed the input in place
    packed = our_utils.pack_padded_sequence(reftorch.from_numpy(rng.standard_normal((4, 2, 3))),
                                            [2, 4], enforce_sorted=False)
    converted = packed.float()
    assert converted.data.dtype == reftorch.float32
    assert converted.to(reftorch.float32) is converted
    assert isinstance(converted, our_utils.PackedSequence) and isinstance(converted, tuple)
    assert converted.sorted_indices is packed.sorted_indices or \
        np.array_equal(_np(converted.sorted_indices), _np(packed.sorted_indices))
    data, batch_sizes, sorted_indices, unsorted_indices = packed
    assert not packed.is_cuda
    rebuilt = our_utils.PackedSequence(data, batch_sizes, sorted_indices)
    np.testing.assert_array_equal(_np(rebuilt.unsorted_indices), _np(unsorted_indices))
    from_tuple = our_utils.PackedSequence((data, batch_sizes))
    assert from_tuple.sorted_indices is None and from_tuple.batch_sizes is batch_sizes


def _same_util_error(call):
    try:
        call(torch_utils, torch)
    except Exception as exc:  # noqa: BLE001
        expected = type(exc)
    else:
        raise AssertionError("torch did not raise")
    with pytest.raises(expected):
        call(our_utils, reftorch)


@pytest.mark.parametrize("call", [
    lambda u, m: u.pack_padded_sequence(m.zeros(3, 2, 1), [3, 1, 1]),       # len(lengths)
    lambda u, m: u.pack_padded_sequence(m.zeros(3, 2, 1), [1, 3]),          # not sorted
    lambda u, m: u.pack_padded_sequence(m.zeros(3, 2, 1), [3, 0]),          # zero length
    lambda u, m: u.pack_padded_sequence(m.zeros(3, 2, 1), [[3, 1]]),        # 2-D lengths
    lambda u, m: u.pack_padded_sequence(m.zeros(0, 2, 1), [3, 1]),          # empty
    lambda u, m: u.pad_packed_sequence(u.pack_sequence([m.zeros(3), m.zeros(2)]),
                                       total_length=2),
    lambda u, m: u.pad_sequence([]),
    lambda u, m: u.pad_sequence([m.zeros(2, 3), m.zeros(1, 2)]),
    lambda u, m: u.pad_sequence([m.zeros(2, 3)], padding_side="up"),
    lambda u, m: u.pad_sequence(5),
])
def test_util_errors(call):
    _same_util_error(call)
