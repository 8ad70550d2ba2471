"""torch.utils.cpp_extension: build C, C++ and CUDA sources into Python extension modules.

Two ways, as in PyTorch:

- ahead of time, with setuptools: `setup(ext_modules=[CppExtension("ext", ["ext.cpp"])],
  cmdclass={"build_ext": BuildExtension})`;
- just in time: `load(name, sources)` compiles into a build directory and imports the result;
  `load_inline(name, cpp_sources, functions=[...])` does the same from source strings.

The sources' API. reftorch has no libtorch (no ATen, no pybind11), so extensions are written
against the Python C API (`Python.h`, found through `include_paths()`, which also lists
NumPy's headers). A tensor's memory is reachable through `t.numpy()` (the buffer protocol,
`PyObject_GetBuffer`) or through `t.data_ptr()`.

- `load(name, sources)`: the sources define the module's init function `PyInit_<name>`
  themselves. The macro TORCH_EXTENSION_NAME is defined to `name`, as in PyTorch.
- `load_inline(name, cpp_sources, functions=...)`: `Python.h` is included before the sources
  (unless `no_implicit_headers=True`), and for every name in `functions` (a name, a list of
  names, or a dict of name -> docstring) a binding is generated. Each such function must have
  the METH_VARARGS signature

      PyObject* my_function(PyObject* self, PyObject* args)

  (parse `args` with PyArg_ParseTuple; return a new reference, or NULL with an exception set).
  Without `functions`, the sources must define `PyInit_<name>` themselves.

Builds are cached: every build lives in `<build_directory>/<key>/`, where `key` hashes the
sources' contents (not the headers they include), the flags, the compilers and the Python
ABI; a second load of unchanged sources just imports the existing library. Changed sources
get a new directory, so a changed extension can be loaded again in the same process (PyTorch
renames it `name_v1` instead).
The default build directory is `$TORCH_EXTENSIONS_DIR/<name>` or
`~/.cache/reftorch_extensions/py<version>/<name>`. C++ is compiled with `$CXX` (default `c++`),
C with `$CC` (default `cc`), CUDA with nvcc from CUDA_HOME; no ninja is needed.
"""
from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig

import setuptools
from setuptools.command.build_ext import build_ext

__all__ = ["CppExtension", "CUDAExtension", "BuildExtension", "load", "load_inline",
           "include_paths", "library_paths", "check_compiler_abi_compatibility",
           "get_default_build_root", "is_ninja_available", "verify_ninja_availability",
           "CUDA_HOME"]

_CXX_SUFFIXES = (".cpp", ".cc", ".cxx", ".c++", ".C")
_CUDA_SUFFIXES = (".cu", ".cuh")
_CXX_STANDARD = "-std=c++17"
_MINIMUM_GCC_MAJOR = 5   # PyTorch's documented minimum for ABI compatibility on Linux
_IS_MACOS = sys.platform == "darwin"


# --- where things are ----------------------------------------------------------------------------

def _find_cuda_home():
    """CUDA_HOME or CUDA_PATH; else the toolkit that nvcc belongs to; else /usr/local/cuda.
    A candidate counts only if it has include/cuda_runtime.h (nvcc on PATH is often a
    wrapper script, so its grandparent directory is not always the toolkit)."""
    explicit = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if explicit:
        return explicit
    candidates = []
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    candidates.append("/usr/local/cuda")
    for home in candidates:
        if os.path.exists(os.path.join(home, "include", "cuda_runtime.h")):
            return home
    return None


CUDA_HOME = _find_cuda_home()


def _join_cuda_home(*parts):
    if CUDA_HOME is None:
        raise OSError("CUDA_HOME environment variable is not set. Please set it to your CUDA "
                      "install root (no CUDA toolkit with nvcc was found).")
    return os.path.join(CUDA_HOME, *parts)


def _nvcc():
    path = _join_cuda_home("bin", "nvcc")
    if os.path.exists(path):
        return [path]
    found = shutil.which("nvcc")
    if found is None:
        raise OSError(f"nvcc was not found in {CUDA_HOME}/bin or on PATH: CUDA sources cannot "
                      f"be compiled")
    return [found]


