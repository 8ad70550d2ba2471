"""torch.utils helpers and the thread-count API, checked against PyTorch:
dlpack, hub / model_zoo, bottleneck, cpp_extension, set/get_num_(interop_)threads."""
from __future__ import annotations

import builtins
import hashlib
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
import torch.hub
import torch.utils.dlpack

import reftorch as rt
from reftorch import _threads, hub
from reftorch._tensor import Tensor
from reftorch.utils import cpp_extension, dlpack, model_zoo

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUBPROCESS_ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(
    [os.path.join(REPO, "reference"), os.path.join(REPO, "plugins")]))

# Until the Tensor class binds them itself, attach the protocol methods dlpack.py provides.
if "__dlpack__" not in vars(Tensor):
    Tensor.__dlpack__ = dlpack.tensor_dlpack
    Tensor.__dlpack_device__ = dlpack.tensor_dlpack_device


def raised(fn):
    """(exception type, message) raised by fn(), or None."""
    try:
        fn()
    except Exception as error:  # noqa: BLE001 - the type is what is compared
        return type(error), str(error)
    return None


# ============================================================ dlpack ============================

DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32",
          "int64", "bool", "complex64", "complex128"]
LAYOUTS = ["contiguous", "transposed", "strided", "expanded", "scalar", "empty"]


def _values(dtype_name, shape, seed=0):
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(shape) * 5
    if dtype_name == "bool":
        return values > 0
    if dtype_name.startswith("complex"):
        return (values + 1j * rng.standard_normal(shape)).astype(dtype_name)
    if dtype_name == "bfloat16":
        return values.astype(np.float32)
    return values.astype(dtype_name)


def _pair(dtype_name, layout):
    """The same tensor, with the same strides, in reftorch and in torch."""
    shape = {"scalar": (), "empty": (0, 3)}.get(layout, (2, 3, 4))
    values = _values(dtype_name, shape)
    pair = []
    for module in (rt, torch):
        if layout == "empty":
            # (torch.tensor of an empty NumPy array keeps NumPy's all-zero strides)
            pair.append(module.zeros(shape, dtype=getattr(module, dtype_name)))
            continue
        t = module.tensor(values).to(getattr(module, dtype_name))
        if layout == "transposed":
            t = t.transpose(0, 2)
        elif layout == "strided":
            t = t[:, ::2, 1:]
        elif layout == "expanded":
            t = t[:, :1].expand(2, 5, 4)
        pair.append(t)
    return pair


def _host(t):
    """Elements as float64/complex128/bool NumPy for comparison (bfloat16 has no NumPy)."""
    if isinstance(t, torch.Tensor):
        return (t.float() if t.dtype == torch.bfloat16 else t).numpy()
    return (t.float() if t.dtype == rt.bfloat16 else t).numpy()


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype_name", DTYPES)
def test_torch_reads_reftorch_tensor(dtype_name, layout):
    ours, theirs = _pair(dtype_name, layout)
    imported = torch.from_dlpack(ours)
    assert imported.dtype == theirs.dtype
    assert imported.shape == theirs.shape
    assert imported.stride() == theirs.stride() == ours.stride()
    np.testing.assert_array_equal(_host(imported), _host(theirs))
    if ours.numel() and layout != "expanded":
        assert imported.data_ptr() == ours.data_ptr()


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype_name", DTYPES)
def test_reftorch_reads_torch_tensor(dtype_name, layout):
    ours, theirs = _pair(dtype_name, layout)
    imported = dlpack.from_dlpack(theirs)
    assert imported.dtype == ours.dtype
    assert tuple(imported.shape) == tuple(theirs.shape)
    assert imported.stride() == theirs.stride()
    np.testing.assert_array_equal(_host(imported), _host(theirs))
    if theirs.numel():
        assert imported.data_ptr() == theirs.data_ptr()


