"""Run-time compilation of the plugin's CUDA C++ with NVRTC, behind a two-level cache.

`compile(source, name, arch=...)` is the one way kernels get compiled. It

  * checks every NVRTC status and raises `CompileError` (with the log, source name, options
    and a line-numbered listing of the source) on any failure;
  * compiles for one explicit architecture: `sm_XY` gives a CUBIN, `compute_XY` gives PTX;
  * instantiates C++ templates through name expressions (`nvrtcAddNameExpression`), and
    returns the lowered (mangled) name of each, so one template yields every dtype's kernel;
  * caches results in memory, keyed by (source, source name, options, arch, name
    expressions), and on disk, keyed by a sha256 of those plus the NVRTC and plugin versions.
    A request for one name expression (how a kernel's first launch compiles: just the
    instantiation it needs, see `Program.compile_expression`) is also served from memory by
    any earlier compile of the same source, options and arch that instantiated it.

Disk entries live in `$REFTORCH_CACHE_DIR/cuda` (or `$XDG_CACHE_HOME/reftorch/cuda`, or
`~/.cache/reftorch/cuda`). Each is written to a temporary file and moved into place with
`os.replace`, so readers never see half an entry, and each carries a sha256 of its contents,
checked on load: an entry that fails the check is deleted and compiled again, never used.

Every option is part of both keys. The defaults ask for IEEE arithmetic (no flush to zero, no
fused multiply-add, correctly rounded division and square root) so results match the NumPy
reference bit for bit; a caller who wants fast math passes the options and gets its own
cache entries.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

from ._version import __version__

DEFAULT_OPTIONS = ("-std=c++17", "--ftz=false", "--fmad=false", "--prec-div=true",
                   "--prec-sqrt=true")
_ARCH = re.compile(r"^(sm|compute)_(\d+)([af]?)$")
_FORMAT = 1                                # bump when the entry layout changes
_MAGIC = b"reftorch-cuda-cache\n"


class CompileError(RuntimeError):
    """NVRTC failed. Carries what is needed to see why: the log, the source name, the options
    and the source itself (`numbered_source()` gives it with line numbers)."""

    def __init__(self, message, *, log="", name="", options=(), source="", status=None):
        self.message = message
        self.log = log
        self.name = name
        self.options = tuple(options)
        self.source = source
        self.status = status
        super().__init__(self._describe())

    def numbered_source(self, lines=None):
        """The source with 1-based line numbers; `lines` picks a subset (iterable of ints)."""
        text = self.source.splitlines()
        width = len(str(len(text)))
        wanted = range(1, len(text) + 1) if lines is None else sorted(set(lines))
        return "\n".join(f"{n:>{width}} | {text[n - 1]}" for n in wanted if 1 <= n <= len(text))

    def error_lines(self):
        """The source lines the log points at (`name(LINE): error ...`)."""
        pattern = re.compile(re.escape(self.name) + r"\((\d+)\)") if self.name else None
        return sorted({int(m) for m in pattern.findall(self.log)}) if pattern else []

    def _describe(self):
        parts = [f"{self.message}\n  source: {self.name}\n  options: {' '.join(self.options)}"]
        if self.log.strip():
            parts.append("NVRTC log:\n" + self.log.rstrip())
        if self.source:
            near = {n + d for n in self.error_lines() for d in range(-3, 4)}
            listing = self.numbered_source(near or None)
            parts.append(("source near the errors:\n" if near else "source:\n") + listing)
        return "\n".join(parts)


@dataclass(frozen=True)
class CompiledProgram:
    """One compiled program: its image (CUBIN or PTX) and the lowered kernel names."""
    name: str
    arch: str
    options: tuple
    kind: str                  # "cubin" or "ptx"
    image: bytes
    lowered: dict              # name expression -> lowered name
    log: str
    key: str                   # the disk-cache key (sha256 hex)
    origin: str                # "nvrtc", "disk" or "memory" (how this call got it)
    seconds: float = 0.0       # NVRTC time when origin is "nvrtc"

    def lowered_name(self, name_expression):
        try:
            return self.lowered[name_expression]
        except KeyError:
            raise KeyError(f"{self.name} was not compiled with name expression "
                           f"{name_expression!r}") from None


# --- NVRTC ------------------------------------------------------------------------------------

def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise CompileError(f"NVRTC is not available: cuda-bindings cannot be imported ({exc})"
                           ) from exc
    return nvrtc


def nvrtc_version():
    """(major, minor) of the NVRTC library in use."""
    nvrtc = _nvrtc()
    err, major, minor = nvrtc.nvrtcVersion()
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise CompileError(f"nvrtcVersion failed: {_status_name(err)}", status=err)
    return major, minor


def supported_archs():
    """The sm_XY numbers this NVRTC can compile for, e.g. [75, 80, 86, 89, 90, ...]."""
    nvrtc = _nvrtc()
    err, archs = nvrtc.nvrtcGetSupportedArchs()
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise CompileError(f"nvrtcGetSupportedArchs failed: {_status_name(err)}", status=err)
    return list(archs)


def _status_name(err):
    nvrtc = _nvrtc()
    try:
        status, text = nvrtc.nvrtcGetErrorString(err)
        if status == nvrtc.nvrtcResult.NVRTC_SUCCESS and text:
            return text.decode(errors="replace")
    except Exception:  # an unknown status value: fall back to its repr
        pass
    return repr(err)


def _run_nvrtc(source, name, options, name_expressions, kind):
    """Compile once with NVRTC; every call's status is checked. Returns (image, lowered, log)."""
    nvrtc = _nvrtc()
    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS

    def fail(what, err, log=""):
        raise CompileError(f"{what} failed: {_status_name(err)}", log=log, name=name,
                           options=options, source=source, status=err)

    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    if err != ok:
        fail("nvrtcCreateProgram", err)
    try:
        for expression in name_expressions:
            (err,) = nvrtc.nvrtcAddNameExpression(prog, expression.encode())
            if err != ok:
                fail(f"nvrtcAddNameExpression({expression!r})", err)
        encoded = [o.encode() for o in options]
        (compile_err,) = nvrtc.nvrtcCompileProgram(prog, len(encoded), encoded)
        log = _program_log(nvrtc, prog, fail)
        if compile_err != ok:
            fail(f"compiling {name}", compile_err, log)
        if kind == "cubin":
            get_size, get = nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN
        else:
            get_size, get = nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX
        err, size = get_size(prog)
        if err != ok:
            fail(get_size.__name__, err, log)
        image = bytearray(size)          # NVRTC writes into it: never an immutable bytes
        (err,) = get(prog, image)
        if err != ok:
            fail(get.__name__, err, log)
        image = bytes(image)
        lowered = {}
        for expression in name_expressions:
            err, mangled = nvrtc.nvrtcGetLoweredName(prog, expression.encode())
            if err != ok:
                fail(f"nvrtcGetLoweredName({expression!r})", err, log)
            lowered[expression] = mangled.decode()
    finally:
        (err,) = nvrtc.nvrtcDestroyProgram(prog)
    if err != ok:
        fail("nvrtcDestroyProgram", err)
    return image, lowered, log


