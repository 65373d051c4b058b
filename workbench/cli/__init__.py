"""The ``workbench`` command: thin argument handling over the library; no logic of its own.

Errors workbench raises on purpose (bad input, missing files) print one line and exit 2,
without a traceback. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Sequence

EXIT_USAGE = 2
COMMAND_MODULES = (
    "workbench.cli.report",
    "workbench.cli.analyze",
    "workbench.cli.profile",
    "workbench.cli.history",
    "workbench.cli.diff",
    "workbench.cli.rules",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="workbench",
        description="A notebook-native GPU performance lab: profile, diagnose, compare, report.",
    )
    from workbench import __version__

    parser.add_argument("--version", action="version", version=f"workbench {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # that command is not part of this installation
                continue
            raise
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads: no spin-waiting threads
    from workbench.errors import WorkbenchError

    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.handler(args) or 0)
    except WorkbenchError as exc:
        print(f"workbench {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
