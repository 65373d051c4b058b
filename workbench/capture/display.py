"""HTML for a ProfileRun in a notebook: timing with spread, cold call, compile, top ops/kernels.

Op and kernel tables come from the trace's own analyses (``op_breakdown``, ``kernel_breakdown``);
where the trace or an analysis is absent the section is left out and the reason is shown.
"""
from __future__ import annotations

import html
from typing import Any

TOP_ROWS = 10
_OP_COLUMNS = ("name", "count", "self_us", "total_us", "pct", "top_input_dims", "top_input_types")
_KERNEL_COLUMNS = ("rank", "name", "kernel_type", "count", "sum_us", "mean_us", "pct")


def _esc(value: Any) -> str:
    return html.escape(str(value))


def _timing_rows(run: Any) -> list[tuple[str, str]]:
    t = run.timing
    lo, hi = t.median_ci_ms()
    return [
        ("warm median", f"{t.median_ms:.4g} ms (95% CI {lo:.4g}–{hi:.4g})"),
        ("p95 / IQR", f"{t.p95_ms:.4g} ms / {t.iqr_ms:.3g} ms ({t.relative_iqr:.1%} of median)"),
        ("min / max", f"{t.min_ms:.4g} ms / {t.max_ms:.4g} ms"),
        ("samples", f"{t.n} repeats after {run.warmup} warm-up calls, timer {t.timer}"),
        ("cold (first call)", f"{run.cold_ms:.4g} ms = {run.cold_over_warm:.1f}× the warm median"),
    ]


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


def _table_section(title: str, trace: Any, method: str, columns: tuple[str, ...],
                   sort_by: str) -> str:
    analysis = getattr(trace, method, None)
    if analysis is None:
        return ""
    try:
        table = analysis().table
    except Exception as exc:  # show the gap, not a fake table
        return f"<h4>{_esc(title)}</h4><p>not available: {_esc(type(exc).__name__)}: {_esc(exc)}</p>"
    if table is None or len(table) == 0:
        return f"<h4>{_esc(title)}</h4><p>none recorded</p>"
    if sort_by in table.columns:
        table = table.sort_values(sort_by, ascending=False)
    keep = [c for c in columns if c in table.columns] or list(table.columns)
    return f"<h4>{_esc(title)}</h4>" + table[keep].head(TOP_ROWS).to_html(index=False, float_format=lambda v: f"{v:.4g}")


def _trace_sections(run: Any) -> str:
    trace = run.trace
    if trace is None:
        return ""
    parts = [_table_section(f"Top {TOP_ROWS} CPU ops by self time", trace, "op_breakdown",
                            _OP_COLUMNS, "self_us")]
    if getattr(trace, "has_gpu", False):
        parts.append(_table_section(f"Top {TOP_ROWS} GPU kernels by time", trace,
                                    "kernel_breakdown", _KERNEL_COLUMNS, "sum_us"))
    return "".join(parts)


def _hypotheses_section(run: Any) -> str:
    try:
        hyps = run.hypotheses
    except Exception as exc:
        return f"<h4>Hypotheses</h4><p>not available: {_esc(type(exc).__name__)}: {_esc(exc)}</p>"
    if not hyps:
        return ""
    items = "".join(f"<li>{_esc(getattr(h, 'category', ''))}: {_esc(getattr(h, 'title', h))}</li>"
                    for h in hyps[:5])
    return f"<h4>Hypotheses (ranked)</h4><ol>{items}</ol>"


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
        f"{_kv_table(_timing_rows(run))}"
        f"{_compile_section(run)}{_trace_sections(run)}{_hypotheses_section(run)}{_charts_section(run)}"
        + (f"<p>Notes:</p><ul>{notes}</ul>" if notes else "")
        + f"<p style='font-size:smaller'>settings: {_esc(settings)}; profiler warm-up: "
        f"{_esc(run.profiler_warmup)}; recorded {_esc(run.created_at)}</p></div>"
    )