@pytest.mark.parametrize("dtype_name", ["float32", "int64", "bool", "complex64", "bfloat16"])
def test_capsule_round_trips(dtype_name):
    ours, theirs = _pair(dtype_name, "transposed")
    from_ours = torch.utils.dlpack.from_dlpack(dlpack.to_dlpack(ours))
    from_theirs = dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(theirs))
    np.testing.assert_array_equal(_host(from_ours), _host(theirs))
    np.testing.assert_array_equal(_host(from_theirs), _host(theirs))
    assert from_ours.stride() == theirs.stride() and from_theirs.stride() == ours.stride()
    # Our own capsules come back to us too.
    again = dlpack.from_dlpack(dlpack.to_dlpack(ours))
    np.testing.assert_array_equal(_host(again), _host(ours))


def test_writes_are_shared_both_ways():
    ours = rt.arange(12, dtype=rt.float32).reshape(3, 4).t()
    theirs = torch.from_dlpack(ours)
    expected = theirs.clone()
    theirs[1, 2] = -7.0
    assert ours[1, 2].item() == -7.0
    ours.add_(1)
    expected[1, 2] = -7.0
    assert torch.equal(theirs, expected + 1)

    source = torch.zeros(2, 5)[:, 1::2]
    mirror = dlpack.from_dlpack(source)
    mirror.fill_(3.0)
    assert torch.equal(source, torch.full((2, 2), 3.0))
    source.mul_(2)
    assert rt.equal(mirror, rt.full((2, 2), 6.0))


def test_numpy_from_dlpack_shares_memory():
    for dtype_name in ("float64", "int32", "bool", "complex64", "uint8"):
        for layout in ("contiguous", "transposed", "strided"):
            ours, theirs = _pair(dtype_name, layout)
            array = np.from_dlpack(ours)
            reference = np.from_dlpack(theirs)
            assert array.dtype == reference.dtype
            assert array.strides == reference.strides
            np.testing.assert_array_equal(array, reference)
            array[(0,) * array.ndim] = array[(1,) * array.ndim]
            assert ours[(0,) * array.ndim].item() == ours[(1,) * array.ndim].item()
    # And reftorch reads NumPy arrays, non-contiguous ones included, without copying.
    base = np.arange(24.0).reshape(4, 6)[::2, 1::2]
    imported = dlpack.from_dlpack(base)
    assert imported.stride() == torch.from_dlpack(base).stride()
    imported.zero_()
    assert not base.any()


def test_dlpack_device_and_protocol_options_match_torch():
    ours, theirs = rt.ones(3), torch.ones(3)
    assert ours.__dlpack_device__() == theirs.__dlpack_device__()
    assert int(ours.__dlpack_device__()[0]) == int(dlpack.DLDeviceType.kDLCPU)
    for kwargs in ({"max_version": (1, 0)}, {"max_version": (0, 8)}, {"stream": None},
                   {"copy": True}, {"dl_device": (1, 0)}):
        capsule_names = [repr(t.__dlpack__(**kwargs)).split('"')[1] for t in (ours, theirs)]
        assert capsule_names[0] == capsule_names[1], kwargs
    copied = torch.from_dlpack(_CapsuleOnly(ours.__dlpack__(copy=True)))
    copied.fill_(5)
    assert ours.sum().item() == 3    # copy=True exports a copy
    for kwargs in ({"stream": 1},):
        assert raised(lambda: ours.__dlpack__(**kwargs))[0] is \
            raised(lambda: theirs.__dlpack__(**kwargs))[0]


class _CapsuleOnly:
    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **_):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


def test_dlpack_errors_match_torch():
    # A tensor that requires grad cannot be exported through the protocol...
    ours, theirs = rt.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    assert raised(lambda: ours.__dlpack__()) == raised(lambda: theirs.__dlpack__())
    assert raised(lambda: np.from_dlpack(ours))[0] is raised(lambda: np.from_dlpack(theirs))[0]
    # ... but to_dlpack exports its data.
    assert torch.from_dlpack(dlpack.to_dlpack(ours)).tolist() == [1.0, 1.0]
    # A capsule is consumed once.
    for to_capsule, consume in ((dlpack.to_dlpack, dlpack.from_dlpack),
                                (torch.utils.dlpack.to_dlpack, torch.from_dlpack)):
        capsule = to_capsule(rt.ones(2) if to_capsule is dlpack.to_dlpack else torch.ones(2))
        consume(capsule)
        ours_error = raised(lambda: dlpack.from_dlpack(capsule))
        theirs_error = raised(lambda: torch.from_dlpack(capsule))
        assert ours_error == theirs_error and ours_error[0] is RuntimeError
    assert raised(lambda: dlpack.to_dlpack(5))[0] is \
        raised(lambda: torch.utils.dlpack.to_dlpack(5))[0] is TypeError
    assert raised(lambda: dlpack.from_dlpack(5))[0] is raised(lambda: torch.from_dlpack(5))[0]
    # Negative strides: PyTorch aborts the process on these; reftorch refuses cleanly.
    assert raised(lambda: dlpack.from_dlpack(np.arange(4.0)[::-1]))[0] is ValueError


