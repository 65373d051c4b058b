"""Old import paths kept for one release: a module moved in 0.1 (``workbench.facade`` to
``workbench.api.trace``, say) leaves a thin re-export at its old path that warns once, at import,
naming the user's import line and the new path. A leaf (standard library only): every shim, of
any layer, may use it."""

from __future__ import annotations

import warnings

# old module path -> the module that now holds its names; saved artefacts that name a module
# (a study's baseline callable, a report's workload string) are read through this table too
MOVED_MODULES: dict[str, str] = {
    "workbench.facade": "workbench.api.trace",
    "workbench.profile_run": "workbench.api.run",
    "workbench.profiling": "workbench.api.profiling",
    "workbench.rank_folder": "workbench.api.rank_folder",
    "workbench.distributed": "workbench.api.distributed",
    "workbench.commands": "workbench.cli",
    "workbench.demo": "workbench.workloads.demo",
}
REMOVED_IN = "the next release"


def current_module(name: str) -> str:
    """The module path that holds what ``name`` held: ``name`` itself unless it moved."""
    for old, new in MOVED_MODULES.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old) :]
    return name


def warn_moved(old: str, new: str, hint: str = "") -> None:
    """The DeprecationWarning of a shim module, called at its top level: it names the line that
    imported the old path (the import machinery's frames are skipped)."""
    warnings.warn(
        f"{old} is deprecated: import from {new}{hint}; the old path goes in {REMOVED_IN}",
        DeprecationWarning,
        stacklevel=3,
    )


def current_spec(spec: str) -> str:
    """A ``module:function`` workload string with its module read through ``current_module``: the
    workload a report written before a move names (``workbench.demo:workload``) is the same one."""
    module, sep, function = spec.partition(":")
    return current_module(module) + sep + function if sep else spec
