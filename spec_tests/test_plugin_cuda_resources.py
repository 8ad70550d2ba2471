"""What the compiled kernels need from a GPU (registers, shared memory, launch bounds), read
from the CUBINs NVRTC makes for sm_80 and sm_90: the reader against what a source declares,
the limits of a block, every kernel program, and the emulated driver refusing a launch a GPU
would refuse. No GPU is needed; NVRTC is."""
from __future__ import annotations

import pytest

from spec_tests.cubin_resources import KernelResources, kernel_resources
from spec_tests.cuda_emulator import EmulatedDriver
from spec_tests.test_plugin_cuda import compile_once, needs_nvrtc

from reftorch_cuda import nvrtc as N  # noqa: E402  (test_plugin_cuda skips without the plugin)
from reftorch_cuda import ops as O  # noqa: E402

# Two kernels whose resources the source fixes: a launch bound of 128 threads and 300 floats
# of static shared memory; no bound and 17 doubles.
DECLARED = r"""
extern "C" __global__ void __launch_bounds__(128) bounded(float *out)
{
    __shared__ float tile[300];
    for (int i = threadIdx.x; i < 300; i += blockDim.x) tile[i] = out[i];
    __syncthreads();
    out[threadIdx.x] = tile[299 - threadIdx.x];
}

extern "C" __global__ void unbounded(double *out)
{
    __shared__ double buf[17];
    if (threadIdx.x < 17) buf[threadIdx.x] = out[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = buf[16 - threadIdx.x % 17];
}
"""


def compile_declared(arch):
    return N.compile(DECLARED, "declared.cu", arch=arch, name_expressions=("bounded", "unbounded"))


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_reads_what_the_source_declares(arch):
    # (sm_90 images count the system's 1 KiB per block in each kernel's shared memory: the
    # reader takes it out, so both archs give the declared sizes)
    found = kernel_resources(compile_declared(arch).image)
    assert set(found) == {"bounded", "unbounded"}
    bounded, unbounded = found["bounded"], found["unbounded"]
    assert (bounded.max_threads, bounded.static_shared) == (128, 300 * 4)
    assert (unbounded.max_threads, unbounded.static_shared) == (None, 17 * 8)
    for r in (bounded, unbounded):
        assert 1 <= r.registers <= 255 and r.frame == 0


def test_a_non_elf_image_is_rejected():
    with pytest.raises(ValueError, match="ELF64"):
        kernel_resources(b"// PTX text, not a CUBIN")


@pytest.mark.parametrize("registers, threads, fits", [
    (64, 1024, True),      # 8 units of 256 a warp, 32 warps: exactly 65,536
    (65, 1024, False),     # rounds up to 72 a thread: 73,728
    (72, 896, True),       # 28 warps of 2,304: 64,512
    (255, 256, True),      # 8 warps of 8,192: 65,536
    (255, 257, False),     # a ninth (partial) warp
])
def test_register_file_of_a_block(registers, threads, fits):
    problem = KernelResources(registers, 0, 0, None).launch_problem(threads, 0)
    assert (problem is None) == fits
    if not fits:
        assert "registers" in problem


def test_launch_bounds_threads_and_shared_memory():
    r = KernelResources(registers=32, static_shared=40 * 1024, frame=0, max_threads=256)
    assert r.launch_problem(256, 8 * 1024) is None
    assert "__launch_bounds__" in r.launch_problem(512, 0)
    assert "shared memory" in r.launch_problem(256, 8 * 1024 + 1)
    assert "1024" in KernelResources(16, 0, 0, None).launch_problem(1025, 0)


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("program", O.PROGRAMS, ids=lambda p: p.filename)
def test_every_kernel_can_run_its_declared_block(arch, program):
    compiled = compile_once(arch, program)
    found = kernel_resources(compiled.image)
    assert set(compiled.lowered.values()) <= set(found)
    for expression, lowered in compiled.lowered.items():
        r = found[lowered]
        assert 1 <= r.registers <= 255, expression
        assert r.launch_problem(r.max_threads or 1, 0) is None, expression


@needs_nvrtc
def test_emulated_driver_refuses_what_a_gpu_would():
    declared = compile_declared("sm_90")
    driver = EmulatedDriver({v: k for k, v in declared.lowered.items()})
    driver.cuCtxSetCurrent(driver.cuDevicePrimaryCtxRetain(0)[1])
    _, module = driver.cuModuleLoadData(declared.image)
    _, bounded = driver.cuModuleGetFunction(module, declared.lowered["bounded"].encode())
    with pytest.raises(AssertionError, match="launch_bounds"):
        driver.cuLaunchKernel(bounded, 1, 1, 1, 256, 1, 1, 0, 0, 0, 0)
    _, unbounded = driver.cuModuleGetFunction(module, declared.lowered["unbounded"].encode())
    with pytest.raises(AssertionError, match="shared memory"):
        driver.cuLaunchKernel(unbounded, 1, 1, 1, 32, 1, 1, 48 * 1024, 0, 0, 0)
    assert driver.launches == []
