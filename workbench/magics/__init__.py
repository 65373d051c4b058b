"""IPython integration: ``%load_ext workbench`` registers the magics named in MAGICS.

Each entry is "module:MagicsClass"; a new magic adds one line to the list.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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


# what the magics return or display, shown through workbench.render in every mime type: a line
# magic's result (``%gpustudy study --accept NAME`` returns the new Baseline) and a comparison's
# plain-text copy (a terminal shell, the text/plain a saved notebook keeps) are the renderings,
# never a dataclass repr several screens long
SHOWN: tuple[tuple[str, str, str], ...] = (
    ("workbench.study.baseline", "Baseline", "workbench.render.study"),
    ("workbench.study.study", "Study", "workbench.render.study"),
    ("workbench.study.rounds", "StudyRound", "workbench.render.study"),
    ("workbench.variants.results", "Comparison", "workbench.render.comparison"),
    ("workbench.variants.decision", "DecisionRecord", "workbench.render.decision"),
)


def _html_of(module: str) -> Any:
    def show(value: Any) -> str:
        return importlib.import_module(module).html(value)

    return show


def _text_of(module: str) -> Any:
    def show(value: Any, printer: Any, cycle: bool) -> None:
        renderer = importlib.import_module(module)
        if cycle:
            printer.text(f"<{type(value).__name__}>")
        elif module.endswith(".comparison"):
            printer.text(renderer.text(value, record=True))
        else:
            printer.text(renderer.text(value))

    return show


def register_formatters(ipython: InteractiveShell) -> None:
    """Show the values of ``SHOWN`` through their renderer (HTML and plain text) in this shell."""
    if ipython.display_formatter is None:
        return  # a shell without a display formatter shows nothing rich anyway
    formatters = ipython.display_formatter.formatters
    for module, name, renderer in SHOWN:
        if name == "Baseline":
            formatters["text/html"].for_type_by_name(module, name, _html_of(renderer))
        formatters["text/plain"].for_type_by_name(module, name, _text_of(renderer))


def load_ipython_extension(ipython: InteractiveShell) -> None:
    try:  # charts shown as a cell's last line draw offline (altair's default loads a CDN)
        from workbench.charts.offline import enable_offline_renderer

        enable_offline_renderer()
    except ImportError:
        pass
    register_formatters(ipython)
    for entry in MAGICS:
        ipython.register_magics(_magics_class(entry))


def unload_ipython_extension(ipython: InteractiveShell) -> None:
    """Remove the magics registered above (IPython has no public call for it)."""
    registry = ipython.magics_manager.magics
    for entry in MAGICS:
        for kind, names in _magics_class(entry).magics.items():
            for name in names:
                registry[kind].pop(name, None)


__all__ = ["LAST_RUN_NAME", "MAGICS", "last_run", "load_ipython_extension", "unload_ipython_extension"]
