"""reftorch-cuda: NVRTC compilation, the `cuda` device, and its kernels.

(a) Compile-only (needs cuda.bindings' NVRTC, no GPU): every kernel instantiation compiles
    for sm_80 and sm_90; errors carry the log and the line-numbered source; the disk cache is
    hit on a second compile and survives corrupted entries; the memory cache keys on arch.
(b) Launch tests, run twice: on a real GPU (skipped without one) and on an emulated driver
    (below) that re-implements each kernel with NumPy from the exact bytes the plugin hands
    to cuLaunchKernel. The emulation checks the host side (geometry packing, pointers,
    offsets, dispatch, fallbacks, memory management) everywhere; only a GPU checks the device
    code itself.
(c) The plugin loads without a GPU, silently, and cuda allocation then says what is missing.

Run the GPU part on a machine with an NVIDIA GPU and driver:
    PYTHONPATH=reference:plugins:plugin_cuda python -m pytest spec_tests/test_plugin_cuda.py
"""
from __future__ import annotations

import ctypes
import gc
import os
import re
import struct
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

import reftorch
import reftorch.cuda
from reftorch import _storage
from reftorch import plugins

reftorch_cuda = pytest.importorskip(
    "reftorch_cuda", reason="reftorch-cuda is not installed (pip install ./plugin_cuda)")
from reftorch_cuda import nvrtc as N  # noqa: E402
from reftorch_cuda import ops as O  # noqa: E402
from reftorch_cuda.device import CUDABackend  # noqa: E402

from spec_tests.cuda_emulator import EmulatedDriver  # noqa: E402

try:
    from cuda.bindings import nvrtc as _bindings_nvrtc  # noqa: F401
    NO_BINDINGS = None
except ImportError as exc:
    NO_BINDINGS = f"cuda.bindings is not importable ({exc}), so NVRTC cannot run"
needs_nvrtc = pytest.mark.skipif(NO_BINDINGS is not None, reason=NO_BINDINGS or "")

ROOT = Path(__file__).resolve().parents[1]
FLOATS = ["float32", "float64", "float16", "bfloat16"]
TINY = 'extern "C" __global__ void fill(float* p) { p[threadIdx.x] = 1.0f; }\n'


# --- fixtures ---------------------------------------------------------------------------------

@pytest.fixture(scope="module", autouse=True)
def kernel_cache_dir(tmp_path_factory):
    """Compile into a fresh cache directory, so the tests see real NVRTC runs and leave the
    user's cache alone."""
    with pytest.MonkeyPatch.context() as mp:
        path = tmp_path_factory.mktemp("reftorch-cache")
        mp.setenv("REFTORCH_CACHE_DIR", str(path))
        yield path / "cuda"


@pytest.fixture(scope="module", autouse=True)
def plugin():
    """The loaded plugin: through its entry point when installed, else loaded here (and
    unloaded again after this module, with the backend registry restored)."""
    previous_backend = _storage._BACKENDS.get("cuda")
    loaded_here = "cuda" not in plugins.loaded()
    if loaded_here:
        assert plugins.load("cuda", reftorch_cuda.register) is not None, plugins.failed()
    yield plugins.loaded()["cuda"]
    if loaded_here:
        plugins.unload("cuda")
        if previous_backend is None:
            _storage._BACKENDS.pop("cuda", None)
        else:
            _storage._BACKENDS["cuda"] = previous_backend


# Compile results shared by every test module of the run (each cuda test module imports these
# fixtures; compiling every program for one arch takes ~20 s on a 2-core machine).
_COMPILED = {}


def compile_once(arch, program=O.ELEMENTWISE):
    """`program` compiled for `arch`, once per test run."""
    if (arch, program) not in _COMPILED:
        _COMPILED[arch, program] = program.compile(arch)
    return _COMPILED[arch, program]


def emulated_backend():
    """A cuda backend on a new emulated driver (2 devices, sm_90), and the driver."""
    lowered = {}
    for program in O.PROGRAMS:
        lowered.update({v: k for k, v in compile_once("sm_90", program).lowered.items()})
    emulator = EmulatedDriver(lowered)
    return CUDABackend(driver_module=emulator), emulator


@pytest.fixture(scope="module")
def compiled():
    """Each kernel program compiled for each arch, once per test run."""
    return compile_once


