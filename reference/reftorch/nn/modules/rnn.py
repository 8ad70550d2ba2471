"""torch.nn modules: recurrent layers (RNN, LSTM, GRU) and their single-step cells.

The layers are compositions of reftorch ops, so autograd needs no rows of its own. The input
of every layer is first brought to the *packed* layout (rows of time-major data, with a batch
size per time step; see nn/utils/rnn.py): a plain (T, B, F) tensor is the special case where
every step has all B sequences. One loop then serves both: per layer and direction, the input
projection W_ih x + b_ih is computed for all time steps in one matmul, and a Python loop over
time steps applies the recurrence to the rows still running at that step.

Gate layouts follow PyTorch: LSTM rows of W are (input, forget, cell, output) gates, GRU rows
are (reset, update, new) with n = tanh(W_in x + b_in + r * (W_hn h + b_hn)).
"""
from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from ... import _ops
from .. import functional as F
from .. import init
from ..parameter import Parameter
from ..utils.rnn import PackedSequence
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]


def _empty(shape, device, dtype):
    return _ops.creation.empty(shape, device=device, dtype=dtype)


def _zeros(shape, like):
    return _ops.creation.zeros(shape, dtype=like.dtype, device=like.device)


def _cat(tensors, dim=0):
    return _ops.joining.cat(tensors, dim)


def _apply_permutation(tensor, permutation, dim=1):
    return tensor.index_select(dim, permutation)


# ----------------------------------------------------------------------------------------------
# One time step of each recurrence. `x_gates` is W_ih x + b_ih, already computed.

def _rnn_tanh_step(x_gates, h, c, w_hh, b_hh, w_hr):
    return (x_gates + F.linear(h, w_hh, b_hh)).tanh(), None


def _rnn_relu_step(x_gates, h, c, w_hh, b_hh, w_hr):
    return (x_gates + F.linear(h, w_hh, b_hh)).relu(), None


def _lstm_step(x_gates, h, c, w_hh, b_hh, w_hr):
    gates = x_gates + F.linear(h, w_hh, b_hh)
    in_gate, forget_gate, cell_gate, out_gate = gates.chunk(4, 1)
    c_new = forget_gate.sigmoid() * c + in_gate.sigmoid() * cell_gate.tanh()
    h_new = out_gate.sigmoid() * c_new.tanh()
    if w_hr is not None:  # LSTM with projections: h is projected to proj_size
        h_new = F.linear(h_new, w_hr)
    return h_new, c_new


def _gru_step(x_gates, h, c, w_hh, b_hh, w_hr):
    x_reset, x_update, x_new = x_gates.chunk(3, 1)
    h_reset, h_update, h_new = F.linear(h, w_hh, b_hh).chunk(3, 1)
    reset = (x_reset + h_reset).sigmoid()
    update = (x_update + h_update).sigmoid()
    new = (x_new + reset * h_new).tanh()
    return (h - new) * update + new, None


_STEPS = {"RNN_TANH": _rnn_tanh_step, "RNN_RELU": _rnn_relu_step, "LSTM": _lstm_step,
          "GRU": _gru_step}


def _run_forward(step, x_gates, batch_sizes, h, c, weights):
    """The recurrence forwards in time over packed rows. Sequences are sorted longest first,
    so when the batch shrinks at step t the last rows are finished: their state is final."""
    outputs, finished_h, finished_c = [], [], []
    for t, size in enumerate(batch_sizes):
        if size < h.shape[0]:
            finished_h.append(h[size:])
            h = h[:size]
            if c is not None:
                finished_c.append(c[size:])
                c = c[:size]
        h, c = step(x_gates[t], h, c, *weights)
        outputs.append(h)
    # The rows that finished first are the highest-numbered ones.
    h_n = _cat([h] + finished_h[::-1]) if finished_h else h
    c_n = None if c is None else (_cat([c] + finished_c[::-1]) if finished_c else c)
    return outputs, h_n, c_n


