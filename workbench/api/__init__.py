"""The face: the public objects that ``import workbench as wb`` hands out, in one package.

    workbench.api.trace          Trace (wb.Trace) and load_trace (wb.load_trace): a trace's tables plus one
                                 method per analysis and the diagnosis
    workbench.api.run            ProfileRun (wb.ProfileRun) and load_run (wb.load_run)
    workbench.api.profiling      profile (wb.profile)
    workbench.api.rank_folder    RankFolder: a folder of rank files analysed where each rank is read
    workbench.api.distributed    profile_distributed (wb.profile_distributed), DistributedTrace, and
                                 step(), the step marker of a script profiled by ``workbench profile``

The names below load lazily, as the package root's do: ``from workbench.api import Trace`` does not
import torch (a trace recorded on a GPU box is analysed anywhere).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the lazy names below, for type checkers
    from workbench.api.distributed import DistributedTrace, profile_distributed, step
    from workbench.api.profiling import profile
    from workbench.api.rank_folder import RankFolder
    from workbench.api.run import ProfileRun, load_run
    from workbench.api.trace import Trace, load_trace

# public name -> its module
_LAZY: dict[str, str] = {
    "Trace": "workbench.api.trace",
    "load_trace": "workbench.api.trace",
    "ProfileRun": "workbench.api.run",
    "load_run": "workbench.api.run",
    "profile": "workbench.api.profiling",
    "RankFolder": "workbench.api.rank_folder",
    "profile_distributed": "workbench.api.distributed",
    "DistributedTrace": "workbench.api.distributed",
    "step": "workbench.api.distributed",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    try:
        module_name = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'workbench.api' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
