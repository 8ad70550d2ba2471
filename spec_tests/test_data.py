"""torch.utils.data against real PyTorch: datasets, samplers, collation and the DataLoader.

Random index orders must be PyTorch's for the same seed (samplers, random_split, shuffled
loaders with 0, 1 and 2 worker processes, persistent workers, worker seeds). Worker failures
(exceptions, timeouts, a killed worker) must surface in the main process as in PyTorch.
Workers are forked (fast); one test uses the 'spawn' start method.
"""
from __future__ import annotations

import collections
import os
import random
import signal
import time

import numpy as np
import pytest

import reftorch
import reftorch.utils.data as rdata

torch = pytest.importorskip("torch")
import torch.utils.data as tdata  # noqa: E402

LIBS = ((reftorch, rdata), (torch, tdata))
Point = collections.namedtuple("Point", "x y")


def as_numpy(value):
    """A batch as nested plain Python/NumPy values (tensors -> (dtype name, array))."""
    if isinstance(value, (reftorch.Tensor, torch.Tensor)):
        return ("tensor", str(value.dtype).split(".")[-1], value.numpy().copy())
    if isinstance(value, dict):
        return {k: as_numpy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [as_numpy(v) for v in value])
    return value


def assert_same(actual, expected):
    a, e = as_numpy(actual), as_numpy(expected)
    _assert_equal(a, e)


def _assert_equal(a, e):
    if isinstance(e, np.ndarray):
        assert isinstance(a, np.ndarray) and a.dtype == e.dtype and a.shape == e.shape
        np.testing.assert_array_equal(a, e)
    elif isinstance(e, dict):
        assert isinstance(a, dict) and list(a) == list(e)
        for k in e:
            _assert_equal(a[k], e[k])
    elif isinstance(e, tuple):
        assert isinstance(a, tuple) and len(a) == len(e)
        for x, y in zip(a, e):
            _assert_equal(x, y)
    elif isinstance(e, list):
        assert isinstance(a, list) and len(a) == len(e)
        for x, y in zip(a, e):
            _assert_equal(x, y)
    else:
        assert a == e


def both(fn):
    """fn(lib, data) for reftorch and torch."""
    return [fn(lib, data) for lib, data in LIBS]


def same_error(fn):
    """fn(lib, data) must raise the same exception type for both libraries."""
    types = []
    for lib, data in LIBS:
        with pytest.raises(Exception) as info:
            fn(lib, data)
        types.append(info.type)
    assert types[0] is types[1], types


X = np.arange(46, dtype=np.float32).reshape(23, 2)
Y = np.arange(23) * 10


def tensor_dataset(lib, data):
    return data.TensorDataset(lib.tensor(X), lib.tensor(Y))


# --- datasets ---------------------------------------------------------------------------------

def test_tensor_concat_subset_stack_datasets():
    def run(lib, data):
        ds = tensor_dataset(lib, data)
        cat = ds + data.TensorDataset(lib.tensor(X[:4] + 100), lib.tensor(Y[:4]))
        sub = data.Subset(cat, [25, 0, 3])
        stack = data.StackDataset(a=ds, b=ds)
        return [len(ds), ds[3], len(cat), cat[24], cat[-1], cat[-27], len(sub), sub[0],
                sub.__getitems__([1, 2]), stack[2], len(stack), cat.cumulative_sizes]
    assert_same(*both(run))
    same_error(lambda lib, data: data.TensorDataset(lib.zeros(3), lib.zeros(4)))
    same_error(lambda lib, data: data.ConcatDataset([]))
    same_error(lambda lib, data: tensor_dataset(lib, data) + tensor_dataset(lib, data)[-47])
    same_error(lambda lib, data: data.StackDataset(tensor_dataset(lib, data), [1]))


class CountBase:
    """start, start + 1, ..., stop - 1 as an iterable dataset (mixed into each library's)."""

    def __init__(self, start, stop):
        self.start, self.stop = start, stop

    def __iter__(self):
        return iter(range(self.start, self.stop))

    def __len__(self):
        return self.stop - self.start


class Count(CountBase, tdata.IterableDataset):
    pass


class RCount(CountBase, rdata.IterableDataset):
    pass


