"""dtypes, promotion, devices, Size, finfo/iinfo, legacy types: compared with torch."""
from __future__ import annotations

import itertools
import pickle

import numpy as np
import pytest

import reftorch
from .opdb import DTYPE_NAMES

torch = pytest.importorskip("torch")


def _r(name):
    return getattr(reftorch, name)


def _t(name):
    return getattr(torch, name)


@pytest.mark.parametrize("a,b", list(itertools.product(DTYPE_NAMES, repeat=2)))
def test_promote_types_matches_torch(a, b):
    assert repr(reftorch.promote_types(_r(a), _r(b))) == repr(torch.promote_types(_t(a), _t(b)))


@pytest.mark.parametrize("a,b", list(itertools.product(DTYPE_NAMES, repeat=2)))
def test_can_cast_matches_torch(a, b):
    assert reftorch.can_cast(_r(a), _r(b)) == torch.can_cast(_t(a), _t(b))


@pytest.mark.parametrize("dtype_name", DTYPE_NAMES)
@pytest.mark.parametrize("scalar", [True, 3, 2.5, 1 + 2j])
def test_result_type_with_scalars_and_zero_dim(dtype_name, scalar):
    if dtype_name == "float16" and isinstance(scalar, complex):
        pytest.skip("reftorch has no complex32 (see xfails.py)")
    rt = reftorch.zeros(2, dtype=_r(dtype_name))
    tt = torch.zeros(2, dtype=_t(dtype_name))
    assert repr(reftorch.result_type(rt, scalar)) == repr(torch.result_type(tt, scalar))
    r0 = reftorch.tensor(scalar)
    t0 = torch.tensor(scalar)
    if not (isinstance(scalar, complex) and dtype_name == "float16"):
        assert repr(reftorch.result_type(rt, r0)) == repr(torch.result_type(tt, t0))


@pytest.mark.parametrize("name", DTYPE_NAMES)
def test_dtype_attributes(name):
    r, t = _r(name), _t(name)
    assert repr(r) == repr(t)
    assert (r.is_floating_point, r.is_complex, r.is_signed, r.itemsize) == \
        (t.is_floating_point, t.is_complex, t.is_signed, t.itemsize)
    assert pickle.loads(pickle.dumps(r)) is r


def test_dtype_aliases():
    for alias in ("half", "float", "double", "cfloat", "cdouble", "short", "int", "long"):
        assert repr(getattr(reftorch, alias)) == repr(getattr(torch, alias))


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_finfo_matches_torch(name):
    r, t = reftorch.finfo(_r(name)), torch.finfo(_t(name))
    for attr in ("bits", "eps", "max", "min", "tiny", "resolution"):
        assert getattr(r, attr) == getattr(t, attr), attr


@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "int32", "int64"])
def test_iinfo_matches_torch(name):
    r, t = reftorch.iinfo(_r(name)), torch.iinfo(_t(name))
    assert (r.bits, r.min, r.max) == (t.bits, t.min, t.max)


def test_finfo_rejects_integers_and_iinfo_rejects_floats():
    with pytest.raises(TypeError):
        reftorch.finfo(reftorch.int32)
    with pytest.raises(TypeError):
        reftorch.iinfo(reftorch.float32)


def test_default_dtype_round_trip():
    try:
        reftorch.set_default_dtype(reftorch.float64)
        assert reftorch.tensor([1.5]).dtype is reftorch.float64
        assert reftorch.tensor([1j]).dtype is reftorch.complex128
        assert reftorch.get_default_dtype() is reftorch.float64
        with pytest.raises(TypeError):
            reftorch.set_default_dtype(reftorch.int64)
    finally:
        reftorch.set_default_dtype(reftorch.float32)
    assert reftorch.tensor([1.5]).dtype is reftorch.float32


def test_bare_int_device_is_a_legacy_cuda_ordinal():
    assert reftorch.device(1) == reftorch.device("cuda:1")


