"""repr() of tensors must match PyTorch's character for character.

Each case builds the same values twice: as a real torch tensor, and as a small stand-in object
carrying just what `reftorch._tensor_str.tensor_repr` reads (dtype, shape, device, autograd
state, `_host_array()`). The values go through torch first, so both sides hold identical
(already rounded) numbers.
"""
import zlib

import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from reftorch import _dtype as D  # noqa: E402
from reftorch import _tensor_str as S  # noqa: E402

# ---------------------------------------------------------------------------------------------
# Stand-ins and helpers


class FakeDevice:
    def __init__(self, type_, index=None):
        self.type, self.index = type_, index

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"


class AddBackward0:
    """Stand-in grad_fn: only its class name is printed."""


class StandIn:
    """The few Tensor attributes that tensor_repr may use."""

    def __init__(self, array, dtype_name, requires_grad=False, grad_fn=None,
                 device=FakeDevice("cpu")):
        self.dtype = D.by_name(dtype_name)
        assert array.dtype == self.dtype.numpy_dtype
        self._array = array
        self.shape = tuple(array.shape)
        self.device = device
        self.grad_fn = grad_fn
        self.requires_grad = requires_grad or grad_fn is not None

    @property
    def is_leaf(self):
        return self.grad_fn is None

    def _host_array(self):
        return self._array


def host_copy(t):
    """A torch tensor's values as the NumPy array a reftorch tensor of that dtype would hold."""
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return t.float().numpy().astype(ml_dtypes.bfloat16)  # exact: bfloat16 widens to float32
    return t.numpy().copy()


def pair(values, dtype_name, **standin_kwargs):
    """(torch tensor, stand-in) holding the same values, converted to `dtype_name`."""
    t = torch.from_numpy(np.asarray(values)).to(getattr(torch, dtype_name))
    return t, StandIn(host_copy(t), dtype_name, **standin_kwargs)


def check(values, dtype_name):
    t, s = pair(values, dtype_name)
    assert S.tensor_repr(s) == repr(t)


def seed_for(*parts):
    """A stable seed per case, so a case's values do not depend on which other cases run."""
    return zlib.crc32(repr(parts).encode())


@pytest.fixture(autouse=True)
def restore_print_options():
    """Every test starts and ends with default options (and default dtype) on both sides."""
    def reset():
        torch.set_printoptions(profile="default")
        S.set_printoptions(profile="default")
        torch.set_default_dtype(torch.float32)
        D.set_default_dtype(D.float32)
    reset()
    yield
    reset()


# ---------------------------------------------------------------------------------------------
# Value patterns


def float_values(pattern, shape, rng):
    """float64 values of a named pattern (later cast to the dtype under test)."""
    n = int(np.prod(shape))
    scale = {"normal": 1.0, "normal_1e3": 1e3, "normal_1e-3": 1e-3, "normal_1e6": 1e6,
             "normal_1e-6": 1e-6, "normal_1e10": 1e10}
    if pattern in scale:
        v = rng.standard_normal(n) * scale[pattern]
    elif pattern == "ints":
        v = rng.integers(-50, 50, n).astype(np.float64)
    elif pattern == "big_ints":
        v = rng.integers(-10**9, 10**9, n).astype(np.float64)
    elif pattern == "halves":
        v = rng.integers(-20, 20, n) / 2.0
    elif pattern == "huge_and_tiny":
        v = rng.choice([1e-8, -3e-7, 2.5, 4e5, -7e9, 0.0], n)
    elif pattern == "nonfinite":
        v = rng.standard_normal(n) * 10
        v[rng.random(n) < 0.3] = np.nan
        v[rng.random(n) < 0.15] = np.inf
        v[rng.random(n) < 0.15] = -np.inf
    elif pattern == "negzero":
        v = rng.choice([-0.0, 0.0, 3.0, -2.0], n)
    elif pattern == "zeros":
        v = np.zeros(n)
    elif pattern == "all_nan":
        v = np.full(n, np.nan)
    elif pattern == "inf_and_ints":
        v = rng.choice([np.inf, -np.inf, 1.0, 12.0, 0.0], n)
    else:
        raise ValueError(pattern)
    return v.reshape(shape)


