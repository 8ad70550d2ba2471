"""torch.nn.utils.rnn: packed sequences for variable-length batches.

A batch of sequences of different lengths, sorted longest first, is "packed" by keeping only
the real (non-padding) steps, time-major: at time step t the first batch_sizes[t] sequences
still run, so the packed `data` holds rows

    step 0 of sequences 0..batch_sizes[0]-1, then step 1 of sequences 0..batch_sizes[1]-1, ...

Packing and unpacking are gathers with an index computed in NumPy from the lengths, so
autograd flows through `index_select` and no loop over batch elements is needed.
"""
from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterable

import numpy as np

from ... import _ops
from ..._tensor import Tensor

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence",
           "pad_packed_sequence", "pad_sequence", "unpad_sequence", "pack_sequence",
           "unpack_sequence"]


def _int64(values):
    return _ops.creation.tensor(np.asarray(values, dtype=np.int64))


def invert_permutation(permutation):
    """The permutation that undoes `permutation` (None stays None)."""
    if permutation is None:
        return None
    inverse = np.empty(permutation.numel(), dtype=np.int64)
    inverse[permutation._np] = np.arange(permutation.numel(), dtype=np.int64)
    return _int64(inverse).to(permutation.device)


def _packed_sequence_fields(data, batch_sizes, sorted_indices, unsorted_indices):
    if unsorted_indices is None:
        unsorted_indices = invert_permutation(sorted_indices)
    if batch_sizes is not None:
        if batch_sizes.device.type != "cpu":
            raise ValueError(
                "batch_sizes should always be on CPU. Instances of PackedSequence should never "
                "be created manually. They should be instantiated by functions like "
                "pack_sequence and pack_padded_sequences in nn.utils.rnn. "
                "https://pytorch.org/docs/stable/nn.html#torch.nn.utils.rnn.pack_sequence")
        return data, batch_sizes, sorted_indices, unsorted_indices
    # Also accepted, like PyTorch: PackedSequence((data, batch_sizes), ...).
    if not (isinstance(data, (list, tuple)) and len(data) == 2):
        raise AssertionError("Expected data to be a list or tuple of length 2")
    return data[0], data[1], sorted_indices, unsorted_indices