@pytest.mark.parametrize("spec", ["cpu", "cuda", "cuda:1", "cpu:0", ("cuda", 0), "meta"])
def test_device_matches_torch(spec):
    args = spec if isinstance(spec, tuple) else (spec,)
    r, t = reftorch.device(*args), torch.device(*args)
    assert (repr(r), str(r), r.type, r.index) == (repr(t), str(t), t.type, t.index)
    assert r == reftorch.device(*args) and hash(r) == hash(reftorch.device(*args))


@pytest.mark.parametrize("bad", ["gpu", "cuda:x", "cuda:-1", "cuda:01"])
def test_bad_device_strings_raise_like_torch(bad):
    with pytest.raises(RuntimeError):
        torch.device(bad)
    with pytest.raises(RuntimeError):
        reftorch.device(bad)


def test_device_equality_keeps_index():
    assert reftorch.device("cuda") != reftorch.device("cuda:0")
    assert reftorch.device("cpu") == "cpu"


def test_size_behaves_like_torch_size():
    r, t = reftorch.Size([2, 3]), torch.Size([2, 3])
    assert repr(r) == repr(t) and r.numel() == t.numel() == 6
    assert repr(r[1:]) == repr(t[1:]) and isinstance(r + (4,), reftorch.Size)
    assert r == (2, 3)
    with pytest.raises(TypeError):
        reftorch.Size([2.5])


def test_layouts_and_memory_formats():
    assert repr(reftorch.strided) == repr(torch.strided)
    assert repr(reftorch.sparse_coo) == repr(torch.sparse_coo)
    assert reftorch.zeros(2).layout is reftorch.strided


def test_legacy_tensor_types():
    t = reftorch.FloatTensor(2, 3)
    assert t.shape == (2, 3) and t.dtype is reftorch.float32
    assert isinstance(t, reftorch.FloatTensor) and not isinstance(t, reftorch.LongTensor)
    assert isinstance(t, reftorch.Tensor)
    assert t.type() == "torch.FloatTensor"
    assert reftorch.LongTensor([1, 2]).tolist() == [1, 2]
    assert t.type(reftorch.DoubleTensor).dtype is reftorch.float64
    assert t.type("torch.IntTensor").dtype is reftorch.int32
    assert reftorch.Tensor([1, 2]).dtype is reftorch.float32
    assert reftorch.Tensor().shape == (0,)
    assert reftorch.ByteTensor([1]).type() == torch.ByteTensor([1]).type()


def test_set_default_tensor_type():
    try:
        reftorch.set_default_tensor_type(reftorch.DoubleTensor)
        assert reftorch.tensor([1.0]).dtype is reftorch.float64
        assert reftorch.Tensor(2).dtype is reftorch.float64
    finally:
        reftorch.set_default_tensor_type("torch.FloatTensor")
    assert reftorch.get_default_dtype() is reftorch.float32


def test_typed_storage_methods():
    s = reftorch.FloatStorage([1, 2, 3])
    assert s.size() == len(s) == 3 and s.tolist() == [1.0, 2.0, 3.0]
    assert s.element_size() == 4 and s.double().tolist() == [1.0, 2.0, 3.0]
    assert s.long().type() == "torch.LongStorage"
    s[0] = 10
    assert s[0] == 10.0
    assert s.clone().tolist() == s.tolist() and s.fill_(7).tolist() == [7.0] * 3
    assert reftorch.is_storage(s) and not reftorch.is_storage([1])
    t = reftorch.tensor([1.0, 2.0])
    t.storage()[1] = 5  # a storage view writes through to the tensor
    assert t.tolist() == [1.0, 5.0]
    assert reftorch.FloatStorage.from_buffer(np.array([1, 2], np.float32).tobytes()).tolist() \
        == [1.0, 2.0]


def test_is_tensor_numel_is_floating_point():
    t = reftorch.zeros(2, 3, dtype=reftorch.int64)
    assert reftorch.is_tensor(t) and not reftorch.is_tensor(np.zeros(1))
    assert reftorch.numel(t) == 6 and not reftorch.is_floating_point(t)
