"""reftorch-cuda compiles, at a kernel's first launch, only the instantiation that launch asks
for (Program.compile_expression), not every instantiation of its .cu file.

  * With a recording stand-in for NVRTC (no cuda.bindings needed): one expression reaches
    NVRTC; the cache key names the expression (two expressions are two compiles, two disk
    entries); a second call is a memory hit; a new cache on the same folder (a new process,
    in effect) loads the entry from disk without compiling; a damaged entry is deleted,
    compiled again and rewritten whole; a compile of the whole program serves each of its
    expressions from memory; the driver's function lookup compiles one expression per
    kernel and loads each module once.
  * With the real NVRTC on a tiny two-kernel template program: the image holds the one
    kernel asked for and not the other.
"""
from __future__ import annotations

import pytest

pytest.importorskip("reftorch_cuda", reason="reftorch-cuda is not installed "
                    "(pip install ./plugin_cuda)")
from reftorch_cuda import device as cuda_device  # noqa: E402
from reftorch_cuda import kernel_base  # noqa: E402
from reftorch_cuda import nvrtc as N  # noqa: E402
from reftorch_cuda.ops_conv import CONV  # noqa: E402

from spec_tests.cuda_emulator import EmulatedDriver  # noqa: E402
from spec_tests.test_plugin_cuda import damage_entry, needs_nvrtc  # noqa: E402

ELF = b"\x7fELF"


class RecordingNvrtc:
    """Stands in for nvrtc._run_nvrtc: records the name expressions of every run and returns
    an ELF-looking image that names them, with made-up lowered names."""

    def __init__(self):
        self.runs = []

    def __call__(self, source, name, options, name_expressions, kind):
        self.runs.append(tuple(name_expressions))
        lowered = {e: self.lowered(e) for e in name_expressions}
        image = ELF + b"|".join(n.encode() for n in lowered.values())
        return image, lowered, ""

    @staticmethod
    def lowered(expression):
        return "_Z" + "".join(c if c.isalnum() else "_" for c in expression)


@pytest.fixture
def recording(monkeypatch):
    fake = RecordingNvrtc()
    monkeypatch.setattr(N, "_run_nvrtc", fake)
    monkeypatch.setattr(N, "nvrtc_version", lambda: (13, 5))
    return fake


FORWARD = "conv_kernel<float, ConvForward>"
BACKWARD = "conv_kernel<rt_bfloat16, ConvWeightGrad>"


def test_one_expression_reaches_nvrtc(recording):
    cache = N.ProgramCache(disk=False)
    result = CONV.compile_expression("sm_90", FORWARD, cache=cache)
    assert recording.runs == [(FORWARD,)]
    assert result.origin == "nvrtc" and set(result.lowered) == {FORWARD}
    assert "-arch=sm_90" in result.options and "--fmad=false" in result.options
    with pytest.raises(KeyError, match="no instantiation"):
        CONV.compile_expression("sm_90", "conv_kernel<int, ConvForward>", cache=cache)
    assert recording.runs == [(FORWARD,)]


def test_cache_key_names_the_expression_and_second_call_hits_memory(recording, tmp_path):
    cache = N.ProgramCache(directory=tmp_path)
    forward = CONV.compile_expression("sm_90", FORWARD, cache=cache)
    backward = CONV.compile_expression("sm_90", BACKWARD, cache=cache)
    assert recording.runs == [(FORWARD,), (BACKWARD,)]
    assert forward.key != backward.key
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"{forward.key}.bin", f"{backward.key}.bin"])       # no temporary files left
    again = CONV.compile_expression("sm_90", FORWARD, cache=cache)
    assert again.origin == "memory" and again.key == forward.key
    assert cache.stats.compiles == 2 and cache.stats.memory_hits == 1
    assert len(recording.runs) == 2
    # The key also covers the arch and the options, as a whole program's does.
    other_arch = CONV.compile_expression("sm_80", FORWARD, cache=cache)
    fast = CONV.compile_expression("sm_90", FORWARD, cache=cache,
                                   options=N.DEFAULT_OPTIONS + ("--use_fast_math",))
    assert len({forward.key, other_arch.key, fast.key}) == 3 and len(recording.runs) == 4


def test_disk_entry_is_reused_by_a_new_cache(recording, tmp_path):
    first = CONV.compile_expression("sm_90", FORWARD, cache=N.ProgramCache(directory=tmp_path))
    cache = N.ProgramCache(directory=tmp_path)     # a new process, in effect
    loaded = CONV.compile_expression("sm_90", FORWARD, cache=cache)
    assert loaded.origin == "disk" and cache.stats.disk_hits == 1
    assert (loaded.image, loaded.lowered, loaded.key) == (first.image, first.lowered, first.key)
    assert recording.runs == [(FORWARD,)]
    # A whole-program entry on disk is a different entry: the expression's own is used.
    assert CONV.compile_expression("sm_90", BACKWARD, cache=cache).origin == "nvrtc"


@pytest.mark.parametrize("damage", ["flip_payload_byte", "truncate", "empty"])
def test_damaged_entry_is_compiled_again_and_rewritten(recording, tmp_path, damage):
    good = CONV.compile_expression("sm_90", FORWARD, cache=N.ProgramCache(directory=tmp_path))
    damage_entry(tmp_path / f"{good.key}.bin", damage)
    cache = N.ProgramCache(directory=tmp_path)
    again = CONV.compile_expression("sm_90", FORWARD, cache=cache)
    assert again.origin == "nvrtc" and cache.stats.corrupt == 1
    assert again.image == good.image and recording.runs == [(FORWARD,), (FORWARD,)]
    reloaded = CONV.compile_expression("sm_90", FORWARD, cache=N.ProgramCache(directory=tmp_path))
    assert reloaded.origin == "disk" and reloaded.image == good.image