def _program_log(nvrtc, prog, fail):
    err, size = nvrtc.nvrtcGetProgramLogSize(prog)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        fail("nvrtcGetProgramLogSize", err)
    # A mutable buffer: NVRTC writes the log into it. (`b" " * 1` is CPython's cached one-byte
    # object; writing its NUL there turned every b" " in the process into b"\x00".)
    buffer = bytearray(size)
    (err,) = nvrtc.nvrtcGetProgramLog(prog, buffer)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        fail("nvrtcGetProgramLog", err)
    return bytes(buffer).rstrip(b"\0").decode(errors="replace")


# --- the cache --------------------------------------------------------------------------------

def default_cache_dir():
    """Where compiled programs are kept between processes."""
    root = os.environ.get("REFTORCH_CACHE_DIR")
    if root:
        return Path(root).expanduser() / "cuda"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "reftorch" / "cuda"


@dataclass
class CacheStats:
    memory_hits: int = 0
    disk_hits: int = 0
    compiles: int = 0
    corrupt: int = 0           # disk entries that failed verification (and were replaced)
    compile_seconds: float = 0.0


@dataclass(eq=False)
class ProgramCache:
    """Memory cache in front of a disk cache in front of NVRTC.

    `directory=None` uses `default_cache_dir()` at each call (so `REFTORCH_CACHE_DIR` may be
    set after import); `disk=False` keeps everything in memory."""
    directory: object = None
    disk: bool = True
    stats: CacheStats = field(default_factory=CacheStats)
    _memory: dict = field(default_factory=dict, repr=False)
    # (source, name, options, arch, one name expression) -> a result that instantiated it
    _covering: dict = field(default_factory=dict, repr=False)
    _lock: object = field(default_factory=threading.Lock, repr=False)
    _warned: bool = field(default=False, repr=False)

    def path(self):
        return Path(self.directory) if self.directory is not None else default_cache_dir()

    def clear_memory(self):
        with self._lock:
            self._memory.clear()
            self._covering.clear()

    def get(self, source, name, arch, options, name_expressions):
        memory_key = (source, name, options, arch, name_expressions)
        with self._lock:
            found = self._memory.get(memory_key)
            if found is None and len(name_expressions) == 1:
                # One instantiation: any program compiled here with it will do (the CI
                # compile test instantiates every kernel of a file in one NVRTC run).
                found = self._covering.get((source, name, options, arch, *name_expressions))
            if found is not None:
                self.stats.memory_hits += 1
                return replace(found, origin="memory")
            kind = "cubin" if arch.startswith("sm_") else "ptx"
            version = "%d.%d" % nvrtc_version()
            key = _disk_key(source, name, arch, options, name_expressions, version)
            entry = self._load(key) if self.disk else None
            if entry is not None:
                image, lowered, log = entry
                result = CompiledProgram(name, arch, options, kind, image, lowered, log, key,
                                         origin="disk")
                self.stats.disk_hits += 1
            else:
                start = time.perf_counter()
                image, lowered, log = _run_nvrtc(source, name, options, name_expressions, kind)
                seconds = time.perf_counter() - start
                result = CompiledProgram(name, arch, options, kind, image, lowered, log, key,
                                         origin="nvrtc", seconds=seconds)
                self.stats.compiles += 1
                self.stats.compile_seconds += seconds
                if self.disk:
                    self._store(key, result, version)
            self._memory[memory_key] = result
            for expression in name_expressions:
                self._covering.setdefault((source, name, options, arch, expression), result)
            return result

    # --- disk entries: MAGIC, sha256 hex line, JSON header line, payload ---------------------
    def _entry_path(self, key):
        return self.path() / f"{key}.bin"

    def _load(self, key):
        path = self._entry_path(key)
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError:
            return None
        entry = _parse_entry(blob, key)
        if entry is None:
            self.stats.corrupt += 1
            try:
                path.unlink()
            except OSError:
                pass
        return entry

    def _store(self, key, result, version):
        header = json.dumps({
            "format": _FORMAT, "key": key, "name": result.name, "arch": result.arch,
            "options": list(result.options), "kind": result.kind, "lowered": result.lowered,
            "log": result.log, "nvrtc": version, "plugin": __version__,
            "payload_sha256": hashlib.sha256(result.image).hexdigest(),
            "payload_size": len(result.image)}, sort_keys=True).encode()
        body = header + b"\n" + result.image
        blob = _MAGIC + hashlib.sha256(body).hexdigest().encode() + b"\n" + body
        directory = self.path()
        tmp = None
        try:
            directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{key[:16]}-", suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self._entry_path(key))
            tmp = None
        except OSError as exc:
            if not self._warned:
                self._warned = True
                warnings.warn(f"reftorch-cuda: cannot write the kernel cache in {directory} "
                              f"({exc}); kernels will be compiled again next time",
                              RuntimeWarning, stacklevel=4)
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass


