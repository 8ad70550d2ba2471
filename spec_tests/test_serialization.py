"""reftorch.serialization (torch.save / torch.load) against real PyTorch: files written by one
library load in the other, with the same values, dtypes, strides, storage sharing and
flags; the weights-only loader refuses what PyTorch's refuses and never runs code; damaged
files raise only the exception types PyTorch uses for them."""
from __future__ import annotations

import collections
import io
import pickle
import struct
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reftorch
from reftorch import plugins, serialization
from reftorch._storage import _BACKENDS, DeviceBackend

from .fake_device import HostBackedStorage
from .opdb import DTYPE_NAMES

torch = pytest.importorskip("torch")

# What a damaged checkpoint may raise: RuntimeError for the archive (PyTorch's zip reader),
# pickle.UnpicklingError for the pickle inside it (PyTorch's weights-only unpickler),
# EOFError for an empty file (PyTorch's too).
DAMAGED_FILE_ERRORS = (RuntimeError, pickle.UnpicklingError, EOFError)


# --- helpers --------------------------------------------------------------------------------

def _values(t):
    """Elements of a reftorch or torch tensor as float64/complex128 NumPy values."""
    if isinstance(t, reftorch.Tensor):
        array = np.asarray(t.detach().cpu()._np)
        return array.astype(np.complex128 if array.dtype.kind == "c" else np.float64)
    wide = torch.complex128 if t.is_complex() else torch.float64
    return t.detach().to(wide).numpy()


def assert_same_tensor(r, t):
    """Same dtype, geometry, requires_grad and values (NaN equal to NaN)."""
    assert repr(r.dtype) == repr(t.dtype)
    assert tuple(r.shape) == tuple(t.shape)
    assert r.stride() == t.stride()
    assert r.storage_offset() == t.storage_offset()
    assert r.requires_grad == t.requires_grad
    np.testing.assert_array_equal(_values(r), _values(t))


def _sample_values(dtype_name, n, seed=0):
    """n values exactly representable in `dtype_name` (halves of small integers)."""
    rng = np.random.default_rng(seed)
    if dtype_name == "bool":
        return rng.random(n) > 0.5
    if dtype_name == "uint8":
        return rng.integers(0, 200, n)
    if dtype_name.startswith("int"):
        return rng.integers(-100, 100, n)
    halves = rng.integers(-40, 40, n) / 2
    if dtype_name.startswith("complex"):
        return halves + 1j * rng.integers(-40, 40, n) / 2
    return halves


def make_pair(dtype_name, n=12, seed=0):
    """The same 1-D tensor of n elements in reftorch and in torch."""
    values = _sample_values(dtype_name, n, seed)
    base = np.complex128 if np.iscomplexobj(values) else np.float64
    base = np.bool_ if values.dtype == np.bool_ else base
    r = reftorch.tensor(values.astype(base)).to(getattr(reftorch, dtype_name))
    t = torch.tensor(values.astype(base)).to(getattr(torch, dtype_name))
    return r, t


def views_of(lib, x):
    """A dict of views of one 12-element storage (sharing it) plus a 0-dim and an empty
    tensor: contiguous, transposed, offset slice, strided, expanded (stride 0)."""
    m = x.view(3, 4)
    return {"flat": x, "matrix": m, "transposed": m.t(), "row": m[1], "column": m[:, 2],
            "strided": x[1::3], "expanded": m[0].unsqueeze(0).expand(2, 4),
            "scalar": x[5], "empty": lib.zeros(0, 3, dtype=x.dtype)}


SHARED_KEYS = ("flat", "matrix", "transposed", "row", "column", "strided", "expanded", "scalar")


def torch_save_bytes(obj, **kwargs):
    buffer = io.BytesIO()
    torch.save(obj, buffer, **kwargs)
    return buffer.getvalue()


def reftorch_save_bytes(obj, **kwargs):
    buffer = io.BytesIO()
    serialization.save(obj, buffer, **kwargs)
    return buffer.getvalue()


