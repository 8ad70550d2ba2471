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
    gemm         mm, bmm, addmm, convolution          _gemm     (src/gemm.c)
    pooling      max/avg pooling, batch/group norm    _pool     (src/pool.c)
    sorting      sort, argsort, topk                  _sort     (src/sort.c)
    random       mt19937 streams: rand, randn, ...    _random   (src/random.c)
"""
import importlib
import os


# Spins of libgomp's idle threads before they sleep (see _load_openmp_briefly_spinning).
SPIN_COUNT = "1000"


def _load_openmp_briefly_spinning():
    """Load the C extensions' OpenMP runtime (libgomp, which reads its settings when it
    loads) with idle threads that spin only briefly, then sleep, unless the user chose a wait
    policy or spin count.

    libgomp's default spins for milliseconds after each parallel region: in a training step
    our kernels alternate with NumPy's OpenBLAS (its own thread pool) and often PyTorch in the
    same process, and spinning threads take the cores those pools need (2-core x86-64, MLP
    784-512-512-10 training step, batch 256: 145 ms spinning, 18 ms sleeping). Threads that
    sleep at once, though, must be woken for every region, which costs 7-30 us in a VM
    (measured on this 2-core one, where an empty region between busy ones costs ~1.5 us):
    float32 sum of 64 Ki elements took 14 us on 2 threads and 4 us on one. GOMP_SPINCOUNT=1000
    keeps a thread spinning about 20-50 us: long enough to catch the next kernel of a step,
    short enough to hand the core back. Ours alone, sleeping vs this, the best of 3-4 runs
    in each of two alternating series: MLP step 9.1-9.6 vs 7.2-8.9 ms, LeNet step 9.6-11.1
    vs 8.2-9.9 ms, cross_entropy forward+backward (256, 1000) 479-582 vs 417-452 us, exp of
    64 Ki elements 40-53 vs 30-32 us; 4M-element reductions unchanged.
    The setting applies only while our extension loads libgomp: the environment is restored
    (and a libgomp some other library loaded earlier keeps its own settings)."""
    chosen = "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ
    if not chosen:
        os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
    try:
        importlib.import_module(f"{__name__}._C")
    finally:
        if not chosen:
            del os.environ["GOMP_SPINCOUNT"]


_load_openmp_briefly_spinning()

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
          "sorting", "random")


def register(registrar):
    """Plugin entry point: register every group's kernels with reftorch."""
    # Imported here, not above: reftorch calls this while `import reftorch` is still running.
    for group in GROUPS:
        importlib.import_module(f"{__name__}.{group}").register(registrar)


# Importing this package first must still load the plugin: import reftorch now that
# `register` exists (importing it loads the installed plugins, this one included).
import reftorch  # noqa: E402,F401
