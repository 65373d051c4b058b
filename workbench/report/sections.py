"""HTML sections of a report, built from a ProfileRun; every text from the run is escaped.

The template notebook only displays these, so the logic is tested without papermill. Times are
per clean call in adaptive units (``workbench.units``); the exact millisecond figure rides along as
the cell's tooltip. The timing section carries the run's health check.
"""
from __future__ import annotations

import html
import math
from typing import Any

import pandas as pd

from workbench.units import format_ms

TOP_OP_COLUMNS = ("name", "calls_per_call", "self_ms_per_call", "total_ms_per_call", "pct")


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _health(run: Any) -> Any:
    health = getattr(run, "health", None)
    if health is None:
        from workbench.capture.health import ProfileHealth

        health = ProfileHealth.not_recorded()
    return health


def timing_summary(run: Any) -> dict[str, Any]:
    """The numbers a report shows and a later report compares against: the clean timing (no
    profiler running), the traced pass apart with the profiler's overhead, and the health check."""
    t = run.timing
    lo, hi = t.median_ci_ms()
    traced = getattr(run, "traced_timing", None)
    health = _health(run)
    return {
        "name": getattr(run, "name", ""), "n": t.n, "median_ms": t.median_ms, "p95_ms": t.p95_ms,
        "iqr_ms": t.iqr_ms, "median_ci_low_ms": lo, "median_ci_high_ms": hi,
        "cold_ms": float(getattr(run, "cold_ms", float("nan"))), "warnings": list(t.warnings),
        "clean": not bool(getattr(run, "timed_under_profiler", False)),
        "traced_n": traced.n if traced is not None else 0,
        "traced_median_ms": traced.median_ms if traced is not None else None,
        "profiler_overhead": getattr(run, "profiler_overhead", None),
        "health": health.to_dict(),
    }


def _ms_cell(value: Any, suffix: str = "") -> str:
    """An adaptive-unit time with the exact millisecond figure as its tooltip."""
    if value is None or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "<td class='wb-num'>n/a</td>"
    return f"<td class='wb-num' title='{value:.3f} ms'>{_esc(format_ms(value) + suffix)}</td>"


def timing_html(run: Any) -> str:
    s = timing_summary(run)
    n_traced = s["traced_n"]
    rows = [("clean median (per call)", _ms_cell(s["median_ms"])),
            ("95% CI of the median", f"<td class='wb-num' title='{s['median_ci_low_ms']:.3f} ms – "
                                     f"{s['median_ci_high_ms']:.3f} ms'>{_esc(format_ms(s['median_ci_low_ms']))} – "
                                     f"{_esc(format_ms(s['median_ci_high_ms']))}</td>"),
            ("p95", _ms_cell(s["p95_ms"])), ("IQR", _ms_cell(s["iqr_ms"])),
            ("samples", f"<td class='wb-num'>{s['n']} timed calls, no profiler running</td>"),
            ("first call (cold)", _ms_cell(s["cold_ms"], " once"))]
    if n_traced:
        overhead = s["profiler_overhead"]
        rows.append(("traced pass (per call)", _ms_cell(s["traced_median_ms"], f" over {n_traced} traced calls")))
        rows.append(("profiler overhead", f"<td class='wb-num'>{overhead:.2f}× the clean call; trace times "
                                          "in this report are scaled to the clean call</td>"
                     if overhead else "<td class='wb-num'>n/a</td>"))
    elif not s["clean"]:
        rows.append(("timed under the profiler", "<td>yes (an older run): the samples include the "
                                                 "profiler's overhead</td>"))
    body = "".join(f"<tr><th>{_esc(k)}</th>{cell}</tr>" for k, cell in rows)
    warn = "".join(f"<li>{_esc(w)}</li>" for w in s["warnings"])
    return (f"<table class='wb-timing'>{body}</table>" + health_html(run)
            + (f"<p><b>Measurement warnings</b></p><ul>{warn}</ul>" if warn else ""))


def health_html(run: Any) -> str:
    """The run's profile-health check: a banner, each problem with what to do."""
    return _health(run)._repr_html_()


def top_ops_table(run: Any, n: int = 15) -> pd.DataFrame:
    """The ``n`` CPU ops with the most self time, per clean call (``ProfileRun.per_call_ops``;
    empty when the run has no trace)."""
    if getattr(run, "trace", None) is None or not hasattr(run, "per_call_ops"):
        return pd.DataFrame(columns=list(TOP_OP_COLUMNS))
    return run.per_call_ops(n)