def test_from_dlpack_read_only_numpy_and_copy():
    frozen = np.arange(4.0)
    frozen.flags.writeable = False
    assert dlpack.from_dlpack(frozen).tolist() == torch.from_dlpack(frozen).tolist()
    source = torch.arange(3.0)
    copy = dlpack.from_dlpack(source, copy=True)
    copy.add_(1)
    assert source.tolist() == [0.0, 1.0, 2.0]


# ============================================================ hub =================================

HUBCONF = '''
dependencies = ["json", "numpy"]
import helper_module_for_hub as _helper

CONSTANT = 3

def tiny(pretrained=False, scale=1):
    """A tiny entrypoint: returns a dict."""
    return {"pretrained": pretrained, "values": [_helper.base() * scale, scale]}

def plain(*args, **kwargs):
    return [list(args), sorted(kwargs)]

def _hidden():
    return "private"
'''
HELPER = "def base():\n    return 7\n"


def _write_repo(directory, hubconf=HUBCONF):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "hubconf.py").write_text(hubconf)
    (directory / "helper_module_for_hub.py").write_text(HELPER)
    return str(directory)


@pytest.fixture
def hub_dirs(tmp_path, monkeypatch):
    """A fresh hub dir for both libraries holding a cached 'someone/tinyrepo' checkout."""
    hub_dir = tmp_path / "hub"
    _write_repo(hub_dir / "someone_tinyrepo_main")
    monkeypatch.setattr(torch.hub, "_hub_dir", str(hub_dir))
    monkeypatch.setattr(hub, "_hub_dir", str(hub_dir))
    return tmp_path


def test_hub_local_load_matches_torch(tmp_path):
    repo = _write_repo(tmp_path / "repo")
    for args, kwargs in (((), {}), ((True,), {"scale": 4})):
        assert hub.load(repo, "tiny", *args, source="local", **kwargs) == \
            torch.hub.load(repo, "tiny", *args, source="local", **kwargs)
    assert hub.load(repo, "plain", 1, 2, source="local", b=1, a=2) == \
        torch.hub.load(repo, "plain", 1, 2, source="local", b=1, a=2)
    assert repo not in sys.path    # hubconf's directory is only on sys.path while in use


def test_hub_list_help_load_github_cache_match_torch(hub_dirs):
    github = "someone/tinyrepo:main"
    expected = torch.hub.list(github, trust_repo=True, verbose=False)
    assert hub.list(github, trust_repo=True, verbose=False) == expected == ["plain", "tiny"]
    assert hub.help(github, "tiny", trust_repo=True) == torch.hub.help(github, "tiny",
                                                                        trust_repo=True)
    assert hub.load(github, "tiny", scale=2, trust_repo=True, verbose=False) == \
        torch.hub.load(github, "tiny", scale=2, trust_repo=True, verbose=False)
    # Without a ref, reftorch uses the cached main (or master) branch (PyTorch asks GitHub).
    assert hub.list("someone/tinyrepo", trust_repo=True, verbose=False) == expected
    # reftorch's addition: list/help of a local directory.
    local = str(hub_dirs / "hub" / "someone_tinyrepo_main")
    assert hub.list(local, source="local") == expected
    assert hub.help(local, "plain", source="local") is None


