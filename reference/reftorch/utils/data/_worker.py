"""What runs inside a DataLoader worker process, and what it sends back.

A worker seeds its random generators, runs `worker_init_fn`, then serves tasks from its index
queue: each task `(task_id, indices)` is fetched and collated and the result (or the exception
it raised, wrapped) goes to the shared result queue as `(task_id, data)`. `None` on the index
queue ends the worker; `_ResumeIteration` restarts the dataset (persistent workers).
"""
from __future__ import annotations

import os
import queue
import random
import sys
import traceback

import numpy as np

import reftorch as torch

# How often a blocked worker or main process looks whether its peer is still alive (seconds).
STATUS_CHECK_INTERVAL = 0.2


class WorkerInfo:
    """Facts about the current worker: id, num_workers, seed, dataset (read-only)."""

    def __init__(self, **kwargs):
        for key, value in kwargs.items():
            object.__setattr__(self, key, value)
        object.__setattr__(self, "_keys", tuple(kwargs))

    def __setattr__(self, key, value):
        raise RuntimeError(f"Cannot assign attributes to {type(self).__name__} objects")

    def __repr__(self):
        fields = ", ".join(f"{k}={getattr(self, k)}" for k in self._keys)
        return f"{type(self).__name__}({fields})"


_worker_info = None


def get_worker_info():
    """In a DataLoader worker process its `WorkerInfo`, in the main process None."""
    return _worker_info


class ExceptionWrapper:
    """An exception caught in a worker, with its traceback as text (tracebacks themselves
    cannot be pickled); `reraise` raises it again in the main process."""

    def __init__(self, exc_info=None, where="in background"):
        if exc_info is None:
            exc_info = sys.exc_info()
        self.exc_type = exc_info[0]
        self.exc_msg = "".join(traceback.format_exception(*exc_info))
        self.where = where

    def reraise(self):
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.exc_msg}"
        if self.exc_type is KeyError:
            # KeyError would show the message as a repr (escaped newlines).
            msg = _KeyErrorMessage(msg)
        try:
            exception = self.exc_type(msg)
        except Exception:
            # An exception class whose constructor needs other arguments.
            raise RuntimeError(msg) from None
        raise exception


class _KeyErrorMessage(str):
    def __repr__(self):
        return self


class _IterableDatasetStopIteration:
    """A worker's iterable dataset is exhausted."""

    def __init__(self, worker_id):
        self.worker_id = worker_id


class _ResumeIteration:
    """Start a new epoch in a persistent worker."""


# --- fetching one task's data --------------------------------------------------------------

class _MapDatasetFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn

    def fetch(self, index):
        if not self.auto_collation:
            return self.collate_fn(self.dataset[index])
        if callable(getattr(self.dataset, "__getitems__", None)):
            data = self.dataset.__getitems__(index)
        else:
            data = [self.dataset[i] for i in index]
        return self.collate_fn(data)


class _IterableDatasetFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset_iter = iter(dataset)
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last
        self.ended = False

    def fetch(self, index):
        """`index` is a list with one entry per wanted sample (its values are unused)."""
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.dataset_iter))
        data = []
        for _ in index:
            try:
                data.append(next(self.dataset_iter))
            except StopIteration:
                self.ended = True
                break
        if not data or (self.drop_last and len(data) < len(index)):
            raise StopIteration
        return self.collate_fn(data)


def create_fetcher(is_iterable, dataset, auto_collation, collate_fn, drop_last):
    kind = _IterableDatasetFetcher if is_iterable else _MapDatasetFetcher
    return kind(dataset, auto_collation, collate_fn, drop_last)


def seed_worker(base_seed, worker_id):
    """Seed Python's, reftorch's and NumPy's generators as PyTorch does; returns the seed.

    NumPy gets four 32-bit words mixed from (worker_id, base_seed) by NumPy's own SeedSequence
    (PyTorch's hashing is SeedSequence's), so workers' NumPy streams differ from the others'.
    """
    seed = base_seed + worker_id
    random.seed(seed)
    torch.manual_seed(seed)
    words = [worker_id, base_seed & 0xFFFFFFFF, base_seed >> 32, 0]
    np.random.seed(np.random.SeedSequence(words).generate_state(4))
    return seed


# --- the worker process ----------------------------------------------------------------------

def worker_loop(is_iterable, dataset, index_queue, data_queue, done_event, auto_collation,
                collate_fn, drop_last, base_seed, init_fn, worker_id, num_workers,
                parent_pid):
    global _worker_info
    try:
        seed = seed_worker(base_seed, worker_id)
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed,
                                  dataset=dataset)
        init_exception = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = create_fetcher(is_iterable, dataset, auto_collation, collate_fn,
                                     drop_last)
        except Exception:
            init_exception = ExceptionWrapper(where=f"in DataLoader worker process {worker_id}")

        iteration_ended = False
        while True:
            try:
                task = index_queue.get(timeout=STATUS_CHECK_INTERVAL)
            except queue.Empty:
                # Stop when the main process died, or shut down without reaching us (its
                # index queue may already be finalized when the iterator is collected).
                if os.getppid() != parent_pid or done_event.is_set():
                    break
                continue
            if task is None:
                break                   # shutdown
            if isinstance(task, _ResumeIteration):
                data_queue.put((task, None))
                iteration_ended = False
                fetcher = create_fetcher(is_iterable, dataset, auto_collation, collate_fn,
                                         drop_last)
                continue
            if done_event.is_set() or iteration_ended:
                continue                # drain tasks until the shutdown signal
            task_id, index = task
            if init_exception is not None:
                data, init_exception = init_exception, None
            else:
                try:
                    data = fetcher.fetch(index)
                except Exception as e:
                    if isinstance(e, StopIteration) and is_iterable:
                        data = _IterableDatasetStopIteration(worker_id)
                        iteration_ended = True
                    else:
                        data = ExceptionWrapper(
                            where=f"in DataLoader worker process {worker_id}")
            data_queue.put((task_id, data))
            del data, task, index       # drop the batch's memory before blocking again
    except KeyboardInterrupt:
        pass
    if done_event.is_set():
        # Results nobody reads any more must not keep this process alive at exit.
        data_queue.cancel_join_thread()
        data_queue.close()
