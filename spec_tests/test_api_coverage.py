"""API coverage against the documented inventory (spec_tests/documented_api.tsv).

The summary printed at the end of `make test` comes from `coverage_report()`.
"""
from __future__ import annotations

import csv
import importlib
import pathlib
import types
from collections import defaultdict

import reftorch

INVENTORY = pathlib.Path(__file__).with_name("documented_api.tsv")


def documented_items():
    with INVENTORY.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    return {(r["namespace"], r["name"].strip()) for r in rows}


def _resolve(namespace, name):
    """The object a documented item names in reftorch, or None."""
    parts = namespace.split(".")
    if parts[0] != "torch":
        return None
    obj = reftorch
    for i, part in enumerate(parts[1:], start=1):
        child = getattr(obj, part, None)
        if child is None and isinstance(obj, types.ModuleType):
            # Submodules PyTorch also leaves unimported (torch.utils.cpp_extension).
            try:
                child = importlib.import_module("reftorch." + ".".join(parts[1:i + 1]))
            except ImportError:
                child = None
        if child is None:
            return None
        obj = child
    # Some items are documented with a dotted name ("Event.query", "comm.broadcast"): each
    # part must resolve in turn.
    for part in name.split("(")[0].strip().split("."):
        if not part.isidentifier():
            return None
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def coverage_report():
    """{namespace: (implemented, documented)} over the inventory."""
    counts = defaultdict(lambda: [0, 0])
    for namespace, name in documented_items():
        counts[namespace][1] += 1
        if _resolve(namespace, name) is not None:
            counts[namespace][0] += 1
    return {ns: tuple(v) for ns, v in counts.items()}


def test_inventory_is_the_shared_one():
    shared = pathlib.Path(__file__).resolve().parents[2] / "shared" / "spec" / \
        "documented_api.tsv"
    if shared.exists():
        assert shared.read_bytes() == INVENTORY.read_bytes()


def test_foundation_items_are_implemented():
    """The items issue 2 names must resolve."""
    for name in ("is_tensor", "is_storage", "is_floating_point", "set_default_dtype",
                 "get_default_dtype", "set_default_tensor_type", "numel", "set_printoptions",
                 "tensor", "as_tensor", "from_numpy", "zeros", "zeros_like", "ones",
                 "ones_like", "arange", "range", "linspace", "logspace", "eye", "empty",
                 "empty_like", "full", "full_like", "finfo", "iinfo", "FloatStorage"):
        assert _resolve("torch", name) is not None, name


def test_every_declared_pointwise_op_is_public_and_in_the_op_database():
    from reftorch import _dispatch
    from .opdb import BY_NAME, structured_ops
    tested = set(BY_NAME) | {info.name for info in structured_ops()}
    for name, op in _dispatch.all_ops().items():
        if op.family == "pointwise":
            if name.startswith("special_"):
                # torch.special-only functions: no torch.X or Tensor.X spelling in PyTorch.
                assert callable(getattr(reftorch.special, name[len("special_"):])), name
            elif name.endswith("_backward"):
                pass  # backward ops (tanh_backward): torch.ops.aten only, tested as OpInfos
            else:
                assert callable(getattr(reftorch, name)), name
                assert hasattr(reftorch.Tensor, name), name
            assert name in tested, f"{name} has no op-database entry"


def test_coverage_counts_are_consistent():
    report = coverage_report()
    implemented, documented = report["torch"]
    assert 0 < implemented <= documented
