"""The diagnosis engine: a catalog of rules that turn measurements into ranked, falsifiable
hypotheses (DESIGN.md "Hypotheses"). No torch, IPython or altair imports.

    from workbench.hypotheses import diagnose_trace, diagnose_run, diagnose
    diag = diagnose(trace_or_run)        # Diagnosis: .hypotheses (ranked) + .statements()
    print(diag.to_text())
"""
from __future__ import annotations

from typing import Any

from workbench.hypotheses.diagnose import (
    Diagnosis, NotJudgedNote, diagnose_run, diagnose_run_full, diagnose_trace, diagnose_trace_full, rank,
)
from workbench.hypotheses.model import CATEGORIES, CONFIDENCES, STATUSES, Evidence, Hypothesis
from workbench.hypotheses.catalog import get_rule, list_rules
from workbench.hypotheses.registry import NotJudged, Rule
from workbench.hypotheses.render import HypothesisList, render_html, render_markdown, render_text


def diagnose(subject: Any, **kw: Any) -> Diagnosis:
    """Diagnosis of a ProfileRun (has ``timing``) or a Trace (has ``cpu_ops``/``kernels``)."""
    if hasattr(subject, "timing"):
        return diagnose_run_full(subject)
    return diagnose_trace_full(subject, **kw)


__all__ = [
    "CATEGORIES", "CONFIDENCES", "STATUSES", "Diagnosis", "Evidence", "Hypothesis", "HypothesisList", "NotJudged",
    "NotJudgedNote", "Rule", "diagnose", "diagnose_run", "diagnose_run_full", "diagnose_trace",
    "diagnose_trace_full", "get_rule", "list_rules", "rank", "render_html", "render_markdown", "render_text",
]