def zip_checkpoint(data_pkl, storages=(), byteorder=b"little"):
    """A checkpoint laid out as torch writes it, with a hand-made data.pkl."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("archive/data.pkl", data_pkl)
        archive.writestr("archive/byteorder", byteorder)
        for key, data in storages:
            archive.writestr(f"archive/data/{key}", data)
        archive.writestr("archive/version", b"3\n")
    return buffer.getvalue()


def load_both(data, **kwargs):
    """(reftorch result or exception, torch result or exception) for the same bytes."""
    results = []
    for load in (serialization.load, torch.load):
        try:
            results.append(load(io.BytesIO(data), **kwargs))
        except Exception as exc:  # noqa: BLE001 - the caller compares exception types
            results.append(exc)
    return results


FORMATS = {"zip": {}, "legacy": {"_use_new_zipfile_serialization": False}}


# --- PyTorch's files in reftorch ---------------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype_name", DTYPE_NAMES)
def test_torch_file_loads_in_reftorch(dtype_name, fmt):
    _, t = make_pair(dtype_name)
    saved = views_of(torch, t)
    loaded = serialization.load(io.BytesIO(torch_save_bytes(saved, **FORMATS[fmt])))
    assert set(loaded) == set(saved)
    for key in saved:
        assert_same_tensor(loaded[key], saved[key])
    # One storage for all the views, as in the file: a write through one shows in the others.
    assert all(loaded[k]._storage is loaded["flat"]._storage for k in SHARED_KEYS)
    loaded["flat"][5] = loaded["flat"][0]
    assert _values(loaded["scalar"]) == _values(loaded["flat"][0])


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype_name", DTYPE_NAMES)
def test_reftorch_file_loads_in_torch_weights_only(dtype_name, fmt):
    r, _ = make_pair(dtype_name)
    saved = views_of(reftorch, r)
    loaded = torch.load(io.BytesIO(reftorch_save_bytes(saved, **FORMATS[fmt])),
                        weights_only=True)
    assert set(loaded) == set(saved)
    for key in saved:
        assert_same_tensor(saved[key], loaded[key])
    pointers = {loaded[k].untyped_storage().data_ptr() for k in SHARED_KEYS}
    assert len(pointers) == 1
    loaded["flat"][5] = loaded["flat"][0]
    assert _values(loaded["scalar"]) == _values(loaded["flat"][0])


def test_data_pkl_is_byte_for_byte_torchs():
    """For tensors and views the pickle, the record names and the small records are exactly
    what PyTorch writes (only .data/serialization_id is random)."""
    def objects(lib):
        x = lib.arange(6.0).view(2, 3)
        return {"x": x, "views": [x.t(), x[1], (x[:, 0],)],
                "other": collections.OrderedDict(i=lib.tensor(3), b=lib.ones(2, dtype=lib.bool),
                                                 g=lib.ones(3, requires_grad=True))}
    ours = zipfile.ZipFile(io.BytesIO(reftorch_save_bytes(objects(reftorch))))
    theirs = zipfile.ZipFile(io.BytesIO(torch_save_bytes(objects(torch))))
    assert ours.namelist() == theirs.namelist()
    for name in theirs.namelist():
        if not name.endswith("serialization_id"):
            assert ours.read(name) == theirs.read(name), name


def test_real_and_imag_views_share_one_storage_and_mixed_dtypes_are_refused():
    """x.real and x.imag view the complex storage's memory as floats: one storage in the
    file, shared after load. A float and a complex view of the same memory cannot be saved
    (torch raises RuntimeError too)."""
    def parts(lib):
        z = lib.tensor([1 + 2j, 3 - 4j, 5 + 0.5j])
        return {"real": z.real, "imag": z.imag[1:]}
    ours, theirs = reftorch_save_bytes(parts(reftorch)), torch_save_bytes(parts(torch))
    assert zipfile.ZipFile(io.BytesIO(ours)).read("archive/data.pkl") == \
        zipfile.ZipFile(io.BytesIO(theirs)).read("archive/data.pkl")
    loaded = torch.load(io.BytesIO(ours), weights_only=True)
    assert_same_tensor(parts(reftorch)["imag"], loaded["imag"])
    assert loaded["real"].untyped_storage().data_ptr() == \
        loaded["imag"].untyped_storage().data_ptr()
    mine = serialization.load(io.BytesIO(theirs))
    assert mine["real"]._storage is mine["imag"]._storage

    for lib, save in ((torch, torch.save), (reftorch, serialization.save)):
        z = lib.tensor([1 + 2j])
        with pytest.raises(RuntimeError, match="different types"):
            save([z, z.real], io.BytesIO())


def test_records_are_aligned_for_mmap(tmp_path):
    """Every record's bytes start at a multiple of 64 in the file, as torch writes them, and
    torch memory-maps our file."""
    r, _ = make_pair("float64", 10)
    path = tmp_path / "aligned.pt"
    serialization.save({"a": r, "b": reftorch.ones(3, dtype=reftorch.int16), "c": r[3:]}, path)
    data = path.read_bytes()
    infos = zipfile.ZipFile(path).infolist()
    assert infos
    for info in infos:
        name_length, extra_length = struct.unpack(
            "<HH", data[info.header_offset + 26:info.header_offset + 30])
        assert (info.header_offset + 30 + name_length + extra_length) % 64 == 0, info.filename
    loaded = torch.load(path, mmap=True, weights_only=True)
    assert_same_tensor(r, loaded["a"])
    assert_same_tensor(r[3:], loaded["c"])


@pytest.mark.parametrize("direction", ["torch->reftorch", "reftorch->torch"])
def test_nested_containers_and_plain_values(direction):
    def objects(lib):
        return {"list": [1, 2.5, "text", None, True, (lib.ones(2), [lib.zeros(1)])],
                "tuple": (lib.tensor(7), {"inner": lib.arange(3)}),
                "ordered": collections.OrderedDict([("z", 1), ("a", lib.eye(2))]),
                "set": {1, 2}, "bytes": b"\x00\xffab", "bytearray": bytearray(b"xy"),
                "complex": 1.5 - 2j, "size": lib.Size([2, 3]), "dtype": lib.bfloat16,
                "device": lib.device("cpu"), "big": 2 ** 70, "nested_empty": [[], {}, ()]}
    if direction == "torch->reftorch":
        saved, loaded = objects(torch), serialization.load(
            io.BytesIO(torch_save_bytes(objects(torch))))
    else:
        saved, loaded = objects(reftorch), torch.load(
            io.BytesIO(reftorch_save_bytes(objects(reftorch))), weights_only=True)
    _assert_same_structure(loaded, saved)


def _assert_same_structure(a, b):
    if isinstance(a, (reftorch.Tensor, torch.Tensor)):
        assert isinstance(b, (reftorch.Tensor, torch.Tensor))
        r, t = (a, b) if isinstance(a, reftorch.Tensor) else (b, a)
        assert_same_tensor(r, t)
    elif isinstance(a, (dict, list, tuple)) and not isinstance(a, (torch.Size, reftorch.Size)):
        assert type(a) is type(b)
        if isinstance(a, dict):
            assert list(a) == list(b)
            for key in a:
                _assert_same_structure(a[key], b[key])
        else:
            assert len(a) == len(b)
            for x, y in zip(a, b):
                _assert_same_structure(x, y)
    elif isinstance(a, (torch.dtype, reftorch.dtype, torch.device, reftorch.device)):
        assert repr(a) == repr(b)
    elif isinstance(a, (torch.Size, reftorch.Size)):
        assert repr(a) == repr(b) and type(b).__name__ == "Size"
    else:
        assert type(a) is type(b) and a == b


def test_requires_grad_and_parameters_both_ways():
    saved = {"p": torch.nn.Parameter(torch.arange(4.0)), "frozen": torch.nn.Parameter(
        torch.ones(2), requires_grad=False), "g": torch.ones(3, requires_grad=True) * 2}
    loaded = serialization.load(io.BytesIO(torch_save_bytes(saved)))
    assert isinstance(loaded["p"], reftorch.nn.Parameter) and loaded["p"].requires_grad
    assert isinstance(loaded["frozen"], reftorch.nn.Parameter)
    assert not loaded["frozen"].requires_grad
    assert type(loaded["g"]) is reftorch.Tensor and loaded["g"].requires_grad  # a leaf now
    assert loaded["g"].is_leaf
    np.testing.assert_array_equal(_values(loaded["g"]), [2.0, 2.0, 2.0])

    ours = {"p": reftorch.nn.Parameter(reftorch.arange(4.0)),
            "frozen": reftorch.nn.Parameter(reftorch.ones(2), requires_grad=False)}
    back = torch.load(io.BytesIO(reftorch_save_bytes(ours)), weights_only=True)
    assert isinstance(back["p"], torch.nn.Parameter) and back["p"].requires_grad
    assert isinstance(back["frozen"], torch.nn.Parameter) and not back["frozen"].requires_grad
    assert_same_tensor(ours["p"], back["p"])


def test_python_attributes_on_tensors_both_ways():
    t, p = torch.arange(3.0), torch.nn.Parameter(torch.ones(2))
    t.note, p.tag = "hello", {"lr": 0.1}
    loaded = serialization.load(io.BytesIO(torch_save_bytes({"t": t, "p": p})))
    assert loaded["t"].note == "hello" and loaded["p"].tag == {"lr": 0.1}
    assert isinstance(loaded["p"], reftorch.nn.Parameter)
    assert_same_tensor(loaded["t"], t)

    r, q = reftorch.arange(3.0), reftorch.nn.Parameter(reftorch.ones(2))
    r.note, q.tag = "hello", {"lr": 0.1}
    ours = reftorch_save_bytes({"t": r, "p": q})
    theirs = torch_save_bytes({"t": t, "p": p})
    assert zipfile.ZipFile(io.BytesIO(ours)).read("archive/data.pkl") == \
        zipfile.ZipFile(io.BytesIO(theirs)).read("archive/data.pkl")
    back = torch.load(io.BytesIO(ours), weights_only=True)
    assert back["t"].note == "hello" and back["p"].tag == {"lr": 0.1}


def test_lazy_conjugate_and_negative_views_from_torch():
    """torch saves conj()/neg views with a metadata dict; reftorch (which has no conj bit)
    loads their values."""
    z = torch.tensor([1 + 2j, -3 + 0.5j])
    for saved in (z.conj(), torch.tensor([1 + 2j, -3 + 0.5j]).conj().imag):
        loaded = serialization.load(io.BytesIO(torch_save_bytes(saved)))
        assert repr(loaded.dtype) == repr(saved.dtype)
        np.testing.assert_array_equal(_values(loaded), _values(saved.resolve_conj()
                                                               .resolve_neg()))


def test_dtypes_reftorch_lacks_are_refused_by_name():
    data = torch_save_bytes(torch.ones(2, dtype=torch.uint16))
    with pytest.raises(pickle.UnpicklingError, match="torch.uint16"):
        serialization.load(io.BytesIO(data))


def test_state_dict_metadata_attribute_survives():
    """Module.state_dict() is an OrderedDict with a `_metadata` attribute (pickled with
    BUILD); the weights-only loaders keep it."""
    state = torch.nn.Linear(3, 2).state_dict()
    loaded = serialization.load(io.BytesIO(torch_save_bytes(state)))
    assert isinstance(loaded, collections.OrderedDict) and list(loaded) == list(state)
    assert loaded._metadata == state._metadata
    back = torch.load(io.BytesIO(reftorch_save_bytes(loaded)), weights_only=True)
    assert back._metadata == state._metadata
    for key in state:
        assert_same_tensor(loaded[key], back[key])


def test_storages_save_and_load_both_ways():
    t = torch.arange(5, dtype=torch.int32)
    loaded = serialization.load(io.BytesIO(torch_save_bytes(t.storage())))
    assert isinstance(loaded, reftorch.IntStorage) and loaded.tolist() == t.tolist()
    r = reftorch.arange(5, dtype=reftorch.int64)
    back = torch.load(io.BytesIO(reftorch_save_bytes(r.storage())), weights_only=True)
    assert back.dtype == torch.int64 and back.tolist() == r.tolist()


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_pickle_protocols(protocol):
    """Other pickle protocols write what torch writes; torch's own weights-only loader only
    reads protocols up to 3, so protocols 4 and 5 are loaded in torch with weights_only=False."""
    r, t = make_pair("float32")
    data = reftorch_save_bytes({"a": r, "b": r[2:]}, pickle_protocol=protocol)
    theirs = torch_save_bytes({"a": t, "b": t[2:]}, pickle_protocol=protocol)
    assert zipfile.ZipFile(io.BytesIO(data)).read("archive/data.pkl") == \
        zipfile.ZipFile(io.BytesIO(theirs)).read("archive/data.pkl")
    loaded = torch.load(io.BytesIO(data), weights_only=protocol <= 3)
    assert_same_tensor(r[2:], loaded["b"])
    for load_theirs in (False, True):
        mine = serialization.load(io.BytesIO(theirs if load_theirs else data))
        assert_same_tensor(mine["b"], t[2:])
        assert mine["a"]._storage is mine["b"]._storage


def test_big_endian_checkpoints_are_byteswapped():
    """A checkpoint from a big-endian machine: byteorder says 'big' and the storages are
    big-endian. Both libraries read the right values."""
    tensors = {"f": torch.arange(5.0, dtype=torch.float64), "i": torch.arange(-3, 3,
                                                                               dtype=torch.int16)}
    source = zipfile.ZipFile(io.BytesIO(torch_save_bytes(tensors)))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as target:
        for name in source.namelist():
            data = source.read(name)
            if name.endswith("byteorder"):
                data = b"big"
            elif "/data/" in name:
                itemsize = {"0": 8, "1": 2}[name.rsplit("/", 1)[1]]
                data = np.frombuffer(data, f"u{itemsize}").byteswap().tobytes()
            target.writestr(name, data)
    ours, theirs = load_both(buffer.getvalue())
    for key in tensors:
        assert_same_tensor(ours[key], theirs[key])
        assert_same_tensor(ours[key], tensors[key])


# --- where storages go: map_location ----------------------------------------------------------

@pytest.mark.parametrize("where", ["cpu", "device", "dict", "callable-keep", "callable-none"])
def test_map_location_to_cpu(where):
    t = torch.arange(6.0).view(2, 3)
    mapping = {"cpu": "cpu", "device": reftorch.device("cpu"), "dict": {"cpu": "cpu"},
               "callable-keep": lambda storage, location: storage,
               "callable-none": lambda storage, location: None}[where]
    loaded = serialization.load(io.BytesIO(torch_save_bytes([t, t.t()])), map_location=mapping)
    assert loaded[0].device == reftorch.device("cpu")
    assert_same_tensor(loaded[1], t.t())
    assert loaded[0]._storage is loaded[1]._storage


class FakeBackend(DeviceBackend):
    type_name = "meta"  # a device name PyTorch's parser knows

    def allocate(self, size, dtype, device):
        return HostBackedStorage(size, dtype, device)


@pytest.fixture
def fake_device():
    _BACKENDS["meta"] = FakeBackend()
    plugins.reset_fallbacks()
    yield reftorch.device("meta:0")
    del _BACKENDS["meta"]


def test_device_locations_and_map_location(fake_device):
    x = reftorch.arange(6.0).view(2, 3).to(fake_device)
    data = reftorch_save_bytes({"x": x, "t": x.t()})
    assert b"meta:0" in zipfile.ZipFile(io.BytesIO(data)).read("archive/data.pkl")

    restored = serialization.load(io.BytesIO(data))  # back on the device it was saved from
    assert restored["x"].device == fake_device
    assert restored["x"]._storage is restored["t"]._storage
    np.testing.assert_array_equal(_values(restored["t"]), _values(x.t()))

    seen = []

    def to_cpu(storage, location):
        seen.append(location)
        return storage

    for mapping in ("cpu", {"meta:0": "cpu"}, to_cpu):
        loaded = serialization.load(io.BytesIO(data), map_location=mapping)
        assert loaded["x"].device == reftorch.device("cpu")
        assert loaded["x"]._storage is loaded["t"]._storage
        np.testing.assert_array_equal(_values(loaded["t"]), _values(x.t()))
    assert seen == ["meta:0"]
    unchanged = serialization.load(io.BytesIO(data), map_location={"cuda:0": "cpu"})
    assert unchanged["x"].device == fake_device


@pytest.mark.skipif(reftorch.cuda.is_available(), reason="needs a machine without cuda")
def test_map_location_to_missing_cuda_raises_like_torch():
    data = torch_save_bytes(torch.ones(2))
    ours, theirs = load_both(data, map_location="cuda:0")
    if not isinstance(theirs, Exception):
        pytest.skip("torch has cuda here")
    assert type(ours) is type(theirs) is RuntimeError
    assert "CUDA" in str(ours)


# --- what f can be -----------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["str", "Path", "BytesIO", "open file"])
def test_paths_and_file_objects(kind, tmp_path):
    r, t = make_pair("float32")
    for save, load, saved in ((serialization.save, torch.load, r),
                              (torch.save, serialization.load, t)):
        path = tmp_path / f"{kind}-{save.__module__}.pt"
        if kind == "BytesIO":
            buffer = io.BytesIO()
            save(saved, buffer)
            buffer.seek(0)
            loaded = load(buffer)
        elif kind == "open file":
            with open(path, "wb") as f:
                save(saved, f)
            with open(path, "rb") as f:
                loaded = load(f)
        else:
            target = str(path) if kind == "str" else path
            save(saved, target)
            loaded = load(target)
        pair = (saved, loaded) if isinstance(saved, reftorch.Tensor) else (loaded, saved)
        assert_same_tensor(*pair)


def test_archive_is_named_after_the_file(tmp_path):
    serialization.save(reftorch.ones(1), tmp_path / "my.model.pt")
    torch.save(torch.ones(1), tmp_path / "theirs.model.pt")
    ours = zipfile.ZipFile(tmp_path / "my.model.pt").namelist()
    theirs = zipfile.ZipFile(tmp_path / "theirs.model.pt").namelist()
    assert ours == [n.replace("theirs.model/", "my.model/") for n in theirs]


def test_save_into_missing_directory_raises_like_torch(tmp_path):
    target = tmp_path / "missing" / "x.pt"
    with pytest.raises(RuntimeError, match="does not exist"):
        torch.save(torch.ones(1), target)
    with pytest.raises(RuntimeError, match="does not exist"):
        serialization.save(reftorch.ones(1), target)


def test_mmap(tmp_path):
    _, t = make_pair("int32")
    path = tmp_path / "mapped.pt"
    torch.save({"a": t, "b": t[3:]}, path)
    loaded = serialization.load(path, mmap=True)
    assert_same_tensor(loaded["b"], t[3:])
    assert loaded["a"]._storage is loaded["b"]._storage
    loaded["a"][0] = 99  # copy-on-write: the file keeps its bytes
    assert_same_tensor(serialization.load(path)["a"], t)

    for data in (path.read_bytes(), torch_save_bytes(t, _use_new_zipfile_serialization=False)):
        ours, theirs = load_both(data, mmap=True)
        assert type(ours) is type(theirs) and isinstance(ours, (ValueError, RuntimeError))


# --- weights_only: what is refused -----------------------------------------------------------

def _os_system_pickle(marker):
    """A protocol-2 pickle calling os.system('touch <marker>')."""
    command = f"touch {marker}".encode()
    return (b"\x80\x02cos\nsystem\nq\x00X" + struct.pack("<I", len(command)) + command
            + b"q\x01\x85q\x02Rq\x03.")


def test_malicious_pickle_is_refused_without_running(tmp_path):
    marker = tmp_path / "pwned"
    for data in (zip_checkpoint(_os_system_pickle(marker)),
                 _legacy_with_object_pickle(_os_system_pickle(marker))):
        ours, theirs = load_both(data)
        assert isinstance(theirs, pickle.UnpicklingError)
        assert isinstance(ours, pickle.UnpicklingError)
        assert "os.system" in str(ours) and "weights_only=False" in str(ours)
        assert not marker.exists()


def _legacy_with_object_pickle(object_pickle):
    return (pickle.dumps(serialization.LEGACY_MAGIC_NUMBER, protocol=2)
            + pickle.dumps(serialization.LEGACY_PROTOCOL_VERSION, protocol=2)
            + pickle.dumps({"little_endian": True}, protocol=2) + object_pickle
            + pickle.dumps([], protocol=2))


@pytest.mark.parametrize("payload", [
    b"\x80\x02cbuiltins\neval\nX\x04\x00\x00\x001+1q\x00\x85R.",       # eval via GLOBAL
    b"\x80\x04\x8c\x08builtins\x8c\x04eval\x93X\x03\x00\x00\x001+1\x85R.",  # STACK_GLOBAL
    b"(S'ls'\nios\nsystem\n.",                                         # INST (protocol 0)
    b"\x80\x02cbuiltins\ngetattr\ncos\nsystem\nX\x01\x00\x00\x00x\x86R.",  # getattr
    b"\x80\x02ctorch\nFloatStorage\nJ\x00\x00\x00\x10\x85R.",           # calling a storage
    b"\x80\x02ctorch\nfloat32\n)R.",                                     # calling a dtype
], ids=["eval", "stack_global", "inst", "getattr", "call-storage", "call-dtype"])
def test_weights_only_refuses_calls_outside_the_allow_list(payload):
    """torch refuses all of these too (with UnpicklingError, or TypeError for the last two:
    reftorch reports every malformed pickle as UnpicklingError)."""
    ours, theirs = load_both(zip_checkpoint(payload))
    assert isinstance(ours, pickle.UnpicklingError), ours
    assert isinstance(theirs, (pickle.UnpicklingError, TypeError)), theirs


class UserRecord:
    """A user class: weights-only loads refuse it until it is allowed."""

    def __init__(self, value):
        self.value = value


def test_user_classes_need_weights_only_false_or_safe_globals():
    data = torch_save_bytes({"record": UserRecord(3), "t": torch.ones(2)})
    with pytest.raises(pickle.UnpicklingError, match="UserRecord"):
        serialization.load(io.BytesIO(data))
    with pytest.raises(pickle.UnpicklingError, match="UserRecord"):
        torch.load(io.BytesIO(data), weights_only=True)

    full = serialization.load(io.BytesIO(data), weights_only=False)
    assert isinstance(full["record"], UserRecord) and full["record"].value == 3
    assert isinstance(full["t"], reftorch.Tensor)

    assert UserRecord not in serialization.get_safe_globals()
    with serialization.safe_globals([UserRecord]):
        assert UserRecord in serialization.get_safe_globals()
        allowed = serialization.load(io.BytesIO(data))
    assert allowed["record"].value == 3
    assert UserRecord not in serialization.get_safe_globals()
    serialization.add_safe_globals([UserRecord])
    try:
        assert serialization.load(io.BytesIO(data))["record"].value == 3
    finally:
        serialization.clear_safe_globals()


def test_whole_torch_module_loads_with_weights_only_false():
    """torch.save(model) pickles the module classes; with weights_only=False the torch.*
    class names map to reftorch's (torch.nn.modules.linear.Linear -> reftorch.nn...)."""
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU())
    data = torch_save_bytes(model)
    with pytest.raises(pickle.UnpicklingError, match="torch.nn.modules"):
        serialization.load(io.BytesIO(data))
    loaded = serialization.load(io.BytesIO(data), weights_only=False)
    assert type(loaded) is reftorch.nn.Sequential
    x = [[0.5, -1.0], [2.0, 0.25]]
    np.testing.assert_allclose(_values(loaded(reftorch.tensor(x))),
                               _values(model(torch.tensor(x))), rtol=1e-6)


