"""HTML sections of a report, built from a ProfileRun; every text from the run is escaped.

The template notebook only displays these, so the logic is tested without papermill.
"""
from __future__ import annotations

import html
import math
from typing import Any

import pandas as pd

TOP_OP_COLUMNS = ("name", "count", "self_us", "total_us", "pct")


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _fmt_ms(value: float) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.3f} ms"


def timing_summary(run: Any) -> dict[str, Any]:
    """The numbers a report shows and a later report compares against."""
    t = run.timing
    lo, hi = t.median_ci_ms()
    return {
        "name": getattr(run, "name", ""), "n": t.n, "median_ms": t.median_ms, "p95_ms": t.p95_ms,
        "iqr_ms": t.iqr_ms, "median_ci_low_ms": lo, "median_ci_high_ms": hi,
        "cold_ms": float(getattr(run, "cold_ms", float("nan"))), "warnings": list(t.warnings),
    }


def timing_html(run: Any) -> str:
    s = timing_summary(run)
    rows = [("median", _fmt_ms(s["median_ms"])),
            ("95% CI of the median", f"{_fmt_ms(s['median_ci_low_ms'])} – {_fmt_ms(s['median_ci_high_ms'])}"),
            ("p95", _fmt_ms(s["p95_ms"])), ("IQR", _fmt_ms(s["iqr_ms"])), ("samples", str(s["n"])),
            ("first call (cold)", _fmt_ms(s["cold_ms"]))]
    body = "".join(f"<tr><th>{_esc(k)}</th><td class='wb-num'>{_esc(v)}</td></tr>" for k, v in rows)
    warn = "".join(f"<li>{_esc(w)}</li>" for w in s["warnings"])
    return (f"<table class='wb-timing'>{body}</table>"
            + (f"<p><b>Measurement warnings</b></p><ul>{warn}</ul>" if warn else ""))


def top_ops_table(run: Any, n: int = 15) -> pd.DataFrame:
    """The ``n`` CPU ops with the most self time (empty when the run has no trace)."""
    trace = getattr(run, "trace", None)
    if trace is None:
        return pd.DataFrame(columns=list(TOP_OP_COLUMNS))
    table = trace.op_breakdown().table
    cols = [c for c in table.columns if c in TOP_OP_COLUMNS or "shape" in c or "dims" in c]
    return table.sort_values("self_us", ascending=False).head(n)[cols].reset_index(drop=True)


def top_ops_html(run: Any, n: int = 15) -> str:
    table = top_ops_table(run, n)
    if table.empty:
        note = getattr(run, "trace_note", "") or "the run has no trace"
        return f"<p>No op table: {_esc(note)}.</p>"
    return table.to_html(escape=True, index=False, float_format=lambda v: f"{v:,.1f}",
                         classes="wb-top-ops", border=0)


def hypotheses_html(run: Any) -> str:
    hyps = list(getattr(run, "hypotheses", None) or [])
    if not hyps:
        return "<p>No hypothesis fired: no rule found evidence in this run.</p>"
    items = []
    for h in hyps:
        stake = getattr(h, "time_at_stake_ms", None)
        stake_txt = f" — up to {stake:.3g} ms at stake" if isinstance(stake, (int, float)) else ""
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