def int_values(pattern, shape, dtype_name, rng):
    info = np.iinfo(dtype_name)
    n = int(np.prod(shape))
    if pattern == "small":
        v = rng.integers(0, 10, n)
    elif pattern == "signed":
        v = rng.integers(max(info.min, -120), min(info.max, 120), n, endpoint=True)
    elif pattern == "extremes":
        v = rng.choice([info.min, info.max, 0, 1], n)
    elif pattern == "zeros":
        v = np.zeros(n)
    else:
        raise ValueError(pattern)
    return v.astype(dtype_name).reshape(shape)


def bool_values(pattern, shape, rng):
    n = int(np.prod(shape))
    v = {"random": rng.random(n) < 0.5, "all_true": np.ones(n, bool),
         "all_false": np.zeros(n, bool)}[pattern]
    return v.reshape(shape)


def values_for(dtype_name, pattern, shape, rng):
    dt = D.by_name(dtype_name)
    if dt.is_complex:
        # Set the parts directly: `1j * inf` would be nan+infj, not 0+infj.
        real_pattern, imag_pattern = pattern.split("+")
        v = np.empty(shape, np.complex128)
        v.real = float_values(real_pattern, shape, rng)
        v.imag = float_values(imag_pattern, shape, rng)
        return v
    if dt.is_floating_point:
        return float_values(pattern, shape, rng)
    if dtype_name == "bool":
        return bool_values(pattern, shape, rng)
    return int_values(pattern, shape, dtype_name, rng)


FLOAT_DTYPES = ["float16", "bfloat16", "float32", "float64"]
INT_DTYPES = ["uint8", "int8", "int16", "int32", "int64"]
COMPLEX_DTYPES = ["complex64", "complex128"]
ALL_DTYPES = FLOAT_DTYPES + INT_DTYPES + COMPLEX_DTYPES + ["bool"]

PATTERNS = {
    "float": ["normal", "normal_1e3", "normal_1e-3", "normal_1e6", "normal_1e-6",
              "normal_1e10", "ints", "big_ints", "halves", "huge_and_tiny", "nonfinite",
              "negzero", "zeros", "all_nan", "inf_and_ints"],
    "int": ["small", "signed", "extremes", "zeros"],
    "bool": ["random", "all_true", "all_false"],
    "complex": ["normal+normal", "ints+zeros", "normal+normal_1e-6", "nonfinite+normal",
                "negzero+negzero", "normal_1e10+ints", "zeros+halves", "normal_1e-3+inf_and_ints"],
}


def patterns_of(dtype_name):
    dt = D.by_name(dtype_name)
    if dt.is_complex:
        return PATTERNS["complex"]
    if dt.is_floating_point:
        return PATTERNS["float"]
    return PATTERNS["bool" if dtype_name == "bool" else "int"]


SMALL_SHAPES = [(), (1,), (7,), (3, 4), (2, 3, 4), (2, 1, 2, 3)]
BIG_SHAPES = [(1500,), (40, 30), (11, 12, 13)]  # over the default threshold of 1000
EMPTY_SHAPES = [(0,), (0, 3), (3, 0), (2, 0, 3)]

TABLE = ([(d, p, s) for d in ALL_DTYPES for p in patterns_of(d) for s in SMALL_SHAPES + BIG_SHAPES]
         + [(d, patterns_of(d)[0], s) for d in ALL_DTYPES for s in EMPTY_SHAPES])


# ---------------------------------------------------------------------------------------------
# The table: every dtype x value pattern x shape, default options


@pytest.mark.parametrize("dtype_name,pattern,shape", TABLE, ids=str)
def test_table(dtype_name, pattern, shape):
    rng = np.random.default_rng(seed_for(dtype_name, pattern, shape))
    check(values_for(dtype_name, pattern, shape, rng), dtype_name)


