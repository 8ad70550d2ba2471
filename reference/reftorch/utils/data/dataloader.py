"""DataLoader: iterate over a dataset in batches, in this process or in worker processes.

The loader turns its options into an index sampler (a BatchSampler over a Sequential- or
RandomSampler unless given) and a collate function. Iterating it makes one of two iterators:

* `_SingleProcessIter` fetches each batch in the calling process;
* `_MultiProcessIter` starts `num_workers` processes (see `_worker`), hands out batch indices
  round-robin, keeps `prefetch_factor` tasks per worker in flight and returns the results in
  sampler order. Results come back through a reftorch.multiprocessing queue, so their tensors
  arrive as shared memory.

Random streams follow PyTorch: a new iterator first draws `base_seed` (an int64) from the
loader's generator, then the sampler draws (a RandomSampler built for `shuffle=True` uses the
loader's generator). Worker i is seeded with base_seed + i.
"""
from __future__ import annotations

import itertools
import os
import queue
import time
import warnings

import reftorch as torch
from ... import multiprocessing as reftorch_multiprocessing  # registers tensor reducers
from . import _worker
from ._collate import default_collate, default_convert
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler


class _InfiniteConstantSampler(Sampler):
    """The sampler of an iterable dataset: it asks for 'the next sample' forever."""

    def __iter__(self):
        while True:
            yield None


