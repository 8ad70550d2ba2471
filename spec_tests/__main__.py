"""`python -m spec_tests --plugin NAME`: check an installed plugin against the reference.

Loads only the named plugin (REFTORCH_PLUGINS) and runs the conformance kit: every kernel the
plugin registers is run on the op database's samples and compared with the reference kernels.
With `--oracle`, the reference-vs-PyTorch runners run too.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m spec_tests", description=__doc__)
    parser.add_argument("--plugin", required=True, help="plugin entry-point name, e.g. cpu")
    parser.add_argument("--oracle", action="store_true",
                        help="also compare the reference with PyTorch (needs torch)")
    parser.add_argument("pytest_args", nargs="*", help="extra arguments for pytest")
    args = parser.parse_args(argv)
    os.environ["REFTORCH_PLUGINS"] = args.plugin
    import pytest
    here = pathlib.Path(__file__).parent
    files = [str(here / "test_plugin_conformance.py")]
    if args.oracle:
        files += [str(here / "test_oracle_pointwise.py"), str(here / "test_oracle_ops.py")]
    return pytest.main(files + ["-q", "-p", "no:cacheprovider"] + args.pytest_args)


if __name__ == "__main__":
    sys.exit(main())
