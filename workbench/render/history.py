"""A cell's (or callable's) history (``run.history``, ``workbench.study.history.History``) in
HTML, text and Markdown: how many runs, each change point with the shift it marks, the latest
runs' medians, and in HTML the trend chart (``workbench.charts.history.history_chart``, drawn
offline) with the change points marked.

Runs are numbered from 0 in order, as the trend chart's axis and ``History.to_text`` number them,
so a change point reads the same in the table and on the chart. A shift is the median of the
runs' medians after the change point against the one before it (the levels the change-point
search split the runs into). A history of one run has no trend yet: the HTML says so in one line.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from workbench.render.escape import html_text, markdown_text
from workbench.render.tables import (
    Cell,
    html_pairs,
    html_table,
    markdown_pairs,
    markdown_table,
    text_pairs,
    text_table,
)
from workbench.units import format_ms

if TYPE_CHECKING:
    from workbench.study.history import History

TREND_MIN_RUNS = 2  # a trend (chart, change points) needs this many runs
LATEST_RUNS = 8  # runs listed in the table, the latest last
RUN_HEADERS = ("run", "time", "median", "IQR", "")
CHANGE_MARK = "← change"


def _levels(history: History) -> list[float]:
    """The median of the runs' medians in each segment the change points split the runs into."""
    medians = [e.median_ms for e in history.entries]
    bounds = [0, *sorted(i for i in history.change_points if 0 < i < len(medians)), len(medians)]
    return [statistics.median(medians[a:b]) for a, b in zip(bounds, bounds[1:]) if b > a]


def change_texts(history: History) -> list[str]:
    """One line per change point: where it begins and the shift of the level it marks."""
    starts = sorted(i for i in history.change_points if 0 < i < len(history.entries))
    levels = _levels(history)
    out = []
    for k, start in enumerate(starts):
        before, after = levels[k], levels[k + 1]
        change = f" ({after / before - 1:+.0%})" if before > 0 else ""
        out.append(f"run {start} ({history.entries[start].time}): {format_ms(before)} → {format_ms(after)}{change}")
    return out


def summary_rows(history: History) -> list[tuple[str, Cell]]:
    """Runs recorded, the change points with their shifts, the first and latest medians."""
    entries = history.entries
    rows = [("runs recorded", Cell(str(len(entries))))]
    if len(entries) >= TREND_MIN_RUNS:
        rows.append(("change points", Cell("; ".join(change_texts(history)) or "none: one level throughout")))
    if entries:
        first, last = entries[0], entries[-1]
        if len(entries) > 1:
            rows.append(
                (
                    "first median",
                    Cell(
                        format_ms(first.median_ms) + f" (run 0, {first.time})",
                        title=f"{first.median_ms:.4f} ms",
                        numeric=True,
                    ),
                )
            )
        rows.append(
            (
                "latest median",
                Cell(
                    format_ms(last.median_ms) + f" (run {len(entries) - 1}, {last.time})",
                    title=f"{last.median_ms:.4f} ms",
                    numeric=True,
                ),
            )
        )
    return rows


def run_rows(history: History, latest: int = LATEST_RUNS) -> list[list[Cell]]:
    """The latest runs, oldest first: number, time, median, IQR, and the mark of a change point."""
    starts = set(history.change_points)
    first = max(0, len(history.entries) - latest)
    return [
        [
            Cell(str(i), numeric=True),
            Cell(e.time),
            Cell(format_ms(e.median_ms), title=f"{e.median_ms:.4f} ms", numeric=True),
            Cell(format_ms(e.spread_ms), numeric=True),
            Cell(CHANGE_MARK if i in starts else ""),
        ]
        for i, e in enumerate(history.entries)
        if i >= first
    ]


def _hidden(history: History, latest: int) -> int:
    return max(0, len(history.entries) - latest)


def chart_html(history: History) -> str:
    """The trend chart, drawn offline; a sentence where it cannot be drawn (a display never raises)."""
    try:
        from workbench.charts.history import history_chart
        from workbench.charts.notebook import charts_html

        return charts_html([history_chart(history)])
    except Exception as exc:  # altair missing, or the chart failed: say so
        return (
            f"<p class='workbench-chart-error'>history chart not drawn: {html_text(type(exc).__name__)}: "
            f"{html_text(exc)}</p>"
        )


def html(history: History, *, charts: bool = True, latest: int = LATEST_RUNS) -> str:
    """The history as an HTML fragment: the summary, the trend chart and the latest runs; one
    line for a history of a single run."""
    entries = history.entries
    if len(entries) < TREND_MIN_RUNS:
        first = f" ({format_ms(entries[0].median_ms)}, {entries[0].time})" if entries else ""
        return (
            f"<p class='wb-history'>{html_text(f'{len(entries)} run recorded so far{first}')}: the trend and "
            "its change points show from the second run of the same code in the same environment.</p>"
        )
    hidden = _hidden(history, latest)
    more = f"<p style='font-size:smaller'>{hidden} earlier run(s) on the chart only</p>" if hidden else ""
    return (
        "<div class='wb-history'>"
        + html_pairs(summary_rows(history), "wb-history-summary")
        + (chart_html(history) if charts else "")
        + html_table(RUN_HEADERS, run_rows(history, latest), "wb-history-runs")
        + more
        + "</div>"
    )


def text(history: History, *, latest: int = LATEST_RUNS) -> str:
    """The history as plain text: the summary and the latest runs, change points marked."""
    lines = [text_pairs(summary_rows(history))]
    if len(history.entries) >= TREND_MIN_RUNS:
        lines.append(text_table(RUN_HEADERS, run_rows(history, latest)))
        if _hidden(history, latest):
            lines.append(f"  ({_hidden(history, latest)} earlier run(s) not listed)")
    return "\n".join(lines)


def markdown(history: History, *, latest: int = LATEST_RUNS) -> str:
    """The history as Markdown: the summary and the latest runs as tables."""
    blocks = [markdown_pairs(summary_rows(history))]
    if len(history.entries) >= TREND_MIN_RUNS:
        blocks.append(markdown_table(RUN_HEADERS, run_rows(history, latest)))
        if _hidden(history, latest):
            blocks.append(markdown_text(f"{_hidden(history, latest)} earlier run(s) not listed"))
    return "\n\n".join(blocks) + "\n"