# ---------------------------------------------------------------------------------------------
# Print options

OPTION_SETS = [
    dict(precision=2), dict(precision=0), dict(precision=8),
    dict(sci_mode=True), dict(sci_mode=False), dict(sci_mode=True, precision=1),
    dict(linewidth=40), dict(linewidth=120), dict(linewidth=10),
    dict(threshold=5, edgeitems=2), dict(threshold=5, edgeitems=1),
    dict(threshold=5, edgeitems=0), dict(edgeitems=0), dict(threshold=0),
    dict(threshold=20, edgeitems=5, linewidth=50),
    dict(profile="full"), dict(profile="short"), dict(profile="short", precision=6),
    dict(profile="full", sci_mode=False),
]
OPTION_CASES = [
    ("float32", "normal", (7,)), ("float32", "normal_1e-6", (3, 4)),
    ("float64", "huge_and_tiny", (2, 3, 4)), ("float32", "ints", (1500,)),
    ("bfloat16", "normal_1e3", (11, 12, 13)), ("float16", "nonfinite", (40, 30)),
    ("float64", "normal", ()), ("float32", "negzero", (2, 1, 2, 3)),
    ("complex64", "normal+normal_1e-6", (3, 4)), ("complex128", "ints+zeros", (1500,)),
    ("int32", "signed", (40, 30)), ("int64", "extremes", (7,)), ("bool", "random", (2, 3, 4)),
    ("uint8", "small", ()), ("float32", "normal", (0, 3)), ("int16", "small", (0,)),
]


@pytest.mark.parametrize("options", OPTION_SETS, ids=str)
@pytest.mark.parametrize("dtype_name,pattern,shape", OPTION_CASES, ids=str)
def test_print_options(options, dtype_name, pattern, shape):
    torch.set_printoptions(**options)
    S.set_printoptions(**options)
    rng = np.random.default_rng(seed_for(dtype_name, pattern, shape))
    check(values_for(dtype_name, pattern, shape, rng), dtype_name)


def test_random_mix_of_everything():
    """Random shapes, patterns and options: a net for combinations the table misses."""
    rng = np.random.default_rng(1234)
    for _ in range(300):
        dtype_name = ALL_DTYPES[rng.integers(len(ALL_DTYPES))]
        pattern = rng.choice(patterns_of(dtype_name))
        shape = tuple(int(n) for n in rng.integers(1, 7, rng.integers(0, 5)))
        options = dict(precision=int(rng.integers(0, 7)), linewidth=int(rng.integers(20, 120)),
                       threshold=int(rng.integers(0, 60)), edgeitems=int(rng.integers(0, 4)),
                       sci_mode=[None, True, False][rng.integers(3)])
        torch.set_printoptions(**options)
        S.set_printoptions(**options)
        t, s = pair(values_for(dtype_name, pattern, shape, rng), dtype_name)
        assert S.tensor_repr(s) == repr(t), (dtype_name, pattern, shape, options)


def test_get_and_set_printoptions_follow_torch():
    calls = [dict(profile="short"), dict(sci_mode=True), dict(precision=3),
             dict(profile="full", linewidth=100), dict(profile="no-such-profile"),
             dict(threshold=7, edgeitems=1, sci_mode=False), dict(profile="default")]
    for kwargs in calls:
        torch.set_printoptions(**kwargs)
        S.set_printoptions(**kwargs)
        assert S.get_printoptions() == torch._tensor_str.get_printoptions()


def test_printoptions_context_manager_restores():
    S.set_printoptions(precision=6, linewidth=70)
    before = S.get_printoptions()
    with S.printoptions(precision=1, sci_mode=True):
        assert S.get_printoptions()["precision"] == 1
        assert S.get_printoptions()["sci_mode"] is True
    assert S.get_printoptions() == before
    with pytest.raises(KeyError), S.printoptions(threshold=3):
        raise KeyError("restored even on error")
    assert S.get_printoptions() == before


# ---------------------------------------------------------------------------------------------
# Suffixes: dtype, size, default dtype, autograd, device, line wrapping


