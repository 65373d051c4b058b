"""Deprecated: the subcommands moved to ``workbench.cli`` (``workbench.cli.analyze``, ...). This
package warns once, at import, gives each old subcommand module by attribute
(``from workbench.commands import analyze``), and goes in the next release."""

from __future__ import annotations

import importlib
from types import ModuleType

from workbench._moved import warn_moved

COMMANDS = ("analyze", "diff", "history", "profile", "report")

warn_moved(__name__, "workbench.cli (the command modules: workbench.cli.analyze, ...)")


def __getattr__(name: str) -> ModuleType:
    if name in COMMANDS:
        return importlib.import_module(f"workbench.cli.{name}")
    raise AttributeError(f"module 'workbench.commands' has no attribute {name!r}")
