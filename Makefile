# reftorch: `make demo` and `make test` set everything up from a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
PYTEST_ARGS ?=

CPU_PLUGIN_SOURCES := $(shell find plugin_cpu -name '*.c' -o -name '*.h' -o -name '*.py' -o -name '*.toml' 2>/dev/null)

.PHONY: demo test install test-deps bench coverage clean

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

clean:
	rm -rf $(VENV) build plugin_cpu/build *.egg-info */*.egg-info