def _disk_key(source, name, arch, options, name_expressions, version):
    described = json.dumps({
        "format": _FORMAT, "source": source, "name": name, "arch": arch,
        "options": list(options), "name_expressions": list(name_expressions),
        "nvrtc": version, "plugin": __version__}, sort_keys=True)
    return hashlib.sha256(described.encode()).hexdigest()


def _parse_entry(blob, key):
    """(image, lowered, log) from a disk entry, or None when anything does not verify."""
    if not blob.startswith(_MAGIC):
        return None
    rest = blob[len(_MAGIC):]
    digest, sep, body = rest.partition(b"\n")
    if not sep or hashlib.sha256(body).hexdigest().encode() != digest:
        return None
    header_bytes, sep, payload = body.partition(b"\n")
    try:
        header = json.loads(header_bytes)
    except ValueError:
        return None
    if (not sep or header.get("format") != _FORMAT or header.get("key") != key
            or header.get("payload_size") != len(payload)
            or header.get("payload_sha256") != hashlib.sha256(payload).hexdigest()):
        return None
    return payload, dict(header["lowered"]), header.get("log", "")


_default_cache = ProgramCache()


def default_cache():
    """The process-wide cache the plugin's kernels use."""
    return _default_cache


def compile(source, name, *, arch, options=DEFAULT_OPTIONS, name_expressions=(),  # noqa: A001
            cache=None):
    """Compile CUDA C++ `source` (called `name` in diagnostics) for `arch`.

    `arch` is `sm_XY` (a CUBIN for that GPU generation) or `compute_XY` (PTX the driver
    compiles when loading). `name_expressions` are the template instantiations to create and
    look up, e.g. "binary_kernel<float, AddOp>". `options` must not contain -arch.
    Returns a `CompiledProgram`; raises `CompileError` on any NVRTC failure.
    """
    if not _ARCH.match(arch):
        raise ValueError(f"arch must look like 'sm_90' or 'compute_90', not {arch!r}")
    options = tuple(options)
    if any(o.startswith(("-arch", "--gpu-architecture")) for o in options):
        raise ValueError("give the architecture with arch=, not in options")
    full_options = options + (f"-arch={arch}",)
    cache = _default_cache if cache is None else cache
    return cache.get(source, name, arch, full_options, tuple(name_expressions))