def test_pickle_module_argument_like_torch():
    data = torch_save_bytes({"t": torch.ones(2)})
    ours, theirs = load_both(data, pickle_module=pickle, weights_only=True)
    assert type(ours) is type(theirs) is RuntimeError
    # A pickle_module alone means full unpickling (weights_only defaults to False then).
    loaded = serialization.load(io.BytesIO(data), pickle_module=pickle)
    assert_same_tensor(loaded["t"], torch.ones(2))


def test_out_of_bounds_geometry_raises_runtime_error():
    """A tensor claiming more elements than its storage holds is refused by both."""
    class FakeTensor:
        def __reduce__(self):
            return (torch._utils._rebuild_tensor_v2,
                    (FakeStorage(), 0, (10,), (1,), False, collections.OrderedDict()))

    class FakeStorage:
        pass

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            if isinstance(obj, FakeStorage):
                return ("storage", torch.FloatStorage, "0", "cpu", 4)
            return None

    buffer = io.BytesIO()
    Pickler(buffer, protocol=2).dump(FakeTensor())
    data = zip_checkpoint(buffer.getvalue(), [("0", np.ones(4, np.float32).tobytes())])
    ours, theirs = load_both(data)
    assert type(ours) is type(theirs) is RuntimeError


# --- damaged files -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["empty", "truncated zip", "plain pickle", "text"])
def test_damaged_files_raise_torchs_exception_types(name):
    data = {"empty": b"", "truncated zip": torch_save_bytes(torch.ones(3))[:200],
            "plain pickle": pickle.dumps(5), "text": b"not a checkpoint at all"}[name]
    ours, theirs = load_both(data)
    assert isinstance(ours, DAMAGED_FILE_ERRORS)
    if isinstance(theirs, DAMAGED_FILE_ERRORS):
        assert type(ours) is type(theirs)