# --- (a) compile-only -------------------------------------------------------------------------

@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("program", O.PROGRAMS, ids=lambda p: p.filename)
def test_every_instantiation_compiles(compiled, arch, program):
    result = compiled(arch, program)
    assert result.kind == "cubin" and result.arch == arch
    assert result.image.startswith(b"\x7fELF")
    assert set(result.lowered) == set(program.name_expressions)
    names = list(result.lowered.values())
    assert len(set(names)) == len(names)
    for name in names:
        assert name.startswith("_Z") and name.encode() in result.image
    assert "-arch=" + arch in result.options
    assert "--fmad=false" in result.options and "--ftz=false" in result.options


def test_elementwise_program_instantiates_every_dtype_and_width():
    # 4 ops x 4 dtypes, 4 ops x 2 16-bit dtypes x (scalar first, scalar second), 5 widths
    assert len(O.ELEMENTWISE.name_expressions) == 4 * 4 + 4 * 2 * 2 + 5


@needs_nvrtc
def test_ptx_for_a_virtual_arch():
    result = N.compile(TINY, "tiny.cu", arch="compute_80", cache=N.ProgramCache(disk=False))
    assert result.kind == "ptx" and b".entry fill" in result.image


def test_geometry_struct_matches_the_kernel_layout():
    # The .cu static_asserts pin sizeof(Geometry<N>) to the same formula (checked by compiling).
    dims = O.max_dims()
    source = O.ELEMENTWISE.source()
    for n in (2, 3):
        assert ctypes.sizeof(O.geometry_type(n)) == 16 + 8 * dims * (n + 1)
        assert f"sizeof(Geometry<{n}>) == 16 + 8 * RT_MAX_DIMS * {n + 1}" in source


@needs_nvrtc
def test_syntax_error_raises_compile_error_with_log_and_numbered_source():
    source = "// line 1\n__global__ void broken(float* p) {\n    p[0] = 1.0f +;\n}\n"
    with pytest.raises(N.CompileError) as info:
        N.compile(source, "broken.cu", arch="sm_80", cache=N.ProgramCache(disk=False))
    err = info.value
    assert err.name == "broken.cu"
    assert "broken.cu(3)" in err.log and "error" in err.log
    assert "-arch=sm_80" in err.options and "--fmad=false" in err.options
    assert err.error_lines() == [3]
    assert "3 |     p[0] = 1.0f +;" in err.numbered_source()
    assert err.numbered_source().splitlines()[0] == "1 | // line 1"
    text = str(err)
    assert "broken.cu" in text and "NVRTC log" in text and "3 |     p[0] = 1.0f +;" in text


@needs_nvrtc
def test_bad_option_and_bad_name_expression_raise_compile_error():
    cache = N.ProgramCache(disk=False)
    with pytest.raises(N.CompileError, match="INVALID_OPTION"):
        N.compile(TINY, "tiny.cu", arch="sm_80", options=("--no-such-option",), cache=cache)
    with pytest.raises(N.CompileError) as info:
        N.compile(TINY, "tiny.cu", arch="sm_80", name_expressions=("missing<int>",),
                  cache=cache)
    assert "missing" in info.value.log
    with pytest.raises(ValueError):
        N.compile(TINY, "tiny.cu", arch="sm_80", options=("-arch=sm_90",), cache=cache)
    with pytest.raises(ValueError):
        N.compile(TINY, "tiny.cu", arch="80", cache=cache)


@needs_nvrtc
def test_disk_cache_hits_on_second_compile(tmp_path):
    first = N.ProgramCache(directory=tmp_path)
    a = N.compile(TINY, "tiny.cu", arch="sm_80", cache=first)
    assert a.origin == "nvrtc" and first.stats.compiles == 1
    assert [p.name for p in tmp_path.iterdir()] == [f"{a.key}.bin"]  # no temp files left
    second = N.ProgramCache(directory=tmp_path)  # a new process, in effect
    b = N.compile(TINY, "tiny.cu", arch="sm_80", cache=second)
    assert b.origin == "disk" and second.stats.disk_hits == 1 and second.stats.compiles == 0
    assert (b.image, b.lowered, b.key) == (a.image, a.lowered, a.key)
    assert N.compile(TINY, "tiny.cu", arch="sm_80", cache=second).origin == "memory"


