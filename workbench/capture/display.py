"""HTML for a ProfileRun in a notebook: timing with spread, cold call, compile, top ops/kernels.

Op and kernel tables come from the trace's own analyses (``op_breakdown``, ``kernel_breakdown``),
stated per clean call (``ProfileRun.per_call_ops``) in adaptive units (``workbench.units``); where
the trace or an analysis is absent the section is left out and the reason is shown. The health
check of the measurement stands beside the timing.
"""
from __future__ import annotations

import html
from typing import Any

from workbench.units import format_ms

TOP_ROWS = 10
# per clean call: (column, header, formatter)
OP_COLUMNS = (("name", "op", str), ("calls_per_call", "calls / call", lambda v: f"{v:.3g}"),
               ("self_ms_per_call", "self / call", format_ms), ("total_ms_per_call", "total / call", format_ms),
               ("pct", "% of self time", lambda v: f"{v:.1f} %"), ("top_input_dims", "input dims", str),
               ("top_input_types", "input types", str))
KERNEL_COLUMNS = (("rank", "rank", str), ("name", "kernel", str), ("kernel_type", "type", str),
                   ("calls_per_call", "launches / call", lambda v: f"{v:.3g}"),
                   ("sum_ms_per_call", "time / call", format_ms), ("pct", "% of kernel time", lambda v: f"{v:.1f} %"))


def _esc(value: Any) -> str:
    return html.escape(str(value))


def _timing_rows(run: Any) -> list[tuple[str, str]]:
    t = run.timing
    lo, hi = t.median_ci_ms()
    rows = [
        ("clean median (per call)", f"{format_ms(t.median_ms)} (95% CI {format_ms(lo)}–{format_ms(hi)}), "
                                    "no profiler running"),
        ("p95 / IQR", f"{format_ms(t.p95_ms)} / {format_ms(t.iqr_ms)} ({t.relative_iqr:.1%} of median)"),
        ("min / max", f"{format_ms(t.min_ms)} / {format_ms(t.max_ms)}"),
        ("samples", f"{t.n} timed calls after {run.warmup} warm-up calls, timer {t.timer}"),
        ("cold (first call)", f"{format_ms(run.cold_ms)} once = {run.cold_over_warm:.1f}× the clean median"),
    ]
    traced = getattr(run, "traced_timing", None)
    if traced is not None:
        rows.append(("traced pass", f"{format_ms(traced.median_ms)} per call over {traced.n} calls under "
                                    f"torch.profiler: overhead {run.profiler_overhead:.2f}× the clean call; "
                                    "the trace's times below are scaled to the clean call"))
    return rows


def _kv_table(rows: list[tuple[str, str]]) -> str:
    body = "".join(f"<tr><th style='text-align:left'>{_esc(k)}</th><td style='text-align:left'>"
                   f"{_esc(v)}</td></tr>" for k, v in rows)
    return f"<table>{body}</table>"


def _compile_section(run: Any) -> str:
    c = run.compile
    if not c.compiled_anything and not c.graph_breaks and not c.recompiles:
        return ""
    rows = [("graphs compiled", str(c.graph_count)), ("graph breaks", str(c.graph_break_count)),
            ("recompiles", str(c.recompile_count))]
    parts = [f"<h4>torch.compile</h4>{_kv_table(rows)}"]
    if c.graph_breaks:
        items = "".join(f"<li>{_esc(b.reason)} <code>{_esc(b.location)}</code> ×{b.count}</li>"
                        for b in c.graph_breaks)
        parts.append(f"<p>Graph breaks:</p><ul>{items}</ul>")
    if c.recompiles:
        items = "".join(f"<li><code>{_esc(r.function)}</code>: {_esc('; '.join(r.guard_failures))}</li>"
                        for r in c.recompiles)
        parts.append(f"<p>Recompiles:</p><ul>{items}</ul>")
    if c.cudagraph_skip_reasons:
        items = "".join(f"<li>{_esc(r[:300])}</li>" for r in dict.fromkeys(c.cudagraph_skip_reasons))
        parts.append(f"<p>CUDA graphs skipped ×{len(c.cudagraph_skip_reasons)}:</p><ul>{items}</ul>")
    if c.fallback_kernels:
        parts.append(f"<p>Inductor fallback kernels: <code>{_esc(', '.join(c.fallback_kernels))}</code></p>")
    return "".join(parts)


def readable_table(table: Any, columns: tuple) -> Any:
    """A per-call table with readable headers and adaptive units (strings, for display only)."""
    import pandas as pd

    out = pd.DataFrame()
    for col, header, fmt in columns:
        if col in table.columns:
            out[header] = [fmt(v) if v is not None and v == v else "" for v in table[col]]
    return out