def _device_type(device_type, cuda):
    """Both PyTorch spellings: include_paths(cuda=True) (1.x) and include_paths("cuda")."""
    if cuda is not None:
        return "cuda" if cuda else "cpu"
    if isinstance(device_type, bool):
        return "cuda" if device_type else "cpu"
    return device_type


def include_paths(device_type="cpu", torch_include_dirs=True, *, cuda=None):
    """Header directories an extension needs: Python's and NumPy's, plus CUDA's for
    `device_type='cuda'` (OSError when no CUDA toolkit is found). `torch_include_dirs` is
    accepted for compatibility: reftorch has no headers of its own."""
    import numpy
    paths = []
    for path in (sysconfig.get_paths()["include"], sysconfig.get_paths()["platinclude"],
                 numpy.get_include()):
        if path not in paths:
            paths.append(path)
    if _device_type(device_type, cuda) == "cuda":
        paths.append(_join_cuda_home("include"))
    return paths


def library_paths(device_type="cpu", torch_include_dirs=True, cross_target_platform=None, *,
                  cuda=None):
    """Library directories an extension links against: none for cpu (Python symbols are
    resolved when the module is loaded), CUDA's lib64 for `device_type='cuda'`.
    `cross_target_platform` (Windows cross-compilation in PyTorch) is not supported."""
    if cross_target_platform is not None:
        raise RuntimeError("reftorch.utils.cpp_extension does not cross-compile")
    if _device_type(device_type, cuda) != "cuda":
        return []
    lib64 = _join_cuda_home("lib64")
    return [lib64 if os.path.isdir(lib64) else _join_cuda_home("lib")]


def get_default_build_root():
    """The folder holding one build folder per JIT-compiled extension."""
    cache = os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
    return os.path.realpath(os.path.join(cache, "reftorch_extensions"))


def _build_directory(name, build_directory):
    if build_directory is None:
        root = os.environ.get("TORCH_EXTENSIONS_DIR")
        if root is None:
            python = f"py{sys.version_info.major}{sys.version_info.minor}"
            root = os.path.join(get_default_build_root(), python)
        build_directory = os.path.join(root, name)
    os.makedirs(build_directory, exist_ok=True)
    return build_directory


def _compiler(env_name, default):
    return shlex.split(os.environ.get(env_name, default))


# --- compiler checks --------------------------------------------------------------------------

