"""The FixList rendering (``run.fixes``): one row per fix, best first: the fix, where it applies,
why (or why it cannot run here) and the time the hypotheses it tests put at stake per call, in
HTML and Markdown, built once as rows (``workbench.render.tables``), every cell escaped; the text
is the list's own lines (``FixList.to_text``: one line a fix), control characters replaced.

The list draws nothing itself: a notebook reaches this module through IPython's display formatter
(``workbench.render.ipython``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from workbench.render.escape import html_text, markdown_text, plain
from workbench.render.tables import Cell, html_table, markdown_table
from workbench.units import format_ms

if TYPE_CHECKING:
    from workbench.fixes.fix import Applicability
    from workbench.fixes.listing import FixList

HEADERS = ("fix", "applies at", "why", "at stake / call")
NONE_FOUND = "No fix applies to this run: none of the catalog's patterns was found."


def _row(r: Applicability) -> list[Cell | str]:
    stake = Cell(format_ms(r.stake_ms), f"{r.stake_ms:.6g} ms", numeric=True) if r.stake_ms else "found by pattern"
    if not r.applies:
        return [r.fix, "(cannot run here)", r.reason, ""]
    return [r.fix, r.where or "the whole call", r.reason, stake]


def rows(fixes: FixList) -> list[list[Cell | str]]:
    """The table's rows: the fixes that apply (largest stake first), then those that cannot run here."""
    return [_row(r) for r in fixes]


def html(fixes: FixList) -> str:
    if not len(fixes):
        return f"<div class='wb-fixes'><p><em>{html_text(NONE_FOUND)}</em></p></div>"
    head = f"<p><b>Fixes for this run</b> ({len(fixes.names)} apply)</p>"
    return f"<div class='wb-fixes'>{head}{html_table(HEADERS, rows(fixes), 'wb-fixes')}</div>"


def text(fixes: FixList) -> str:
    return plain(fixes.to_text())


def markdown(fixes: FixList) -> str:
    if not len(fixes):
        return f"_{markdown_text(NONE_FOUND)}_"
    return markdown_table(HEADERS, rows(fixes))