def test_hub_errors_match_torch(hub_dirs, monkeypatch):
    repo = _write_repo(hub_dirs / "repo")
    missing_dep = _write_repo(hub_dirs / "needs_missing",
                              HUBCONF.replace('"numpy"]', '"numpy", "no_such_pkg_xyz"]'))
    cases = [
        lambda m: m.hub.load(repo, "nope", source="local"),
        lambda m: m.hub.load(repo, "CONSTANT", source="local"),
        lambda m: m.hub.load(repo, 3, source="local"),
        lambda m: m.hub.load(repo, "tiny", source="gitlab"),
        lambda m: m.hub.load(missing_dep, "tiny", source="local"),
        lambda m: m.hub.help("someone/tinyrepo:main", "nope", trust_repo=True),
    ]
    for case in cases:
        ours, theirs = raised(lambda: case(rt)), raised(lambda: case(torch))
        assert ours is not None and ours == theirs
    # An untrusted repository asks; answering no refuses it in both.
    monkeypatch.setattr(builtins, "input", lambda prompt="": "n")
    ours = raised(lambda: hub.list("stranger/repo:main", trust_repo=False))
    theirs = raised(lambda: torch.hub.list("stranger/repo:main", trust_repo=False))
    assert ours == theirs == (Exception, "Untrusted repository.")


def test_hub_never_downloads(hub_dirs):
    for call in (lambda: hub.list("someone/other:main", trust_repo=True),
                 lambda: hub.list("someone/other", trust_repo=True),
                 lambda: hub.load("someone/tinyrepo:main", "tiny", trust_repo=True,
                                  force_reload=True)):
        error = raised(call)
        assert error[0] is RuntimeError and "does not download" in error[1]


def test_hub_dir_defaults_match_torch(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.hub, "_hub_dir", None)
    monkeypatch.setattr(hub, "_hub_dir", None)
    monkeypatch.delenv("TORCH_HOME", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hub.get_dir() == torch.hub.get_dir()
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert hub.get_dir() == torch.hub.get_dir()
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "home"))
    assert hub.get_dir() == torch.hub.get_dir() == str(tmp_path / "home" / "hub")
    hub.set_dir("~/somewhere")
    torch.hub.set_dir("~/somewhere")
    assert hub.get_dir() == torch.hub.get_dir()


def _checkpoint_source(tmp_path, payload):
    digest = hashlib.sha256(payload).hexdigest()
    good = tmp_path / "src" / f"weights-{digest[:10]}.pt"
    bad = tmp_path / "src" / f"weights-{'0' * 10}.pt"
    good.parent.mkdir(parents=True, exist_ok=True)
    good.write_bytes(payload)
    bad.write_bytes(payload)
    return good, bad


def test_download_url_to_file_and_hash_check_match_torch(tmp_path):
    payload = os.urandom(300_000)    # more than one read chunk
    good, bad = _checkpoint_source(tmp_path, payload)
    for module, name in ((hub, "ours"), (torch.hub, "theirs")):
        dst = tmp_path / f"{name}.bin"
        module.download_url_to_file(good.as_uri(), str(dst), hash_prefix=good.stem[-10:],
                                    progress=False)
        assert dst.read_bytes() == payload
    ours = raised(lambda: hub.download_url_to_file(good.as_uri(), str(tmp_path / "x"),
                                                   hash_prefix="deadbeef", progress=False))
    theirs = raised(lambda: torch.hub.download_url_to_file(
        good.as_uri(), str(tmp_path / "y"), hash_prefix="deadbeef", progress=False))
    assert ours == theirs and ours[0] is RuntimeError
    assert sorted(os.listdir(tmp_path)) == ["ours.bin", "src", "theirs.bin"]  # no leftovers


def test_load_state_dict_from_url_hash_failure_matches_torch(tmp_path, capsys):
    _, bad = _checkpoint_source(tmp_path, b"not really a checkpoint")
    ours = raised(lambda: hub.load_state_dict_from_url(
        bad.as_uri(), model_dir=str(tmp_path / "ours"), check_hash=True, progress=False))
    theirs = raised(lambda: torch.hub.load_state_dict_from_url(
        bad.as_uri(), model_dir=str(tmp_path / "theirs"), check_hash=True, progress=False))
    assert ours == theirs and ours[0] is RuntimeError and "invalid hash value" in ours[1]
    assert os.listdir(tmp_path / "ours") == []    # nothing half-downloaded is kept
    assert model_zoo.load_url is hub.load_state_dict_from_url


