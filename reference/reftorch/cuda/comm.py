"""Communication collectives between GPUs: `torch.cuda.comm`.

Copies between devices go through `Tensor.to` (reftorch-cuda copies device to device with
cuMemcpyPeerAsync). `broadcast_coalesced` copies each tensor on its own: the coalescing into
buffers of `buffer_size` bytes is a speed measure that does not change the results.
"""
from __future__ import annotations

from .._device import device as _Device

__all__ = ["broadcast", "broadcast_coalesced", "gather", "reduce_add", "scatter"]


def _cuda(index):
    from . import _index
    return _Device("cuda", _index(index))


def _on(tensor, target):
    """`tensor` itself when it already lives on `target`, else a copy there."""
    return tensor if tensor.device == target else tensor.to(target)


def broadcast(tensor, devices=None, *, out=None):
    """Copies of `tensor` on each of `devices` (ints or devices; the tensor itself for its
    own device), or written into the tensors of `out` (one per device). Give exactly one of
    `devices` and `out`."""
    if (devices is None) == (out is None):
        raise RuntimeError("Exactly one of 'devices' and 'out' must be specified, but got "
                           f"devices={devices} and out={out}")
    if out is not None:
        for target in out:
            if target.shape != tensor.shape:
                raise RuntimeError(f"Expected all output tensors to have the same shape as "
                                   f"the source {tuple(tensor.shape)}, but got "
                                   f"{tuple(target.shape)}")
            target.copy_(tensor)
        return tuple(out)
    return tuple(_on(tensor, _cuda(d)) for d in devices)


def broadcast_coalesced(tensors, devices, buffer_size=10485760):
    """For each of `devices` (the first is where all `tensors` live), a tuple of copies of
    `tensors` there (the tensors themselves on the first)."""
    targets = [_cuda(d) for d in devices]
    for t in tensors:
        if t.device != targets[0]:
            raise RuntimeError(f"all tensors must be on devices[0]: {targets[0]}, but found "
                               f"a tensor on {t.device}")
    return tuple(tuple(_on(t, target) for t in tensors) for target in targets)


def reduce_add(inputs, destination=None):
    """The sum of `inputs` (tensors of one shape on different GPUs), on `destination`
    (default: the current device), which must hold one of them."""
    target = _cuda(destination)
    root = None
    for i, t in enumerate(inputs):
        if t.device.type == "cpu":
            raise RuntimeError("reduce_add expects all inputs to be on GPUs")
        if t.device == target:
            root = i
        if t.shape != inputs[0].shape:
            raise ValueError(f"input {i} has invalid size: got {_size(t)}, but expected "
                             f"{_size(inputs[0])}")
    if root is None:
        raise RuntimeError("reduce_add expects destination to be on the same GPU with one of "
                           "the tensors")
    result = inputs[root].clone()
    for i, t in enumerate(inputs):
        if i != root:
            result.add_(t.to(target))
    return result


def _size(t):
    return "x".join(str(n) for n in t.shape)


def scatter(tensor, devices=None, chunk_sizes=None, dim=0, streams=None, *, out=None):
    """Split `tensor` along `dim` and put one piece on each of `devices`: equal chunks (as
    `Tensor.chunk`) or `chunk_sizes` (which must sum to the size of `dim`). With `out`, the
    pieces are written into its tensors instead (their sizes along `dim` give the split).
    `streams` gives the stream to copy on for each device."""
    if out is not None:
        if devices is not None or chunk_sizes is not None:
            raise RuntimeError("'devices' and 'chunk_sizes' must not be specified when 'out' "
                               "is given")
        pieces = tensor.split([t.shape[dim] for t in out], dim)
        for i, (piece, target) in enumerate(zip(pieces, out)):
            with _stream_for(streams, i):
                target.copy_(piece)
        return tuple(out)
    if devices is None:
        raise RuntimeError("scatter() needs 'devices' or 'out'")
    devices = list(devices)
    if chunk_sizes is None:
        pieces = tensor.chunk(len(devices), dim)
    else:
        chunk_sizes = list(chunk_sizes)
        if len(chunk_sizes) != len(devices):
            raise RuntimeError(f"Expected devices and chunk_sizes to be of same length, but "
                               f"got len(devices) = {len(devices)} and len(chunk_sizes) = "
                               f"{len(chunk_sizes)}")
        if sum(chunk_sizes) != tensor.shape[dim]:
            raise RuntimeError(f"Chunk sizes sum to {sum(chunk_sizes)}, but expected "
                               f"{tensor.shape[dim]}")
        pieces = tensor.split(chunk_sizes, dim)
    result = []
    for i, (piece, d) in enumerate(zip(pieces, devices)):
        with _stream_for(streams, i):
            result.append(_on(piece, _cuda(d)))
    return tuple(result)


def _stream_for(streams, i):
    from .streams import stream
    return stream(streams[i] if streams is not None else None)


def gather(tensors, dim=0, destination=None, *, out=None):
    """Concatenate `tensors` (from any GPUs) along `dim` on `destination` (default: the
    current device; -1 or 'cpu': the CPU), or into `out`."""
    from .. import cat
    if out is not None:
        if destination is not None:
            raise RuntimeError("'destination' must not be specified when 'out' is given")
        target = out.device
    elif destination == -1 or (isinstance(destination, (str, _Device))
                               and _Device(destination).type == "cpu"):
        target = _Device("cpu")
    else:
        target = _cuda(destination)
    first = tensors[0]
    for i, t in enumerate(tensors):
        other = [n for d, n in enumerate(t.shape) if d != dim % max(t.ndim, 1)]
        expected = [n for d, n in enumerate(first.shape) if d != dim % max(first.ndim, 1)]
        if t.ndim != first.ndim or other != expected:
            raise RuntimeError(f"Expected all tensors to have the same sizes except in "
                               f"dimension {dim}, but tensor {i} has size {_size(t)} and "
                               f"tensor 0 has size {_size(first)}")
    result = cat([t.to(target) for t in tensors], dim)
    if out is not None:
        out.copy_(result)
        return out
    return result
