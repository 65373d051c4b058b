"""The Trace rendering: a short summary card (ranks, events, span, device, warnings, top kernels
or ops), and in HTML the trace's charts, drawn offline (``workbench.charts``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from workbench.render.escape import html_text, markdown_text, plain
from workbench.render.tables import Cell, html_table, markdown_table, text_table
from workbench.units import format_ms

if TYPE_CHECKING:
    from workbench.trace import TraceData

NO_TABLES_HERE = (
    "The ranks were read by worker processes, which keep per-rank summaries: the charts need the tables "
    "(trace.save_charts(...) reads every rank's here; trace.rank(r) shows one rank)."
)
MAX_WARNINGS_SHOWN = 10
TOP_ROWS = 5


def top_rows(trace: TraceData, top: int = TOP_ROWS) -> tuple[str, list[str], list[list[Cell]]]:
    """(title, headers, rows): the kernels with the most time on a GPU trace, else the CPU ops by
    self time, over the whole trace (totals, not per call)."""
    from workbench import analysis

    # a Trace answers through its own methods (a rank folder's from its summaries, no tables read)
    kernels = getattr(trace, "kernel_breakdown", None) or (lambda: analysis.kernel_breakdown(trace))
    ops = getattr(trace, "op_breakdown", None) or (lambda: analysis.op_breakdown(trace))
    if trace.has_gpu:
        table = kernels().table.sort_values("sum_us", ascending=False).head(top)
        rows = [
            [
                Cell(str(r["name"])),
                Cell(str(r["kernel_type"])),
                Cell(str(r["count"]), numeric=True),
                Cell(format_ms(r["sum_us"] / 1e3), title=f"{r['sum_us']:.1f} µs", numeric=True),
            ]
            for r in table.to_dict("records")
        ]
        return f"top {top} kernels by total time", ["kernel", "type", "launches", "total"], rows
    table = ops().table.head(top)
    rows = [
        [
            Cell(str(r["name"])),
            Cell(str(r["count"]), numeric=True),
            Cell(format_ms(r["self_us"] / 1e3), title=f"{r['self_us']:.1f} µs", numeric=True),
        ]
        for r in table.to_dict("records")
    ]
    return f"top {top} CPU ops by total self time", ["op", "calls", "self time"], rows


def _warnings(trace: TraceData) -> tuple[list[str], int]:
    warnings = list(trace.warnings)
    return warnings[:MAX_WARNINGS_SHOWN], max(0, len(warnings) - MAX_WARNINGS_SHOWN)


def html(trace: TraceData, *, charts: bool = True) -> str:
    shown, more = _warnings(trace)
    parts = [f"<div class='workbench-trace'><p><b>{html_text(trace.summary())}</b></p>"]
    if shown:
        parts.append(
            "<p>Warnings:</p><ul>"
            + "".join(f"<li>{html_text(w)}</li>" for w in shown)
            + "</ul>"
            + (f"<p>… and {more} more</p>" if more else "")
        )
    try:
        title, headers, rows = top_rows(trace)
        if rows:
            parts.append(f"<h4>{html_text(title)}</h4>" + html_table(headers, rows, "wb-trace-top"))
    except Exception as exc:  # a display must not raise: say what failed instead
        parts.append(f"<p>no table: {html_text(type(exc).__name__)}: {html_text(exc)}</p>")
    if charts and _summarised(trace):
        parts.append(f"<p>{html_text(NO_TABLES_HERE)}</p>")
    elif charts:
        parts.append(_charts_html(trace))
    parts.append("</div>")
    return "".join(parts)


def _summarised(trace: TraceData) -> bool:
    """A rank folder read by workers whose tables are not in this process (drawing would read them all)."""
    folder = getattr(trace, "rank_folder", None)
    return folder is not None and not folder.read_all


def _charts_html(trace: TraceData) -> str:
    try:
        from workbench.charts.notebook import charts_html
        from workbench.charts.run import trace_charts

        return charts_html(trace_charts(trace))
    except Exception as exc:  # altair missing, or a chart failed: say so instead of a blank
        return (
            f"<p class='workbench-chart-error'>the trace's charts could not be drawn: "
            f"{html_text(type(exc).__name__)}: {html_text(exc)}</p>"
        )


def text(trace: TraceData) -> str:
    shown, more = _warnings(trace)
    lines = [plain(trace.summary())] + [f"  warning: {plain(w)}" for w in shown]
    if more:
        lines.append(f"  ... and {more} more warning(s)")
    title, headers, rows = top_rows(trace)
    if rows:
        lines += [f"{title}:", text_table(headers, rows)]
    return "\n".join(lines)


def markdown(trace: TraceData) -> str:
    shown, more = _warnings(trace)
    out = [f"**{markdown_text(trace.summary())}**", ""] + [f"- warning: {markdown_text(w)}" for w in shown]
    if more:
        out.append(f"- … and {more} more warning(s)")
    title, headers, rows = top_rows(trace)
    if rows:
        out += ["", f"#### {markdown_text(title)}", "", markdown_table(headers, rows)]
    return "\n".join(out) + "\n"
