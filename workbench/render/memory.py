"""Memory in the card, the report, the trace report and ``workbench analyze --memory``: the peak per device,
what recording memory cost the traced pass, the largest blocks live at the peak (with op, module and line),
the category split, growth across steps and the memory hypotheses; the memory chart, drawn offline."""

from __future__ import annotations

from typing import Any

from workbench.render.escape import html_text, markdown_text, plain
from workbench.render.tables import Cell, html_pairs, html_table, markdown_table, text_table

TITLE = "Memory"
TOP = 8
MIB = float(1 << 20)


def _mib(n: Any) -> str:
    return f"{float(n) / MIB:,.2f} MiB"


def _results(subject: Any) -> tuple[Any, Any, list, dict]:
    """(peak, growth, hypotheses, record) of a ProfileRun (``run.memory``) or a Trace."""
    memory: Any = getattr(subject, "memory", None)
    if hasattr(memory, "peak") and hasattr(memory, "growth"):  # a run's RunMemory
        return memory.peak, memory.growth, list(memory.hypotheses), dict(memory)
    from workbench.analysis import memory as mem
    from workbench.hypotheses.rules.memory import diagnose_memory

    if memory is None or not len(memory):
        return None, None, [], {}
    events = mem.memory_events(subject)
    return (
        mem.memory_peak(subject, events=events),
        mem.memory_growth(subject, events=events),
        diagnose_memory(subject)[0],
        {},
    )


def pairs(subject: Any) -> list[tuple[str, Cell | str]]:
    peak, growth, _, record = _results(subject)
    if peak is None:
        return []
    rows: list[tuple[str, Cell | str]] = []
    for row in peak.devices.itertuples():
        reserved = f", reserved {_mib(row.reserved_peak_bytes)}" if row.reserved_peak_bytes >= 0 else ""
        rows.append(
            (
                f"peak on {row.device}",
                Cell(
                    f"{_mib(row.peak_bytes)} at {row.peak_ts_us / 1e3:.3f} ms{reserved} ({row.source})",
                    title=f"{int(row.peak_bytes):,} bytes",
                ),
            )
        )
    if peak.live_bytes > peak.peak_bytes:
        rows.append(("with tensors from before the trace", Cell(_mib(peak.live_bytes))))
    cost = record.get("recording_overhead")
    if isinstance(cost, (int, float)):
        rows.append(
            (
                "memory recording cost",
                Cell(
                    f"{cost:.2f}x the traced pass without it "
                    f"({record.get('traced_without_memory_median_ms', 0):.3f} ms -> "
                    f"{record.get('traced_median_ms', 0):.3f} ms per traced call); "
                    "the clean timing ran without it"
                ),
            )
        )
    if "peak_allocated_bytes" in record:
        rows.append(("CUDA max_memory_allocated (clean repeats)", Cell(_mib(record["peak_allocated_bytes"]))))
    if record.get("snapshot_path"):
        rows.append(("allocator snapshot", Cell(str(record["snapshot_path"]))))
    cats = {k: v for k, v in peak.category_bytes().items() if v}
    if cats:
        rows.append(
            (
                "live at the peak by category",
                Cell(", ".join(f"{k} {_mib(v)}" for k, v in sorted(cats.items(), key=lambda kv: -kv[1]))),
            )
        )
    if growth is not None and growth.steps >= 2:
        rows.append(
            (
                "growth per step",
                Cell(
                    f"{_mib(growth.growth_per_step_bytes)} (median after the first step), "
                    f"{growth.steps_growing} of {growth.steps - 1} steps grew"
                ),
            )
        )
    return rows


def block_rows(subject: Any, top: int = TOP) -> tuple[list[str], list[list[Cell]]]:
    peak = _results(subject)[0]
    if peak is None or not len(peak.table):
        return [], []
    headers = ["bytes", "category", "op", "module", "source line", "lifetime (ms)"]
    body = []
    for r in peak.top(top).itertuples():
        life = r.lifetime_us / 1e3 if r.lifetime_us == r.lifetime_us else float("nan")
        body.append(
            [
                Cell(_mib(r.bytes), numeric=True),
                Cell(str(r.category)),
                Cell(str(r.top_op or r.name or "")),
                Cell(str(r.module)),
                Cell(str(r.location)),
                Cell(f"{life:.3f}", numeric=True),
            ]
        )
    return headers, body


def html(subject: Any, *, chart: bool = True) -> str:
    peak, _, hyps, _ = _results(subject)
    if peak is None:
        return ""
    out = f"<h4>{TITLE}</h4>" + html_pairs(pairs(subject), "wb-memory")
    headers, body = block_rows(subject)
    if body:
        out += "<p><b>Largest blocks live at the peak</b></p>" + html_table(headers, body, "wb-memory-blocks")
    if hyps:
        out += "<ul>" + "".join(f"<li>{html_text(h.title)}</li>" for h in hyps) + "</ul>"
    out += "".join(f"<p style='font-size:smaller'>{html_text(n)}</p>" for n in peak.notes)
    if chart:
        try:
            from workbench.charts.memory import memory_chart
            from workbench.charts.offline import notebook_html

            trace = getattr(subject, "trace", subject)
            out += notebook_html(memory_chart(trace, peak=peak, timeline=None))
        except ImportError as exc:
            out += f"<p>memory chart not available: {html_text(exc)}</p>"
    return out


def text_lines(subject: Any) -> list[str]:
    peak, _, hyps, _ = _results(subject)
    if peak is None:
        return []
    lines = [f"{TITLE}:"] + [f"  {plain(k)}: {plain(v.text if isinstance(v, Cell) else v)}" for k, v in pairs(subject)]
    headers, body = block_rows(subject)
    if body:
        lines += ["  largest blocks live at the peak:", text_table(headers, body, indent="    ")]
    lines += [f"  - {plain(h.title)}" for h in hyps]
    lines += [f"  note: {plain(n)}" for n in peak.notes]
    return lines


def markdown_lines(subject: Any) -> list[str]:
    peak, _, hyps, _ = _results(subject)
    if peak is None:
        return []
    out = [
        f"- **{markdown_text(k)}**: {markdown_text(v.text if isinstance(v, Cell) else v)}" for k, v in pairs(subject)
    ]
    headers, body = block_rows(subject)
    if body:
        out += ["", markdown_table(headers, body)]
    out += [f"- {markdown_text(h.title)}" for h in hyps]
    return out
