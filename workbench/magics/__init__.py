"""IPython integration: ``%load_ext workbench`` registers the magics named in MAGICS.

Each entry is "module:MagicsClass"; a new magic adds one line to the list.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from workbench.magics.gpuprofile import LAST_RUN_NAME, last_run

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.core.magic import Magics

MAGICS: list[str] = [
    "workbench.magics.gpuprofile:GpuProfileMagics",
    "workbench.magics.variant:GpuVariantMagics",
    "workbench.magics.study:GpuStudyMagics",
]


def _magics_class(entry: str) -> type[Magics]:
    module_name, _, class_name = entry.partition(":")
    return getattr(importlib.import_module(module_name), class_name)


def load_ipython_extension(ipython: InteractiveShell) -> None:
    try:    # charts shown as a cell's last line draw offline (altair's default loads a CDN)
        from workbench.charts.offline import enable_offline_renderer

        enable_offline_renderer()
    except ImportError:
        pass
    for entry in MAGICS:
        ipython.register_magics(_magics_class(entry))


def unload_ipython_extension(ipython: InteractiveShell) -> None:
    """Remove the magics registered above (IPython has no public call for it)."""
    registry = ipython.magics_manager.magics
    for entry in MAGICS:
        for kind, names in _magics_class(entry).magics.items():
            for name in names:
                registry[kind].pop(name, None)


__all__ = ["LAST_RUN_NAME", "MAGICS", "last_run", "load_ipython_extension",
           "unload_ipython_extension"]