_FUZZ_SOURCES = {}


def _fuzz_source(fmt):
    """A torch checkpoint with views, several dtypes, a Parameter and containers."""
    if fmt not in _FUZZ_SOURCES:
        x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
        obj = {"a": x, "b": x.t(), "c": [torch.tensor(1), (torch.ones(2, dtype=torch.bool),)],
               "d": collections.OrderedDict(e=torch.zeros(3, dtype=torch.float16)),
               "p": torch.nn.Parameter(torch.ones(2)), "s": {"k": 1.5, "set": {1, 2}}}
        legacy = fmt == "legacy"
        _FUZZ_SOURCES[fmt] = torch_save_bytes(obj, _use_new_zipfile_serialization=not legacy)
    return _FUZZ_SOURCES[fmt]


def _with_data_pkl(checkpoint, damage):
    """The zip checkpoint with its data.pkl damaged by `damage` and valid CRCs, so that the
    damage reaches the pickle interpreter instead of the zip reader's CRC check."""
    source = zipfile.ZipFile(io.BytesIO(checkpoint))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as target:
        for name in source.namelist():
            data = source.read(name)
            target.writestr(name, damage(data) if name.endswith("data.pkl") else data)
    return buffer.getvalue()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(target=st.sampled_from(["zip file", "legacy file", "data.pkl in zip"]), data=st.data())
def test_corrupted_checkpoints_raise_only_allowed_errors(target, data):
    """Truncations and byte flips of real torch files: the load succeeds or raises one of
    DAMAGED_FILE_ERRORS (nothing else, no crash)."""
    def damage(original):
        if data.draw(st.booleans(), label="truncate"):
            return original[:data.draw(st.integers(0, len(original) - 1), label="length")]
        damaged = bytearray(original)
        flips = data.draw(st.lists(st.tuples(st.integers(0, len(original) - 1),
                                             st.integers(0, 255)), min_size=1, max_size=4),
                          label="flips")
        for position, value in flips:
            damaged[position] = value
        return bytes(damaged)

    if target == "data.pkl in zip":
        damaged = _with_data_pkl(_fuzz_source("zip"), damage)
    else:
        damaged = damage(_fuzz_source(target.split()[0]))
    try:
        serialization.load(io.BytesIO(damaged))
    except DAMAGED_FILE_ERRORS:
        pass
