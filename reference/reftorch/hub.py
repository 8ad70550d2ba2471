"""torch.hub: load models from a repository's hubconf.py, and checkpoints from URLs.

A hub repository is a directory with a `hubconf.py` whose public callables are entrypoints
(`def resnet18(pretrained=False, **kwargs)`) and whose optional `dependencies` list names the
packages it needs. `load(repo_or_dir, model, source='local')` imports that file and calls the
entrypoint; `list` and `help` show the entrypoints and their docstrings.

reftorch never downloads repositories: `source='github'` ('owner/repo[:ref]') resolves to the
hub cache directory `<hub_dir>/owner_repo_ref` exactly where PyTorch would have unpacked the
GitHub archive, and raises a clear error when that directory is missing (or `force_reload`
asks for a fresh download). `list` and `help` also accept `source='local'` (a reftorch
addition; PyTorch's take only GitHub repositories).

Checkpoints: `download_url_to_file` and `load_state_dict_from_url` fetch any URL urllib can
open (file:// included), save under `<hub_dir>/checkpoints`, verify the SHA-256 prefix in a
`name-<hash>.ext` file name when `check_hash=True`, and deserialize with
`reftorch.serialization.load`.

Directories follow PyTorch: hub_dir is set_dir's argument, else `$TORCH_HOME/hub`, where
TORCH_HOME defaults to `$XDG_CACHE_HOME/torch` and XDG_CACHE_HOME to `~/.cache`.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import re
import shutil
import sys
import uuid
import warnings
import zipfile
from urllib.parse import urlparse
from urllib.request import Request, urlopen

__all__ = ["list", "help", "load", "download_url_to_file", "get_dir", "set_dir",
           "load_state_dict_from_url"]

# `name-<hex digits>.ext`: the hex digits are a prefix of the file's SHA-256.
HASH_REGEX = re.compile(r"-([a-f0-9]*)\.")
# Owners whose repositories PyTorch trusts without asking.
_TRUSTED_REPO_OWNERS = ("facebookresearch", "facebookincubator", "pytorch", "fairinternal")
ENV_TORCH_HOME = "TORCH_HOME"
ENV_XDG_CACHE_HOME = "XDG_CACHE_HOME"
DEFAULT_CACHE_DIR = "~/.cache"
VAR_DEPENDENCY = "dependencies"
MODULE_HUBCONF = "hubconf.py"
READ_DATA_CHUNK = 128 * 1024

_hub_dir = None


# --- directories -------------------------------------------------------------------------------

def _get_torch_home():
    default = os.path.join(os.getenv(ENV_XDG_CACHE_HOME, DEFAULT_CACHE_DIR), "torch")
    return os.path.expanduser(os.getenv(ENV_TORCH_HOME, default))


def get_dir():
    """The hub cache directory: set_dir's argument, else `$TORCH_HOME/hub`."""
    if os.getenv("TORCH_HUB"):
        warnings.warn("TORCH_HUB is deprecated, please use env TORCH_HOME instead",
                      stacklevel=2)
    if _hub_dir is not None:
        return _hub_dir
    return os.path.join(_get_torch_home(), "hub")


def set_dir(d):
    """Use directory `d` (a str or os.PathLike; `~` is expanded) as the hub cache."""
    global _hub_dir
    _hub_dir = os.path.expanduser(d)


# --- resolving a repository ----------------------------------------------------------------------

def _parse_repo_info(github):
    """('owner', 'repo', 'ref') from 'owner/repo[:ref]'. Without a ref PyTorch asks GitHub for
    the default branch; offline it uses whichever of main / master is already cached."""
    repo_info, _, ref = github.partition(":")
    parts = repo_info.split("/")
    if len(parts) != 2 or not all(parts):
        raise ValueError(f'Invalid GitHub repository "{github}": expected the form '
                         f'"repo_owner/repo_name[:ref]"')
    owner, name = parts
    if not ref:
        for candidate in ("main", "master"):
            if os.path.isdir(os.path.join(get_dir(), f"{owner}_{name}_{candidate}")):
                return owner, name, candidate
        raise RuntimeError(
            f"reftorch.hub does not download repositories, and no cached copy of {owner}/{name} "
            f"(branch main or master) was found in the hub cache ({get_dir()}). Put a "
            f"checkout at {os.path.join(get_dir(), f'{owner}_{name}_main')} or use "
            f"source='local' with the path of a directory holding hubconf.py")
    return owner, name, ref


