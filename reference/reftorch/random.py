"""PyTorch's CPU random number generator: a Mersenne Twister (mt19937) with PyTorch's state.

The same seed gives the same numbers as PyTorch on the CPU: the generator is mt19937 seeded
with the standard `init_genrand` recurrence from the low 32 bits of the seed, and every
sampler in `reftorch._ops.sampling` consumes its output exactly as PyTorch's CPU kernels do
(32-bit draws, or 64-bit draws made of two 32-bit ones, high word first).

NumPy's MT19937 bit generator is the engine (it produces the raw 32-bit stream in C); this
module keeps the parts of PyTorch's state NumPy does not have (the seed, the cached second
normal of the scalar Box-Muller path) and converts the whole to and from the 5056-byte layout
of `torch.get_rng_state()`, so states can be exchanged with PyTorch.
"""
from __future__ import annotations

import contextlib
import os
import struct

import numpy as np

from ._device import device as _device_type

DEFAULT_SEED = 67280421310721   # the seed PyTorch's default CPU generator starts with
MT_WORDS = 624                  # mt19937's state words

# The byte layout of PyTorch's CPU generator state (little-endian, C struct padding):
#   u64 initial seed, i32 left, i32 seeded, u64 next, u64 state[624],
#   f64 normal_x, f64 normal_y, f64 normal_rho, i32 normal_is_valid, (4 bytes padding),
#   f32 next float normal, bool its validity, (3 bytes padding).
# `left` and `next` are mt19937's position: `next` indexes the word returned next and `left`
# counts down to the next regeneration of all 624 words. The cached double normal of the
# scalar Box-Muller path travels in normal_y, flagged by normal_is_valid.
_HEAD = struct.Struct("<QiiQ")
_TAIL = struct.Struct("<dddi4xf?3x")
STATE_SIZE = _HEAD.size + MT_WORDS * 8 + _TAIL.size   # 5056


def _seed_value(seed):
    """PyTorch accepts any int in [-2**63, 2**64) (negatives wrap) and truncates floats."""
    if isinstance(seed, str):
        seed = int(seed)
    seed = int(seed)
    if not -2 ** 63 <= seed < 2 ** 64:
        raise ValueError("Overflow when unpacking long long")
    return seed % 2 ** 64


