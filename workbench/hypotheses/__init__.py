"""The diagnosis engine: a catalog of rules that turn measurements into ranked, falsifiable
hypotheses (DESIGN.md "Hypotheses"). No torch, IPython or altair imports.

    from workbench.hypotheses import diagnose
    diag = diagnose(trace_or_run)        # Diagnosis: .hypotheses (ranked) + .statements()
    print(diag.to_text())

Its HTML and Markdown are drawn by the render layer (``workbench.render.html(diag)``,
``workbench.render.markdown(diag)``; a notebook shows them through IPython's display formatter).
"""

from __future__ import annotations

from workbench.hypotheses.catalog import get_rule, list_rules
from workbench.hypotheses.diagnose import Diagnosis, NotJudgedNote, diagnose, rank
from workbench.hypotheses.hypothesis import CATEGORIES, CONFIDENCES, STATUSES, Evidence, Hypothesis
from workbench.hypotheses.ranked import HypothesisList, render_text
from workbench.hypotheses.registry import NotJudged, Rule

__all__ = [
    "CATEGORIES",
    "CONFIDENCES",
    "STATUSES",
    "Diagnosis",
    "Evidence",
    "Hypothesis",
    "HypothesisList",
    "NotJudged",
    "NotJudgedNote",
    "Rule",
    "diagnose",
    "get_rule",
    "list_rules",
    "rank",
    "render_text",
]