def _run_reverse(step, x_gates, batch_sizes, h0, c0, weights):
    """The recurrence backwards in time: the batch grows as shorter sequences start (from
    their own last step), each joining with its initial state."""
    outputs = [None] * len(batch_sizes)
    last = int(batch_sizes[-1])
    h = h0[:last]
    c = None if c0 is None else c0[:last]
    for t in range(len(batch_sizes) - 1, -1, -1):
        size = int(batch_sizes[t])
        if size > h.shape[0]:
            h = _cat([h, h0[h.shape[0]:size]])
            if c is not None:
                c = _cat([c, c0[c.shape[0]:size]])
        h, c = step(x_gates[t], h, c, *weights)
        outputs[t] = h
    return outputs, h, c


# ----------------------------------------------------------------------------------------------
# Multi-layer recurrent networks

class RNNBase(Module):
    """Common parameters, checks and the layer/direction loop of RNN, LSTM and GRU."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0,
                 device=None, dtype=None):
        super().__init__()
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        self._check_options(mode, input_size, hidden_size, num_layers, bias, batch_first,
                            dropout, proj_size)
        gate_size = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}[mode] * hidden_size
        num_directions = 2 if bidirectional else 1
        real_hidden_size = proj_size if proj_size > 0 else hidden_size

        # Registration order is PyTorch's, so parameters() (and the seeded default init,
        # which walks it) matches: per layer, per direction: w_ih, w_hh, b_ih, b_hh, w_hr.
        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            layer_input_size = input_size if layer == 0 else real_hidden_size * num_directions
            for direction in range(num_directions):
                suffix = f"_l{layer}" + ("_reverse" if direction == 1 else "")
                shapes = {"weight_ih": (gate_size, layer_input_size),
                          "weight_hh": (gate_size, real_hidden_size)}
                if bias:
                    shapes["bias_ih"] = (gate_size,)
                    shapes["bias_hh"] = (gate_size,)
                if proj_size > 0:
                    shapes["weight_hr"] = (proj_size, hidden_size)
                names = []
                for prefix, shape in shapes.items():
                    setattr(self, prefix + suffix, Parameter(_empty(shape, device, dtype)))
                    names.append(prefix + suffix)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    @staticmethod
    def _check_options(mode, input_size, hidden_size, num_layers, bias, batch_first, dropout,
                       proj_size):
        if (not isinstance(dropout, numbers.Number) or isinstance(dropout, bool)
                or not 0 <= dropout <= 1):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                          "non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}", stacklevel=3)
        if not isinstance(bias, bool):
            raise TypeError(f"bias should be of type bool, got: {type(bias).__name__}")
        if not isinstance(batch_first, bool):
            raise TypeError(f"batch_first should be of type bool, got: "
                            f"{type(batch_first).__name__}")
        if not isinstance(input_size, int):
            raise TypeError(f"input_size should be of type int, got: {type(input_size).__name__}")
        if input_size <= 0:
            raise ValueError("input_size must be greater than zero")
        if not isinstance(hidden_size, int):
            raise TypeError(f"hidden_size should be of type int, got: "
                            f"{type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if mode not in _STEPS:
            raise ValueError("Unrecognized RNN mode: " + mode)

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    # PyTorch keeps a flat copy of the weights for cuDNN; here they are just looked up.
    @property
    def _flat_weights(self):
        return [getattr(self, name, None) for name in self._flat_weights_names]

    @property
    def all_weights(self):
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def flatten_parameters(self):
        """No-op: there is no fused (cuDNN) weight buffer to compact."""

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    # -- checks (PyTorch's messages) -----------------------------------------------------

    def check_input(self, input, batch_sizes):
        weight_dtype = self._flat_weights[0].dtype
        if input.dtype != weight_dtype:
            raise ValueError(f"RNN input dtype ({input.dtype}) does not match weight dtype "
                             f"({weight_dtype}). Convert input: input.to({weight_dtype}), or "
                             f"convert model: model.to({input.dtype})")
        expected_input_dim = 2 if batch_sizes is not None else 3
        if input.dim() != expected_input_dim:
            raise RuntimeError(f"input must have {expected_input_dim} dimensions, got "
                               f"{input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.size(-1)}")

    def get_expected_hidden_size(self, input, batch_sizes):
        if batch_sizes is not None:
            mini_batch = int(batch_sizes[0])
        else:
            mini_batch = input.size(0) if self.batch_first else input.size(1)
        num_directions = 2 if self.bidirectional else 1
        size = self.proj_size if self.proj_size > 0 else self.hidden_size
        return (self.num_layers * num_directions, mini_batch, size)

    def check_hidden_size(self, hx, expected_hidden_size, msg="Expected hidden size {}, got {}"):
        if tuple(hx.size()) != tuple(expected_hidden_size):
            raise RuntimeError(msg.format(expected_hidden_size, list(hx.size())))

    def check_forward_args(self, input, hidden, batch_sizes):
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden, self.get_expected_hidden_size(input, batch_sizes))

    def permute_hidden(self, hx, permutation):
        if permutation is None:
            return hx
        return _apply_permutation(hx, permutation)

    # -- input normalisation shared by the three layers ------------------------------------

    def _prepare(self, input, hx, state_sizes):
        """Unpacks a PackedSequence or adds the batch dimension of unbatched input; builds
        zero initial states. Returns (input, hx, batch_sizes, sorted, unsorted, is_batched)."""
        name = {"RNN_TANH": "RNN", "RNN_RELU": "RNN"}.get(self.mode, self.mode)
        lstm = self.mode == "LSTM"
        num_directions = 2 if self.bidirectional else 1
        is_batched = True
        if isinstance(input, PackedSequence):
            input, batch_sizes, sorted_indices, unsorted_indices = input
            max_batch_size = int(batch_sizes[0])
            if hx is not None:
                hx = self.permute_hidden(hx, sorted_indices)
        else:
            batch_sizes = sorted_indices = unsorted_indices = None
            if input.dim() not in (2, 3):
                tail = "tensor instead" if name == "RNN" else \
                    ("input instead" if name == "GRU" else "instead")
                raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D "
                                 f"{tail}")
            is_batched = input.dim() == 3
            if not is_batched:
                input = input.unsqueeze(0 if self.batch_first else 1)
            if hx is not None:
                hx = self._check_hx_rank(hx, is_batched, lstm)
            max_batch_size = input.size(0) if self.batch_first else input.size(1)
        if hx is None:
            shape = (self.num_layers * num_directions, max_batch_size)
            hx = tuple(_zeros(shape + (size,), input) for size in state_sizes)
            if not lstm:
                hx = hx[0]
        return input, hx, batch_sizes, sorted_indices, unsorted_indices, is_batched

    @staticmethod
    def _check_hx_rank(hx, is_batched, lstm):
        want = 3 if is_batched else 2
        kind = "batched 3-D" if is_batched else "unbatched 2-D"
        if lstm:
            if hx[0].dim() != want or hx[1].dim() != want:
                raise RuntimeError(f"For {kind} input, hx and cx should also be {want}-D but "
                                   f"got ({hx[0].dim()}-D, {hx[1].dim()}-D) tensors")
            return hx if is_batched else (hx[0].unsqueeze(1), hx[1].unsqueeze(1))
        if hx.dim() != want:
            raise RuntimeError(f"For {kind} input, hx should also be {want}-D but got "
                               f"{hx.dim()}-D tensor")
        return hx if is_batched else hx.unsqueeze(1)

    # -- the computation -------------------------------------------------------------------

    def _run(self, input, h0, c0, batch_sizes):
        """All layers and directions. `input` is packed data (N, F) when batch_sizes is given,
        else a (T, B, F) tensor (B, T, F with batch_first). Returns (output, h_n, c_n)."""
        packed = batch_sizes is not None
        if packed:
            sizes = batch_sizes._np.astype(np.int64)
            data = input
        else:
            if self.batch_first:
                input = input.transpose(0, 1)
            steps, batch = input.shape[0], input.shape[1]
            sizes = np.full(steps, batch, dtype=np.int64)
            data = input.reshape(steps * batch, input.shape[2])
        sizes = sizes.tolist()
        step = _STEPS[self.mode]
        num_directions = 2 if self.bidirectional else 1
        h_finals, c_finals = [], []
        for layer in range(self.num_layers):
            direction_outputs = []
            for direction in range(num_directions):
                index = layer * num_directions + direction
                w_ih, w_hh, b_ih, b_hh, w_hr = self._layer_weights(index)
                # one product for every step, then a piece of its rows per step
                x_gates = F.linear(data, w_ih, b_ih).split(sizes)
                c_init = None if c0 is None else c0[index]
                run = _run_reverse if direction == 1 else _run_forward
                outputs, h_n, c_n = run(step, x_gates, sizes, h0[index], c_init,
                                        (w_hh, b_hh, w_hr))
                direction_outputs.append(_cat(outputs))
                h_finals.append(h_n)
                c_finals.append(c_n)
            data = direction_outputs[0] if num_directions == 1 else _cat(direction_outputs, 1)
            if self.dropout != 0 and self.training and layer < self.num_layers - 1:
                data = self._dropout_between_layers(data, packed, sizes)
        h_n = _ops.joining.stack(h_finals)
        c_n = None if c0 is None else _ops.joining.stack(c_finals)
        if not packed:
            data = data.reshape(len(sizes), sizes[0] if sizes else 0, data.shape[-1])
            if self.batch_first:
                data = data.transpose(0, 1)
        return data, h_n, c_n

    def _dropout_between_layers(self, data, packed, sizes):
        # PyTorch drops out the (T, B, features) layer output (or the packed data); the
        # mask is drawn in the same element order either way.
        if packed:
            return F.dropout(data, self.dropout, True)
        shaped = data.reshape(len(sizes), sizes[0], data.shape[-1])
        return F.dropout(shaped, self.dropout, True).reshape(data.shape)

    def _layer_weights(self, index):
        names = self._all_weights[index]
        weights = {name.split("_l")[0]: getattr(self, name) for name in names}
        return (weights["weight_ih"], weights["weight_hh"], weights.get("bias_ih"),
                weights.get("bias_hh"), weights.get("weight_hr"))

    def _finish(self, output, hidden, batch_sizes, sorted_indices, unsorted_indices,
                is_batched):
        if batch_sizes is not None:
            return (PackedSequence(output, batch_sizes, sorted_indices, unsorted_indices),
                    self.permute_hidden(hidden, unsorted_indices))
        if not is_batched:
            output = output.squeeze(0 if self.batch_first else 1)
            hidden = tuple(h.squeeze(1) for h in hidden) if isinstance(hidden, tuple) \
                else hidden.squeeze(1)
        return output, self.permute_hidden(hidden, unsorted_indices)


class _SingleStateRNN(RNNBase):
    """RNN and GRU: one hidden state tensor."""

    def forward(self, input, hx=None):
        prepared = self._prepare(input, hx, (self.hidden_size,))
        input, hx, batch_sizes, sorted_indices, unsorted_indices, is_batched = prepared
        self.check_forward_args(input, hx, batch_sizes)
        output, h_n, _ = self._run(input, hx, None, batch_sizes)
        return self._finish(output, h_n, batch_sizes, sorted_indices, unsorted_indices,
                            is_batched)


class RNN(_SingleStateRNN):
    """Elman RNN: h_t = tanh(W_ih x_t + b_ih + W_hh h_(t-1) + b_hh) (or relu)."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:  # positional order: input_size, hidden_size, num_layers, nonlinearity
            nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            nonlinearity = kwargs.pop("nonlinearity", "tanh")
        modes = {"tanh": "RNN_TANH", "relu": "RNN_RELU"}
        if nonlinearity not in modes:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' "
                             f"or 'relu'.")
        super().__init__(modes[nonlinearity], *args, **kwargs)
        self.nonlinearity = nonlinearity