def _check_repo_is_trusted(owner, name, owner_name_branch, trust_repo):
    """PyTorch's trust check: repositories of trusted owners, in `<hub_dir>/trusted_list`, or
    already in the cache are trusted; otherwise (or with trust_repo=False) ask the user."""
    hub_dir = get_dir()
    os.makedirs(hub_dir, exist_ok=True)
    trusted_list = os.path.join(hub_dir, "trusted_list")
    trusted = set()
    if os.path.exists(trusted_list):
        with open(trusted_list) as f:
            trusted = {line.strip() for line in f}
    cached_dirs = next(os.walk(hub_dir))[1]
    owner_name = f"{owner}_{name}"
    is_trusted = (owner_name in trusted or owner_name_branch in cached_dirs
                  or owner in _TRUSTED_REPO_OWNERS)
    if trust_repo is False or (trust_repo == "check" and not is_trusted):
        response = input(
            f"The repository {owner_name} does not belong to the list of trusted repositories "
            f"and as such cannot be downloaded. Do you trust this repository and wish to add "
            f"it to the trusted list of repositories (y/N)?")
        if response.lower() in ("n", "no", ""):
            raise Exception("Untrusted repository.")
        if response.lower() not in ("y", "yes"):
            raise ValueError(f"Unrecognized response {response}.")
    if not is_trusted:
        with open(trusted_list, "a") as f:
            f.write(owner_name + "\n")


def _cached_repo_dir(github, force_reload, trust_repo, verbose):
    """The hub cache directory holding the GitHub repository `github` (never downloads)."""
    owner, name, ref = _parse_repo_info(github)
    # GitHub refs may contain '/', which PyTorch flattens to '_' in the directory name.
    owner_name_branch = "_".join([owner, name, ref.replace("/", "_")])
    repo_dir = os.path.join(get_dir(), owner_name_branch)
    _check_repo_is_trusted(owner, name, owner_name_branch, trust_repo)
    if force_reload or not os.path.isdir(repo_dir):
        reason = "force_reload=True asks for a fresh download" if force_reload else \
            f"it is not in the hub cache ({repo_dir})"
        raise RuntimeError(
            f"reftorch.hub does not download repositories, and {github} would need to be: "
            f"{reason}. Put a checkout of the repository at {repo_dir}, or use "
            f"source='local' with the path of a directory holding hubconf.py")
    if verbose:
        sys.stderr.write(f"Using cache found in {repo_dir}\n")
    return repo_dir


def _repo_dir(repo_or_dir, source, force_reload, trust_repo, verbose):
    source = source.lower()
    if source not in ("github", "local"):
        raise ValueError(f'Unknown source: "{source}". Allowed values: "github" | "local".')
    if source == "github":
        return _cached_repo_dir(repo_or_dir, force_reload, trust_repo, verbose)
    return os.fspath(repo_or_dir)


# --- hubconf.py ---------------------------------------------------------------------------------

@contextlib.contextmanager
def _added_to_sys_path(path):
    """hubconf.py may import modules that live next to it."""
    sys.path.insert(0, path)
    try:
        yield
    finally:
        sys.path.remove(path)