def test_chain_dataset():
    chains = [rdata.ChainDataset([RCount(0, 3), RCount(10, 12)]),
              tdata.ChainDataset([Count(0, 3), Count(10, 12)])]
    assert list(chains[0]) == list(chains[1]) and len(chains[0]) == len(chains[1])
    assert list(RCount(0, 2) + RCount(5, 6)) == list(Count(0, 2) + Count(5, 6))


@pytest.mark.parametrize("lengths", [[10, 13], [0.5, 0.5], [0.3, 0.3, 0.4], [0.1, 0.2, 0.7]])
def test_random_split_matches_torch(lengths):
    def run(lib, data):
        parts = data.random_split(range(23), lengths, generator=lib.Generator().manual_seed(7))
        return [list(p) for p in parts]
    assert_same(*both(run))
    same_error(lambda lib, data: data.random_split(range(5), [2, 2]))


def test_random_split_default_generator():
    def run(lib, data):
        lib.manual_seed(11)
        return [list(p) for p in data.random_split(range(9), [4, 5])]
    assert_same(*both(run))


# --- samplers ---------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs", [{}, {"num_samples": 50}, {"num_samples": 5},
                                    {"replacement": True},
                                    {"replacement": True, "num_samples": 70}])
def test_random_sampler_matches_torch(kwargs):
    def run(lib, data):
        g = lib.Generator().manual_seed(123)
        sampler = data.RandomSampler(range(23), generator=g, **kwargs)
        return [list(sampler), list(sampler), len(sampler)]
    assert_same(*both(run))


def test_random_sampler_without_generator_uses_global_seed():
    def run(lib, data):
        lib.manual_seed(99)
        sampler = data.RandomSampler(range(17))
        return [list(sampler), list(sampler)]
    assert_same(*both(run))


def test_other_samplers_match_torch():
    def run(lib, data):
        g = lib.Generator().manual_seed(3)
        weights = [0.1, 0.5, 2.0, 0.0, 1.0]
        return [
            list(data.SequentialSampler(range(4))),
            list(data.SubsetRandomSampler([5, 8, 13, 2, 7], generator=g)),
            list(data.WeightedRandomSampler(weights, 12, generator=g)),
            list(data.WeightedRandomSampler(weights, 4, replacement=False, generator=g)),
            list(data.BatchSampler(range(10), 3, drop_last=False)),
            list(data.BatchSampler(range(10), 3, drop_last=True)),
            len(data.BatchSampler(range(10), 3, False)),
            len(data.BatchSampler(range(10), 3, True)),
        ]
    assert_same(*both(run))


@pytest.mark.parametrize("shuffle,drop_last,n", [(True, False, 23), (False, False, 23),
                                                  (True, True, 23), (True, False, 2)])
def test_distributed_sampler_matches_torch(shuffle, drop_last, n):
    from reftorch.utils.data.distributed import DistributedSampler as R
    from torch.utils.data.distributed import DistributedSampler as T
    for rank in range(3):
        samplers = [cls(range(n), num_replicas=3, rank=rank, shuffle=shuffle, seed=4,
                        drop_last=drop_last) for cls in (R, T)]
        for epoch in (0, 1):
            for s in samplers:
                s.set_epoch(epoch)
            assert list(samplers[0]) == list(samplers[1])
            assert len(samplers[0]) == len(samplers[1])


@pytest.mark.parametrize("make", [
    lambda data: data.RandomSampler(range(3), replacement=1),
    lambda data: data.RandomSampler(range(3), num_samples=0),
    lambda data: data.RandomSampler([]),
    lambda data: data.WeightedRandomSampler([1.0, 2.0], num_samples=True),
    lambda data: data.WeightedRandomSampler([[1.0, 2.0]], num_samples=2),
    lambda data: data.WeightedRandomSampler([1.0], num_samples=2, replacement=None),
    lambda data: data.BatchSampler(range(3), 0, False),
    lambda data: data.BatchSampler(range(3), 2, 1),
    lambda data: data.distributed.DistributedSampler(range(3), num_replicas=2, rank=2),
])
def test_sampler_errors(make):
    same_error(lambda lib, data: make(data))


# --- collation --------------------------------------------------------------------------------

def samples(lib):
    return [{"a": (lib.tensor([i, i + 1.0]), i), "b": Point(np.float32(i), np.arange(3) + i),
             "c": [float(i), "s%d" % i, True], "d": np.int16(i), "e": b"x"}
            for i in range(3)]


