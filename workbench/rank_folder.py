"""Deprecated: ``workbench.rank_folder`` moved to ``workbench.api.rank_folder`` (RankFolder, what wb.load_trace returns for a folder of many rank files). This thin re-export
of the same objects warns once, at import, and goes in the next release."""

from workbench._moved import warn_moved
from workbench.api.rank_folder import *  # noqa: F401,F403
from workbench.api.rank_folder import __all__  # noqa: F401

warn_moved(__name__, "workbench.api.rank_folder")


def __getattr__(name: str) -> object:  # any other name the old module had: the new module's
    import workbench.api.rank_folder as moved

    return getattr(moved, name)
