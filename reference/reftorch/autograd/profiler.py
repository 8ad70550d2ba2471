"""torch.autograd.profiler: per-op CPU timings, their averages, and Chrome trace export.

While a `profile` block is active, every dispatched op is timed: the profiler wraps the
dispatcher's `call` (the one place every kernel call goes through) for the duration of the
block, so each event has a real start time and duration. `record_function` adds user events.
"""
from __future__ import annotations

import json
import os
import threading
import time
from collections import OrderedDict

from .. import _dispatch

__all__ = ["profile", "record_function", "emit_nvtx", "FunctionEvent", "FunctionEventAvg",
           "EventList"]

_active = []          # the profile objects currently recording (innermost last)
_original_call = None


def _now_us():
    return time.perf_counter_ns() / 1000.0


def _shapes(inputs):
    return [list(t._shape) if hasattr(t, "_shape") else [] for t in inputs]


def _timed_call(op, out, inputs, dtypes, params, device_type, numel=None):
    """The dispatcher's `call`, timed, while a profile block is active."""
    start = _now_us()
    result = _original_call(op, out, inputs, dtypes, params, device_type, numel)
    end = _now_us()
    for prof in _active:
        prof._add(op.name, start, end, inputs)
    return result


def _install(prof):
    global _original_call
    if not _active:
        _original_call = _dispatch.call
        _dispatch.call = _timed_call
    _active.append(prof)


def _uninstall(prof):
    global _original_call
    _active.remove(prof)
    if not _active:
        _dispatch.call = _original_call
        _original_call = None


class FunctionEvent:
    """One timed op or user range."""

    def __init__(self, id, name, thread, start_us, end_us, input_shapes=None):
        self.id, self.name, self.thread = id, name, thread
        self.time_range_start, self.time_range_end = start_us, end_us
        self.input_shapes = input_shapes or []
        self.cpu_children = []
        self.device_type = "CPU"

    @property
    def key(self):
        return self.name

    @property
    def cpu_time_total(self):
        return self.time_range_end - self.time_range_start

    @property
    def cpu_time(self):
        return self.cpu_time_total

    @property
    def self_cpu_time_total(self):
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    cuda_time_total = device_time_total = 0.0

    def __repr__(self):
        return (f"<FunctionEvent id={self.id} name={self.name} "
                f"cpu_time={_format_us(self.cpu_time_total)} input_shapes={self.input_shapes}>")


class FunctionEventAvg:
    """Totals of the events sharing one key (name, and input shapes when grouped by them)."""

    def __init__(self, key, input_shapes=None):
        self.key, self.input_shapes = key, input_shapes
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.cuda_time_total = self.device_time_total = 0.0

    def add(self, event):
        self.count += 1
        self.cpu_time_total += event.cpu_time_total
        self.self_cpu_time_total += event.self_cpu_time_total
        return self

    @property
    def cpu_time(self):
        return self.cpu_time_total / self.count if self.count else 0.0

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} count={self.count} "
                f"cpu_time_total={_format_us(self.cpu_time_total)}>")


_SORT_KEYS = ("cpu_time", "cpu_time_total", "self_cpu_time_total", "count", "cuda_time",
              "cuda_time_total", "self_cuda_time_total", "device_time_total")


class EventList(list):
    """A list of events (or averages) that prints as a table."""

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75, max_name_column_width=55,
              max_shapes_column_width=80, header=None, top_level_events_only=False):
        rows = list(self)
        if sort_by is not None:
            if sort_by not in _SORT_KEYS:
                raise AttributeError(f"'{type(rows[0]).__name__ if rows else 'event'}' object "
                                     f"has no attribute '{sort_by}'")
            rows.sort(key=lambda e: getattr(e, sort_by, 0.0), reverse=True)
        if row_limit is not None and row_limit >= 0:
            rows = rows[:row_limit]
        total = sum(e.self_cpu_time_total for e in self) or 1.0
        has_shapes = any(getattr(e, "input_shapes", None) for e in rows)
        width = max([len("Name")] + [len(e.key) for e in rows])
        width = min(width, max_name_column_width)
        columns = ["Name".ljust(width), "Self CPU %".rjust(12), "Self CPU".rjust(12),
                   "CPU total %".rjust(12), "CPU total".rjust(12), "CPU time avg".rjust(12),
                   "# of Calls".rjust(12)]
        if has_shapes:
            columns.append("  Input Shapes")
        line = "-" * len("  ".join(columns))
        out = [line, "  ".join(columns), line]
        if header:
            out.insert(0, header)
        for e in rows:
            cells = [e.key[:width].ljust(width),
                     f"{100.0 * e.self_cpu_time_total / total:.2f}%".rjust(12),
                     _format_us(e.self_cpu_time_total).rjust(12),
                     f"{100.0 * e.cpu_time_total / total:.2f}%".rjust(12),
                     _format_us(e.cpu_time_total).rjust(12),
                     _format_us(e.cpu_time).rjust(12),
                     str(getattr(e, "count", 1)).rjust(12)]
            if has_shapes:
                cells.append("  " + str(e.input_shapes)[:max_shapes_column_width])
            out.append("  ".join(cells))
        out.append(line)
        out.append(f"Self CPU time total: {_format_us(sum(e.self_cpu_time_total for e in self))}")
        return "\n".join(out) + "\n"

    def __str__(self):
        return self.table()

    @property
    def self_cpu_time_total(self):
        return sum(e.self_cpu_time_total for e in self)


