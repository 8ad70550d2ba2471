#!/usr/bin/env bash
# The cuda plugin's checks that need a GPU, for a machine that has one and no network (the
# device machine a session may be lent): its python3 must already hold numpy, ml_dtypes,
# cuda-bindings, the NVRTC wheel, pytest and a CUDA build of torch (the benchmark peer).
#
#   scripts/gpu_check.sh tests   # every cuda launch test and the conformance kit's cuda rows
#   scripts/gpu_check.sh bench   # the issue's speed targets: ops, GEMM, convolution vs torch
#   scripts/gpu_check.sh all     # both (about 10 minutes on an H100: split it if time is short)
#
# reftorch and the cuda plugin run from this checkout with the machine's own python3 (the one
# that holds torch; a venv made from it can lose its packages when python3 is itself a venv):
# the source trees go on PYTHONPATH, and the cuda plugin's entry point is declared by a
# hand-written dist-info on that path, what an editable install makes, with nothing built or
# fetched. Kernels are compiled ahead, in parallel, into the cache the tests then read
# (reftorch_cuda.precompile); GPU_CHECK_JOBS sets the processes (pytest-xdist workers too).
#
# Logs go to $OUT (or ./gpu_out).
set -uo pipefail
cd "$(dirname "$0")/.."
stage=${1:-all}
out=${OUT:-gpu_out}
mkdir -p "$out"
jobs=${GPU_CHECK_JOBS:-12}
meta=$(mktemp -d)
mkdir -p "$meta/reftorch_cuda-0+src.dist-info"
printf 'Metadata-Version: 2.1\nName: reftorch-cuda\nVersion: 0+src\n' \
    > "$meta/reftorch_cuda-0+src.dist-info/METADATA"
printf '[reftorch.plugins]\ncuda = reftorch_cuda:register\n' \
    > "$meta/reftorch_cuda-0+src.dist-info/entry_points.txt"
export PYTHONPATH="$PWD/reference:$PWD/plugins:$PWD/plugin_cuda:$meta${PYTHONPATH:+:$PYTHONPATH}"
py=${GPU_CHECK_PYTHON:-python3}
export REFTORCH_PLUGINS=all PYTHONUNBUFFERED=1
export REFTORCH_CACHE_DIR=${REFTORCH_CACHE_DIR:-/tmp/reftorch-cache}

{
    git rev-parse HEAD 2>/dev/null
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    "$py" -c "import reftorch, torch; print('reftorch cuda:', reftorch.cuda.is_available(),
reftorch.cuda.get_device_name(0), 'torch', torch.__version__, torch.cuda.is_available())"
} 2>&1 | tee "$out/machine.txt"

status=0
whole=$([ "$stage" = bench ] || echo --whole sm_90 --whole sm_80)
"$py" -m reftorch_cuda.precompile $whole --jobs "$jobs" 2>&1 | tee "$out/precompile.log" || status=1
if [ "$stage" = tests ] || [ "$stage" = all ]; then
    # -rs lists every skip with its reason: on a GPU none should say "no CUDA GPU".
    # pytest-xdist spreads the tests over processes when it is installed; a test that runs
    # past two minutes (a kernel that never ends) is stopped with every thread's stack.
    parallel=$("$py" -c 'import xdist, pytest_timeout' 2>/dev/null &&
               echo "-n $jobs --timeout 120 --timeout-method thread")
    "$py" -m pytest -q -rs -p no:cacheprovider -W ignore $parallel \
        spec_tests/test_plugin_cuda*.py spec_tests/test_plugin_conformance.py \
        spec_tests/test_plugin_layouts.py \
        2>&1 | tee "$out/tests.log" || status=1
fi
if [ "$stage" = bench ] || [ "$stage" = all ]; then
    for bench in bench/bench_plugin_cuda_ops.py bench/bench_plugin_cuda_gemm.py \
                 bench/bench_plugin_cuda_conv.py; do
        (cd bench && "$py" "$(basename "$bench")") 2>&1 | tee -a "$out/bench.log" || status=1
    done
fi
exit $status
