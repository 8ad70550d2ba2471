"""Creation ops and tensor() dtype inference, compared with torch."""
from __future__ import annotations

import numpy as np
import pytest

import reftorch
from .oracle import compare

torch = pytest.importorskip("torch")

DATA = [1, 2.5, True, 1 + 2j, [1, 2], [1, 2.0], [True, 1], [1, 2j], [[1, 2], [3, 4]], [],
        [[]], [np.float64(1.0)], [np.int32(1), 2], np.array([1, 2], dtype=np.int16),
        np.array(3.0), [np.array([1, 2], dtype=np.uint8)], (1, 2), [[1.5], [2]]]


@pytest.mark.parametrize("data", DATA, ids=[repr(d)[:30] for d in DATA])
def test_tensor_infers_dtype_like_torch(data):
    assert compare(lambda: reftorch.tensor(data), lambda: torch.tensor(data)) is None


@pytest.mark.parametrize("bad", [[[1, 2], [3]], "abc", [1, "a"], 2**64, [object()]])
def test_tensor_rejects_bad_data_like_torch(bad):
    assert compare(lambda: reftorch.tensor(bad), lambda: torch.tensor(bad)) is None


CALLS = [
    lambda m: m.zeros(2, 3), lambda m: m.zeros((2, 3), dtype=m.int32), lambda m: m.ones(4),
    lambda m: m.ones(2, 0), lambda m: m.full((2, 2), 7), lambda m: m.full((2,), 1.5),
    lambda m: m.full((2,), True), lambda m: m.full((2,), 2, dtype=m.float16),
    lambda m: m.arange(5), lambda m: m.arange(1, 4, 0.5), lambda m: m.arange(0, 1, 0.1),
    lambda m: m.arange(10, 0, -3), lambda m: m.arange(5, dtype=m.float64),
    lambda m: m.arange(-1.5, 2.5), lambda m: m.linspace(0, 1, 5), lambda m: m.linspace(-3, 7, 11),
    lambda m: m.linspace(0, 10, 4, dtype=m.int64), lambda m: m.linspace(1, 2, 1),
    lambda m: m.linspace(0, 1, 0), lambda m: m.logspace(0, 3, 4),
    lambda m: m.logspace(-2, 2, 5, base=2), lambda m: m.eye(3), lambda m: m.eye(2, 4),
    lambda m: m.eye(3, dtype=m.int64), lambda m: m.zeros_like(m.ones(2, 3, dtype=m.int8)),
    lambda m: m.ones_like(m.zeros(3), dtype=m.float64), lambda m: m.full_like(m.zeros(2), 4),
    lambda m: m.empty(2, 3).shape, lambda m: m.empty_like(m.zeros(3, 2).t()).stride(),
    lambda m: m.zeros(2, 3, requires_grad=True), lambda m: m.scalar_tensor(3),
    lambda m: m.as_tensor([1, 2], dtype=m.float32),
    # errors
    lambda m: m.zeros(-1), lambda m: m.arange(0, 10, 0), lambda m: m.arange(10, 0, 1),
    lambda m: m.linspace(0, 1, -1), lambda m: m.eye(-1), lambda m: m.zeros(2, dtype=m.int64,
                                                                         requires_grad=True),
]


@pytest.mark.parametrize("index", range(len(CALLS)))
def test_creation_matches_torch(index):
    fn = CALLS[index]
    assert compare(lambda: fn(reftorch), lambda: fn(torch)) is None


def test_out_argument_of_factories():
    for fn in (lambda m, o: m.zeros(2, 3, out=o), lambda m, o: m.arange(4, out=o),
               lambda m, o: m.linspace(0, 1, 3, out=o), lambda m, o: m.eye(2, out=o)):
        r_out, t_out = reftorch.empty(0), torch.empty(0)
        assert compare(lambda: fn(reftorch, r_out), lambda: fn(torch, t_out)) is None
        assert fn(reftorch, r_out) is r_out


