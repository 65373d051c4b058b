"""Tell IPython's display formatter how to show the results whose own layer may not import the
render layer (a Comparison, a DecisionRecord, a Diagnosis, ``run.hypotheses``, a Study): their
HTML is registered by type name (``for_type_by_name``), so neither their modules nor any chart
library is imported until such a value is displayed.

Done when ``workbench`` is imported inside an IPython shell and by ``%load_ext workbench``.
"""
from __future__ import annotations

from typing import Any

from workbench.render.base import DISPLAYED_BY_NAME, RENDERERS


def display_html(value: Any) -> str:
    """The formatter's function: the value's HTML rendering (``workbench.render.html``)."""
    from workbench.render.dispatch import html

    return html(value)


def register_display_formatters(shell: Any) -> None:
    """Register ``display_html`` with ``shell``'s ``text/html`` formatter for each type of
    ``workbench.render.base.DISPLAYED_BY_NAME`` whose renderer is installed."""
    import importlib.util

    formatter = shell.display_formatter.formatters["text/html"]
    for module, name in DISPLAYED_BY_NAME:
        if importlib.util.find_spec(RENDERERS[(module, name)]) is not None:
            formatter.for_type_by_name(module, name, display_html)


def register_in_running_shell() -> bool:
    """Register with the running IPython shell, if any (IPython is not imported otherwise);
    True when a shell was found."""
    import sys

    if "IPython" not in sys.modules:
        return False
    shell = sys.modules["IPython"].get_ipython()
    if shell is None or getattr(shell, "display_formatter", None) is None:
        return False
    register_display_formatters(shell)
    return True
