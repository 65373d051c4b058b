"""Deprecated: ``workbench.distributed`` moved to ``workbench.api.distributed`` (wb.profile_distributed, DistributedTrace and the step marker step()). This thin re-export
of the same objects warns once, at import, and goes in the next release."""

from workbench._moved import warn_moved
from workbench.api.distributed import *  # noqa: F401,F403
from workbench.api.distributed import __all__  # noqa: F401

warn_moved(
    __name__, "workbench.api.distributed (or use wb.profile_distributed; in a script, workbench.api.distributed.step())"
)


def __getattr__(name: str) -> object:  # any other name the old module had: the new module's
    import workbench.api.distributed as moved

    return getattr(moved, name)