def test_range_is_inclusive_and_deprecated():
    with pytest.warns(UserWarning):
        r = reftorch.range(1, 4)
    assert r.tolist() == [1.0, 2.0, 3.0, 4.0] and r.dtype is reftorch.float32


def test_as_tensor_shares_memory_when_it_can():
    a = np.arange(3.0)
    t = reftorch.as_tensor(a)
    a[0] = 9
    assert t[0].item() == 9
    x = reftorch.ones(2)
    assert reftorch.as_tensor(x) is x
    assert reftorch.as_tensor(a, dtype=reftorch.float32).data_ptr() != t.data_ptr()


@pytest.mark.parametrize("make", ["empty", "empty_like", "new_empty", "tensor", "tensor_cast"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int8"])
def test_large_empty_storages_are_cache_line_aligned_like_torchs(make, dtype):
    # PyTorch's CPU allocator aligns to 64 bytes, and plugin kernels (which write into
    # storages made like these) rely on it for whole-line vector stores. Storages of under
    # 512 KiB, and arrays NumPy computed, keep NumPy's alignment: not compared. tensor(data)
    # copies into a storage of its own, aligned too.
    for lib in (reftorch, torch):
        d = getattr(lib, dtype)
        for nbytes in (1 << 19, (1 << 20) + 8, 1 << 22):
            n = nbytes // d.itemsize
            if make == "empty":
                t = lib.empty(n, dtype=d)
            elif make == "empty_like":
                t = lib.empty_like(lib.empty(1, dtype=d).expand(n))
            elif make == "new_empty":
                t = lib.empty(3, dtype=d).new_empty((2, n // 2))
            else:   # a copy of user data, from a NumPy array that starts off a line
                source = np.float64 if make == "tensor_cast" else dtype
                data = np.arange(n + 1).astype(source)[1:]
                t = lib.tensor(data, dtype=d)
                assert t[:3].tolist() == [1, 2, 3]
            assert t.data_ptr() % 64 == 0, (lib.__name__, make, dtype, n)


# --- a number stored into a dtype: PyTorch's overflow check ------------------------------------

_FILL_VALUES = [-1.5, 300, 2.5, -1, -255, -256, 256, -1.0, 1e10, 2147483647.5, -2147483648.9,
                2 ** 63, -2 ** 63, 2 ** 63 - 1, float("nan"), float("inf"), -float("inf"),
                1e39, 3.4e38, 3.39e38, 65519.0, 70000, 1 + 0j, 1 + 1j, True]
_FILL_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
                "float32", "float64", "complex64", "complex128"]
_FILLS = {
    "full": lambda m, n, dt, v: m.full((n,), v, dtype=dt),
    "fill_": lambda m, n, dt, v: m.zeros(n, dtype=dt).fill_(v),
    "masked_fill": lambda m, n, dt, v: m.zeros(n, dtype=dt).masked_fill(
        m.ones(n, dtype=m.bool), v),
    "index_fill": lambda m, n, dt, v: m.zeros(n, dtype=dt).index_fill(0, m.tensor([0]), v),
}


def _fill_outcomes(m, fill):
    outcomes = []
    for n in (1, 3):   # PyTorch skips the 16-bit range check when filling one element
        for dtype_name in _FILL_DTYPES:
            for value in _FILL_VALUES:
                try:
                    result = _FILLS[fill](m, n, getattr(m, dtype_name), value)
                    outcome = ("ok", result.to(m.float64 if not result.is_complex()
                                               else m.complex128).tolist())
                except Exception as exc:  # noqa: BLE001 - compared with PyTorch's
                    outcome = (type(exc).__name__, str(exc))
                outcomes.append((n, dtype_name, repr(value), outcome))
    return outcomes


@pytest.mark.parametrize("fill", list(_FILLS))
def test_filling_a_number_checks_its_range_as_pytorch(fill):
    with np.errstate(all="ignore"):
        ours = _fill_outcomes(reftorch, fill)
    theirs = _fill_outcomes(torch, fill)
    differ = [(o, t) for o, t in zip(ours, theirs) if repr(o) != repr(t)]
    assert not differ, differ[:5]