def top_ops_html(run: Any, n: int = 15) -> str:
    table = top_ops_table(run, n)
    if table.empty:
        note = getattr(run, "trace_note", "") or "the run has no trace"
        return f"<p>No op table: {_esc(note)}.</p>"
    from workbench.capture.display import OP_COLUMNS, readable_table

    calls = getattr(run, "traced_calls", 0) or 1
    note = (f"<p class='wb-note'>Per clean call: the trace's totals over {calls} traced call(s), scaled by "
            f"the clean / traced time ({getattr(run, 'trace_scale', 1.0):.2f}).</p>")
    return note + readable_table(table, OP_COLUMNS).to_html(escape=True, index=False, classes="wb-top-ops",
                                                              border=0)


def hypotheses_html(run: Any) -> str:
    hyps = list(getattr(run, "hypotheses", None) or [])
    if not hyps:
        return "<p>No hypothesis fired: no rule found evidence in this run.</p>"
    from workbench.capture.display import stake_text

    items = []
    for h in hyps:
        stake_txt = stake_text(h)
        stake_txt = f" — {stake_txt}" if stake_txt else ""
        items.append(f"<li><b>{_esc(getattr(h, 'title', h))}</b> "
                     f"<code>{_esc(getattr(h, 'category', ''))}</code>{_esc(stake_txt)}<br>"
                     f"{_esc(getattr(h, 'observed', ''))}<br><i>falsifier:</i> {_esc(getattr(h, 'falsifier', ''))}</li>")
    return "<ol class='wb-hypotheses'>" + "".join(items) + "</ol>"


def flatten_environment(env: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Nested environment dicts as ("torch.math_mode.float32_matmul_precision", value) rows."""
    rows: list[tuple[str, Any]] = []
    for key, value in sorted(dict(env).items(), key=lambda kv: str(kv[0])):
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            rows += flatten_environment(value, prefix=f"{name}.")
        else:
            rows.append((name, value))
    return rows


def environment_html(run: Any) -> str:
    env = dict(getattr(run, "environment", None) or {})
    if not env:
        return "<p>No environment recorded.</p>"
    rows = "".join(f"<tr><th>{_esc(k)}</th><td>{_esc(v)}</td></tr>" for k, v in flatten_environment(env))
    return f"<table class='wb-environment'>{rows}</table>"


NO_BUNDLE_EXPERIMENTS = ("No experiments: this report was made from a saved run bundle, which holds no "
                         "code to run variants of; make the report with --workload to run them.")


def experiments_html(doc: dict[str, Any]) -> str:
    """The experiments section: the comparison (table, decision, charts) and the decision record,
    or, in words, why there are none (a bundle report, no suggested variant, an error)."""
    if not doc:
        return f"<p class='wb-experiments'>{_esc(NO_BUNDLE_EXPERIMENTS)}</p>"
    if "error" in doc:
        return f"<p class='wb-experiments-error'>The experiments could not run: {_esc(doc['error'])}</p>"
    if "comparison" not in doc:
        return f"<p class='wb-experiments'>No experiments: {_esc(doc.get('none', 'nothing to run'))}.</p>"
    from workbench.variants.results import Comparison

    cmp = Comparison.from_dict(doc["comparison"])
    verdict = doc["comparison"].get("hypothesis_verdict")
    held = (f"<p><b>Hypothesis held against the measurement:</b> {_esc(verdict.get('status', ''))}: "
            f"{_esc(verdict.get('explanation', ''))}</p>") if isinstance(verdict, dict) else ""
    return cmp._repr_html_() + held + decision_record_html(cmp.decision.to_dict())


def decision_record_html(record: dict[str, Any]) -> str:
    """A DecisionRecord's fields as HTML, every text escaped."""
    fields = [("Problem", "problem"), ("Bottleneck", "bottleneck"), ("Change", "change"),
              ("Numerical class", "numerical_class"), ("Why it is safe", "why_safe"), ("Guard", "guard"),
              ("Fallback", "fallback"), ("Result", "result")]
    rows = "".join(f"<tr><th style='text-align:left'>{t}</th><td style='text-align:left'>"
                   f"{_esc(record.get(k) or '—')}</td></tr>" for t, k in fields)
    lists = ""
    for title, key in (("Evidence", "evidence"), ("Rejected alternatives", "rejected_alternatives"),
                       ("Remaining risk", "remaining_risk"), ("Failure cases", "failure_cases")):
        items = "".join(f"<li>{_esc(x)}</li>" for x in record.get(key) or ()) or "<li>none</li>"
        lists += f"<h4>{title}</h4><ul>{items}</ul>"
    head = (f"<h3>Decision record: <code>{_esc(record.get('decision'))}</code> for "
            f"{_esc(record.get('variant'))}</h3><p>{_esc(record.get('reason'))}</p>")
    return f"<div class='wb-decision-record'>{head}<table class='wb-decision'>{rows}</table>{lists}</div>"
