"""A report page's heading: its title and a line under it, every text escaped (the report templates'
first cell: ``display(HTML(page.title_html(title, "workload ", Code(run.name), ...)))``)."""

from __future__ import annotations

from workbench.render.escape import html_text
from workbench.render.panel import Code, status_html

__all__ = ["Code", "title_html"]


def title_html(title: str, *line: str | Code) -> str:
    """``<h1>title</h1>`` and, where ``line`` has parts, a paragraph of them (texts, and ``Code`` parts as code)."""
    under = f"<p>{status_html(*line)}</p>" if line else ""
    return f"<h1>{html_text(title)}</h1>{under}"