def check_compiler_abi_compatibility(compiler):
    """Whether `compiler` can build extensions for this Python: it must run, and a GCC must
    be at least version 5 (PyTorch's rule). Extensions here use only the C ABI of Python, so
    any working C/C++ compiler of the platform is otherwise compatible. Set
    TORCH_DONT_CHECK_COMPILER_ABI=1 to skip the check."""
    if os.environ.get("TORCH_DONT_CHECK_COMPILER_ABI", "").upper() in ("ON", "1", "YES",
                                                                         "TRUE", "Y"):
        return True
    import warnings
    try:
        banner = subprocess.run(shlex.split(compiler) + ["--version"], capture_output=True,
                                text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        warnings.warn(f"Error checking compiler version for {compiler}")
        return False
    if "clang" in banner.lower() or "gcc" not in banner.lower() and "g++" not in banner:
        return True
    version = subprocess.run(shlex.split(compiler) + ["-dumpfullversion", "-dumpversion"],
                             capture_output=True, text=True).stdout.strip()
    major = int(version.split(".")[0]) if version[:1].isdigit() else 0
    if major < _MINIMUM_GCC_MAJOR:
        warnings.warn(f"Your compiler ({compiler} {version}) may be ABI-incompatible: use "
                      f"g++ {_MINIMUM_GCC_MAJOR}.0 or newer")
        return False
    return True


def is_ninja_available():
    """Whether the ninja build tool runs (reftorch's JIT builds do not need it)."""
    try:
        subprocess.run(["ninja", "--version"], capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return False
    return True


def verify_ninja_availability():
    """RuntimeError unless ninja is available (kept for PyTorch compatibility)."""
    if not is_ninja_available():
        raise RuntimeError("Ninja is required to load C++ extensions")


# --- setuptools ------------------------------------------------------------------------------

def _append(kwargs, key, values):
    kwargs[key] = list(kwargs.get(key) or []) + list(values)


def CppExtension(name, sources, *args, **kwargs):
    """A setuptools.Extension for C/C++ sources, with the include directories an extension
    needs (include_paths()) and language c++. Build it with BuildExtension."""
    _append(kwargs, "include_dirs", include_paths())
    kwargs["language"] = "c++"
    return setuptools.Extension(name, sources, *args, **kwargs)


def CUDAExtension(name, sources, *args, **kwargs):
    """A setuptools.Extension for C++ and CUDA (.cu) sources, linked with the CUDA runtime.
    Raises OSError when no CUDA toolkit (CUDA_HOME / nvcc) is found. Build it with
    BuildExtension, which compiles .cu files with nvcc."""
    _append(kwargs, "include_dirs", include_paths("cuda"))
    _append(kwargs, "library_dirs", library_paths("cuda"))
    _append(kwargs, "libraries", ["cudart"])
    kwargs["language"] = "c++"
    return setuptools.Extension(name, sources, *args, **kwargs)


def _split_compile_args(extra_compile_args):
    """PyTorch lets extra_compile_args be a list (for every source) or a dict
    {'cxx': [...], 'nvcc': [...]}: returns (host args, nvcc args)."""
    if isinstance(extra_compile_args, dict):
        return list(extra_compile_args.get("cxx", [])), list(extra_compile_args.get("nvcc", []))
    return list(extra_compile_args or []), []


class BuildExtension(build_ext):
    """setuptools' build_ext, extended as PyTorch's is:

    - `extra_compile_args` may be a dict {'cxx': [...], 'nvcc': [...]};
    - C++ sources get -std=c++17 unless they ask for a standard, C sources stay C;
    - .cu sources are compiled with nvcc (-Xcompiler -fPIC);
    - every extension gets -DTORCH_EXTENSION_NAME=<its module name>;
    - option `no_python_abi_suffix=True` names the library `name.so`, without the ABI tag.
      `use_ninja` is accepted and ignored (setuptools' compiler object does the work).
    """

    @classmethod
    def with_options(cls, **options):
        """A BuildExtension subclass whose instances are created with `options`."""
        class BuildExtensionWithOptions(cls):
            def __init__(self, *args, **kwargs):
                kwargs.update(options)
                super().__init__(*args, **kwargs)
        return BuildExtensionWithOptions

    def __init__(self, *args, **kwargs):
        self.no_python_abi_suffix = kwargs.pop("no_python_abi_suffix", False)
        self.use_ninja = kwargs.pop("use_ninja", False)
        super().__init__(*args, **kwargs)

    def build_extensions(self):
        # (a new list: `+=` would grow the compiler class's shared list on every build)
        self.compiler.src_extensions = self.compiler.src_extensions + [".cu", ".cuh"]
        original_compile = self.compiler._compile

        def compile_one(obj, src, ext, cc_args, extra_postargs, pp_opts):
            host_args, nvcc_args = _split_compile_args(extra_postargs)
            if src.endswith(_CUDA_SUFFIXES):
                saved = self.compiler.compiler_so
                self.compiler.set_executable("compiler_so", _nvcc())
                try:
                    args = nvcc_args + ["-Xcompiler", "-fPIC"] + _with_cxx_standard(nvcc_args)
                    return original_compile(obj, src, ext, cc_args, args, pp_opts)
                finally:
                    self.compiler.set_executable("compiler_so", saved)
            if src.endswith(_CXX_SUFFIXES):
                host_args = host_args + _with_cxx_standard(host_args)
            return original_compile(obj, src, ext, cc_args, host_args, pp_opts)

        self.compiler._compile = compile_one
        for extension in self.extensions:
            module_name = extension.name.split(".")[-1]
            define = f"-DTORCH_EXTENSION_NAME={module_name}"
            if isinstance(extension.extra_compile_args, dict):
                for key in ("cxx", "nvcc"):
                    extension.extra_compile_args.setdefault(key, []).append(define)
            else:
                extension.extra_compile_args = list(extension.extra_compile_args or []) \
                    + [define]
        super().build_extensions()

    def get_ext_filename(self, ext_name):
        filename = super().get_ext_filename(ext_name)
        if self.no_python_abi_suffix:
            # 'pkg/ext.cpython-311-x86_64-linux-gnu.so' -> 'pkg/ext.so'
            stem, _, _ = filename.partition(".")
            filename = stem + os.path.splitext(filename)[1]
        return filename


def _with_cxx_standard(args):
    """[-std=c++17] unless the arguments already choose a standard."""
    return [] if any(a.startswith(("-std=", "--std")) for a in args) else [_CXX_STANDARD]


# --- just-in-time builds ---------------------------------------------------------------------

def _is_cuda_file(path):
    return os.path.splitext(path)[1] in _CUDA_SUFFIXES


def _source_kind(path):
    if _is_cuda_file(path):
        return "cuda"
    if path.endswith(_CXX_SUFFIXES):
        return "c++"
    if path.endswith(".c"):
        return "c"
    raise ValueError(f"don't know how to compile {path}: expected a C (.c), C++ "
                     f"(.cpp .cc .cxx) or CUDA (.cu) source")


def _compile_command(kind, source, obj, name, include_dirs, cflags, cuda_cflags):
    includes = [f"-I{path}" for path in include_dirs]
    define = [f"-DTORCH_EXTENSION_NAME={name}"]
    if kind == "cuda":
        return (_nvcc() + ["-c", source, "-o", obj, "-Xcompiler", "-fPIC"] + define + includes
                + cuda_cflags + _with_cxx_standard(cuda_cflags))
    if kind == "c++":
        return (_compiler("CXX", "c++") + ["-c", source, "-o", obj, "-fPIC", "-O2"] + define
                + includes + cflags + _with_cxx_standard(cflags))
    return _compiler("CC", "cc") + ["-c", source, "-o", obj, "-fPIC", "-O2"] + define \
        + includes + cflags


def _link_command(objects, target, ldflags, with_cuda, is_standalone):
    command = _compiler("CXX", "c++") + objects + ["-o", target]
    if not is_standalone:
        command += ["-shared"]
        if _IS_MACOS:   # Python's symbols are resolved when the interpreter loads the module
            command += ["-undefined", "dynamic_lookup"]
    if with_cuda:
        command += [f"-L{path}" for path in library_paths("cuda")] + ["-lcudart"]
    return command + ldflags


def _run(command, name, verbose):
    if verbose:
        print(" ".join(shlex.quote(part) for part in command), flush=True)
    result = subprocess.run(command, capture_output=True, text=True)
    if verbose and (result.stdout or result.stderr):
        print(result.stdout + result.stderr, flush=True)
    if result.returncode != 0:
        raise RuntimeError(f"Error building extension '{name}':\n"
                           f"{' '.join(shlex.quote(part) for part in command)}\n"
                           f"{result.stdout}{result.stderr}")


def _build_key(name, sources, *settings):
    """A digest of everything the built library depends on."""
    digest = hashlib.sha256()
    for part in (name, sys.version, sysconfig.get_config_var("EXT_SUFFIX"),
                 os.environ.get("CXX", ""), os.environ.get("CC", ""), repr(settings)):
        digest.update(str(part).encode() + b"\0")
    for source in sources:
        digest.update(os.path.abspath(source).encode() + b"\0")
        with open(source, "rb") as f:
            digest.update(f.read() + b"\0")
    return digest.hexdigest()[:16]


def _target_name(name, is_python_module, is_standalone):
    if is_standalone:
        return name
    if is_python_module:
        return name + sysconfig.get_config_var("EXT_SUFFIX")
    return f"lib{name}.dylib" if _IS_MACOS else f"lib{name}.so"


def _compile_and_link(name, sources, output_dir, target, settings, verbose):
    include_dirs, cflags, cuda_cflags, ldflags, with_cuda, is_standalone = settings
    objects = []
    for index, source in enumerate(sources):
        obj = os.path.join(output_dir, f"{index}_{os.path.basename(source)}.o")
        _run(_compile_command(_source_kind(source), source, obj, name, include_dirs, cflags,
                              cuda_cflags), name, verbose)
        objects.append(obj)
    # Link to a temporary name, then rename: a concurrent or interrupted build never leaves
    # a half-written library where the cache looks for it.
    partial = f"{target}.{os.getpid()}.partial"
    _run(_link_command(objects, partial, ldflags, with_cuda, is_standalone), name, verbose)
    os.replace(partial, target)


def _refuse_sycl(extra_sycl_cflags, with_sycl, sources):
    sources = [sources] if isinstance(sources, str) else list(sources or [])
    if with_sycl or extra_sycl_cflags or any(s.endswith(".sycl") for s in sources):
        raise RuntimeError("reftorch.utils.cpp_extension cannot build SYCL sources")


def _import_built_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load(name, sources, extra_cflags=None, extra_cuda_cflags=None, extra_sycl_cflags=None,
         extra_ldflags=None, extra_include_paths=None, build_directory=None, verbose=False,
         with_cuda=None, with_sycl=None, is_python_module=True, is_standalone=False,
         keep_intermediates=True):
    """Compile `sources` (paths of C, C++ or CUDA files) and load the result.

    Returns the imported Python module (whose sources define `PyInit_<name>`); with
    `is_python_module=False` the shared library is loaded into the process (ctypes, global
    symbols) and its path returned; with `is_standalone=True` an executable is built and its
    path returned. `with_cuda` defaults to whether any source is a .cu file. A build whose
    inputs are unchanged is reused (see the module docstring). The SYCL parameters exist for
    PyTorch's signature; SYCL sources are refused.
    """
    if is_python_module and is_standalone:
        raise ValueError("`is_python_module` and `is_standalone` are mutually exclusive.")
    _refuse_sycl(extra_sycl_cflags, with_sycl, sources)
    if not name.isidentifier():
        raise ValueError(f"extension name {name!r} must be a valid Python identifier")
    sources = [os.path.abspath(s) for s in ([sources] if isinstance(sources, str) else sources)]
    if with_cuda is None:
        with_cuda = any(_is_cuda_file(s) for s in sources)
    settings = (include_paths("cuda" if with_cuda else "cpu") + list(extra_include_paths or []),
                list(extra_cflags or []), list(extra_cuda_cflags or []),
                list(extra_ldflags or []), bool(with_cuda), bool(is_standalone))
    key = _build_key(name, sources, is_python_module, settings)
    output_dir = os.path.join(_build_directory(name, build_directory), key)
    os.makedirs(output_dir, exist_ok=True)
    target = os.path.join(output_dir, _target_name(name, is_python_module, is_standalone))

    if os.path.exists(target):
        if verbose:
            print(f"No modifications detected for extension {name}: using {target}", flush=True)
    else:
        if verbose:
            print(f"Building extension module {name} in {output_dir}...", flush=True)
        _compile_and_link(name, sources, output_dir, target, settings, verbose)
        if not keep_intermediates:
            for leftover in os.listdir(output_dir):
                if leftover.endswith(".o"):
                    os.remove(os.path.join(output_dir, leftover))

    if is_standalone:
        return target
    if is_python_module:
        return _import_built_module(name, target)
    ctypes.CDLL(target, mode=ctypes.RTLD_GLOBAL)
    return target


# --- load_inline -----------------------------------------------------------------------------

_IMPLICIT_CPP_HEADER = "#define PY_SSIZE_T_CLEAN\n#include <Python.h>\n"
_IMPLICIT_CUDA_HEADER = "#include <cuda_runtime.h>\n"


def _c_string(text):
    """`text` as a C string literal."""
    escaped = (text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
               .replace("\r", "\\r").replace("\t", "\\t"))
    return f'"{escaped}"'


def _function_docs(functions):
    """{name: docstring} from a name, a list of names, or a dict name -> docstring."""
    if isinstance(functions, str):
        functions = [functions]
    if isinstance(functions, dict):
        docs = dict(functions)
    else:
        docs = {f: "" for f in functions}
    for function in docs:
        if not re.fullmatch(r"[A-Za-z_]\w*", function):
            raise ValueError(f"function name {function!r} is not a C identifier")
    return docs


def _module_definition(name, functions):
    """C++ that binds each function (METH_VARARGS convention) and defines PyInit_<name>."""
    entries = "".join(
        f"    {{{_c_string(f)}, (PyCFunction)(void (*)(void)){f}, METH_VARARGS, "
        f"{_c_string(doc) if doc else 'NULL'}}},\n"
        for f, doc in functions.items())
    return (
        "\n// --- bindings generated by reftorch.utils.cpp_extension.load_inline ---\n"
        f"static PyMethodDef reftorch_extension_methods[] = {{\n{entries}"
        "    {NULL, NULL, 0, NULL}\n};\n"
        "static struct PyModuleDef reftorch_extension_module = {\n"
        f"    PyModuleDef_HEAD_INIT, {_c_string(name)}, NULL, -1, reftorch_extension_methods\n"
        "};\n"
        f"PyMODINIT_FUNC PyInit_{name}(void) {{\n"
        "    return PyModule_Create(&reftorch_extension_module);\n}\n")


def _write_if_changed(path, text):
    """Rewrite only changed files, so an unchanged source keeps its timestamp."""
    if os.path.exists(path):
        with open(path) as f:
            if f.read() == text:
                return
    with open(path, "w") as f:
        f.write(text)


def load_inline(name, cpp_sources, cuda_sources=None, sycl_sources=None, functions=None,
                extra_cflags=None, extra_cuda_cflags=None, extra_sycl_cflags=None,
                extra_ldflags=None, extra_include_paths=None, build_directory=None,
                verbose=False, with_cuda=None, with_sycl=None, is_python_module=True,
                with_pytorch_error_handling=True, keep_intermediates=True, use_pch=False,
                no_implicit_headers=False):
    """Like `load`, from source strings: `cpp_sources` (a string or list of strings) go to
    `main.cpp` in the build directory after `#include <Python.h>`; `cuda_sources` go to
    `cuda.cu` after `#include <cuda_runtime.h>`. `functions` generates the module's bindings;
    each must be `PyObject* f(PyObject* self, PyObject* args)` (see the module docstring).
    `with_pytorch_error_handling` and `use_pch` are accepted for compatibility and have no
    effect (there are no C++ PyTorch exceptions to translate, no large headers to precompile).
    """
    _refuse_sycl(extra_sycl_cflags, with_sycl or bool(sycl_sources), [])
    if isinstance(cpp_sources, str):
        cpp_sources = [cpp_sources]
    if isinstance(cuda_sources, str):
        cuda_sources = [cuda_sources]
    cuda_sources = list(cuda_sources or [])
    build_directory = _build_directory(name, build_directory)

    cpp_text = "\n".join(cpp_sources)
    if not no_implicit_headers:
        cpp_text = _IMPLICIT_CPP_HEADER + cpp_text
    if functions:
        cpp_text += _module_definition(name, _function_docs(functions))
    source_paths = [os.path.join(build_directory, "main.cpp")]
    _write_if_changed(source_paths[0], cpp_text)
    if cuda_sources:
        cuda_text = "\n".join(cuda_sources)
        if not no_implicit_headers:
            cuda_text = _IMPLICIT_CUDA_HEADER + cuda_text
        source_paths.append(os.path.join(build_directory, "cuda.cu"))
        _write_if_changed(source_paths[1], cuda_text)
        with_cuda = True if with_cuda is None else with_cuda

    return load(name, source_paths, extra_cflags=extra_cflags,
                extra_cuda_cflags=extra_cuda_cflags, extra_ldflags=extra_ldflags,
                extra_include_paths=extra_include_paths, build_directory=build_directory,
                verbose=verbose, with_cuda=with_cuda, is_python_module=is_python_module,
                keep_intermediates=keep_intermediates)