def test_default_collate_nested_matches_torch():
    def run(lib, data):
        return data.default_collate(samples(lib))
    assert_same(*both(run))


def test_default_convert_matches_torch():
    def run(lib, data):
        item = samples(lib)[1]
        item["f"] = (np.zeros((2, 2), np.float64), np.array(["a"]), np.uint8(3))
        return data.default_convert(item)
    assert_same(*both(run))


def test_collate_errors_match_torch():
    same_error(lambda lib, data: data.default_collate([lib.ones(2), lib.ones(3)]))
    same_error(lambda lib, data: data.default_collate([np.array(["a"]), np.array(["b"])]))
    same_error(lambda lib, data: data.default_collate([[1, 2], [3]]))
    same_error(lambda lib, data: data.default_collate([object(), object()]))


# --- the DataLoader ---------------------------------------------------------------------------

def loader_batches(lib, data, epochs=2, **kwargs):
    loader = data.DataLoader(tensor_dataset(lib, data), **kwargs)
    return [batch for _ in range(epochs) for batch in loader] + [len(loader)]


@pytest.mark.parametrize("num_workers", [0, 1, 2])
def test_shuffled_loader_matches_torch(num_workers):
    def run(lib, data):
        return loader_batches(lib, data, batch_size=4, shuffle=True, num_workers=num_workers,
                              generator=lib.Generator().manual_seed(5))
    assert_same(*both(run))


@pytest.mark.parametrize("kwargs", [
    {"batch_size": 5, "drop_last": True},
    {"batch_size": None},
    {"batch_size": 3, "num_workers": 2, "prefetch_factor": 1},
    {"batch_size": 6, "num_workers": 2, "persistent_workers": True, "shuffle": True},
])
def test_loader_options_match_torch(kwargs):
    def run(lib, data):
        if kwargs.get("shuffle"):
            kwargs["generator"] = lib.Generator().manual_seed(8)
        return loader_batches(lib, data, epochs=3, **kwargs)
    assert_same(*both(run))


def test_loader_default_generator_matches_torch():
    def run(lib, data):
        lib.manual_seed(21)
        return loader_batches(lib, data, batch_size=4, shuffle=True)
    assert_same(*both(run))


def test_loader_batch_sampler_and_sampler():
    def run(lib, data):
        ds = tensor_dataset(lib, data)
        by_batches = data.DataLoader(ds, batch_sampler=[[3, 1], [0], [22, 4, 5]])
        by_sampler = data.DataLoader(ds, sampler=[5, 2, 9], batch_size=2,
                                     collate_fn=lambda b: [int(t[1]) for t in b])
        return [list(by_batches), list(by_sampler), len(by_batches)]
    assert_same(*both(run))


@pytest.mark.parametrize("kwargs", [
    {"num_workers": -1}, {"timeout": -1}, {"prefetch_factor": 2},
    {"persistent_workers": True}, {"sampler": [0, 1], "shuffle": True},
    {"batch_sampler": [[0]], "batch_size": 2}, {"batch_size": None, "drop_last": True},
])
def test_loader_argument_errors(kwargs):
    same_error(lambda lib, data: data.DataLoader(tensor_dataset(lib, data), **kwargs))


def test_loader_attribute_is_frozen_and_iterable_options():
    def set_batch_size(lib, data):
        data.DataLoader(range(3)).batch_size = 2
    same_error(set_batch_size)
    same_error(lambda lib, data: data.DataLoader(RCount(0, 3) if lib is reftorch
                                                 else Count(0, 3), shuffle=True))
    same_error(lambda lib, data: iter(data.DataLoader(range(3), timeout=1)))


def test_pin_memory_is_a_no_op_on_cpu():
    with pytest.warns(UserWarning):
        batches = list(rdata.DataLoader(tensor_dataset(reftorch, rdata), batch_size=8,
                                        pin_memory=True))
    assert_same(batches, list(tdata.DataLoader(tensor_dataset(torch, tdata), batch_size=8)))


class ShardedBase(CountBase):
    """Each worker yields its own stride of the range."""

    def __iter__(self):
        info = (rdata if isinstance(self, rdata.IterableDataset) else tdata).get_worker_info()
        if info is None:
            return iter(range(self.start, self.stop))
        return iter(range(self.start + info.id, self.stop, info.num_workers))


class ShardedCount(ShardedBase, tdata.IterableDataset):
    pass


