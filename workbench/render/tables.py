"""Tables for every format from one description: headers plus rows of ``Cell``s.

A section builds its rows once (``workbench.render.run`` and friends); ``html_table``,
``markdown_table`` and ``text_table`` lay the same rows out, escaping each cell
(``workbench.render.escape``). A cell may carry a ``title`` (the exact figure behind a rounded
one), shown as an HTML tooltip, and be ``numeric`` (right-aligned, ``class="wb-num"``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from workbench.render.escape import html_text, markdown_text, plain


@dataclass(frozen=True)
class Cell:
    text: str
    title: str | None = None  # HTML tooltip: the exact value behind the shown one
    numeric: bool = False


def cell(value: object, title: str | None = None, *, numeric: bool = False) -> Cell:
    return value if isinstance(value, Cell) else Cell(str(value), title, numeric)


Row = Sequence[Cell | str]


# A notebook's own stylesheet right-aligns every table cell (JupyterLab: ``:not(.jp-RenderedMarkdown)
# .jp-RenderedHTMLCommon td {text-align: right}``): in the outputs shown in a notebook (``notebook_html``)
# text reads left-aligned and numbers right-aligned, for every table workbench writes (their classes
# start with ``wb-`` or ``workbench-``); !important because the notebook's rule is the more specific one.
# One rule, no external stylesheet.
_OURS = ('table[class*="wb-"]', 'table[class*="workbench-"]')
NOTEBOOK_CSS = (
    "<style>"
    + ",".join(f"{t} th,{t} td" for t in _OURS)
    + "{text-align:left !important;vertical-align:top}"
    + ",".join(f"{t} td.wb-num" for t in _OURS)
    + "{text-align:right !important;font-variant-numeric:tabular-nums;white-space:nowrap}</style>"
)

QUOTES = ('"', "'")  # the attribute quotes a table may be written with (either is safe: html_text escapes both)


def _html_cell(tag: str, value: Cell | str, quote: str = '"') -> str:
    c = cell(value)
    title = f" title={quote}{html_text(c.title)}{quote}" if c.title else ""
    klass = f" class={quote}wb-num{quote}" if c.numeric else ""
    return f"<{tag}{klass}{title}>{html_text(c.text)}</{tag}>"


def html_table(headers: Sequence[str], rows: Sequence[Row], css_class: str, *, quote: str = '"') -> str:
    """The table with a header row; ``quote`` is the attributes' quote (``'`` for the trace report's
    tables, which have always been written so)."""
    if quote not in QUOTES:
        raise ValueError(f"an HTML attribute is quoted with ' or \", not {quote!r}")
    head = "".join(f"<th>{html_text(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(_html_cell("td", v, quote) for v in row) + "</tr>" for row in rows)
    klass = f"class={quote}{html_text(css_class)}{quote}"
    return f"<table {klass}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def html_pairs(rows: Sequence[tuple[str, Cell | str]], css_class: str) -> str:
    """A two-column table: a header cell (the label) and its value per row."""
    body = "".join(f"<tr><th style='text-align:left'>{html_text(k)}</th>{_html_cell('td', v)}</tr>" for k, v in rows)
    return f'<table class="{html_text(css_class)}">{body}</table>'


def markdown_table(headers: Sequence[str], rows: Sequence[Row]) -> str:
    lines = ["| " + " | ".join(markdown_text(h) for h in headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(markdown_text(cell(v).text) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def markdown_pairs(rows: Sequence[tuple[str, Cell | str]]) -> str:
    return markdown_table(("", ""), [(k, v) for k, v in rows])


def text_table(headers: Sequence[str], rows: Sequence[Row], indent: str = "  ") -> str:
    cells = [[plain(h) for h in headers]] + [[plain(cell(v).text).replace("\n", " ") for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return "\n".join(indent + "  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in cells)


def text_pairs(rows: Sequence[tuple[str, Cell | str]], indent: str = "  ") -> str:
    width = max((len(k) for k, _ in rows), default=0)
    return "\n".join(f"{indent}{plain(k).ljust(width)}  {plain(cell(v).text)}" for k, v in rows)
