"""The random number generators of the GPUs: one `reftorch.Generator` per cuda device.

Random ops on a cuda tensor draw from its device's generator (not the CPU one). The engine is
the reference's mt19937 with PyTorch's CPU state layout (see reftorch.random): seeding a
device gives the numbers PyTorch's *CPU* generator gives for that seed, not the numbers of
PyTorch's CUDA generator (Philox, counter based), and `get_rng_state` returns the 5056-byte
mt19937 state rather than PyTorch's 16-byte Philox (seed, offset) state.

Lazy, as in PyTorch: seeding before CUDA is initialised does not start the driver; the call is
queued and applied when the generators are first used after initialisation. Without a cuda
backend the seeding calls do nothing.
"""
from __future__ import annotations

from collections.abc import Sequence

from .. import _storage
from .._device import device as _Device
from ..random import Generator

__all__ = ["default_generators", "get_rng_state", "get_rng_state_all", "initial_seed",
           "manual_seed", "manual_seed_all", "seed", "seed_all", "set_rng_state",
           "set_rng_state_all"]

_generators = {}   # device index -> Generator
# Seeding calls made before initialisation: the latest one of each kind ("current" device,
# "all" devices), in the order they were made. Keeping only the latest (as PyTorch does)
# bounds the queue when a program reseeds often on a machine where CUDA never starts.
_queued = {}


def _initialized():
    backend = _storage._BACKENDS.get("cuda")
    return backend is not None and backend.is_initialized()


def _run_queued():
    calls = list(_queued.values())
    _queued.clear()   # first: the calls use the generators, which run the queue
    for call in calls:
        call()


def generator(index):
    """Device `index`'s default generator (created on first use), after queued seeding."""
    _run_queued()
    found = _generators.get(index)
    if found is None:
        found = _generators.setdefault(index, Generator(_Device("cuda", index)))
    return found


def _lazy(kind, call):
    """Run a seeding call now if CUDA is initialised, else when it is (replacing an earlier
    queued call of the same `kind`)."""
    if _initialized():
        _run_queued()
        call()
    elif "cuda" in _storage._BACKENDS:
        _queued.pop(kind, None)
        _queued[kind] = call


def _current():
    from . import current_device
    return current_device()


def _all_indices():
    from . import device_count
    return range(device_count())


class _DefaultGenerators(Sequence):
    """`torch.cuda.default_generators`: one Generator per device, made on first access."""

    def __len__(self):
        from . import device_count
        return device_count()

    def __getitem__(self, index):
        if isinstance(index, slice):
            return tuple(self[i] for i in range(len(self))[index])
        if not -len(self) <= index < len(self):
            raise IndexError("default_generators index out of range")
        return generator(index % len(self))

    def __repr__(self):
        return repr(tuple(self))


default_generators = _DefaultGenerators()


def _index(device):
    from . import _index as index_of
    return index_of(device)


def manual_seed(seed):
    """Seed the current GPU's generator (queued before initialisation; ignored without
    CUDA)."""
    seed = int(seed)
    _lazy("current", lambda: generator(_current()).manual_seed(seed))


def manual_seed_all(seed):
    """Seed every GPU's generator (queued before initialisation; ignored without CUDA)."""
    seed = int(seed)
    _lazy("all", lambda: [generator(i).manual_seed(seed) for i in _all_indices()])


def seed():
    """Seed the current GPU's generator from the operating system's entropy."""
    _lazy("current", lambda: generator(_current()).seed())


def seed_all():
    """Seed every GPU's generator with one seed drawn from the operating system's entropy."""
    def call():
        value = generator(_current()).seed()
        for i in _all_indices():
            generator(i).manual_seed(value)
    _lazy("all", call)


def initial_seed():
    """The seed of the current GPU's generator (initialises CUDA)."""
    from . import init
    init()
    return generator(_current()).initial_seed()


def get_rng_state(device="cuda"):
    """The state of `device`'s generator as a uint8 tensor (initialises CUDA)."""
    from . import init
    init()
    return generator(_index(device)).get_state()


def set_rng_state(new_state, device="cuda"):
    """Restore `device`'s generator from a state `get_rng_state` returned."""
    from . import init
    init()
    generator(_index(device)).set_state(new_state)


def get_rng_state_all():
    """The states of every GPU's generator, as a list of uint8 tensors."""
    from . import init
    init()
    return [generator(i).get_state() for i in _all_indices()]


def set_rng_state_all(new_states):
    """Restore every GPU's generator, one state per device in order."""
    for index, state in enumerate(new_states):
        set_rng_state(state, index)
