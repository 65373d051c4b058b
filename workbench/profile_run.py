"""Deprecated: ``workbench.profile_run`` moved to ``workbench.api.run`` (ProfileRun, wb.ProfileRun, and wb.load_run). This thin re-export
of the same objects warns once, at import, and goes in the next release."""

from workbench._moved import warn_moved
from workbench.api.run import *  # noqa: F401,F403
from workbench.api.run import __all__  # noqa: F401

warn_moved(__name__, "workbench.api (or use wb.load_run)")


def __getattr__(name: str) -> object:  # any other name the old module had: the new module's
    import workbench.api.run as moved

    return getattr(moved, name)