def damage_entry(path, damage):
    """Damage the disk cache entry at `path` one way: flip_payload_byte, truncate, garbage
    or empty (the payload is last in an entry, so its last bytes are the payload's)."""
    blob = bytearray(path.read_bytes())
    if damage == "flip_payload_byte":
        blob[-3] ^= 0x01
    elif damage == "truncate":
        del blob[len(blob) // 2:]
    elif damage == "garbage":
        blob = bytearray(b"not a cache entry" * 10)
    else:
        blob = bytearray()
    path.write_bytes(bytes(blob))


@needs_nvrtc
@pytest.mark.parametrize("damage", ["flip_payload_byte", "truncate", "garbage", "empty"])
def test_corrupt_disk_entry_is_recompiled(tmp_path, damage):
    good = N.compile(TINY, "tiny.cu", arch="sm_80", cache=N.ProgramCache(directory=tmp_path))
    damage_entry(tmp_path / f"{good.key}.bin", damage)
    cache = N.ProgramCache(directory=tmp_path)
    again = N.compile(TINY, "tiny.cu", arch="sm_80", cache=cache)
    assert again.origin == "nvrtc" and cache.stats.corrupt == 1
    assert again.image == good.image
    # ...and the entry was rewritten, whole.
    assert N.compile(TINY, "tiny.cu", arch="sm_80",
                     cache=N.ProgramCache(directory=tmp_path)).origin == "disk"


@needs_nvrtc
def test_memory_cache_key_includes_arch_and_options():
    cache = N.ProgramCache(disk=False)
    sm80 = N.compile(TINY, "tiny.cu", arch="sm_80", cache=cache)
    sm90 = N.compile(TINY, "tiny.cu", arch="sm_90", cache=cache)
    assert (sm80.origin, sm90.origin) == ("nvrtc", "nvrtc") and sm80.image != sm90.image
    assert sm80.key != sm90.key
    assert N.compile(TINY, "tiny.cu", arch="sm_80", cache=cache).origin == "memory"
    fast = N.compile(TINY, "tiny.cu", arch="sm_80", options=("--use_fast_math",), cache=cache)
    assert fast.origin == "nvrtc" and fast.key != sm80.key
    assert cache.stats.compiles == 3 and cache.stats.memory_hits == 1


def test_disk_key_covers_versions_and_inputs():
    base = dict(source=TINY, name="tiny.cu", arch="sm_80", options=("-arch=sm_80",),
                name_expressions=(), version="13.5")
    key = N._disk_key(**base)
    for change in (dict(source=TINY + " "), dict(name="other.cu"), dict(arch="sm_90"),
                   dict(options=("-arch=sm_80", "--ftz=true")), dict(name_expressions=("f",)),
                   dict(version="13.6")):
        assert N._disk_key(**dict(base, **change)) != key
    assert N.__version__ == reftorch_cuda.__version__  # the plugin version is in the key


def test_every_kernel_source_is_packaged():
    """An installed (non-editable) wheel carries only the package-data patterns of
    plugin_cuda/pyproject.toml: every file of the kernels folder must match one (the shared
    prelude common.cuh was once left out, so an installed plugin could compile nothing)."""
    import fnmatch
    import tomllib
    root = Path(__file__).resolve().parents[1] / "plugin_cuda"
    config = tomllib.loads((root / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["reftorch_cuda"]
    kernels = root / "reftorch_cuda" / "kernels"
    files = [p.relative_to(kernels.parent).as_posix() for p in kernels.iterdir()]
    assert "kernels/common.cuh" in files
    for name in files:
        assert any(fnmatch.fnmatch(name, pattern) for pattern in patterns), name


def test_cache_dir_follows_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("REFTORCH_CACHE_DIR", str(tmp_path))
    assert N.default_cache_dir() == tmp_path / "cuda"
    monkeypatch.delenv("REFTORCH_CACHE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert N.default_cache_dir() == Path.home() / ".cache" / "reftorch" / "cuda"


# --- (c) the plugin without a GPU -------------------------------------------------------------

@pytest.fixture
def no_gpu():
    if reftorch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")


def test_plugin_registers_backend_and_kernels(plugin):
    assert plugin.device_types == ["cuda"]
    assert isinstance(_storage._BACKENDS["cuda"], CUDABackend)
    for op in ("add", "sub", "mul", "div"):
        for name in FLOATS:
            assert plugins.serving(op, "cuda", getattr(reftorch, name)) == "cuda"
    assert plugins.serving("copy_", "cuda", reftorch.complex128) == "cuda"
    assert plugins.serving("atan2", "cuda", reftorch.float32) == "fallback"


def test_no_gpu_answers_and_clear_errors(no_gpu):
    assert reftorch.cuda.is_available() is False
    assert reftorch.cuda.device_count() == 0
    assert reftorch.cuda.is_initialized() is False
    message = r"NVIDIA driver|No CUDA GPUs|cuda-bindings"
    with pytest.raises(RuntimeError, match=message):
        reftorch.zeros(3, device="cuda")
    with pytest.raises(RuntimeError, match=message):
        reftorch.ones(2).cuda()
    with pytest.raises(RuntimeError, match=message):
        reftorch.cuda.current_device()
    with pytest.raises(RuntimeError, match=message):
        reftorch.cuda.init()


def test_without_a_backend_cuda_answers_as_pytorch_without_cuda(monkeypatch):
    monkeypatch.delitem(_storage._BACKENDS, "cuda")
    assert reftorch.cuda.is_available() is False
    assert reftorch.cuda.device_count() == 0
    assert reftorch.cuda.is_initialized() is False
    for call in (reftorch.cuda.current_device, reftorch.cuda.synchronize, reftorch.cuda.init,
                 reftorch.cuda.get_device_name, lambda: reftorch.cuda.set_device(0)):
        with pytest.raises(RuntimeError, match="no CUDA backend"):
            call()
    with pytest.raises(AssertionError):  # what PyTorch raises ("not compiled with CUDA")
        reftorch.cuda.current_device()


def test_fresh_process_imports_silently_and_reports_no_gpu(no_gpu):
    code = ("import warnings; warnings.simplefilter('error')\n"
            "import reftorch, reftorch.cuda\n"
            "from reftorch import plugins\n"
            "if 'cuda' not in plugins.loaded():\n"
            "    import reftorch_cuda; plugins.load('cuda', reftorch_cuda.register)\n"
            "print('cuda' in plugins.loaded(), reftorch.cuda.is_available(),"
            " reftorch.cuda.device_count(), plugins.failed())\n"
            "try:\n    reftorch.empty(2, device='cuda')\n"
            "except RuntimeError as e:\n    print('RuntimeError:', e)\n")
    lines = _run_quietly(code).splitlines()
    assert lines[0] == "True False 0 {}"
    assert lines[1].startswith("RuntimeError: ") and re.search(
        r"NVIDIA driver|No CUDA GPUs|cuda-bindings", lines[1])


def test_importing_a_submodule_first_still_loads_the_plugin(no_gpu):
    # Through the entry point (an installed plugin), importing reftorch used to meet the
    # half-imported submodule and fail the plugin's load with a circular-import warning.
    code = ("import warnings; warnings.simplefilter('error')\n"
            "import reftorch_cuda.ops_conv\n"
            "import reftorch\n"
            "from reftorch import plugins\n"
            "print(plugins.failed())\n")
    assert _run_quietly(code).strip() == "{}"


def _run_quietly(code):
    """stdout of `code` run in a fresh interpreter, which must succeed and print nothing to
    stderr."""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=_subprocess_env(), timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
    return run.stdout


def _subprocess_env():
    """This process's environment with the repository's packages on the path, loading only
    the cuda plugin (through its entry point when it is installed)."""
    path = [str(ROOT / "reference"), str(ROOT / "plugins"), str(ROOT / "plugin_cuda")]
    if os.environ.get("PYTHONPATH"):
        path.append(os.environ["PYTHONPATH"])
    return dict(os.environ, PYTHONPATH=os.pathsep.join(path), REFTORCH_PLUGINS="cuda")


def test_installed_entry_point_loads_the_plugin():
    points = {ep.name: ep for ep in metadata.entry_points(group=plugins.ENTRY_POINT_GROUP)}
    if "cuda" not in points:
        pytest.skip("reftorch-cuda is not installed: no 'cuda' entry point in reftorch.plugins")
    assert points["cuda"].value == "reftorch_cuda:register"
    code = "import reftorch; print(sorted(reftorch.plugins.loaded()), reftorch.plugins.failed())"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=_subprocess_env(), timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "['cuda'] {}"


def test_kernels_decline_what_they_do_not_handle():
    f32, f64 = reftorch.float32, reftorch.float64
    a, b = reftorch.ones(2), reftorch.ones(2, dtype=f64)
    add = O.binary_kernel("add")
    assert add(None, (a, b), (f64, f64, f64), {"alpha": 1}) is NotImplemented  # mixed dtypes
    assert add(None, (a, a), (f32, f32, f32), {"alpha": 1}) is NotImplemented  # not on cuda
    assert add(None, (a, a), (f32, f32, f32), {"alpha": 1j}) is NotImplemented
    div = O.binary_kernel("div")
    assert div(None, (a, a), (f32, f32, f32), {"rounding_mode": "floor"}) is NotImplemented
    ints = reftorch.ones(2, dtype=reftorch.int32)
    assert add(None, (ints, ints), (reftorch.int32,) * 3, {}) is NotImplemented
    assert O.copy_kernel(a, (b,), (f64, f64, f32), {}) is NotImplemented


@pytest.fixture
def emulated(compiled):
    """Swap in a cuda backend running on the emulated driver (2 devices, sm_90)."""
    previous = _storage._BACKENDS["cuda"]
    _storage._BACKENDS["cuda"], emulator = emulated_backend()
    try:
        yield emulator
    finally:
        _storage._BACKENDS["cuda"] = previous


@pytest.fixture(params=["gpu", "emulated"])
def device_kind(request):
    """Each launch test runs on a real GPU (when there is one) and on the emulated driver."""
    if request.param == "gpu":
        if NO_BINDINGS is not None or not reftorch.cuda.is_available():
            pytest.skip("no CUDA GPU on this machine")
        return None
    if NO_BINDINGS is not None:
        pytest.skip(NO_BINDINGS)
    return request.getfixturevalue("emulated")


# --- (b) launches -----------------------------------------------------------------------------

def values(shape, dtype_name, seed):
    """Random values with signed zeros, infinities, NaN and subnormals mixed in, as a cpu
    tensor of `dtype_name` (rounded once, by the reference cast)."""
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(shape) * 4).astype(np.float32)
    flat = a.reshape(-1)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -3e-39, 65504.0],
                        dtype=np.float32)
    flat[:min(flat.size, specials.size)] = specials[:flat.size]
    return reftorch.tensor(a).to(getattr(reftorch, dtype_name))


def host(t):
    """A tensor's values as float64 NumPy (exact for every float dtype tested)."""
    return np.asarray(t.cpu()._np, dtype=np.float64) if t.dtype is not reftorch.bfloat16 \
        else np.asarray(t.cpu()._np.astype(np.float32), dtype=np.float64)


def reference(fn, *tensors):
    # errstate: the reference's final cast to float16 warns on overflow to inf (NumPy's cast
    # warning); the values are what the spec wants, so keep the test output clean.
    with plugins.use_reference_kernels(), np.errstate(over="ignore", invalid="ignore"):
        return fn(*tensors)


LAYOUTS = {
    "contiguous": lambda x, y: (x, y),
    "transposed": lambda x, y: (x.t(), y.t()),
    "one_transposed": lambda x, y: (x.t(), y.t().contiguous()),
    "broadcast_row_col": lambda x, y: (x[:, :1], y[:1, :]),
    "broadcast_vector": lambda x, y: (x, y[0]),
    "zero_dim": lambda x, y: (x, y[1, 2]),
    "strided_slices": lambda x, y: (x[::2, 1:], y[1::2, :-1]),
}
OPS = {
    "add": lambda a, b: reftorch.add(a, b),
    "add_alpha": lambda a, b: reftorch.add(a, b, alpha=2.5),
    "sub_alpha": lambda a, b: reftorch.sub(a, b, alpha=-0.75),
    "mul": lambda a, b: reftorch.mul(a, b),
    "div": lambda a, b: reftorch.div(a, b),
}


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype_name", FLOATS)
def test_binary_ops_match_the_cpu_reference(device_kind, dtype_name, op):
    fn = OPS[op]
    plugins.reset_fallbacks()
    for seed, (layout, arrange) in enumerate(LAYOUTS.items()):
        x, y = values((6, 5), dtype_name, seed), values((6, 5), dtype_name, seed + 100)
        a, b = arrange(x, y)
        expected = reference(fn, a, b)
        got = fn(*arrange(x.cuda(), y.cuda()))
        assert got.device.type == "cuda" and got.dtype is expected.dtype, layout
        assert got.shape == expected.shape, layout
        np.testing.assert_array_equal(host(got), host(expected), err_msg=layout)
    assert plugins.fallbacks() == {}


@pytest.mark.parametrize("dtype_name", FLOATS)
def test_in_place_and_out_on_strided_outputs(device_kind, dtype_name):
    x, y = values((4, 7), dtype_name, 1), values((4, 7), dtype_name, 2)
    plugins.reset_fallbacks()
    expected = reference(lambda a, b: a.t().clone().add_(b.t(), alpha=3), x, y)
    got = x.cuda().t()
    got.add_(y.cuda().t(), alpha=3)  # writes through a transposed view
    np.testing.assert_array_equal(host(got), host(expected))
    out = reftorch.empty(0, dtype=x.dtype).cuda()  # resized by the op
    reftorch.mul(x.cuda(), y.cuda(), out=out)
    np.testing.assert_array_equal(host(out), host(reference(reftorch.mul, x, y)))
    assert plugins.fallbacks() == {}


def test_overlapping_output_declines_to_the_fallback(device_kind):
    x = values((10,), "float32", 3)
    expected = x.clone()
    with plugins.use_reference_kernels():
        expected[1:].add_(expected[:-1])
    got = x.cuda()
    plugins.reset_fallbacks()
    got[1:].add_(got[:-1])  # reads elements it has already written: not one elementwise pass
    np.testing.assert_array_equal(host(got), host(expected))
    assert plugins.fallbacks() == {("add", "cuda", reftorch.float32): 1}


@pytest.mark.parametrize("dtype", [reftorch.bool, reftorch.uint8, reftorch.int16,
                                   reftorch.int32, reftorch.int64, reftorch.float16,
                                   reftorch.bfloat16, reftorch.float32, reftorch.float64,
                                   reftorch.complex64, reftorch.complex128])
def test_round_trip_and_device_copies(device_kind, dtype):
    base = reftorch.arange(60).reshape(3, 4, 5) % 7 - 2
    x = base.to(dtype)
    on = x.to("cuda")
    assert on.is_cuda and on.device == reftorch.device("cuda", 0) and on.dtype is dtype
    np.testing.assert_array_equal(on.cpu()._np, x._np)
    plugins.reset_fallbacks()
    for view in (lambda t: t.transpose(0, 2), lambda t: t[:, ::2, 1:], lambda t: t[1],
                 lambda t: t.permute(1, 0, 2)[:, 1:, ::3], lambda t: t.reshape(-1)):
        got = view(on).contiguous()
        assert got.is_contiguous() and got.is_cuda
        np.testing.assert_array_equal(got.cpu()._np, view(x).contiguous()._np)
    clone = on.clone()  # dense: one device-to-device copy
    assert clone.data_ptr() != on.data_ptr()
    np.testing.assert_array_equal(clone.cpu()._np, x._np)
    target = reftorch.zeros(5, 4, dtype=dtype).cuda()
    target.copy_(on[1].t())  # strided destination write
    np.testing.assert_array_equal(target.cpu()._np, x[1].t()._np)
    target.copy_(on[0, 0, :4])  # broadcast source
    np.testing.assert_array_equal(target.cpu()._np, np.broadcast_to(x[0, 0, :4]._np, (5, 4)))
    assert plugins.fallbacks() == {}


def test_copy_kernel_and_device_copy_are_used(emulated):
    x = reftorch.arange(12.0).reshape(3, 4).cuda()
    emulated.launches.clear()
    x.t().contiguous()
    assert emulated.launches == ["copy_kernel<unsigned int>"]
    x.clone()
    assert emulated.launches == ["copy_kernel<unsigned int>"]  # contiguous: cuMemcpyDtoD
    reftorch.add(x, x)
    assert emulated.launches[-1] == "binary_kernel<float, AddOp>"


def test_op_without_a_cuda_kernel_takes_the_counted_fallback(device_kind):
    x, y = values((3, 4), "float32", 5), values((3, 4), "float32", 6)
    plugins.reset_fallbacks()
    got = reftorch.atan2(x.cuda(), y.cuda())
    assert got.is_cuda and got.dtype is reftorch.float32
    np.testing.assert_array_equal(host(got), host(reference(reftorch.atan2, x, y)))
    assert plugins.fallbacks() == {("atan2", "cuda", reftorch.float32): 1}
    half = x.to(reftorch.float16).cuda()
    wide = reftorch.tensor(0.5, dtype=reftorch.float64)
    # a float64 0-dim operand of a float16 op: the reference rounds it to float16 first, so
    # no kernel takes it (a Python number, a float32 0-dim tensor, is served on the device)
    scaled = half * wide.cuda()
    np.testing.assert_array_equal(host(scaled), host(reference(lambda t: t * wide,
                                                               x.to(reftorch.float16))))
    ints = reftorch.arange(12).reshape(3, 4)
    converted = ints.cuda().to(reftorch.int32)  # integer to integer: no kernel, fallback
    np.testing.assert_array_equal(converted.cpu()._np, ints.to(reftorch.int32)._np)
    assert plugins.fallbacks()[("mul", "cuda", reftorch.float16)] == 1
    assert plugins.fallbacks()[("copy_", "cuda", reftorch.int64)] == 1


def test_memory_is_freed_when_tensors_die(emulated):
    x = reftorch.ones(1000).cuda()
    assert len(emulated.memory) == 1
    y = x + x
    assert len(emulated.memory) == 2
    del x, y
    gc.collect()
    assert reftorch.cuda.memory_allocated() == 0   # the blocks wait in the cache...
    reftorch.cuda.empty_cache()                    # ...until given back to the driver
    assert emulated.memory == {}
    assert reftorch.empty(0, device="cuda").data_ptr() == 0 and emulated.memory == {}


def test_cuda_module_with_a_device(emulated):
    cuda = reftorch.cuda
    assert cuda.is_available() and cuda.device_count() == 2
    assert not cuda.is_initialized()
    cuda.init()
    assert cuda.is_initialized()
    assert cuda.current_device() == 0
    assert cuda.get_device_name() == "Emulated GPU 0"
    assert cuda.get_device_name("cuda:1") == "Emulated GPU 1"
    assert cuda.get_device_capability(0) == (9, 0)
    with cuda.device(1):
        assert cuda.current_device() == 1
        t = reftorch.ones(3, device="cuda")
        assert t.device == reftorch.device("cuda", 1)
        cuda.synchronize()
    assert cuda.current_device() == 0
    with cuda.device(None):
        assert cuda.current_device() == 0
    cuda.set_device("cuda:1")
    assert cuda.current_device() == 1
    cuda.set_device(reftorch.device("cuda", 0))
    assert cuda.current_device() == 0
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        cuda.set_device(5)
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        reftorch.zeros(2, device="cuda:3")
    with pytest.raises(ValueError):
        cuda.device("cpu")
    a, b = reftorch.ones(2, device="cuda:0"), reftorch.ones(2, device="cuda:1")
    with pytest.raises(RuntimeError, match="same device"):
        a + b


def test_cuda_module_on_a_real_gpu():
    if NO_BINDINGS is not None or not reftorch.cuda.is_available():
        pytest.skip("no CUDA GPU on this machine")
    cuda = reftorch.cuda
    assert cuda.device_count() >= 1 and cuda.is_initialized()
    assert isinstance(cuda.get_device_name(0), str) and cuda.get_device_name(0)
    major, minor = cuda.get_device_capability()
    assert major >= 7
    with cuda.device(0):
        assert cuda.current_device() == 0
    cuda.synchronize()
    n = 1 << 25  # more elements than MAX_BLOCKS * BLOCK threads: the grid-stride loop runs
    x = reftorch.arange(n, dtype=reftorch.float32).cuda()
    y = (x * 2 + x).cpu()
    np.testing.assert_array_equal(y._np, np.arange(n, dtype=np.float32) * 3)


@needs_nvrtc
def test_compiling_leaves_cached_bytes_objects_intact(tmp_path):
    """NVRTC writes its log and image into the buffers it is given: they must be mutable
    (writing into `b" " * 1`, CPython's shared one-byte object, broke every b" " after it)."""
    N.compile(TINY, "intact.cu", arch="sm_80", cache=N.ProgramCache(directory=tmp_path))
    # The content, not equality: a corrupted singleton still equals itself.
    assert b" "[0] == 32 and struct.pack("<B", 32)[0] == 32
