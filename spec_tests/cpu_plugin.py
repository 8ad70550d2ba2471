"""What every test module of the C plugin (test_plugin_cpu*.py) shares: the fixture that makes
sure its kernels are registered."""
from __future__ import annotations

import pytest

import reftorch


@pytest.fixture(scope="module", autouse=True)
def plugin_loaded():
    """The plugin's kernels are registered for the module's tests (loaded by hand, and
    unloaded afterwards, when REFTORCH_PLUGINS left it out). A module imports this name to
    use it."""
    import reftorch_cpu
    loaded_here = "cpu" not in reftorch.plugins.loaded()
    if loaded_here:
        assert reftorch.plugins.load("cpu", reftorch_cpu.register) is not None
    yield
    if loaded_here:
        reftorch.plugins.unload("cpu")
