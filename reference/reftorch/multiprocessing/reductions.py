"""How tensors and storages cross process boundaries through multiprocessing.

`init_reductions` registers reducers with multiprocessing's ForkingPickler, the pickler behind
its Queues, Pipes and spawned-process arguments. A CPU storage sent that way is first moved to
shared memory (so the sender's tensor becomes shared too, as in PyTorch) and only a handle to
the segment travels: a file descriptor or a file name, depending on the sharing strategy. The
receiver maps the same memory, so writes on either side are seen by the other.
Ordinary `pickle` is unaffected: it still copies the elements.
"""
from __future__ import annotations

from multiprocessing.reduction import DupFd, ForkingPickler

from .._storage import CPUStorage, Storage
from .._tensor import Tensor
from ._segment import Segment


# --- storages ------------------------------------------------------------------------------

def rebuild_storage_fd(dup_fd, nbytes, dtype, size):
    segment = Segment(dup_fd.detach(), nbytes)
    return CPUStorage(segment.array(dtype.numpy_dtype, size), dtype, segment)


def rebuild_storage_filename(path, nbytes, dtype, size):
    segment = Segment.open_name(path, nbytes)
    return CPUStorage(segment.array(dtype.numpy_dtype, size), dtype, segment)


def rebuild_storage_copy(values, dtype, device):
    from .._storage import allocate, normalize_device
    storage = allocate(len(values), dtype, normalize_device(device))
    storage.write(0, values)
    return storage


def reduce_storage(storage):
    if not isinstance(storage, CPUStorage):
        # Device memory of plugin backends cannot be mapped: send a copy of the elements.
        return rebuild_storage_copy, (storage.read(0, len(storage)), storage.dtype,
                                      str(storage.device))
    from . import get_sharing_strategy
    storage.share_memory_()
    segment = storage._segment
    args_tail = (segment.nbytes, storage.dtype, len(storage))
    if get_sharing_strategy() == "file_system" and segment.name is not None:
        return rebuild_storage_filename, (segment.link_for_message(),) + args_tail
    return rebuild_storage_fd, (DupFd(segment.fd),) + args_tail


def rebuild_typed_storage(storage, cls):
    return cls(_storage=storage)


def reduce_typed_storage(typed):
    return rebuild_typed_storage, (typed._storage, type(typed))


# --- tensors -------------------------------------------------------------------------------

def rebuild_tensor(storage, offset, shape, strides, requires_grad):
    t = Tensor._make(storage, offset, shape, strides)
    t.requires_grad = requires_grad
    return t


def reduce_tensor(t):
    if t.requires_grad and t.grad_fn is not None:
        raise RuntimeError(
            "Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd "
            "does not support crossing process boundaries.  If you just want to transfer the "
            "data, call detach() on the tensor before serializing (e.g., putting it on the "
            "queue).")
    if isinstance(t._storage, CPUStorage):
        t.share_memory_()     # refreshes this tensor's NumPy view after the move
    # The storage is pickled as its own object, so tensors sharing it in one message (views)
    # share it again in the receiver.
    return rebuild_tensor, (t._storage, t._offset, t._shape, t._strides, t.requires_grad)


def init_reductions():
    from .._legacy import TypedStorage, _STORAGE_CLASSES
    ForkingPickler.register(Tensor, reduce_tensor)
    ForkingPickler.register(CPUStorage, reduce_storage)
    ForkingPickler.register(TypedStorage, reduce_typed_storage)
    for cls in _STORAGE_CLASSES.values():
        ForkingPickler.register(cls, reduce_typed_storage)
    for cls in _storage_subclasses():
        ForkingPickler.register(cls, reduce_storage)


def _storage_subclasses():
    """Storage classes of registered device backends (reduced by copying their elements)."""
    pending, found = list(Storage.__subclasses__()), []
    while pending:
        cls = pending.pop()
        if cls is not CPUStorage:
            found.append(cls)
        pending.extend(cls.__subclasses__())
    return found