def _format_us(us):
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


class profile:
    """Context manager recording every op run inside it (CPU time; no device timings)."""

    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False,
                 with_flops=False, profile_memory=False, with_stack=False, with_modules=False,
                 use_kineto=True, use_cpu=True, experimental_config=None, acc_events=False,
                 custom_trace_id_callback=None):
        self.enabled = enabled
        self.record_shapes = record_shapes
        self.use_cuda = use_cuda
        self.entered = False
        self._events = []
        self._open_ranges = []
        self._ids = 0
        self._lock = threading.Lock()

    def __enter__(self):
        if not self.enabled:
            return self
        if self.entered:
            raise RuntimeError("Profiler context manager is not reentrant")
        self.entered = True
        self._events = []
        _install(self)
        return self

    def __exit__(self, *exc):
        if self.enabled and self.entered:
            _uninstall(self)
            self._nest()
        return False

    def _add(self, name, start, end, inputs):
        with self._lock:
            self._ids += 1
            shapes = _shapes(inputs) if self.record_shapes else []
            self._events.append(FunctionEvent(self._ids, name, threading.get_ident(), start,
                                              end, shapes))

    def _nest(self):
        """Make each event a child of the innermost range that encloses it (for self time)."""
        ordered = sorted(self._events, key=lambda e: (e.time_range_start, -e.time_range_end))
        stack = []
        for event in ordered:
            while stack and stack[-1].time_range_end <= event.time_range_start:
                stack.pop()
            if stack and event.time_range_end <= stack[-1].time_range_end:
                stack[-1].cpu_children.append(event)
            stack.append(event)

    def _check_finished(self):
        if self.enabled and _active and self in _active:
            raise RuntimeError("Profiler didn't finish running")

    def events(self):
        self._check_finished()
        return EventList(sorted(self._events, key=lambda e: e.time_range_start))

    @property
    def function_events(self):
        return self.events()

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        self._check_finished()
        groups = OrderedDict()
        for event in self.events():
            shapes = str(event.input_shapes) if group_by_input_shape else None
            key = (event.name, shapes)
            if key not in groups:
                groups[key] = FunctionEventAvg(event.name,
                                               event.input_shapes if shapes else None)
            groups[key].add(event)
        return EventList(groups.values())

    def table(self, sort_by=None, row_limit=100, **kwargs):
        return self.key_averages().table(sort_by=sort_by, row_limit=row_limit, **kwargs)

    @property
    def self_cpu_time_total(self):
        return sum(e.self_cpu_time_total for e in self.events())

    def total_average(self):
        total = FunctionEventAvg("Total")
        for e in self.events():
            total.add(e)
        return total

    def export_chrome_trace(self, path):
        """Write the events as Chrome trace JSON (chrome://tracing, Perfetto)."""
        pid = os.getpid()
        trace = {"traceEvents": [
            {"name": e.name, "ph": "X", "cat": "cpu_op", "ts": e.time_range_start,
             "dur": e.cpu_time_total, "pid": pid, "tid": e.thread,
             "args": {"Input Dims": e.input_shapes} if e.input_shapes else {}}
            for e in self.events()]}
        with open(path, "w") as f:
            json.dump(trace, f)

    def __str__(self):
        return self.table()


class record_function:
    """A named user range: shows up as its own event in an active profile."""

    def __init__(self, name, args=None):
        self.name = name
        self.args = args

    def __enter__(self):
        self._start = _now_us()
        return self

    def __exit__(self, *exc):
        end = _now_us()
        for prof in _active:
            prof._add(self.name, self._start, end, ())
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with record_function(self.name, self.args):
                return fn(*args, **kwargs)
        return wrapper


class emit_nvtx:
    """NVTX ranges for nvprof: reftorch has no CUDA timeline, so this records nothing."""

    def __init__(self, enabled=True, record_shapes=False):
        self.enabled = enabled

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class emit_itt(emit_nvtx):
    """Intel ITT ranges: a no-op in reftorch, like emit_nvtx."""