class Generator:
    """A random number generator: `torch.Generator(device='cpu')`."""

    def __init__(self, device="cpu"):
        self._device = _device_type(device)
        self.manual_seed(DEFAULT_SEED)

    @property
    def device(self):
        return self._device

    def manual_seed(self, seed):
        """Seed the generator and forget cached samples; returns the generator."""
        self._seed = _seed_value(seed)
        self._engine = np.random.MT19937()
        self._engine._legacy_seeding(self._seed & 0xFFFFFFFF)   # init_genrand
        self._fresh = True            # no draw since seeding: PyTorch stores next = 0 then
        self.next_double_normal = None
        self.next_float_normal = None
        return self

    def seed(self):
        """Seed from the operating system's entropy; returns the new seed."""
        seed = int.from_bytes(os.urandom(8), "little")
        self.manual_seed(seed)
        return seed

    def initial_seed(self):
        return self._seed

    # --- state exchange with PyTorch's layout ---------------------------------------------
    def get_state(self):
        """The generator's state as a uint8 tensor of PyTorch's 5056-byte layout."""
        from ._ops.creation import tensor
        import reftorch
        engine_state = self._engine.state["state"]
        position = int(engine_state["pos"])        # 624 means "regenerate before next draw"
        left = MT_WORDS + 1 - position
        next_index = 0 if self._fresh else position
        normal = self.next_double_normal
        float_normal = self.next_float_normal
        data = (_HEAD.pack(self._seed, left, 1, next_index)
                + np.asarray(engine_state["key"], np.uint64).astype("<u8").tobytes()
                + _TAIL.pack(0.0, 0.0 if normal is None else normal, 0.0, normal is not None,
                             0.0 if float_normal is None else float_normal,
                             float_normal is not None))
        return tensor(np.frombuffer(data, np.uint8).copy(), dtype=reftorch.uint8)

    def set_state(self, new_state):
        """Restore a state from `get_state()` (ours or PyTorch's); returns the generator."""
        from ._tensor import Tensor
        import reftorch
        if not isinstance(new_state, Tensor):
            raise TypeError(f"expected a torch.ByteTensor, but got {type(new_state).__name__}")
        if new_state.dtype != reftorch.uint8:
            raise TypeError("RNG state must be a torch.ByteTensor")
        if new_state.numel() != STATE_SIZE:
            raise RuntimeError(f"Expected a CPUGeneratorImplState of size {STATE_SIZE} but "
                               f"found the input RNG state size to be {new_state.numel()}")
        data = np.ascontiguousarray(new_state.detach().cpu()._np).tobytes()
        seed, left, _seeded, next_index = _HEAD.unpack_from(data)
        words = np.frombuffer(data, "<u8", MT_WORDS, _HEAD.size)
        _x, normal, _rho, normal_valid, float_normal, float_valid = _TAIL.unpack_from(
            data, _HEAD.size + MT_WORDS * 8)
        if not 1 <= left <= MT_WORDS + 1:
            raise RuntimeError(f"Invalid mt19937 state: left={left}")
        self._seed = seed
        self._engine = np.random.MT19937()
        self._engine.state = {"bit_generator": "MT19937",
                              "state": {"key": words.astype(np.uint32),
                                        "pos": MT_WORDS + 1 - left}}
        self._fresh = next_index == 0 and left == 1
        self.next_double_normal = normal if normal_valid else None
        self.next_float_normal = float_normal if float_valid else None
        return self

    # --- raw draws, as the samplers consume them --------------------------------------------
    def random32(self, count):
        """`count` 32-bit draws (as uint64)."""
        self._fresh = self._fresh and count == 0
        return self._engine.random_raw(count).astype(np.uint64)

    def random64(self, count):
        """`count` 64-bit draws, each made of two 32-bit draws, the first the high word."""
        words = self.random32(2 * count)
        return (words[0::2] << np.uint64(32)) | words[1::2]

    def engine_for_drawing(self):
        """The NumPy MT19937 bit generator that holds the stream, for kernels that draw from
        it in their own code (plugins: through its `capsule`, holding its `lock`). Call it
        just before drawing at least one word; such a kernel must draw exactly the words
        random32/random64 would, so that the stream continues the same."""
        self._fresh = False
        return self._engine

    def __repr__(self):
        return f"<reftorch.Generator object at {id(self):#x}>"


default_generator = Generator()


def manual_seed(seed):
    """Seed the default generator and every GPU's (`torch.manual_seed`); returns the CPU
    one."""
    from . import cuda
    result = default_generator.manual_seed(seed)
    cuda.manual_seed_all(result.initial_seed())
    return result


def seed():
    """Seed the default generator (and every GPU's) non-deterministically; returns the
    seed."""
    from . import cuda
    value = default_generator.seed()
    cuda.manual_seed_all(value)
    return value


def initial_seed():
    return default_generator.initial_seed()


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(new_state):
    default_generator.set_state(new_state)


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, **_ignored):
    """Run a block and restore the default generator's state afterwards, and those of the
    GPUs in `devices` (default: every GPU, once CUDA is initialised; None before, so that
    forking never starts the driver)."""
    if not enabled:
        yield
        return
    from . import cuda
    if devices is None:
        devices = range(cuda.device_count()) if cuda.is_initialized() else ()
    saved = get_rng_state()
    saved_cuda = [(d, cuda.get_rng_state(d)) for d in devices]
    try:
        yield
    finally:
        set_rng_state(saved)
        for d, state in saved_cuda:
            cuda.set_rng_state(state, d)


def generator_or_default(generator, device=None):
    """The generator a sampler filling a tensor on `device` uses: the caller's, or the
    default one of that device type (the CPU one when `device` is None or cpu; for cuda,
    the device's generator from reftorch.cuda)."""
    on_cuda = device is not None and _device_type(device).type == "cuda"
    if generator is None:
        if on_cuda:
            from .cuda import random as cuda_random
            return cuda_random.generator(_device_type(device).index or 0)
        return default_generator
    if not isinstance(generator, Generator):
        raise TypeError(f"generator must be a torch.Generator, not {type(generator).__name__}")
    if device is not None and generator.device.type != _device_type(device).type:
        raise RuntimeError(f"Expected a '{_device_type(device).type}' device type for "
                           f"generator but found '{generator.device.type}'")
    return generator
