"""`spawn` / `start_processes`: run `fn(i, *args)` in `nprocs` processes and report failures.

A child that raises writes its formatted traceback to a temporary file and exits with code 1;
the parent's `ProcessContext.join` then terminates the other children and raises
`ProcessRaisedException` carrying that text. A child that dies from a signal or exits with a
non-zero code gives `ProcessExitedException`.
"""
from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import tempfile
import time
import traceback
import warnings


class ProcessException(Exception):
    def __init__(self, msg, error_index, error_pid):
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.pid = error_pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid)


class ProcessRaisedException(ProcessException):
    """A child process raised an exception; the message contains its traceback."""


class ProcessExitedException(ProcessException):
    """A child process exited with a non-zero code or was killed by a signal."""

    def __init__(self, msg, error_index, error_pid, exit_code, signal_name=None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code = exit_code
        self.signal_name = signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid, self.exit_code,
                            self.signal_name)


def _wrap(fn, i, args, error_file):
    """The child's entry point: call fn and record an exception's traceback for the parent."""
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass            # the parent asked the children to stop
    except Exception:
        with open(error_file, "wb") as f:
            pickle.dump(traceback.format_exc(), f)
        sys.exit(1)


class ProcessContext:
    def __init__(self, processes, error_files):
        self.error_files = error_files
        self.processes = processes
        self.sentinels = {process.sentinel: index for index, process in enumerate(processes)}

    def pids(self):
        return [int(process.pid) for process in self.processes]

    def join(self, timeout=None, grace_period=None):
        """Wait for the children; True once all exited successfully, False on timeout.

        On the first failure the remaining children are terminated and the failure is raised.
        """
        if not self.sentinels:
            return True
        ready = multiprocessing.connection.wait(self.sentinels.keys(), timeout=timeout)
        error_index = None
        for sentinel in ready:
            index = self.sentinels.pop(sentinel)
            process = self.processes[index]
            process.join()
            if process.exitcode != 0:
                error_index = index
                break
        if error_index is None:
            return not self.sentinels

        self._stop_others(grace_period)
        failed = self.processes[error_index]
        if not os.path.exists(self.error_files[error_index]) or \
                os.path.getsize(self.error_files[error_index]) == 0:
            exitcode = failed.exitcode
            if exitcode < 0:
                name = signal.Signals(-exitcode).name
                raise ProcessExitedException(
                    f"process {error_index} terminated with signal {name}", error_index,
                    failed.pid, exitcode, name)
            raise ProcessExitedException(
                f"process {error_index} terminated with exit code {exitcode}", error_index,
                failed.pid, exitcode)
        with open(self.error_files[error_index], "rb") as f:
            original_trace = pickle.load(f)
        msg = f"\n\n-- Process {error_index} terminated with the following error:\n"
        raise ProcessRaisedException(msg + original_trace, error_index, failed.pid)

    def _stop_others(self, grace_period):
        alive = [p for p in self.processes if p.is_alive()]
        for process in alive:
            process.terminate()
        deadline = time.monotonic() + (grace_period or 0)
        for process in alive:
            process.join(max(deadline - time.monotonic(), 0) if grace_period else None)
            if process.is_alive():
                process.kill()
                process.join()

    def __del__(self):
        for path in getattr(self, "error_files", ()):
            try:
                os.unlink(path)
            except OSError:
                pass


class SpawnContext(ProcessContext):
    """What `spawn(..., join=False)` returns (an alias of ProcessContext)."""


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    context = multiprocessing.get_context(start_method)
    error_files, processes = [], []
    for i in range(nprocs):
        fd, error_file = tempfile.mkstemp(prefix="reftorch_spawn_error_")
        os.close(fd)
        os.unlink(error_file)          # the child creates it only when it fails
        process = context.Process(target=_wrap, args=(fn, i, args, error_file), daemon=daemon)
        process.start()
        error_files.append(error_file)
        processes.append(process)
    process_context = ProcessContext(processes, error_files)
    if not join:
        return process_context
    while not process_context.join():
        pass
    return None


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Spawn `nprocs` processes running `fn(i, *args)` (i = process index).

    With join=True waits for all of them and re-raises a child's failure; with join=False
    returns the `ProcessContext` to join later.
    """
    if start_method != "spawn":
        warnings.warn(
            f"This method only supports start_method=spawn (got: {start_method}).\n"
            f"To use a different start_method use:\n\t\t "
            f"torch.multiprocessing.start_processes(...)", FutureWarning, stacklevel=2)
    return start_processes(fn, args, nprocs, join, daemon, start_method)