class DataLoader:
    """Combines a dataset and a sampler and iterates over batches (see the module docstring).

    Options follow torch.utils.data.DataLoader: batch_size, shuffle, sampler, batch_sampler,
    num_workers, collate_fn, pin_memory (no pinned memory without an accelerator), drop_last,
    timeout (seconds to wait for a worker's batch; RuntimeError when exceeded),
    worker_init_fn, multiprocessing_context, generator, prefetch_factor, persistent_workers.
    """

    _initialized = False

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 "
                             "to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in "
                             "multiprocessing.let num_workers > 0 to enable multiprocessing, "
                             "otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")

        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.in_order = in_order

        self._is_iterable = isinstance(dataset, IterableDataset)
        if self._is_iterable:
            # Order and sampling belong to the stream itself.
            for name, value in (("shuffle", shuffle), ("sampler", sampler),
                                ("batch_sampler", batch_sampler)):
                if value not in (None, False):
                    raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                     f"{name} option, but got {name}={value}")
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")

        if sampler is None:
            if self._is_iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if batch_sampler is not None else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self._iterator = None
        self._initialized = True

    def __setattr__(self, name, value):
        if self._initialized and name in ("batch_size", "batch_sampler", "sampler",
                                          "drop_last", "dataset", "persistent_workers"):
            raise ValueError(f"{name} attribute should not be set after "
                             f"{type(self).__name__} is initialized")
        super().__setattr__(name, value)

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        # Each fetch gets a list of indices (batching on) or one index (batching off).
        return self.batch_sampler if self._auto_collation else self.sampler

    def _get_iterator(self):
        if self.num_workers == 0:
            return _SingleProcessIter(self)
        return _MultiProcessIter(self)

    def __iter__(self):
        if self.persistent_workers and self.num_workers > 0:
            if self._iterator is None:
                self._iterator = self._get_iterator()
            else:
                self._iterator._reset(self)
            return self._iterator
        return self._get_iterator()

    def __len__(self):
        if self._is_iterable:
            length = len(self.dataset)     # TypeError when the stream has no length
            if self.batch_size is not None:
                if self.drop_last:
                    return length // self.batch_size
                return -(-length // self.batch_size)
            return length
        return len(self._index_sampler)

    def check_worker_number_rationality(self):
        """Warn when more workers are asked for than this machine has CPUs."""
        cpus = os.cpu_count()
        if cpus is not None and self.num_workers > cpus:
            warnings.warn(f"This DataLoader will create {self.num_workers} worker processes "
                          f"in total. Our suggested max number of worker in current system is "
                          f"{cpus}, which is smaller than what this DataLoader is going to "
                          f"create. Please be aware that excessive worker creation might get "
                          f"DataLoader running slow or even freeze, lower the worker number to "
                          f"avoid potential slowness/freeze if necessary.")


class _BaseIter:
    def __init__(self, loader):
        self._dataset = loader.dataset
        self._is_iterable = loader._is_iterable
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._num_workers = loader.num_workers
        self._timeout = loader.timeout
        self._collate_fn = loader.collate_fn
        if loader.pin_memory:
            warnings.warn("'pin_memory' argument is set as true but no accelerator is found, "
                          "then device pinned memory won't be used.")
        self._sampler_iter = iter(self._index_sampler)
        # Drawn before the sampler draws anything (its iterator is lazy), as in PyTorch.
        self._base_seed = int(torch.empty((), dtype=torch.int64)
                              .random_(generator=loader.generator).item())
        self._persistent_workers = loader.persistent_workers
        self._num_yielded = 0

    def __iter__(self):
        return self

    def _reset(self, loader, first_iter=False):
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0

    def _next_index(self):
        return next(self._sampler_iter)

    def __next__(self):
        data = self._next_data()
        self._num_yielded += 1
        return data

    def __len__(self):
        return len(self._index_sampler)


class _SingleProcessIter(_BaseIter):
    def __init__(self, loader):
        super().__init__(loader)
        if self._timeout != 0:
            raise AssertionError("_SingleProcessDataLoaderIter requires timeout == 0")
        self._fetcher = _worker.create_fetcher(self._is_iterable, self._dataset,
                                               self._auto_collation, self._collate_fn,
                                               self._drop_last)

    def _next_data(self):
        index = self._next_index()
        return self._fetcher.fetch(index)


class _MultiProcessIter(_BaseIter):
    """Workers with one index queue each and one shared result queue.

    Task ids count up in sampler order; results may arrive out of order and wait in
    `_task_info` until their turn. `_task_info[id]` is (worker_id,) while outstanding and
    (worker_id, data) once arrived early.
    """

    def __init__(self, loader):
        super().__init__(loader)
        self._shutdown = True          # nothing to shut down until the workers exist
        self._prefetch_factor = loader.prefetch_factor
        loader.check_worker_number_rationality()
        context = loader.multiprocessing_context
        if context is None:
            context = reftorch_multiprocessing
        elif isinstance(context, str):
            context = reftorch_multiprocessing.get_context(context)
        self._worker_result_queue = context.Queue()
        self._workers_done_event = context.Event()
        self._index_queues, self._workers = [], []
        for worker_id in range(self._num_workers):
            index_queue = context.Queue()
            # Without this, a queue still holding tasks blocks this process's exit.
            index_queue.cancel_join_thread()
            worker = context.Process(
                target=_worker.worker_loop,
                args=(self._is_iterable, self._dataset, index_queue,
                      self._worker_result_queue, self._workers_done_event,
                      self._auto_collation, self._collate_fn, self._drop_last,
                      self._base_seed, loader.worker_init_fn, worker_id, self._num_workers,
                      os.getpid()))
            worker.daemon = True
            worker.start()
            self._index_queues.append(index_queue)
            self._workers.append(worker)
        self._shutdown = False
        self._reset(loader, first_iter=True)

    def _reset(self, loader, first_iter=False):
        super()._reset(loader, first_iter)
        self._send_idx = 0              # id of the next task to hand out
        self._rcvd_idx = 0              # id of the next task to return
        self._task_info = {}
        self._workers_status = [True] * self._num_workers
        self._worker_queue_idx_cycle = itertools.cycle(range(self._num_workers))
        if not first_iter:
            # Persistent workers: restart every worker's dataset and wait for the answers
            # (results of an epoch left unfinished are dropped on the way).
            for index_queue in self._index_queues:
                index_queue.put(_worker._ResumeIteration())
            resumed = 0
            while resumed < self._num_workers:
                task_id, _ = self._get_data()
                if isinstance(task_id, _worker._ResumeIteration):
                    resumed += 1
        for _ in range(self._prefetch_factor * self._num_workers):
            self._try_put_index()

    def _try_put_index(self):
        try:
            index = self._next_index()
        except StopIteration:
            return
        for _ in range(self._num_workers):      # the next worker that is still active
            worker_id = next(self._worker_queue_idx_cycle)
            if self._workers_status[worker_id]:
                break
        else:
            return                              # every worker's stream has ended
        self._index_queues[worker_id].put((self._send_idx, index))
        self._task_info[self._send_idx] = (worker_id,)
        self._send_idx += 1

    def _get_data(self):
        """The next (task_id, data) from any worker, watching for timeout and dead workers."""
        deadline = time.monotonic() + self._timeout if self._timeout > 0 else None
        while True:
            wait = _worker.STATUS_CHECK_INTERVAL
            if deadline is not None:
                wait = min(wait, max(deadline - time.monotonic(), 0))
            try:
                return self._worker_result_queue.get(timeout=wait)
            except queue.Empty:
                self._raise_if_workers_died()
            except (ConnectionError, EOFError):
                # A tensor's memory is handed over by its sender, which must still be running:
                # a worker dying right after sending breaks the hand-over. Give the dying
                # process a moment to be reaped before blaming it.
                self._raise_if_workers_died(grace=1.0)
                raise
            if deadline is not None and time.monotonic() >= deadline:
                raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds")

    def _raise_if_workers_died(self, grace=0.0):
        give_up = time.monotonic() + grace
        while True:
            dead = [w for i, w in enumerate(self._workers)
                    if self._workers_status[i] and not w.is_alive()]
            if dead:
                pids = ", ".join(str(w.pid) for w in dead)
                self._shutdown_workers()
                raise RuntimeError(f"DataLoader worker (pid(s) {pids}) exited unexpectedly")
            if time.monotonic() >= give_up:
                return
            time.sleep(0.02)

    def _next_data(self):
        while True:
            # Skip tasks of workers whose stream ended: their results will never come.
            while self._rcvd_idx < self._send_idx:
                info = self._task_info[self._rcvd_idx]
                if len(info) == 2 or self._workers_status[info[0]]:
                    break
                del self._task_info[self._rcvd_idx]
                self._rcvd_idx += 1
            else:
                if not self._persistent_workers:
                    self._shutdown_workers()
                raise StopIteration

            if len(self._task_info[self._rcvd_idx]) == 2:       # arrived earlier
                data = self._task_info.pop(self._rcvd_idx)[1]
                return self._process_data(data)

            task_id, data = self._get_data()
            if isinstance(data, _worker._IterableDatasetStopIteration):
                self._workers_status[data.worker_id] = False
                self._try_put_index()
                continue
            if task_id != self._rcvd_idx:
                self._task_info[task_id] += (data,)
                continue
            del self._task_info[task_id]
            return self._process_data(data)

    def _process_data(self, data):
        self._rcvd_idx += 1
        self._try_put_index()
        if isinstance(data, _worker.ExceptionWrapper):
            data.reraise()
        return data

    def _shutdown_workers(self):
        if self._shutdown:
            return
        self._shutdown = True
        self._workers_done_event.set()
        for index_queue in self._index_queues:
            try:
                index_queue.put(None)
            except (OSError, ValueError):
                pass
        for worker in self._workers:
            worker.join(timeout=1.0)
            if worker.is_alive():
                worker.terminate()       # still busy inside the dataset
                worker.join()
        for index_queue in self._index_queues:
            index_queue.close()
        self._worker_result_queue.cancel_join_thread()
        self._worker_result_queue.close()

    def __del__(self):
        if hasattr(self, "_shutdown"):       # construction may have failed early
            self._shutdown_workers()
