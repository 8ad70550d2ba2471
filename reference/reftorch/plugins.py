"""reftorch.plugins: find, load and inspect kernel plugins.

A plugin is a distribution with an entry point in the group `reftorch.plugins` whose value is
a callable `register(registrar)`. It calls `registrar.kernel(op, device_type, dtypes, fn)` for
each kernel and `registrar.backend(DeviceBackend)` to add a device type; a plugin with its
own thread pool calls `registrar.on_set_num_threads(fn)` to follow `set_num_threads`.
Plugins load when reftorch is imported; `REFTORCH_PLUGINS` chooses which: `none`, `all` (the
default), or a comma-separated list of entry-point names such as `cpu,cuda`.

A kernel may decline a call (return NotImplemented) and the next kernel, finally the
reference, runs it. A kernel that declines calls below some size because its overhead would
cost more than it saves there compares the size with `size_threshold(n)` (or registers with
`min_numel=n`), so that `all_sizes()` — what the conformance kit runs under — can turn the
threshold off and test the kernel on small samples too.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from importlib import metadata

from . import _dispatch, _threads
from ._storage import register_backend

ENTRY_POINT_GROUP = "reftorch.plugins"
use_reference_kernels = _dispatch.use_reference_kernels
all_sizes = _dispatch.all_sizes
size_threshold = _dispatch.size_threshold
add_hook = _dispatch.add_hook


@dataclass
class PluginInfo:
    """What one loaded plugin registered."""
    name: str
    module: str
    kernels: list = field(default_factory=list)     # (op, device type, dtype) triples
    device_types: list = field(default_factory=list)
    thread_listeners: list = field(default_factory=list)


class Registrar:
    """Handed to a plugin's `register` callable; records what the plugin registers."""

    def __init__(self, info):
        self._info = info

    @property
    def name(self):
        return self._info.name

    def kernel(self, op_name, device_type, dtypes, fn, min_numel=0):
        _dispatch.register_kernel(op_name, device_type, dtypes, fn, plugin=self._info.name,
                                  min_numel=min_numel)
        self._info.kernels.extend((op_name, device_type, d) for d in dtypes)

    def backend(self, backend):
        register_backend(backend)
        self._info.device_types.append(backend.type_name)

    def on_set_num_threads(self, fn):
        """Call fn(n) whenever `reftorch.set_num_threads(n)` runs, and now if a count was
        already set: a plugin with its own thread pool follows reftorch's setting."""
        self._info.thread_listeners.append(fn)
        _threads.follow(fn)


_loaded = {}
_failed = {}


def loaded():
    """The plugins loaded in this process, by name."""
    return dict(_loaded)


def failed():
    """Plugins that failed to load, by name, with the error message."""
    return dict(_failed)


def load(name, register):
    """Load one plugin from its `register` callable (entry points call this too)."""
    info = PluginInfo(name=name, module=getattr(register, "__module__", "?"))
    try:
        register(Registrar(info))
    except Exception as exc:  # a broken plugin must never break `import reftorch`
        _dispatch.unregister_plugin(name)
        _forget_thread_listeners(info)
        _failed[name] = f"{type(exc).__name__}: {exc}"
        warnings.warn(f"reftorch plugin '{name}' failed to load: {type(exc).__name__}: {exc}",
                      RuntimeWarning, stacklevel=2)
        return None
    _loaded[name] = info
    return info


def unload(name):
    """Remove a plugin's kernels and thread listeners (its device types stay registered)."""
    _dispatch.unregister_plugin(name)
    info = _loaded.pop(name, None)
    if info is not None:
        _forget_thread_listeners(info)


def _forget_thread_listeners(info):
    for fn in info.thread_listeners:
        _threads.unfollow(fn)
    info.thread_listeners.clear()


def _selected(names):
    choice = os.environ.get("REFTORCH_PLUGINS", "all").strip().lower()
    if choice in ("", "all"):
        return names
    if choice == "none":
        return []
    wanted = [n.strip() for n in choice.split(",") if n.strip()]
    return [n for n in names if n in wanted]


def load_entry_points():
    """Load the plugins installed for this environment, as REFTORCH_PLUGINS selects."""
    points = {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}
    for name in _selected(sorted(points)):
        if name in _loaded:
            continue
        try:
            register = points[name].load()
        except Exception as exc:
            _failed[name] = f"{type(exc).__name__}: {exc}"
            warnings.warn(f"reftorch plugin '{name}' failed to load: {type(exc).__name__}: "
                          f"{exc}", RuntimeWarning, stacklevel=2)
            continue
        load(name, register)


def serving(op_name, device_type, dtype):
    """Which kernel serves (op, device type, dtype) first: a plugin name, 'reference', or
    'fallback' (copied to cpu and run on the reference)."""
    return _dispatch.get_op(op_name).serving(device_type, dtype)


def kernels(op_name):
    """Every plugin kernel registered for an op: {(device type, dtype): [plugin names]}."""
    op = _dispatch.get_op(op_name)
    return {key: [entry[0] for entry in entries] for key, entries in op.kernels.items()}


fallbacks = _dispatch.fallback_counts
reset_fallbacks = _dispatch.reset_fallback_counts
