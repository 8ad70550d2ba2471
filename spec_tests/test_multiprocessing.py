"""torch.multiprocessing against real PyTorch: shared-memory tensors, tensors through queues,
sharing strategies and `spawn` with error propagation.

Child processes are forked where the start method does not matter (fast); `spawn` itself is
tested once with the 'spawn' start method using a standard-library callable, so the child
does not import this module (or PyTorch).
"""
from __future__ import annotations

import functools
import multiprocessing as python_mp
import operator
import os
import signal
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest

import reftorch
import reftorch.multiprocessing as rmp

torch = pytest.importorskip("torch")
import torch.multiprocessing as tmp  # noqa: E402

LIBS = ((reftorch, rmp), (torch, tmp))


@pytest.fixture(params=["file_descriptor", "file_system"])
def strategy(request):
    """Run a test under each sharing strategy (reftorch's), restoring the default after."""
    before = rmp.get_sharing_strategy()
    rmp.set_sharing_strategy(request.param)
    yield request.param
    rmp.set_sharing_strategy(before)


def test_module_reexports_multiprocessing():
    for name in tmp.__all__:
        assert hasattr(rmp, name), name
    assert rmp.Process is python_mp.Process or callable(rmp.Process)
    for name in ("spawn", "start_processes", "ProcessContext", "SpawnContext",
                 "ProcessRaisedException", "ProcessExitedException"):
        assert hasattr(rmp, name), name


def test_sharing_strategies_match_torch():
    assert rmp.get_all_sharing_strategies() == tmp.get_all_sharing_strategies()
    assert rmp.get_sharing_strategy() == tmp.get_sharing_strategy()
    errors = []
    for mp in (rmp, tmp):
        with pytest.raises(BaseException) as info:
            mp.set_sharing_strategy("no_such_strategy")
        errors.append(info.type)
    assert errors[0] is errors[1]
    assert rmp.get_sharing_strategy() == tmp.get_sharing_strategy()


def test_share_memory_and_is_shared_match_torch():
    results = []
    for lib, _ in LIBS:
        t = lib.arange(6.0).reshape(2, 3)
        before = (t.is_shared(), t.storage().is_shared())
        same = t.share_memory_() is t
        after = (t.is_shared(), t.storage().is_shared(), t[1].is_shared())
        t[0, 1] = 9.0        # still an ordinary tensor
        again = t.share_memory_() is t
        results.append((before, same, after, again, t.numpy().tolist()))
    assert results[0] == results[1]


def _add_one_in_child(tensor):
    tensor.add_(1)


def test_shared_tensor_modified_by_forked_child_is_seen_by_parent():
    for lib, mp in LIBS:
        t = lib.zeros(4, dtype=lib.int64).share_memory_()
        child = mp.get_context("fork").Process(target=_add_one_in_child, args=(t[1:3],))
        child.start()
        child.join()
        assert child.exitcode == 0
        assert t.tolist() == [0, 1, 1, 0], lib.__name__


def _receive_and_modify(in_queue, out_queue, done):
    a, b, strategy_used = in_queue.get()
    reftorch.multiprocessing.set_sharing_strategy(strategy_used)
    b.fill_(5)                   # a view of a: one storage in the child too
    a[0] = a[0] + 1
    out_queue.put((a.is_shared(), b.untyped_storage() is a.untyped_storage(),
                   reftorch.arange(3) * 10))
    done.wait()                  # the parent must map our tensor before we exit


def test_tensor_through_queue_is_shared(strategy):
    ctx = rmp.get_context("fork")
    in_queue, out_queue, done = ctx.Queue(), ctx.Queue(), ctx.Event()
    t = reftorch.zeros(4)
    child = ctx.Process(target=_receive_and_modify, args=(in_queue, out_queue, done))
    child.start()
    in_queue.put((t, t[2:], strategy))
    shared_in_child, same_storage, from_child = out_queue.get(timeout=20)
    done.set()
    child.join(20)
    assert child.exitcode == 0 and shared_in_child and same_storage
    assert t.is_shared()          # sending moved the sender's tensor to shared memory
    np.testing.assert_array_equal(t.numpy(), np.array([1, 0, 5, 5], np.float32))
    assert from_child.is_shared() and from_child.tolist() == [0, 10, 20]
    leftovers = [f for f in os.listdir("/dev/shm") if f.startswith(f"reftorch_{child.pid}_")]
    del from_child
    if strategy == "file_system":
        assert not [f for f in leftovers if os.path.exists(os.path.join("/dev/shm", f))]


def test_non_leaf_requiring_grad_cannot_be_sent():
    types = []
    for lib, _ in LIBS:
        x = lib.ones(2, requires_grad=True)
        with pytest.raises(Exception) as info:
            ForkingPickler.dumps(x * 2)
        types.append(info.type)
        # A leaf tensor is fine, and keeps requires_grad.
        y = ForkingPickler.loads(ForkingPickler.dumps(x))
        assert y.requires_grad and y.tolist() == [1.0, 1.0]
    assert types[0] is types[1] is RuntimeError


def test_plain_pickle_still_copies():
    import pickle
    t = reftorch.arange(3)
    copy = pickle.loads(pickle.dumps(t))
    copy[0] = 7
    assert t.tolist() == [0, 1, 2] and not copy.is_shared() and not t.is_shared()


def _raise_in_rank_1(rank):
    if rank == 1:
        raise ValueError(f"failure in rank {rank}")


def _die_by_signal(rank):
    os.kill(os.getpid(), signal.SIGKILL)


def _exit_with_code(rank):
    os._exit(3)


def _exceptions(start_processes_module, fn):
    with pytest.raises(Exception) as info:
        start_processes_module.start_processes(fn, nprocs=2, start_method="fork")
    return info


def test_start_processes_error_propagation_matches_torch():
    for fn in (_raise_in_rank_1, _die_by_signal, _exit_with_code):
        ours, theirs = _exceptions(rmp, fn), _exceptions(tmp, fn)
        assert type(ours.value).__name__ == type(theirs.value).__name__
        assert ours.value.error_index == theirs.value.error_index or fn is not _raise_in_rank_1
        if fn is _raise_in_rank_1:
            for info in (ours, theirs):
                message = str(info.value)
                assert "-- Process 1 terminated with the following error:" in message
                assert "Traceback (most recent call last)" in message
                assert "ValueError: failure in rank 1" in message
        else:
            assert str(ours.value).split(" terminated")[1] == \
                str(theirs.value).split(" terminated")[1]


def test_start_processes_share_tensors():
    # Children write into a shared tensor: setitem(t, i, 7.0) is t[i] = 7.0. Forked children
    # inherit the mapping, so the tensor must be shared before they start.
    t = reftorch.zeros(3).share_memory_()
    rmp.start_processes(functools.partial(operator.setitem, t), args=(7.0,), nprocs=2,
                        start_method="fork")
    assert t.tolist() == [7.0, 7.0, 0.0]


def test_spawn_propagates_errors():
    # truediv(i, 0) raises ZeroDivisionError in the (spawned) child; joined later.
    context = rmp.spawn(operator.truediv, args=(0,), nprocs=1, join=False)
    assert len(context.pids()) == 1
    with pytest.raises(rmp.ProcessRaisedException) as info:
        while not context.join():
            pass
    assert info.value.error_index == 0
    assert "-- Process 0 terminated with the following error:" in str(info.value)
    assert "Traceback (most recent call last)" in str(info.value)
    assert "ZeroDivisionError" in str(info.value)
