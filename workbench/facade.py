"""Deprecated: ``workbench.facade`` moved to ``workbench.api.trace`` (the public Trace, wb.Trace, and wb.load_trace). This thin re-export
of the same objects warns once, at import, and goes in the next release."""

from workbench._moved import warn_moved
from workbench.api.trace import *  # noqa: F401,F403
from workbench.api.trace import __all__  # noqa: F401

warn_moved(__name__, "workbench.api (or use wb.load_trace)")


def __getattr__(name: str) -> object:  # any other name the old module had: the new module's
    import workbench.api.trace as moved

    return getattr(moved, name)
