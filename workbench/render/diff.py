"""A trace diff (``workbench.analysis.diff.TraceDiff``, what ``wb.diff`` returns) in HTML, text and Markdown:
the one-sentence summary, the totals and how they were normalised, the largest changes (kernels or ops,
with what appeared and disappeared), the change by group (and in HTML its waterfall, drawn offline), and
the two traces' temporal and idle breakdowns side by side."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from workbench.render.escape import html_text
from workbench.render.tables import Cell, html_pairs, html_table, markdown_pairs, markdown_table, text_pairs, text_table
from workbench.units import format_ms

if TYPE_CHECKING:
    from workbench.analysis.diff import TraceDiff

TOP_ROWS = 15


def _ms(us: Any, signed: bool = False) -> Cell:
    if us is None or (isinstance(us, float) and math.isnan(us)):
        return Cell("n/a", numeric=True)
    text = format_ms(abs(us) / 1000 if signed else us / 1000)
    if signed:
        text = ("+" if us >= 0 else "-") + text
    return Cell(text, f"{us:,.3f} µs", numeric=True)


def _num(value: Any) -> Cell:
    v = float(value)
    return Cell(f"{v:.0f}" if abs(v - round(v)) < 0.05 else f"{v:.1f}", numeric=True)


def _pct(value: Any) -> Cell:
    v = float(value)
    return Cell("n/a" if math.isnan(v) else f"{v:+.1f} %", numeric=True)


def _name(value: Any, limit: int = 70) -> Cell:
    text = str(value)
    return Cell(text if len(text) <= limit else text[: limit - 1] + "…", text if len(text) > limit else None)


def _pairs(diff: TraceDiff) -> list[tuple[str, Cell | str]]:
    unit = "kernel" if diff.unit == "kernel" else "op self"
    counts = ", ".join(f"{n} {s}" for s, n in diff.counts.items())
    rows: list[tuple[str, Cell | str]] = [
        (f"{diff.label_a}", f"{format_ms(diff.total_a_us / 1000)} {unit} time {diff.basis} ({diff.source_a})"),
        (f"{diff.label_b}", f"{format_ms(diff.total_b_us / 1000)} {unit} time {diff.basis} ({diff.source_b})"),
        (
            "change",
            f"{'+' if diff.delta_us >= 0 else '-'}{format_ms(abs(diff.delta_us) / 1000)}"
            + (f" ({diff.delta_pct:+.1f} %)" if math.isfinite(diff.delta_pct) else ""),
        ),
        (f"{diff.unit}s", counts),
        ("largest", "; ".join(str(n)[:60] for n in diff.top) or "none"),
    ]
    return rows


def _unit_rows(diff: TraceDiff, limit: int) -> tuple[list[str], list[list[Cell | str]]]:
    t = diff.table.head(limit)
    if diff.unit == "kernel":
        headers = ["kernel", "status", "family", "count a", "count b", "time a", "time b", "change", "share"]
        rows = [
            [
                _name(r["name"]),
                r["status"],
                r["family"],
                _num(r["count_a"]),
                _num(r["count_b"]),
                _ms(r["time_a_us"]),
                _ms(r["time_b_us"]),
                _ms(r["delta_us"], True),
                _pct(r["share_pct"]),
            ]
            for _, r in t.iterrows()
        ]
    else:
        headers = ["op (call tree)", "status", "count a", "count b", "self a", "self b", "change", "share"]
        rows = [
            [
                _name(r["path"]),
                r["status"],
                _num(r["count_a"]),
                _num(r["count_b"]),
                _ms(r["self_a_us"]),
                _ms(r["self_b_us"]),
                _ms(r["delta_us"], True),
                _pct(r["share_pct"]),
            ]
            for _, r in t.iterrows()
        ]
    return headers, rows


def _group_rows(diff: TraceDiff) -> tuple[list[str], list[list[Cell | str]]]:
    return (
        ["group", "change", "share"],
        [
            [_name(g), _ms(d, True), _pct(s)]
            for g, d, s in zip(diff.groups["group"], diff.groups["delta_us"], diff.groups["share_pct"])
        ],
    )


def _temporal_rows(diff: TraceDiff) -> tuple[list[str], list[list[Cell | str]]]:
    t = diff.temporal
    if t is None or not len(t):
        return [], []
    headers = ["rank", "idle a", "idle b", "idle % a", "idle % b", "compute a", "compute b", "span a", "span b"]
    rows: list[list[Cell | str]] = []
    for _, r in t.iterrows():
        rows.append(
            [
                str(int(r["rank"])),
                _ms(r.get("a_idle_us")),
                _ms(r.get("b_idle_us")),
                Cell(f"{r.get('a_idle_pct', float('nan')):.1f} %", numeric=True),
                Cell(f"{r.get('b_idle_pct', float('nan')):.1f} %", numeric=True),
                _ms(r.get("a_compute_us")),
                _ms(r.get("b_compute_us")),
                _ms(r.get("a_kernel_time_us")),
                _ms(r.get("b_kernel_time_us")),
            ]
        )
    return headers, rows


def _idle_rows(diff: TraceDiff) -> tuple[list[str], list[list[Cell | str]]]:
    t = diff.idle
    if t is None or not len(t):
        return [], []
    return (
        ["rank", "idle cause", "idle a", "idle b"],
        [
            [str(int(r["rank"])), str(r["idle_category"]), _ms(r.get("a_idle_us")), _ms(r.get("b_idle_us"))]
            for _, r in t.iterrows()
        ],
    )


def _chart_html(diff: TraceDiff) -> str:
    """The waterfall, drawn offline (the vega bundle once per notebook, as every workbench chart)."""
    try:
        from workbench.charts.diff import diff_waterfall_chart
        from workbench.charts.notebook import charts_html

        return charts_html([diff_waterfall_chart(diff)])
    except ImportError:  # altair not installed: the tables say it all
        return ""
    except Exception as exc:  # noqa: BLE001 (a chart that cannot be drawn must not hide the tables)
        from workbench.render.charts import failed_html

        return failed_html("the waterfall", exc)


def html(diff: TraceDiff, *, limit: int = TOP_ROWS, chart: bool = True) -> str:
    parts = [
        f"<div class='wb-diff'><p><b>{html_text(diff.summary)}</b></p>",
        html_pairs(_pairs(diff), "wb-diff-summary"),
    ]
    parts += [f"<p class='wb-note'>{html_text(n)}</p>" for n in diff.notes]
    if chart:
        parts.append(_chart_html(diff))
    headers, rows = _unit_rows(diff, limit)
    parts.append(
        f"<h4>Largest changes ({diff.unit}s, {html_text(diff.basis)})</h4>"
        + html_table(headers, rows, "wb-trace-table")
    )
    if len(diff.table) > limit:
        parts.append(f"<p class='wb-hidden'>{len(diff.table) - limit:,} more {diff.unit}s not shown.</p>")
    headers, rows = _group_rows(diff)
    parts.append("<h4>Change by group</h4>" + html_table(headers, rows, "wb-trace-table"))
    for title, (headers, rows) in (
        ("Temporal breakdown, side by side", _temporal_rows(diff)),
        ("Idle by cause, side by side", _idle_rows(diff)),
    ):
        if rows:
            parts.append(f"<h4>{title}</h4>" + html_table(headers, rows, "wb-trace-table"))
    return "".join(parts) + "</div>"


def text(diff: TraceDiff, *, limit: int = TOP_ROWS) -> str:
    lines = [diff.summary, text_pairs(_pairs(diff))]
    lines += [f"note: {n}" for n in diff.notes]
    headers, rows = _unit_rows(diff, limit)
    lines += ["", f"== largest changes ({diff.unit}s, {diff.basis}) ==", text_table(headers, rows)]
    if len(diff.table) > limit:
        lines.append(f"  ... {len(diff.table) - limit:,} more {diff.unit}s")
    headers, rows = _group_rows(diff)
    lines += ["", "== change by group ==", text_table(headers, rows)]
    for title, (headers, rows) in (
        ("temporal breakdown, side by side", _temporal_rows(diff)),
        ("idle by cause, side by side", _idle_rows(diff)),
    ):
        if rows:
            lines += ["", f"== {title} ==", text_table(headers, rows)]
    return "\n".join(lines)


def markdown(diff: TraceDiff, *, limit: int = TOP_ROWS) -> str:
    headers, rows = _unit_rows(diff, limit)
    g_headers, g_rows = _group_rows(diff)
    return "\n\n".join(
        [
            f"**{diff.summary}**",
            markdown_pairs(_pairs(diff)),
            *[f"_{n}_" for n in diff.notes],
            markdown_table(headers, rows),
            markdown_table(g_headers, g_rows),
        ]
    )
