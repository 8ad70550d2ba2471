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
    gemm         mm, bmm, addmm, convolution          _gemm     (src/gemm.c)
    pooling      max/avg pooling, batch/group norm    _pool     (src/pool.c)
    sorting      sort, argsort, topk                  _sort     (src/sort.c)
    random       mt19937 streams: rand, randn, ...    _random   (src/random.c)
"""
import importlib

GROUPS = ("kernels", "unary", "reductions", "nn_rows", "indexing", "gemm", "pooling", "sorting",
          "random")


def register(registrar):
    """Plugin entry point: register every group's kernels with reftorch."""
    # Imported here, not above: reftorch calls this while `import reftorch` is still running.
    for group in GROUPS:
        importlib.import_module(f"{__name__}.{group}").register(registrar)


# Importing this package first must still load the plugin: import reftorch now that
# `register` exists (importing it loads the installed plugins, this one included).
import reftorch  # noqa: E402,F401
