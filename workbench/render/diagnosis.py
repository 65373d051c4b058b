"""The diagnosis rendering: a ``Diagnosis`` and ``run.hypotheses`` (a ``HypothesisList``), in
HTML, text (what ``workbench analyze`` prints) and Markdown.

The layout is the hypotheses package's own (``workbench.hypotheses.render``: ranked entries with
their evidence, prediction and falsifier, then what could not be judged); this module is where
views reach it, and adds the run-level banner (timing caveats) of a Diagnosis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workbench.hypotheses import Diagnosis
from workbench.hypotheses import render as hypotheses_render
from workbench.render.escape import html_text, markdown_text, plain

if TYPE_CHECKING:
    from workbench.hypotheses import HypothesisList

    Diagnosed = Diagnosis | HypothesisList


def _banner(value: Diagnosed) -> str:
    """The timing caveats qualifying a Diagnosis ("" for a plain hypothesis list)."""
    return value.banner if isinstance(value, Diagnosis) else ""


def html(value: Diagnosed, *, limit: int | None = None, **options: Any) -> str:
    banner = _banner(value)
    head = f"<p class='wb-banner'>{html_text(banner)}</p>" if banner else ""
    return head + hypotheses_render.render_html(value, limit=limit, **options)


def text(value: Diagnosed, *, limit: int | None = None, **options: Any) -> str:
    banner = _banner(value)
    return (plain(banner) + "\n" if banner else "") + hypotheses_render.render_text(value, limit=limit, **options)


def markdown(value: Diagnosed, *, limit: int | None = None) -> str:
    banner = _banner(value)
    return (f"_{markdown_text(banner)}_\n\n" if banner else "") + hypotheses_render.render_markdown(value, limit=limit)