@pytest.mark.parametrize("dtype_name", ALL_DTYPES)
@pytest.mark.parametrize("default", ["float32", "float64"])
def test_dtype_suffix_follows_default_dtype(dtype_name, default):
    torch.set_default_dtype(getattr(torch, default))
    D.set_default_dtype(D.by_name(default))
    rng = np.random.default_rng(seed_for(dtype_name, default))
    for shape in [(3,), (), (0,), (2, 0)]:
        check(values_for(dtype_name, patterns_of(dtype_name)[0], shape, rng), dtype_name)


@pytest.mark.parametrize("dtype_name", ["float32", "float64", "complex64", "bfloat16"])
@pytest.mark.parametrize("shape", [(), (3,), (12,), (4, 9), (0,), (2, 0), (1500,)])
def test_autograd_suffixes(dtype_name, shape):
    rng = np.random.default_rng(seed_for(dtype_name, shape))
    values = values_for(dtype_name, patterns_of(dtype_name)[0], shape, rng)
    x, s = pair(values, dtype_name, requires_grad=True)
    x.requires_grad_(True)
    assert S.tensor_repr(s) == repr(x)
    y = x + 1
    _, s = pair(y.detach().numpy() if dtype_name != "bfloat16" else y.detach().float().numpy(),
                dtype_name, grad_fn=AddBackward0())
    assert S.tensor_repr(s) == repr(y)


@pytest.mark.parametrize("linewidth", [60, 75, 80, 81, 82, 90])
def test_suffix_wrapping_at_line_end(linewidth):
    """Lengths around the line width decide whether a suffix moves to its own line."""
    torch.set_printoptions(linewidth=linewidth)
    S.set_printoptions(linewidth=linewidth)
    for n in range(1, 17):
        for scale in (1.0, 10.0, 1000.0):
            values = np.arange(1, n + 1) * scale + 0.25
            x, s = pair(values, "float64", requires_grad=True)
            x.requires_grad_(True)
            assert S.tensor_repr(s) == repr(x)
            y = x + 1
            _, s = pair(y.detach().numpy(), "float64", grad_fn=AddBackward0())
            assert S.tensor_repr(s) == repr(y)


def test_tensor_contents_replaces_body():
    t, s = pair(np.arange(4.0).reshape(2, 2), "float64")
    assert S.tensor_repr(s, tensor_contents="[...]") == t.__repr__(tensor_contents="[...]")


CUDA = FakeDevice("cuda", 0)


@pytest.mark.parametrize("values,dtype_name,kwargs,expected", [
    # Hand-checked: the device comes first, before size and dtype (torch.cuda is not at hand
    # here; torch's meta-device repr shows the same order).
    ([1.0, 2.0], "float32", {}, "tensor([1., 2.], device='cuda:0')"),
    ([1.0, 2.0], "float64", {}, "tensor([1., 2.], device='cuda:0', dtype=torch.float64)"),
    ([1, 2], "int64", {}, "tensor([1, 2], device='cuda:0')"),
    (np.zeros((2, 0)), "int32", {},
     "tensor([], device='cuda:0', size=(2, 0), dtype=torch.int32)"),
    ([1.5, 2.0], "float32", dict(requires_grad=True),
     "tensor([1.5000, 2.0000], device='cuda:0', requires_grad=True)"),
    ([1.5, 2.0], "float16", dict(grad_fn=AddBackward0()),
     "tensor([1.5000, 2.0000], device='cuda:0', dtype=torch.float16,\n"
     "       grad_fn=<AddBackward0>)"),
    (np.arange(8) + 0.5, "float64", {},
     "tensor([0.5000, 1.5000, 2.5000, 3.5000, 4.5000, 5.5000, 6.5000, 7.5000],\n"
     "       device='cuda:0', dtype=torch.float64)"),
])
def test_device_suffix(values, dtype_name, kwargs, expected):
    _, s = pair(np.asarray(values), dtype_name, device=CUDA, **kwargs)
    assert S.tensor_repr(s) == expected
