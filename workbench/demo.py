"""Deprecated: ``workbench.demo`` moved to ``workbench.workloads.demo`` (also ``wb.demo``). This thin
re-export of the same objects warns once, at import, and goes in the next release; the workload
string ``workbench.demo:workload`` of a report written before the move still names the same workload."""

from workbench._moved import warn_moved
from workbench.workloads.demo import *  # noqa: F401,F403
from workbench.workloads.demo import make_inputs, run, workload  # noqa: F401

warn_moved(__name__, "workbench.workloads.demo (or use wb.demo)")


def __getattr__(name: str) -> object:  # any other name the old module had: the new module's
    import workbench.workloads.demo as moved

    return getattr(moved, name)