class RShardedCount(ShardedBase, rdata.IterableDataset):
    pass


@pytest.mark.parametrize("cls_pair", [(RCount, Count), (RShardedCount, ShardedCount)])
@pytest.mark.parametrize("num_workers,drop_last", [(0, False), (2, False), (2, True)])
def test_iterable_dataset_loader_matches_torch(cls_pair, num_workers, drop_last):
    def run(lib, data):
        ds = (cls_pair[0] if lib is reftorch else cls_pair[1])(0, 11)
        loader = data.DataLoader(ds, batch_size=3, num_workers=num_workers,
                                 drop_last=drop_last)
        return list(loader) + [len(loader)]
    assert_same(*both(run))


class WorkerSeeds(tdata.Dataset):
    """Per sample: the worker's id and seed and a draw from each random generator."""

    def __init__(self, lib, data):
        self.lib, self.data = lib, data

    def __len__(self):
        return 4

    def __getitem__(self, index):
        info = self.data.get_worker_info()
        return [info.id, info.num_workers, info.seed, self.lib.initial_seed(),
                random.random(), float(np.random.rand()), self.lib.rand(2)]


def test_worker_info_and_seeds_match_torch():
    def run(lib, data):
        assert data.get_worker_info() is None
        loader = data.DataLoader(WorkerSeeds(lib, data), batch_size=2, num_workers=2,
                                 generator=lib.Generator().manual_seed(1234))
        return list(loader)
    assert_same(*both(run))


def test_worker_init_fn_and_batches_in_shared_memory():
    def init(worker_id):
        np.random.seed(1000 + worker_id)     # each worker reseeds NumPy
    for lib, data in LIBS:
        loader = data.DataLoader(WorkerSeeds(lib, data), batch_size=1, num_workers=2,
                                 worker_init_fn=init)
        draws = [batch[5].item() for batch in loader]
        assert draws[:2] == [np.random.RandomState(1000).rand(),
                             np.random.RandomState(1001).rand()]
    batch = next(iter(rdata.DataLoader(tensor_dataset(reftorch, rdata), batch_size=4,
                                       num_workers=1)))
    # Stacked in the worker directly into shared memory, mapped by the main process.
    assert batch[0].is_shared() and batch[1].is_shared()


class Failing(tdata.Dataset):
    def __init__(self, exc_type):
        self.exc_type = exc_type

    def __len__(self):
        return 6

    def __getitem__(self, index):
        if index == 3:
            raise self.exc_type("sample 3 is broken")
        return index


@pytest.mark.parametrize("exc_type", [ValueError, KeyError])
def test_worker_exception_reraised_with_traceback(exc_type):
    messages = []
    for lib, data in LIBS:
        batches = iter(data.DataLoader(Failing(exc_type), batch_size=2, num_workers=2))
        with pytest.raises(exc_type) as info:
            list(batches)
        messages.append(str(info.value))
        # The traceback keeps the iterator alive in a reference cycle; stop its workers now
        # rather than when the cycle is collected (PyTorch then waits seconds per worker).
        batches._shutdown_workers()
    for message in messages:
        assert f"Caught {exc_type.__name__} in DataLoader worker process 1" in message
        assert "Traceback (most recent call last)" in message
        assert "in __getitem__" in message and "sample 3 is broken" in message


class Slow(tdata.Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, index):
        time.sleep(1.2)
        return index


def test_timeout_raises_runtime_error():
    for lib, data in LIBS:
        batches = iter(data.DataLoader(Slow(), num_workers=1, timeout=0.3))
        start = time.monotonic()
        with pytest.raises(RuntimeError, match="DataLoader timed out after 0.3 seconds"):
            next(batches)
        assert time.monotonic() - start < 1.0
        batches._shutdown_workers()      # waits for the busy worker to stop


class Killed(tdata.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, index):
        if index == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        return index


def test_killed_worker_raises_runtime_error():
    loader = rdata.DataLoader(Killed(), num_workers=1)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"DataLoader worker \(pid\(s\) \d+\) exited "
                                           r"unexpectedly"):
        list(loader)
    assert time.monotonic() - start < 5


def test_spawned_workers_match_torch():
    def run(lib, data):
        return loader_batches(lib, data, epochs=1, batch_size=8, num_workers=1,
                              multiprocessing_context="spawn" if lib is reftorch else None)
    assert_same(*both(run))