def _import_hubconf(repo_dir):
    """Execute `<repo_dir>/hubconf.py` as a fresh module (not registered in sys.modules)."""
    path = os.path.join(repo_dir, MODULE_HUBCONF)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{MODULE_HUBCONF} not found in {repo_dir}")
    with _added_to_sys_path(repo_dir):
        spec = importlib.util.spec_from_file_location(MODULE_HUBCONF, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module


def _check_dependencies(hubconf):
    dependencies = getattr(hubconf, VAR_DEPENDENCY, None)
    if dependencies is not None:
        missing = [pkg for pkg in dependencies if importlib.util.find_spec(pkg) is None]
        if missing:
            raise RuntimeError(f"Missing dependencies: {', '.join(missing)}")


def _load_entry_from_hubconf(hubconf, model):
    if not isinstance(model, str):
        raise ValueError("Invalid input: model should be a string of function name")
    # The dependency check comes first, as in PyTorch (an import at the top of hubconf.py of
    # a missing package has already failed with Python's own error by now).
    _check_dependencies(hubconf)
    entry = getattr(hubconf, model, None) if model in dir(hubconf) else None
    if entry is None or not callable(entry):
        raise RuntimeError(f"Cannot find callable {model} in hubconf")
    return entry


def _entrypoints(hubconf):
    return [name for name in dir(hubconf)
            if callable(getattr(hubconf, name)) and not name.startswith("_")]


# --- public API -------------------------------------------------------------------------------

def list(github, force_reload=False, skip_validation=False, trust_repo="check", verbose=True,
         *, source="github"):
    """The names of the callable entrypoints in the repository's hubconf.py.

    `github` is 'owner/repo[:ref]' (resolved in the hub cache; see the module docstring) or,
    with `source='local'`, a directory. `skip_validation` is accepted for compatibility: the
    GitHub branch validation it skips needs the network, which reftorch never uses.
    """
    repo_dir = _repo_dir(github, source, force_reload, trust_repo, verbose)
    return _entrypoints(_import_hubconf(repo_dir))


def help(github, model, force_reload=False, skip_validation=False, trust_repo="check", *,
         source="github"):
    """The docstring of entrypoint `model` (None when it has none)."""
    repo_dir = _repo_dir(github, source, force_reload, trust_repo, verbose=True)
    entry = _load_entry_from_hubconf(_import_hubconf(repo_dir), model)
    return entry.__doc__


def load(repo_or_dir, model, *args, source="github", trust_repo="check", force_reload=False,
         verbose=True, skip_validation=False, **kwargs):
    """Call entrypoint `model` of the repository's hubconf.py with `*args, **kwargs` and return
    its result (normally an nn.Module).

    `source='github'`: `repo_or_dir` is 'owner/repo[:ref]', found in the hub cache;
    `source='local'`: `repo_or_dir` is a directory holding hubconf.py (no trust check).
    """
    repo_dir = _repo_dir(repo_or_dir, source, force_reload, trust_repo, verbose)
    entry = _load_entry_from_hubconf(_import_hubconf(repo_dir), model)
    with _added_to_sys_path(repo_dir):   # the entrypoint may import the repository's modules
        return entry(*args, **kwargs)


def _progress_reporter(total, enabled):
    """A minimal stderr progress line (PyTorch uses tqdm when it is installed)."""
    state = {"done": 0}

    def update(count):
        if not enabled:
            return
        state["done"] += count
        if total:
            sys.stderr.write(f"\r{100 * state['done'] // total:3d}% "
                             f"{state['done']}/{total} bytes")
        else:
            sys.stderr.write(f"\r{state['done']} bytes")
        sys.stderr.flush()

    def close():
        if enabled:
            sys.stderr.write("\n")
    return update, close


def download_url_to_file(url, dst, hash_prefix=None, progress=True):
    """Save the object at `url` to the path `dst`.

    The data goes to a temporary file next to `dst` that is moved into place only once the
    download is complete (and, with `hash_prefix`, only when the SHA-256 of the data starts
    with it: RuntimeError otherwise), so a broken download never replaces a good file.
    `progress` prints a progress line to stderr.
    """
    dst = os.path.expanduser(dst)
    partial = f"{dst}.{uuid.uuid4().hex}.partial"
    sha256 = hashlib.sha256() if hash_prefix is not None else None
    try:
        with urlopen(Request(url, headers={"User-Agent": "torch.hub"})) as response, \
                open(partial, "wb") as out:
            length = response.info().get("Content-Length")
            update, close = _progress_reporter(int(length) if length else None, progress)
            while True:
                chunk = response.read(READ_DATA_CHUNK)
                if not chunk:
                    break
                out.write(chunk)
                if sha256 is not None:
                    sha256.update(chunk)
                update(len(chunk))
            close()
        if sha256 is not None:
            digest = sha256.hexdigest()
            if digest[:len(hash_prefix)] != hash_prefix:
                raise RuntimeError(
                    f'invalid hash value (expected "{hash_prefix}", got "{digest}")')
        shutil.move(partial, dst)
    finally:
        if os.path.exists(partial):
            os.remove(partial)


def _is_legacy_zip_format(filename):
    """A zip holding exactly one file: a checkpoint zipped by hand (PyTorch < 1.6 style),
    as opposed to the multi-entry zip archive torch.save writes."""
    if not zipfile.is_zipfile(filename):
        return False
    with zipfile.ZipFile(filename) as archive:
        members = archive.infolist()
    return len(members) == 1 and not members[0].is_dir()


def _extract_single_member(filename, model_dir):
    with zipfile.ZipFile(filename) as archive:
        member = archive.infolist()[0]
        target = os.path.realpath(os.path.join(model_dir, member.filename))
        if not target.startswith(os.path.realpath(model_dir) + os.sep):
            raise ValueError(f"Archive entry escapes the model directory: {member.filename}")
        archive.extract(member, model_dir)
    return target


def load_state_dict_from_url(url, model_dir=None, map_location=None, progress=True,
                             check_hash=False, file_name=None, weights_only=False):
    """Load the serialized object at `url`, downloading it into `model_dir` (default
    `<hub_dir>/checkpoints`) unless a file of that name is already there.

    With `check_hash`, the file name must look like `name-<sha256 prefix>.ext` and the
    download is verified against that prefix. `file_name` overrides the name taken from the
    URL. A zip holding a single file is extracted first (PyTorch's legacy format).
    """
    from . import serialization   # imported here: serialization is a sibling module
    if os.getenv("TORCH_MODEL_ZOO"):
        warnings.warn("TORCH_MODEL_ZOO is deprecated, please use env TORCH_HOME instead",
                      stacklevel=2)
    if model_dir is None:
        model_dir = os.path.join(get_dir(), "checkpoints")
    os.makedirs(model_dir, exist_ok=True)

    filename = file_name if file_name is not None else os.path.basename(urlparse(url).path)
    cached_file = os.path.join(model_dir, filename)
    if not os.path.exists(cached_file):
        sys.stdout.write(f'Downloading: "{url}" to {cached_file}\n')
        hash_prefix = None
        if check_hash:
            match = HASH_REGEX.search(filename)
            hash_prefix = match.group(1) if match else None
        download_url_to_file(url, cached_file, hash_prefix, progress=progress)

    if _is_legacy_zip_format(cached_file):
        warnings.warn("Falling back to the old format < 1.6. This support will be deprecated "
                      "in favor of default zipfile format introduced in 1.6. Please redo "
                      "torch.save() to save it in the new zipfile format.", FutureWarning,
                      stacklevel=2)
        cached_file = _extract_single_member(cached_file, model_dir)
    return serialization.load(cached_file, map_location=map_location, weights_only=weights_only)

