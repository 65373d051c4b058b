"""Deprecated: ``workbench.profiling`` moved to ``workbench.api.profiling`` (wb.profile). This thin re-export
of the same objects warns once, at import, and goes in the next release."""

from workbench._moved import warn_moved
from workbench.api.profiling import *  # noqa: F401,F403
from workbench.api.profiling import __all__  # noqa: F401

warn_moved(__name__, "workbench.api (or use wb.profile)")


def __getattr__(name: str) -> object:  # any other name the old module had: the new module's
    import workbench.api.profiling as moved

    return getattr(moved, name)
