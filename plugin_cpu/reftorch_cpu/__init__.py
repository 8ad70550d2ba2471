"""reftorch_cpu: C kernels (OpenMP, AVX2/AVX-512 dispatch) for reftorch on cpu. See the
README for what runs where.

`register` is the plugin's entry point (group `reftorch.plugins`, name `cpu`); reftorch calls
it when it is imported. Each kernel group is a Python module here (argument checks, loop
geometry, declining what it does not handle) over its own C extension module:

    kernels      add, sub, mul, div, copy_            _C        (src/kernels.c)
    unary        unary math and activations           _unary    (src/unary.c)
    reductions   sum, mean, max, ... along dims       _reduce   (src/reduce.c)
    nn_rows      softmax, log_softmax, norms, losses  _nn_rows  (src/nn_rows.c)
    indexing     gather/scatter/index ops, embedding  _index    (src/index.c)
    masked       masked_fill/select/scatter           _masked   (src/masked.c)
    gemm         mm, bmm, addmm, convolution          _gemm     (src/gemm.c),
                                                      _depthwise (src/depthwise.c)
    pooling      max/avg pooling, batch/group norm    _pool     (src/pool.c)
    sorting      sort, argsort, topk                  _sort     (src/sort.c)
    padding      constant / reflect / replicate pads   _gather   (src/gather.c)
    upsampling   nearest and (bi/tri)linear, bicubic  _gather   (src/gather.c)
    random       mt19937 streams: rand, randn, ...    _random   (src/random.c)
"""
import importlib
import os


# Spins of libgomp's idle threads before they sleep (see _load_openmp_briefly_spinning).
SPIN_COUNT = "30000"


def _load_openmp_briefly_spinning():
    """Load the C extensions' OpenMP runtime (libgomp, which reads its settings when it
    loads) with idle threads that spin about half a millisecond, then sleep, unless the user
    chose a wait policy or spin count.

    Between two kernels of a training step runs Python: tens to hundreds of microseconds.
    A worker that has gone to sleep by then must be woken for the next parallel region, and
    in a VM its idle virtual CPU halts: waking it costs tens of microseconds, and the busy
    one ran our Python slower while the other was halted (2-core x86-64 VM, no torch in the
    process, cross_entropy forward+backward on (256, 1000) float32: C kernels 53 + 3 + 16 +
    42 us and 129 us of Python with the worker spinning; 2x the kernels' time and 185-290 us
    of Python with it asleep).
    libgomp's own default, 300000 spins (3.6 ms here, about 13 ns a spin), is what PyTorch
    runs with; but NumPy's OpenBLAS pool, and PyTorch's libgomp when it is loaded too, share
    the cores, and a thread spinning for milliseconds takes a core they need. 30000 spins
    (0.46 ms here) cover the gaps of a step and hand the core back soon after. Measured in
    processes without torch, best of 5 blocks, two alternating series:
        spins              1000 (0.025 ms)   30000 (0.46 ms)   100000 (1.3 ms)
        MLP step           5.9-6.2 ms        4.6-4.7 ms        4.8 ms
        LeNet step         5.3 ms            4.6 ms            4.4-4.6 ms
        cross_entropy      470-480 us        237-239 us        240-242 us
    (the MLP 784-512-512-10 step at batch 256 and the LeNet step at batch 64 of bench/
    bench_nn_mlp.py, the cross_entropy step of bench/bench_plugin_loss.py at (256, 1000)).
    The setting applies only while our extension loads libgomp: the environment is restored
    (and a libgomp some other library loaded earlier keeps its own settings)."""
    chosen = "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ
    if not chosen:
        os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
    try:
        return importlib.import_module(f"{__name__}._C")
    finally:
        if not chosen:
            del os.environ["GOMP_SPINCOUNT"]


_C = _load_openmp_briefly_spinning()

# glibc's mallopt parameters, and the values set below.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD = 32 << 20       # glibc's largest: smaller blocks come from the heap
_TRIM_THRESHOLD = 128 << 20      # free heap kept at the top before it goes back to the OS


def _keep_freed_memory():
    """Let the C library's malloc keep freed blocks for reuse, unless the user tuned it.

    Every op's result is a new NumPy array; a training step frees and allocates the same
    megabyte-sized buffers each time. glibc serves such sizes by mmap and hands freed heap
    above 2x its mmap threshold back to the system, so each step writes into fresh pages, and
    the first touch of every 4 KiB page faults (costly in a VM, and serialized between the
    OpenMP threads). Measured on a 2-core x86-64 VM, cross_entropy forward+backward on
    (256, 1000) float32 logits: log_softmax 840 -> 202 us, nll_loss_backward 440 -> 68 us,
    its backward 1016 -> 194 us, the whole step 1307 -> 936 us. The cost: up to
    _TRIM_THRESHOLD bytes of freed memory stay in the process. glibc only; a user's own
    MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ (or REFTORCH_CPU_MALLOC=default) wins."""
    if os.environ.get("REFTORCH_CPU_MALLOC") == "default" or \
            "MALLOC_MMAP_THRESHOLD_" in os.environ or "MALLOC_TRIM_THRESHOLD_" in os.environ:
        return
    try:
        import ctypes
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):     # not glibc (musl, macOS, Windows): nothing to do
        return
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)
    mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)


_keep_freed_memory()

GROUPS = ("kernels", "unary", "reductions", "nn_rows", "indexing", "masked", "gemm", "pooling",
          "sorting", "padding", "upsampling", "random", "bags", "distance")


def register(registrar):
    """Plugin entry point: register every group's kernels with reftorch."""
    # Every C module shares _C's thread setting (src/common.h), which follows reftorch's.
    registrar.on_set_num_threads(_C.set_num_threads)
    # Imported here, not above: reftorch calls this while `import reftorch` is still running.
    for group in GROUPS:
        importlib.import_module(f"{__name__}.{group}").register(registrar)


# Importing this package first must still load the plugin: import reftorch now that
# `register` exists (importing it loads the installed plugins, this one included).
import reftorch  # noqa: E402,F401
