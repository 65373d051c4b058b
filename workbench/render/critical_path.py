"""The critical path (``trace.critical_path()``), a what-if (``trace.what_if(...)``) and the collective waits
of a multi-rank step (``trace.collective_waits()``) in HTML, text and Markdown: the summary line, the
bound-by bar (HTML, drawn offline), the time and share per kind of work, what was inferred (the notes),
and the longest edges on the path with their op, module and source line."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from workbench.render.escape import html_text
from workbench.render.tables import Cell, html_pairs, html_table, markdown_pairs, markdown_table, text_pairs, text_table
from workbench.units import format_ms

if TYPE_CHECKING:
    from workbench.analysis.critical_path import CollectiveWaits, CriticalPath, WhatIf

TOP_EDGES = 12
KINDS = ("host", "launch", "kernel", "memory", "communication", "gpu_idle")


def _ms(us: Any) -> Cell:
    return Cell(format_ms(float(us) / 1000), f"{float(us):,.3f} µs", numeric=True)


def _name(value: Any, limit: int = 70) -> Cell:
    text = str(value)
    return Cell(text if len(text) <= limit else text[: limit - 1] + "…", text if len(text) > limit else None)


def _shares(cp: CriticalPath) -> tuple[list[str], list[list[Cell | str]]]:
    rows: list[list[Cell | str]] = [
        [kind, _ms(cp.by_kind_us.get(kind, 0.0)), Cell(f"{float(cp.shares_pct.get(kind, 0.0)):.1f} %", numeric=True)]
        for kind in KINDS
        if cp.by_kind_us.get(kind, 0.0)
    ]
    return ["kind of work", "time on the path", "share"], rows


def _pairs(cp: CriticalPath) -> list[tuple[str, Cell | str]]:
    rows: list[tuple[str, Cell | str]] = [
        ("step", f"{cp.step} on rank {cp.rank}: {format_ms(cp.step_us / 1000)}"),
        ("critical path", f"{format_ms(cp.length_us / 1000)}, bound by {cp.bound_by}"),
        ("host / GPU", f"{cp.cpu_pct:.1f} % / {cp.gpu_pct:.1f} % of the path"),
    ]
    if cp.sync_wait_us:
        rows.append(("host blocked in syncs on the path", _ms(cp.sync_wait_us)))
    waited = {k: v for k, v in (cp.waited_on_us or {}).items() if v}
    if waited:
        rows.append(
            ("GPU work a blocking call waited on", ", ".join(f"{k} {format_ms(v / 1000)}" for k, v in waited.items()))
        )
    rows.append(("semantics", str(cp.semantics)))
    return rows


def _edges(cp: CriticalPath, limit: int) -> tuple[list[str], list[list[Cell | str]]]:
    t = cp.table
    if not len(t):
        return [], []
    t = t[t["dur_us"] > 0].sort_values("dur_us", ascending=False).head(limit)
    cols = [c for c in ("op_name", "module", "location") if c in t.columns and (t[c].astype(str) != "").any()]
    headers = ["kind", "time", "name", "stream / thread"] + [c.replace("_", " ") for c in cols]
    rows: list[list[Cell | str]] = []
    for _, r in t.iterrows():
        stream = r.get("stream")
        where = f"stream {int(stream)}" if stream is not None and str(stream) not in ("", "nan", "-1") else ""
        if not where and str(r.get("tid", "")) not in ("", "nan"):
            where = f"thread {r.get('tid')}"
        row: list[Cell | str] = [str(r["kind"]), _ms(r["dur_us"]), _name(r["name"]), where]
        rows.append(row + [_name(r[c]) for c in cols])
    return headers, rows


def _chart_html(cp: CriticalPath) -> str:
    try:
        from workbench.charts.critical_path import bound_by_chart
        from workbench.charts.notebook import charts_html

        return charts_html([bound_by_chart(cp)])
    except ImportError:  # altair not installed: the table says it all
        return ""
    except Exception as exc:  # noqa: BLE001 (a chart that cannot be drawn must not hide the tables)
        from workbench.render.charts import failed_html

        return failed_html("the bound-by bar", exc)


def _path_html(cp: CriticalPath, *, limit: int = TOP_EDGES, chart: bool = True) -> str:
    parts = [f"<div class='wb-critical-path'><p><b>{html_text(cp.summary())}</b></p>", html_pairs(_pairs(cp), "wb-cp")]
    if chart:
        parts.append(_chart_html(cp))
    headers, rows = _shares(cp)
    if rows:
        parts.append("<h4>What the path is made of</h4>" + html_table(headers, rows, "wb-trace-table"))
    parts += [f"<p class='wb-note'>partial: {html_text(n)}</p>" for n in cp.notes]
    headers, rows = _edges(cp, limit)
    if rows:
        parts.append(
            f"<h4>Longest edges on the path (top {len(rows)})</h4>" + html_table(headers, rows, "wb-trace-table")
        )
    return "".join(parts) + "</div>"


def _path_text(cp: CriticalPath, *, limit: int = TOP_EDGES) -> str:
    lines = [cp.summary(), text_pairs(_pairs(cp))]
    headers, rows = _shares(cp)
    if rows:
        lines += ["", "== what the path is made of ==", text_table(headers, rows)]
    lines += [f"partial: {n}" for n in cp.notes]
    headers, rows = _edges(cp, limit)
    if rows:
        lines += ["", f"== longest edges on the path (top {len(rows)}) ==", text_table(headers, rows)]
    return "\n".join(lines)


def _path_markdown(cp: CriticalPath, *, limit: int = TOP_EDGES) -> str:
    parts = [f"**{cp.summary()}**", markdown_pairs(_pairs(cp))]
    headers, rows = _shares(cp)
    if rows:
        parts.append(markdown_table(headers, rows))
    parts += [f"_partial: {n}_" for n in cp.notes]
    headers, rows = _edges(cp, limit)
    if rows:
        parts.append(markdown_table(headers, rows))
    return "\n\n".join(parts)


# --- what-if -------------------------------------------------------------------------------------------
def _what_if_line(w: WhatIf) -> str:
    return (
        f"what if: the step would take {format_ms(w.new_step_us / 1000)} instead of "
        f"{format_ms(w.before.step_us / 1000)} ({format_ms(w.saved_us / 1000)} saved on the path), then bound by "
        f"{w.after.bound_by} (was {w.before.bound_by})"
    )


def _changes(w: WhatIf) -> tuple[list[str], list[list[Cell | str]]]:
    t = w.table
    rows: list[list[Cell | str]] = [
        [
            _name(r.get("pattern", "")),
            Cell(f"{float(r.get('factor', 1.0)):g}", numeric=True),
            Cell(str(int(r.get("n_events", 0))), numeric=True),
            _ms(r.get("work_us", 0.0)),
            _ms(r.get("on_path_us", 0.0)),
        ]
        for _, r in t.iterrows()
    ]
    if w.remove_gaps:
        rows.append(["launch delays and GPU idle gaps", Cell("0", numeric=True), "", "", ""])
    return ["change", "factor", "events", "their time", "on the path before"], rows


def _what_if_html(w: WhatIf, **_: Any) -> str:
    headers, rows = _changes(w)
    return (
        f"<div class='wb-what-if'><p><b>{html_text(_what_if_line(w))}</b></p>"
        + (html_table(headers, rows, "wb-trace-table") if rows else "")
        + "<h4>Before</h4>"
        + _path_html(w.before, chart=False, limit=6)
        + "<h4>After</h4>"
        + _path_html(w.after, chart=False, limit=6)
        + "</div>"
    )


def _what_if_text(w: WhatIf, **_: Any) -> str:
    headers, rows = _changes(w)
    return "\n".join(
        [
            _what_if_line(w),
            text_table(headers, rows) if rows else "",
            "",
            "before: " + w.before.summary(),
            "after: " + w.after.summary(),
        ]
    )


def _what_if_markdown(w: WhatIf, **_: Any) -> str:
    headers, rows = _changes(w)
    return "\n\n".join(
        [
            f"**{_what_if_line(w)}**",
            markdown_table(headers, rows) if rows else "",
            f"before: {w.before.summary()}",
            f"after: {w.after.summary()}",
        ]
    )


# --- collective waits --------------------------------------------------------------------------------------
def _waits(cw: CollectiveWaits, limit: int) -> tuple[list[str], list[list[Cell | str]]]:
    t = cw.table.sort_values("wait_us", ascending=False).head(limit) if len(cw.table) else cw.table
    rows: list[list[Cell | str]] = [
        [
            Cell(str(int(r["index"])), numeric=True),
            _name(r["name"]),
            f"rank {int(r['waits_on'])}",
            _ms(r["wait_us"]),
            str(r.get("on_path_ranks", "")),
            str(r.get("waits_for", "") or ""),
        ]
        for _, r in t.iterrows()
    ]
    return [
        "collective",
        "name",
        "the others wait on",
        "wait",
        "on the path of ranks",
        "what that rank did before",
    ], rows


def _waits_line(cw: CollectiveWaits) -> str:
    if not len(cw.table):
        return f"collective waits: none matched across {len(cw.paths)} rank(s)"
    worst = cw.table.sort_values("wait_us", ascending=False).iloc[0]
    return (
        f"collective waits over {len(cw.paths)} ranks: {len(cw.table)} collective(s); the longest wait, "
        f"{format_ms(float(worst['wait_us']) / 1000)}, is on rank {int(worst['waits_on'])}"
    )


def _waits_html(cw: CollectiveWaits, *, limit: int = TOP_EDGES) -> str:
    headers, rows = _waits(cw, limit)
    parts = [f"<div class='wb-collective-waits'><p><b>{html_text(_waits_line(cw))}</b></p>"]
    if rows:
        parts.append(html_table(headers, rows, "wb-trace-table"))
    parts += [f"<p class='wb-note'>{html_text(n)}</p>" for n in cw.notes]
    parts += [f"<p>{html_text(p.summary())}</p>" for _, p in sorted(cw.paths.items())]
    return "".join(parts) + "</div>"


def _waits_text(cw: CollectiveWaits, *, limit: int = TOP_EDGES) -> str:
    headers, rows = _waits(cw, limit)
    lines = [_waits_line(cw)] + ([text_table(headers, rows)] if rows else []) + [f"note: {n}" for n in cw.notes]
    return "\n".join(lines + [p.summary() for _, p in sorted(cw.paths.items())])


def _waits_markdown(cw: CollectiveWaits, *, limit: int = TOP_EDGES) -> str:
    headers, rows = _waits(cw, limit)
    return "\n\n".join(
        [f"**{_waits_line(cw)}**"] + ([markdown_table(headers, rows)] if rows else []) + [f"_{n}_" for n in cw.notes]
    )


# --- the renderer: one per format, over the three results of workbench.analysis.critical_path ----------
_BY_KIND: dict[str, tuple[Callable[..., str], Callable[..., str], Callable[..., str]]] = {
    "critical_path": (_path_html, _path_text, _path_markdown),
    "what_if": (_what_if_html, _what_if_text, _what_if_markdown),
    "collective_waits": (_waits_html, _waits_text, _waits_markdown),
}


def html(value: Any, **options: Any) -> str:
    return _BY_KIND[value.kind][0](value, **options)


def text(value: Any, **options: Any) -> str:
    return _BY_KIND[value.kind][1](value, **options)


def markdown(value: Any, **options: Any) -> str:
    return _BY_KIND[value.kind][2](value, **options)
