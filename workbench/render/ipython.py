"""Tell IPython's display formatter how to show the results whose own layer may not import the
render layer (a Comparison, a DecisionRecord, a Diagnosis, ``run.hypotheses``, ``run.health``,
``run.fixes``, a Study, ``run.attribution`` and the module / source-line breakdowns, every other
analysis result): their HTML is registered by type name (``for_type_by_name``), so neither their
modules nor any chart library is imported until such a value is displayed. This is their one
display path: none of them has a ``_repr_html_`` or ``_repr_markdown_`` of its own. IPython looks
a value's printer up along its class's MRO, most-derived class first, so a registration for a base
class (``AnalysisResult``) covers its subclasses, and a subclass registered itself (``CriticalPath``)
keeps its own. A registered printer comes before a type's own ``_repr_html_``. The plain text of
``run.health`` and the attribution results (a terminal shell, the ``text/plain`` copy in a saved
notebook) is their text rendering too, not a dataclass repr.

Done when ``workbench`` is imported inside an IPython shell and by ``%load_ext workbench``.
"""

from __future__ import annotations

from typing import Any

from workbench.render.base import DISPLAYED_BY_NAME, PLAIN_TEXT_BY_NAME, RENDERERS


def display_html(value: Any) -> str:
    """The formatter's function: the value's HTML rendering as a notebook shows it
    (``workbench.render.notebook_html``)."""
    from workbench.render.dispatch import notebook_html

    return notebook_html(value)


def display_text(value: Any, printer: Any, cycle: bool) -> None:
    """The plain-text formatter's function (IPython's pretty-printer protocol): the value's text
    rendering (``workbench.render.text``)."""
    from workbench.render.dispatch import text

    printer.text(f"<{type(value).__name__}>" if cycle else text(value))


def register_display_formatters(shell: Any) -> None:
    """Register ``display_html`` with ``shell``'s ``text/html`` formatter for each type of
    ``workbench.render.base.DISPLAYED_BY_NAME``, and ``display_text`` with its ``text/plain``
    formatter for each of ``PLAIN_TEXT_BY_NAME``, where the type's renderer is installed."""
    import importlib.util

    formatters = shell.display_formatter.formatters
    for mime, types, function in (
        ("text/html", DISPLAYED_BY_NAME, display_html),
        ("text/plain", PLAIN_TEXT_BY_NAME, display_text),
    ):
        for module, name in types:
            if importlib.util.find_spec(RENDERERS[(module, name)]) is not None:
                formatters[mime].for_type_by_name(module, name, function)


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
