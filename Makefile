# reftorch: `make demo` and `make test` set everything up from a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
PYTEST_ARGS ?=

CPU_PLUGIN_SOURCES := $(shell find plugin_cpu -name '*.c' -o -name '*.h' -o -name '*.py' -o -name '*.toml' 2>/dev/null)

.PHONY: demo test install test-deps bench coverage sanitize clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip setuptools wheel

# reftorch and the CUDA plugin are pure Python (editable); the C plugin is built.
$(VENV)/.installed: $(BIN)/python pyproject.toml plugin_cuda/pyproject.toml $(CPU_PLUGIN_SOURCES)
	$(PIP) install -q -e . -e ./plugin_cuda
	$(PIP) install -q --no-build-isolation ./plugin_cpu
	touch $@

install: $(VENV)/.installed

$(VENV)/.test-deps: $(BIN)/python requirements-test.txt
	$(PIP) install -q -r requirements-test.txt
	touch $@

test-deps: $(VENV)/.test-deps

demo: install
	$(BIN)/python examples/demo.py

test: install test-deps
	$(BIN)/python -m pytest spec_tests $(PYTEST_ARGS)

bench: install test-deps
	$(BIN)/python -m pytest bench/bench_*.py --benchmark-only -q
	$(BIN)/python bench/report.py

# The C plugin built with AddressSanitizer and UBSan (a copy under build/, so the installed
# plugin is untouched), then its tests and the plugin cross-check run against it. Only the
# cpu plugin loads: the cuda one has no C of ours, and under the preloaded ASan runtime NVRTC
# fails to open its builtins library, so its emulated cases could not compile.
SANITIZE_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
sanitize: install test-deps
	rm -rf build/sanitize && mkdir -p build/sanitize && cp -r plugin_cpu build/sanitize/
	rm -rf build/sanitize/plugin_cpu/build build/sanitize/plugin_cpu/reftorch_cpu/*.so
	cd build/sanitize/plugin_cpu && REFTORCH_CPU_CFLAGS="$(SANITIZE_FLAGS)" \
		../../../$(BIN)/python setup.py -q build_ext --inplace
	REFTORCH_PLUGINS=cpu LD_PRELOAD=$$(gcc -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0 \
		PYTHONPATH=build/sanitize/plugin_cpu $(BIN)/python -m pytest -q -p no:cacheprovider \
		spec_tests/test_plugin_conformance.py spec_tests/test_plugin_layouts.py \
		$(wildcard spec_tests/test_plugin_cpu*.py)

clean:
	rm -rf $(VENV) build plugin_cpu/build *.egg-info */*.egg-info
