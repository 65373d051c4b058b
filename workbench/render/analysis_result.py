"""The rendering of an analysis result with no renderer of its own (a ``KernelBreakdown``, an
``IdleBreakdown``, a ``MemoryPeak`` ...: any ``workbench.analysis.result.AnalysisResult``): its
type's name and the first rows of its ``table``, in HTML, text and Markdown, every cell escaped.

A result type with its own renderer (``workbench.render.base.RENDERERS``: the attribution
breakdowns, the critical path, a trace diff) is drawn by that one: ``render.html`` and IPython's
display formatter both look at the most-derived class first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workbench.render.escape import html_text, markdown_text, plain
from workbench.render.tables import markdown_table

if TYPE_CHECKING:
    from workbench.analysis.result import AnalysisResult

MAX_ROWS = 30  # table rows shown; the rest are counted


def _name(result: AnalysisResult) -> str:
    return type(result).__name__


def _more(result: AnalysisResult, rows: int) -> str:
    left = len(result.table) - rows
    return f"… and {left} more row(s) (.table)" if left > 0 else ""


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def html(result: AnalysisResult, *, max_rows: int = MAX_ROWS) -> str:
    """The type's name in bold, then the table (pandas' HTML, every cell and header escaped)."""
    table = result.table.to_html(max_rows=max_rows, escape=True)
    return f"<div class='wb-analysis'><b>{html_text(_name(result))}</b>{table}</div>"


def text(result: AnalysisResult, *, max_rows: int = MAX_ROWS) -> str:
    """The type's name, then the table as pandas prints it (at most ``max_rows`` rows)."""
    shown = result.table.to_string(max_rows=max_rows) if len(result.table.columns) else "(no columns)"
    return plain(f"{_name(result)} ({len(result.table)} rows)\n{shown}")


def markdown(result: AnalysisResult, *, max_rows: int = MAX_ROWS) -> str:
    """The type's name in bold, then the first ``max_rows`` rows as a Markdown table."""
    head = f"**{markdown_text(_name(result))}**"
    table = result.table
    if not len(table.columns):
        return head + "\n\n_no columns_"
    shown = table.head(max_rows)
    rows = [[_cell(v) for v in row] for row in shown.itertuples(index=False, name=None)]
    more = _more(result, len(shown))
    return (
        head
        + "\n\n"
        + markdown_table([str(c) for c in table.columns], rows)
        + (f"\n\n{markdown_text(more)}" if more else "")
    )
