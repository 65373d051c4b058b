"""The sections of a report, built from a ProfileRun by the run's one renderer
(``workbench.render.run``, which the notebook card uses too) and, where the report says more than
the card (a run without a trace or history, the experiments), ``workbench.render.run_report``;
this module picks what each section gets and draws nothing itself (every text is escaped there).

The template notebook only displays these, so the logic is tested without papermill. Times are
per clean call in adaptive units (``workbench.units``); the exact millisecond figure rides along as
the cell's tooltip. The timing section carries the run's health check. The attribution section
(time by module and by source line, ``run.attribution``) and the history section (the trend chart
with its change points, ``run.history``) are the card's own sections too. ``timing_summary`` is the
record of the numbers that ``summary.json`` keeps for a later report's gate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

import workbench.render.run as render_run
import workbench.render.run_report as run_report
from workbench.render.decision import record_html
from workbench.report.experiments import AGREEMENT_TOLERANCE

if TYPE_CHECKING:
    from workbench.api.run import ProfileRun
    from workbench.capture.run import RunRecord

TOP_OP_COLUMNS = ("name", "calls_per_call", "self_ms_per_call", "total_ms_per_call", "pct")


def timing_summary(run: RunRecord) -> dict[str, Any]:
    """The numbers a report shows and a later report compares against: the clean timing (no
    profiler running), the traced pass apart with the profiler's overhead, and the health check."""
    t = run.timing
    lo, hi = t.median_ci_ms()
    traced = run.traced_timing
    return {
        "name": run.name,
        "n": t.n,
        "median_ms": t.median_ms,
        "p95_ms": t.p95_ms,
        "iqr_ms": t.iqr_ms,
        "median_ci_low_ms": lo,
        "median_ci_high_ms": hi,
        "cold_ms": float(run.cold_ms),
        "warnings": list(t.warnings),
        "clean": not run.timed_under_profiler,
        "traced_n": traced.n if traced is not None else 0,
        "traced_median_ms": traced.median_ms if traced is not None else None,
        "profiler_overhead": run.profiler_overhead,
        "health": run.health.to_dict(),
    }


def timing_html(run: ProfileRun) -> str:
    """The Timing section: the run card's timing table, health check and notes
    (``workbench.render.run.timing_html``: the notebook shows the same)."""
    return render_run.timing_html(run)


def top_ops_html(run: ProfileRun, n: int = 15) -> str:
    """The top ops table of the run card, with ``n`` rows (``workbench.render.run.ops_html``)."""
    return render_run.ops_html(run, n)


def hypotheses_html(run: ProfileRun) -> str:
    """Every ranked hypothesis, as the run card lists them (``workbench.render.run.hypotheses_html``)."""
    return render_run.hypotheses_html(run)


def attribution_html(run: ProfileRun) -> str:
    """Time by nn.Module and by source line (``run.attribution``, as the card shows it): the
    tables where the trace recorded Python events, else one line saying why not; a sentence for a
    run without a trace (``workbench.render.run_report``)."""
    return run_report.attribution_html(run)


def memory_html(run: ProfileRun) -> str:
    """The memory section of the run (``workbench.render.memory``, as the card shows it); a sentence where the
    trace has no allocator events (``workbench.render.run_report``)."""
    return run_report.memory_html(run)


def history_html(run: ProfileRun) -> str:
    """The history of the profiled code (``run.history``, as the card shows it): with 2+ runs its
    summary, the trend chart (offline) with the change points marked, and the latest runs; a
    sentence where the run has no history (``workbench.render.run_report``)."""
    return run_report.history_html(run)


flatten_environment = render_run.flatten_environment


def environment_html(run: RunRecord) -> str:
    """The environment, one row per leaf setting (``workbench.render.run.environment_html``)."""
    return render_run.environment_html(run)


NO_BUNDLE_EXPERIMENTS = run_report.NO_BUNDLE_EXPERIMENTS


def experiments_html(doc: dict[str, Any]) -> str:
    """The experiments section: the comparison (table, decision, charts) and the decision record,
    or, in words, why there are none (a bundle report, no suggested variant, an error); drawn by
    ``workbench.render.run_report``."""
    comparison = None
    if doc and "error" not in doc and "comparison" in doc:
        from workbench.variants.results import Comparison

        comparison = Comparison.from_dict(doc["comparison"])
    return run_report.experiments_html(doc, comparison, tolerance=AGREEMENT_TOLERANCE)


def agreement_html(agreement: dict[str, Any] | None) -> str:
    """One line: the experiments' eager median against the headline, or why they disagree."""
    return run_report.agreement_html(agreement, AGREEMENT_TOLERANCE)


def decision_record_html(record: dict[str, Any]) -> str:
    """A DecisionRecord's fields as HTML, every text escaped (``workbench.render.decision``)."""
    return record_html(record)