def test_load_state_dict_from_url_downloads_once_and_loads(tmp_path, monkeypatch):
    serialization = pytest.importorskip(
        "reftorch.serialization", reason="reftorch.serialization is not written yet")
    state = {"weight": rt.arange(6.0).reshape(2, 3), "bias": rt.zeros(3)}
    staging = tmp_path / "staging.pt"
    serialization.save(state, str(staging))
    good, _ = _checkpoint_source(tmp_path, staging.read_bytes())
    monkeypatch.setattr(hub, "_hub_dir", str(tmp_path / "hub"))
    loaded = model_zoo.load_url(good.as_uri(), check_hash=True, progress=False)
    cached = tmp_path / "hub" / "checkpoints" / good.name
    assert cached.read_bytes() == good.read_bytes()
    assert rt.equal(loaded["weight"], state["weight"]) and rt.equal(loaded["bias"], state["bias"])
    good.unlink()    # a second call uses the cached file
    assert rt.equal(hub.load_state_dict_from_url(good.as_uri())["weight"], state["weight"])


# ============================================================ bottleneck ==========================

def test_bottleneck_runs_script_and_prints_both_summaries(tmp_path):
    script = tmp_path / "work.py"
    script.write_text(textwrap.dedent("""
        import sys
        import reftorch as torch
        x = torch.randn(8, 8, requires_grad=True)
        (x @ x).sum().backward()
        print("ARGS", sys.argv[1:])
    """))
    result = subprocess.run(
        [sys.executable, "-m", "reftorch.utils.bottleneck", str(script), "--n", "2"],
        capture_output=True, text=True, env=SUBPROCESS_ENV, cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.count("ARGS ['--n', '2']") == 2    # once per profiler
    assert "Environment Summary" in out
    cprofile_part = out.split("cProfile output")[1].split("autograd profiler output")[0]
    assert "function calls" in cprofile_part and "tottime" in cprofile_part
    autograd_part = out.split("autograd profiler output")[1]
    assert "mm" in autograd_part and "sum" in autograd_part and "Self CPU" in autograd_part


# ============================================================ cpp_extension =======================

INLINE_SOURCE = r'''
static PyObject* add_one(PyObject* self, PyObject* args) {
    long x;
    if (!PyArg_ParseTuple(args, "l", &x)) return NULL;
    return PyLong_FromLong(x + 1);
}

// Scales a float64 buffer (e.g. tensor.numpy()) in place.
static PyObject* scale_(PyObject* self, PyObject* args) {
    PyObject* obj;
    double factor;
    if (!PyArg_ParseTuple(args, "Od", &obj, &factor)) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_WRITABLE | PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    double* data = static_cast<double*>(view.buf);
    for (Py_ssize_t i = 0; i < view.len / (Py_ssize_t)sizeof(double); ++i) data[i] *= factor;
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}
'''
INLINE_FUNCTIONS = {"add_one": "Returns x + 1.", "scale_": "Scales a float64 buffer."}


@pytest.fixture(scope="module")
def build_root(tmp_path_factory):
    return tmp_path_factory.mktemp("extensions")


@pytest.fixture(scope="module")
def inline_module(build_root):
    return cpp_extension.load_inline("refext_inline", INLINE_SOURCE, functions=INLINE_FUNCTIONS,
                                     build_directory=str(build_root / "inline"))


def test_load_inline_builds_callable_functions(inline_module):
    assert inline_module.add_one(41) == 42
    assert inline_module.add_one.__doc__ == "Returns x + 1."
    with pytest.raises(TypeError):
        inline_module.add_one("not a number")
    x = rt.arange(5, dtype=rt.float64)
    inline_module.scale_(x.numpy(), 2.5)     # writes the tensor's own memory
    assert x.tolist() == [0.0, 2.5, 5.0, 7.5, 10.0]


def test_load_inline_reuses_cached_build(inline_module, build_root, capsys):
    again = cpp_extension.load_inline("refext_inline", INLINE_SOURCE,
                                      functions=INLINE_FUNCTIONS, verbose=True,
                                      build_directory=str(build_root / "inline"))
    assert again.__file__ == inline_module.__file__
    assert "No modifications detected" in capsys.readouterr().out
    changed = cpp_extension.load_inline(
        "refext_inline", INLINE_SOURCE.replace("x + 1", "x + 2"), functions=INLINE_FUNCTIONS,
        build_directory=str(build_root / "inline"))
    assert changed.__file__ != inline_module.__file__ and changed.add_one(1) == 3
    assert inline_module.add_one(1) == 2       # the first build still works


def test_load_builds_c_source_with_extension_name_macro(build_root):
    source = build_root / "named.c"
    source.write_text(textwrap.dedent(r'''
        #define PY_SSIZE_T_CLEAN
        #include <Python.h>
        #define STRINGIFY2(x) #x
        #define STRINGIFY(x) STRINGIFY2(x)
        static PyObject* name(PyObject* self, PyObject* unused) {
            return PyUnicode_FromString(STRINGIFY(TORCH_EXTENSION_NAME));
        }
        static PyMethodDef methods[] = {{"name", name, METH_NOARGS, NULL}, {NULL, NULL, 0, NULL}};
        static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "refext_c", NULL, -1, methods};
        PyMODINIT_FUNC PyInit_refext_c(void) { return PyModule_Create(&module); }
    '''))
    module = cpp_extension.load("refext_c", [str(source)], extra_cflags=["-O1"],
                                build_directory=str(build_root / "c"))
    assert module.name() == "refext_c"


def test_build_errors_are_clear(build_root):
    error = raised(lambda: cpp_extension.load_inline(
        "refext_broken", "int broken( {", build_directory=str(build_root / "broken")))
    assert error[0] is RuntimeError and "Error building extension 'refext_broken'" in error[1]
    assert raised(lambda: cpp_extension.load("x", ["a.cpp"], is_standalone=True))[0] is \
        ValueError


def test_signatures_match_torch():
    import inspect

    import torch.utils.cpp_extension as theirs
    for name in ("load", "load_inline", "include_paths", "library_paths", "CppExtension",
                 "CUDAExtension"):
        expected = list(inspect.signature(getattr(theirs, name)).parameters)
        ours = list(inspect.signature(getattr(cpp_extension, name)).parameters)
        assert ours[:len(expected)] == expected, name
    assert issubclass(cpp_extension.BuildExtension, theirs.BuildExtension.__mro__[1])
    header_dirs = cpp_extension.include_paths()
    assert any(os.path.exists(os.path.join(d, "Python.h")) for d in header_dirs)


def test_setuptools_build_with_cpp_extension(tmp_path):
    (tmp_path / "aot.cpp").write_text(textwrap.dedent(r'''
        #include <Python.h>
        #include <vector>
        static PyObject* total(PyObject* self, PyObject* args) {
            std::vector<long> v = {1, 2, 3, 4};
            long s = 0;
            for (long x : v) s += x;
            return PyLong_FromLong(s);
        }
        static PyMethodDef methods[] = {{"total", total, METH_NOARGS, NULL}, {NULL, NULL, 0, NULL}};
        static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "refext_aot", NULL, -1, methods};
        PyMODINIT_FUNC PyInit_refext_aot(void) { return PyModule_Create(&module); }
    '''))
    (tmp_path / "setup.py").write_text(textwrap.dedent('''
        from setuptools import setup
        from reftorch.utils.cpp_extension import BuildExtension, CppExtension
        setup(name="refext_aot",
              ext_modules=[CppExtension("refext_aot", ["aot.cpp"],
                                        extra_compile_args={"cxx": ["-O1"]})],
              cmdclass={"build_ext": BuildExtension.with_options(no_python_abi_suffix=True)})
    '''))
    build = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
                           cwd=tmp_path, env=SUBPROCESS_ENV, capture_output=True, text=True,
                           timeout=120)
    assert build.returncode == 0, build.stderr
    assert (tmp_path / "refext_aot.so").exists()    # no ABI suffix, as asked
    check = subprocess.run([sys.executable, "-c", "import refext_aot; print(refext_aot.total())"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert check.stdout.strip() == "10", check.stderr


def test_cuda_extension_requires_a_toolkit(monkeypatch):
    monkeypatch.setattr(cpp_extension, "CUDA_HOME", None)
    error = raised(lambda: cpp_extension.CUDAExtension("k", ["k.cu"]))
    assert error[0] is OSError and "CUDA_HOME" in error[1]
    assert cpp_extension.CppExtension("k", ["k.cpp"]).language == "c++"


@pytest.mark.skipif(cpp_extension.CUDA_HOME is None, reason="no CUDA toolkit (nvcc) installed")
def test_load_compiles_cuda_sources_with_nvcc(build_root):
    # Only compiled and linked against the CUDA runtime here: launching needs a GPU.
    module = cpp_extension.load_inline(
        "refext_cuda", cpp_sources="", cuda_sources=r'''
        #define PY_SSIZE_T_CLEAN
        #include <Python.h>
        __global__ void fill(float* p) { p[threadIdx.x] = 1.0f; }
        static PyObject* nvcc_major(PyObject* self, PyObject* unused) {
            return PyLong_FromLong(__CUDACC_VER_MAJOR__);
        }
        static PyMethodDef methods[] = {{"nvcc_major", nvcc_major, METH_NOARGS, NULL},
                                        {NULL, NULL, 0, NULL}};
        static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "refext_cuda", NULL, -1,
                                            methods};
        PyMODINIT_FUNC PyInit_refext_cuda(void) { return PyModule_Create(&module); }
        ''', build_directory=str(build_root / "cuda"))
    assert module.nvcc_major() >= 10
    extension = cpp_extension.CUDAExtension("k", ["k.cu"])
    assert "cudart" in extension.libraries and any("include" in d for d in extension.include_dirs)


# ============================================================ threads =============================

BAD_THREAD_COUNTS = [0, -1, 1.5, True, "2", None]


@pytest.mark.parametrize("value", BAD_THREAD_COUNTS)
def test_thread_count_validation_matches_torch(value):
    for ours, theirs in ((_threads.set_num_threads, torch.set_num_threads),
                         (_threads.set_num_interop_threads, torch.set_num_interop_threads)):
        expected = raised(lambda: theirs(value))
        assert expected is not None and raised(lambda: ours(value)) == expected
    assert raised(lambda: _threads.set_num_threads(n=2))[0] is \
        raised(lambda: torch.set_num_threads(int=2))[0] is TypeError


def test_set_num_threads_round_trip():
    previous = _threads.get_num_threads()
    try:
        for value in (3, np.int64(2), 1):
            _threads.set_num_threads(value)
            assert _threads.get_num_threads() == value
            assert type(_threads.get_num_threads()) is int
    finally:    # the loaded plugins follow the count: give them the suite's back
        _threads.set_num_threads(previous)


THREADS_PROBE = """
import json, sys
m = __import__(sys.argv[1])
if sys.argv[1] == "reftorch":
    from reftorch import _threads as m
def attempt(fn):
    try:
        return fn()
    except Exception as e:
        return [type(e).__name__, str(e)]
print(json.dumps([m.get_num_threads(), attempt(lambda: m.set_num_interop_threads(3)),
                  m.get_num_interop_threads(), attempt(lambda: m.set_num_interop_threads(2)),
                  m.get_num_interop_threads()]))
"""


def test_thread_defaults_and_interop_once_match_torch():
    """Fresh processes: the intra-op default honours OMP_NUM_THREADS, and the inter-op pool
    size can be set once."""
    env = dict(SUBPROCESS_ENV, OMP_NUM_THREADS="1")
    results = []
    for module in ("torch", "reftorch"):
        run = subprocess.run([sys.executable, "-c", THREADS_PROBE, module], env=env,
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        results.append(json.loads(run.stdout))
    assert results[0] == results[1]
    assert results[1][0] == 1 and results[1][3][0] == "RuntimeError"