class PackedSequence(namedtuple("PackedSequence_",
                                ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    """Packed data plus the batch size of every time step (an int64 CPU tensor), and the
    permutation that sorted the batch by decreasing length (None when it was already sorted)."""

    __slots__ = ()

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        return super().__new__(cls, *_packed_sequence_fields(data, batch_sizes, sorted_indices,
                                                             unsorted_indices))

    def to(self, *args, **kwargs):
        """Converts `data` (dtype and/or device); the index tensors follow to its device."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        sorted_indices = None if self.sorted_indices is None else self.sorted_indices.to(
            data.device)
        unsorted_indices = None if self.unsorted_indices is None else \
            self.unsorted_indices.to(data.device)
        return type(self)(data, self.batch_sizes, sorted_indices, unsorted_indices)

    def cuda(self, *args, **kwargs):
        if self.data.is_cuda and not args and "device" not in kwargs:
            return self.to(*args, **kwargs)
        kwargs.setdefault("device", "cuda")
        return self.to(*args, **kwargs)

    def cpu(self, *args, **kwargs):
        kwargs["device"] = "cpu"
        return self.to(*args, **kwargs)

    def pin_memory(self):
        return type(self)(self.data.pin_memory(), self.batch_sizes,
                          None if self.sorted_indices is None else self.sorted_indices.pin_memory(),
                          None if self.unsorted_indices is None else
                          self.unsorted_indices.pin_memory())

    def double(self):
        return self.to(dtype=_dtypes().float64)

    def float(self):
        return self.to(dtype=_dtypes().float32)

    def half(self):
        return self.to(dtype=_dtypes().float16)

    def long(self):
        return self.to(dtype=_dtypes().int64)

    def int(self):
        return self.to(dtype=_dtypes().int32)

    def short(self):
        return self.to(dtype=_dtypes().int16)

    def char(self):
        return self.to(dtype=_dtypes().int8)

    def byte(self):
        return self.to(dtype=_dtypes().uint8)

    @property
    def is_cuda(self):
        return self.data.is_cuda

    def is_pinned(self):
        return self.data.is_pinned()


def _dtypes():
    from ... import _dtype
    return _dtype


# ----------------------------------------------------------------------------------------------
# Index arithmetic on lengths (plain NumPy on small integer arrays)

def _batch_sizes_from_lengths(lengths):
    """batch_sizes[t] = number of sequences longer than t (lengths sorted decreasingly)."""
    steps = np.arange(int(lengths[0]))
    return (lengths[None, :] > steps[:, None]).sum(axis=1).astype(np.int64)


def _packed_positions(batch_sizes, max_len, batch):
    """For each (time step, sequence) cell of a (max_len, batch) grid: the row of the packed
    data holding it, or -1 where that sequence has already ended (padding)."""
    starts = np.concatenate([[0], np.cumsum(batch_sizes)[:-1]]).astype(np.int64)
    steps = len(batch_sizes)
    rows = np.full((max_len, batch), -1, dtype=np.int64)
    column = np.arange(batch)[None, :]
    valid = column < batch_sizes[:, None]
    rows[:steps] = np.where(valid, starts[:, None] + column, -1)
    return rows


def _lengths_from_batch_sizes(batch_sizes, batch):
    """lengths[b] = number of time steps in which sequence b is still running."""
    return (batch_sizes[:, None] > np.arange(batch)[None, :]).sum(axis=0).astype(np.int64)


# ----------------------------------------------------------------------------------------------
# Public functions

def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Packs a padded (T, B, *) (or (B, T, *) with batch_first) tensor of sequences with the
    given lengths. With enforce_sorted=False the batch is sorted by decreasing length first and
    the permutation is kept in the result."""
    if isinstance(lengths, Tensor):
        lengths_np = lengths._np.astype(np.int64)
    else:
        lengths_np = np.asarray(lengths, dtype=np.int64)
    if lengths_np.ndim != 1:
        raise RuntimeError(f"'lengths' argument should be a 1D CPU int64 tensor, but got "
                           f"{lengths_np.ndim}D cpu Long tensor")
    sorted_indices = None
    if not enforce_sorted:
        # A stable descending sort, like PyTorch's: equal lengths keep their order.
        order = np.argsort(-lengths_np, kind="stable").astype(np.int64)
        lengths_np = lengths_np[order]
        sorted_indices = _int64(order).to(input.device)
        input = input.index_select(0 if batch_first else 1, sorted_indices)
    data, batch_sizes = _pack_sorted(input, lengths_np, batch_first)
    return PackedSequence(data, batch_sizes, sorted_indices, None)


def _pack_sorted(input, lengths, batch_first):
    if input.numel() == 0:
        raise RuntimeError("Cannot pack empty tensors.")
    if batch_first:
        input = input.transpose(0, 1)
    max_len, batch = input.shape[0], input.shape[1]
    if len(lengths) != batch:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got "
                           f"{len(lengths)} (batch_size={batch})")
    if lengths[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an "
                           "element in 'lengths' that is <= 0")
    if np.any(np.diff(lengths) > 0):
        raise RuntimeError(
            "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. "
            "You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence "
            "to sidestep this requirement if you do not need ONNX exportability.")
    if lengths[0] > max_len:
        raise RuntimeError(f"Expected sequence length to be larger than or equal to the "
                           f"maximum length in `lengths`, but got {max_len} < {lengths[0]}")
    batch_sizes = _batch_sizes_from_lengths(lengths)
    # Time-major flat position t*B + b of every packed row, in packed order.
    steps, column = np.nonzero(np.arange(batch)[None, :] < batch_sizes[:, None])
    flat_rows = steps * batch + column
    flat = input.reshape((max_len * batch,) + tuple(input.shape[2:]))
    data = flat.index_select(0, _int64(flat_rows).to(input.device))
    return data, _int64(batch_sizes)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """Inverse of pack_padded_sequence: returns (padded, lengths), restoring the original batch
    order; total_length pads the time dimension further (at least the longest sequence)."""
    batch_sizes = sequence.batch_sizes._np.astype(np.int64)
    max_len = len(batch_sizes)
    if total_length is not None:
        if total_length < max_len:
            raise ValueError(f"Expected total_length to be at least the length of the longest "
                             f"sequence in input, but got total_length={total_length} and max "
                             f"sequence length being {max_len}")
        max_len = total_length
    data = sequence.data
    batch = int(batch_sizes[0])
    rows = _packed_positions(batch_sizes, max_len, batch)
    # Gather from the packed rows plus one extra row holding the padding value.
    pad_row = _ops.creation.full((1,) + tuple(data.shape[1:]), padding_value, dtype=data.dtype,
                                 device=data.device)
    source = _ops.joining.cat([data, pad_row])
    rows = np.where(rows < 0, data.shape[0], rows)
    padded = source.index_select(0, _int64(rows.reshape(-1)).to(data.device))
    padded = padded.reshape((max_len, batch) + tuple(data.shape[1:]))
    if batch_first:
        padded = padded.transpose(0, 1)
    lengths = _int64(_lengths_from_batch_sizes(batch_sizes, batch))
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(0 if batch_first else 1, sequence.unsorted_indices)
        lengths = lengths[sequence.unsorted_indices.cpu()]
    return padded, lengths


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stacks variable-length (L_i, *) tensors into (T, B, *) (or (B, T, *)), T = max L_i,
    filling with padding_value on the right (or the left with padding_side="left")."""
    if not isinstance(sequences, Iterable):
        raise RuntimeError(f"pad_sequence: Expected iterable for input sequences, but got arg "
                           f"of type: {type(sequences)}")
    sequences = tuple(sequences)
    if len(sequences) == 0:
        raise RuntimeError("received an empty list of sequences")
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got "
                           f"{padding_side}.")
    if any(seq.dim() == 0 for seq in sequences):
        raise RuntimeError("pad_sequence: every sequence needs a length dimension, but got a "
                           "0-dim tensor")
    trailing = tuple(sequences[0].shape[1:])
    for seq in sequences:
        if tuple(seq.shape[1:]) != trailing:
            dim = next((d for d, (a, b) in enumerate(zip(trailing, seq.shape[1:])) if a != b),
                       len(trailing))
            size_a = trailing[dim] if dim < len(trailing) else 1
            size_b = seq.shape[1 + dim] if 1 + dim < seq.dim() else 1
            raise RuntimeError(f"The size of tensor a ({size_a}) must match the size of tensor "
                               f"b ({size_b}) at non-singleton dimension {dim + 1}")
    lengths = np.array([seq.shape[0] for seq in sequences], dtype=np.int64)
    max_len = int(lengths.max())
    batch = len(sequences)
    first = sequences[0]
    pad_row = _ops.creation.full((1,) + trailing, padding_value, dtype=first.dtype,
                                 device=first.device)
    source = _ops.joining.cat(list(sequences) + [pad_row])
    # Row of `source` for each (sequence b, position t): right padding puts step t of
    # sequence b at t; left padding shifts it by max_len - length.
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    position = np.arange(max_len)[None, :]
    if padding_side == "left":
        position = position - (max_len - lengths)[:, None]
    valid = (position >= 0) & (position < lengths[:, None])
    rows = np.where(valid, starts[:, None] + position, int(lengths.sum()))
    padded = source.index_select(0, _int64(rows.reshape(-1)).to(first.device))
    padded = padded.reshape((batch, max_len) + trailing)
    return padded if batch_first else padded.transpose(0, 1).contiguous()


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """Splits a padded batch back into a list of tensors of the given lengths."""
    if not batch_first:
        # PyTorch transposes the caller's tensor in place here; we do the same.
        padded_sequences.transpose_(0, 1)
    lengths_np = lengths._np if isinstance(lengths, Tensor) else np.asarray(lengths)
    return [padded_sequences[b, :int(length)] for b, length in enumerate(lengths_np)]


def pack_sequence(sequences, enforce_sorted=True):
    """pad_sequence followed by pack_padded_sequence."""
    lengths = [seq.size(0) for seq in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The list of tensors a PackedSequence was built from (in the original order)."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