class GRU(_SingleStateRNN):
    """Gated recurrent unit (gates reset, update, new)."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)


class LSTM(RNNBase):
    """Long short-term memory, optionally with projected hidden state (proj_size)."""

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def get_expected_cell_size(self, input, batch_sizes):
        if batch_sizes is not None:
            mini_batch = int(batch_sizes[0])
        else:
            mini_batch = input.size(0) if self.batch_first else input.size(1)
        num_directions = 2 if self.bidirectional else 1
        return (self.num_layers * num_directions, mini_batch, self.hidden_size)

    def check_forward_args(self, input, hidden, batch_sizes):
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden[0], self.get_expected_hidden_size(input, batch_sizes),
                               "Expected hidden[0] size {}, got {}")
        self.check_hidden_size(hidden[1], self.get_expected_cell_size(input, batch_sizes),
                               "Expected hidden[1] size {}, got {}")

    def permute_hidden(self, hx, permutation):
        if permutation is None:
            return hx
        return (_apply_permutation(hx[0], permutation), _apply_permutation(hx[1], permutation))

    def forward(self, input, hx=None):
        real_hidden_size = self.proj_size if self.proj_size > 0 else self.hidden_size
        prepared = self._prepare(input, hx, (real_hidden_size, self.hidden_size))
        input, hx, batch_sizes, sorted_indices, unsorted_indices, is_batched = prepared
        self.check_forward_args(input, hx, batch_sizes)
        output, h_n, c_n = self._run(input, hx[0], hx[1], batch_sizes)
        return self._finish(output, (h_n, c_n), batch_sizes, sorted_indices, unsorted_indices,
                            is_batched)


# ----------------------------------------------------------------------------------------------
# Single-step cells

class RNNCellBase(Module):
    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(_empty((num_chunks * hidden_size, input_size), device, dtype))
        self.weight_hh = Parameter(_empty((num_chunks * hidden_size, hidden_size), device,
                                          dtype))
        if bias:
            self.bias_ih = Parameter(_empty((num_chunks * hidden_size,), device, dtype))
            self.bias_hh = Parameter(_empty((num_chunks * hidden_size,), device, dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        nonlinearity = getattr(self, "nonlinearity", "tanh")
        if nonlinearity != "tanh":
            s += f", nonlinearity={nonlinearity}"
        return s

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _check_rank(self, input, states, labels):
        name = type(self).__name__
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D "
                             f"instead")
        for state, label in zip(states, labels):
            if state.dim() not in (1, 2):
                raise ValueError(f"{name}: Expected {label} to be 1D or 2D, got {state.dim()}D "
                                 f"instead")

    def _check_sizes(self, input, states, labels):
        # PyTorch's cell kernels check these (RuntimeError).
        if input.size(1) != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.size(1)} "
                               f"expected {self.input_size}")
        for state, label in zip(states, labels):
            if input.size(0) != state.size(0):
                raise RuntimeError(f"Input batch size {input.size(0)} doesn't match hidden"
                                   f"{label} batch size {state.size(0)}")
            if state.size(1) != self.hidden_size:
                raise RuntimeError(f"hidden{label} has inconsistent hidden_size: got "
                                   f"{state.size(1)}, expected {self.hidden_size}")

    def _step(self, step, input, h, c):
        x_gates = F.linear(input, self.weight_ih, self.bias_ih)
        return step(x_gates, h, c, self.weight_hh, self.bias_hh, None)


class _SingleStateCell(RNNCellBase):
    _step_fn = None

    def forward(self, input, hx=None):
        self._check_rank(input, [] if hx is None else [hx], ["hidden"])
        is_batched = input.dim() == 2
        if not is_batched:
            input = input.unsqueeze(0)
        if hx is None:
            hx = _zeros((input.size(0), self.hidden_size), input)
        elif not is_batched:
            hx = hx.unsqueeze(0)
        step = self._choose_step()
        self._check_sizes(input, [hx], [""])
        h, _ = self._step(step, input, hx, None)
        return h if is_batched else h.squeeze(0)

    def _choose_step(self):
        return type(self)._step_fn


class RNNCell(_SingleStateCell):
    """One step of an Elman RNN."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device,
                         dtype=dtype)
        self.nonlinearity = nonlinearity

    def _choose_step(self):
        if self.nonlinearity == "tanh":
            return _rnn_tanh_step
        if self.nonlinearity == "relu":
            return _rnn_relu_step
        raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")


class GRUCell(_SingleStateCell):
    """One step of a GRU."""
    _step_fn = staticmethod(_gru_step)

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device,
                         dtype=dtype)


class LSTMCell(RNNCellBase):
    """One step of an LSTM; returns (h, c)."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device,
                         dtype=dtype)

    def forward(self, input, hx=None):
        self._check_rank(input, [] if hx is None else list(hx), ["hx[0]", "hx[1]"])
        is_batched = input.dim() == 2
        if not is_batched:
            input = input.unsqueeze(0)
        if hx is None:
            zeros = _zeros((input.size(0), self.hidden_size), input)
            hx = (zeros, zeros)
        elif not is_batched:
            hx = (hx[0].unsqueeze(0), hx[1].unsqueeze(0))
        self._check_sizes(input, hx, ["[0]", "[1]"])
        h, c = self._step(_lstm_step, input, hx[0], hx[1])
        return (h, c) if is_batched else (h.squeeze(0), c.squeeze(0))