def _table_section(title: str, run: Any, method: str, columns: tuple) -> str:
    try:
        table = getattr(run, method)(TOP_ROWS)
    except Exception as exc:  # show the gap, not a fake table
        return f"<h4>{_esc(title)}</h4><p>not available: {_esc(type(exc).__name__)}: {_esc(exc)}</p>"
    if table is None or len(table) == 0:
        return f"<h4>{_esc(title)}</h4><p>none recorded</p>"
    calls = getattr(run, "traced_calls", 0) or 1
    note = (f"<p style='font-size:smaller'>per clean call: the trace's totals over {calls} traced call(s), "
            f"scaled by the clean / traced time ({run.trace_scale:.2f})</p>")
    return f"<h4>{_esc(title)}</h4>{note}" + readable_table(table, columns).to_html(index=False, escape=True)


def _trace_sections(run: Any) -> str:
    trace = run.trace
    if trace is None:
        return ""
    parts = [_table_section(f"Top {TOP_ROWS} CPU ops by self time", run, "per_call_ops", OP_COLUMNS)]
    if getattr(trace, "has_gpu", False):
        parts.append(_table_section(f"Top {TOP_ROWS} GPU kernels by time", run, "per_call_kernels",
                                    KERNEL_COLUMNS))
    return "".join(parts)


def _hypotheses_section(run: Any) -> str:
    try:
        hyps = run.hypotheses
    except Exception as exc:
        return f"<h4>Hypotheses</h4><p>not available: {_esc(type(exc).__name__)}: {_esc(exc)}</p>"
    if not hyps:
        return ""
    items = "".join(f"<li>{_esc(getattr(h, 'category', ''))}: {_esc(getattr(h, 'title', h))} "
                    f"<span style='font-size:smaller'>({_esc(stake_text(h))})</span></li>"
                    for h in hyps[:5])
    return f"<h4>Hypotheses (ranked)</h4><ol>{items}</ol>"


def stake_text(h: Any) -> str:
    """A hypothesis's stake as a person reads it: per clean call, or once for a one-time cost."""
    stake = getattr(h, "time_at_stake_ms", None)
    if not isinstance(stake, (int, float)):
        return ""
    if getattr(h, "category", "") == "cold_start":
        once = next((r.get("one_time_ms") for e in getattr(h, "evidence", ()) for r in getattr(e, "rows", ())
                     if isinstance(r, dict) and "one_time_ms" in r), None)
        calls = next((r.get("spread_over_calls") for e in getattr(h, "evidence", ()) for r in getattr(e, "rows", ())
                      if isinstance(r, dict) and "spread_over_calls" in r), None)
        if once is not None:
            return f"{format_ms(once)} once; ranked as {format_ms(stake)} a call over {calls} calls"
    if getattr(h, "rule", "") == "recompiles":
        return f"{format_ms(stake)} a call: repeated compile time spread over the profiled calls"
    if getattr(h, "rule", "") == "graph_breaks":
        return (f"{format_ms(stake)} a call: eager time between the graphs plus the extra graphs' "
                "compile time spread over the profiled calls")
    if getattr(h, "category", "") == "measurement":
        return f"uncertainty up to {format_ms(stake)} per call"
    return f"up to {format_ms(stake)} per call at stake"


def _health_section(run: Any) -> str:
    health = getattr(run, "health", None)
    return health._repr_html_() if health is not None else ""


def _charts_section(run: Any) -> str:
    """Timing, breakdown, roofline and timeline charts, drawn offline (workbench.charts)."""
    try:
        from workbench.charts.notebook import run_charts_html
    except ImportError as exc:  # altair / vl-convert missing: say so instead of a blank
        return f"<h4>Charts</h4><p>not available: {_esc(exc)}</p>"
    return run_charts_html(run)


def run_html(run: Any) -> str:
    notes = "".join(f"<li>{_esc(n)}</li>" for n in run.notes)
    settings = ", ".join(f"{k}={v}" for k, v in run.settings.items())
    return (
        f"<div class='workbench-run'><h3>{_esc(run.name)} — {_esc(run.device)}</h3>"
        f"{_kv_table(_timing_rows(run))}{_health_section(run)}"
        f"{_compile_section(run)}{_trace_sections(run)}{_hypotheses_section(run)}{_charts_section(run)}"
        + (f"<p>Notes:</p><ul>{notes}</ul>" if notes else "")
        + f"<p style='font-size:smaller'>settings: {_esc(settings)}; profiler warm-up: "
        f"{_esc(run.profiler_warmup)}; recorded {_esc(run.created_at)}</p></div>"
    )