def test_a_whole_program_compile_serves_each_expression(recording):
    cache = N.ProgramCache(disk=False)
    whole = CONV.compile("sm_90", cache=cache)
    assert recording.runs == [CONV.name_expressions]
    for expression in CONV.name_expressions:
        found = CONV.compile_expression("sm_90", expression, cache=cache)
        assert found.origin == "memory" and found.key == whole.key
        assert found.lowered_name(expression) == RecordingNvrtc.lowered(expression)
    assert len(recording.runs) == 1
    # ...but only for its own arch and options.
    CONV.compile_expression("sm_80", FORWARD, cache=cache)
    assert recording.runs[1:] == [(FORWARD,)]
    cache.clear_memory()
    CONV.compile_expression("sm_90", FORWARD, cache=cache)
    assert recording.runs[2:] == [(FORWARD,)]


def test_driver_compiles_one_expression_per_kernel(recording, monkeypatch):
    monkeypatch.setattr(N, "_default_cache", N.ProgramCache(disk=False))
    lowered = {RecordingNvrtc.lowered(e): e for e in CONV.name_expressions}
    emulator = EmulatedDriver(lowered)
    loads = []

    def load(image):   # the made-up images are no CUBINs: recorded, not parsed
        loads.append(image)
        return emulator.CUresult.CUDA_SUCCESS, ("module", len(loads))
    monkeypatch.setattr(emulator, "cuModuleLoadData", load)
    driver = cuda_device.Driver(emulator)
    driver._archs[0] = "sm_90"      # what arch() finds for the emulator's sm_90 devices
    forward = driver.function(0, CONV, FORWARD)
    assert forward == RecordingNvrtc.lowered(FORWARD)
    assert driver.function(0, CONV, FORWARD) is forward and recording.runs == [(FORWARD,)]
    driver.function(0, CONV, BACKWARD)
    assert recording.runs == [(FORWARD,), (BACKWARD,)] and len(loads) == 2
    assert all(image.startswith(ELF) for image in loads)


class InlineProgram(kernel_base.Program):
    """A Program whose source is given here rather than read from the package."""

    def source(self):
        return ("template <typename T>\n"
                "__global__ void twice(T* p) { p[threadIdx.x] = p[threadIdx.x] * (T)2; }\n")


TEMPLATES = InlineProgram("lazy_test.cu", ("twice<float>", "twice<double>"))


@needs_nvrtc
def test_real_nvrtc_image_holds_only_the_expression_asked_for():
    cache = N.ProgramCache(disk=False)
    both = TEMPLATES.compile("sm_80", cache=cache)
    single = N.ProgramCache(disk=False)
    just_double = TEMPLATES.compile_expression("sm_80", "twice<double>", cache=single)
    assert just_double.origin == "nvrtc" and set(just_double.lowered) == {"twice<double>"}
    assert just_double.image.startswith(ELF)
    assert both.lowered["twice<double>"].encode() in just_double.image
    assert both.lowered["twice<float>"].encode() not in just_double.image
    assert both.lowered["twice<float>"].encode() in both.image
    assert TEMPLATES.compile_expression("sm_80", "twice<float>", cache=cache).origin == "memory"


@needs_nvrtc
def test_a_kernel_file_instantiation_compiles_alone_under_its_whole_program_name():
    """One instantiation of a real kernel file (the prelude and all), compiled as a first
    launch compiles it: its lowered name is the one the whole-program compile gives (which the
    emulated driver's kernel table is built from), and no other kernel is in its image."""
    from reftorch_cuda.ops import ELEMENTWISE, copy_expression

    wanted = copy_expression(4)
    whole = ELEMENTWISE.compile("sm_90", cache=N.ProgramCache(disk=False))
    alone = ELEMENTWISE.compile_expression("sm_90", wanted, cache=N.ProgramCache(disk=False))
    assert alone.origin == "nvrtc" and alone.kind == "cubin" and alone.image.startswith(ELF)
    assert alone.lowered == {wanted: whole.lowered[wanted]}
    assert whole.lowered[wanted].encode() in alone.image
    others = [name for e, name in whole.lowered.items() if e != wanted]
    assert others and not any(name.encode() in alone.image for name in others)
    assert len(alone.image) < len(whole.image)


@needs_nvrtc
def test_precompile_fills_the_disk_keys_a_first_launch_looks_up(tmp_path, monkeypatch, capsys):
    """`python -m reftorch_cuda.precompile` writes each instantiation under the key a first
    launch computes, so a new process's compile_expression comes from disk, not NVRTC; a
    second run finds everything cached."""
    from reftorch_cuda import ops_softmax, precompile

    monkeypatch.setenv("REFTORCH_CACHE_DIR", str(tmp_path))
    program = ops_softmax.SOFTMAX
    assert precompile.main(["--arch", "sm_90", "--jobs", "2", "softmax.cu"]) == 0
    count = len(program.name_expressions)
    assert f"{count} kernels for sm_90: {count} compiled" in capsys.readouterr().out
    for expression in program.name_expressions:
        found = program.compile_expression("sm_90", expression, cache=N.ProgramCache())
        assert found.origin == "disk", expression
    assert precompile.main(["--arch", "sm_90", "--jobs", "1", "softmax.cu"]) == 0
    assert f"0 compiled, {count} already cached, 0 failed" in capsys.readouterr().out
