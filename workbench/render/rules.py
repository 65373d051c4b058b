"""The rule catalog as text: what each rule judges, its thresholds, and what it can say (``workbench rules``).

Rules are data (``workbench.hypotheses.words``): a rule's thresholds are a ``Limits`` value and its words are
``Words`` blocks per branch, so both can be listed without running the rule. ``catalog`` is one line per rule;
``rule`` is one rule whole: its thresholds with their defaults, the fields its finding carries, and each
branch's templates (``{share_pct:.0f}`` where a number goes; parts and notes with the condition's name).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING

from workbench.render.escape import plain

if TYPE_CHECKING:
    from workbench.hypotheses.registry import Rule


def _number(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def _thresholds(r: Rule) -> str:
    return ", ".join(f"{k}={_number(v)}" for k, v in r.thresholds.items())


def catalog(rules: Iterable[Rule]) -> str:
    """One line per rule: name, category, scope, branches, thresholds; then its one-line summary."""
    lines = []
    for r in sorted(rules, key=lambda r: (r.category, r.name)):
        branches = ", ".join(b or "(one)" for b in r.words) or "(no words declared)"
        lines.append(f"{r.name}  [{r.category}, {r.scope}]  branches: {branches}")
        if r.doc:
            lines.append(f"    {plain(r.doc)}")
        if r.thresholds:
            lines.append(f"    thresholds: {_thresholds(r)}")
    return "\n".join(lines)


def rule(r: Rule) -> str:
    """One rule whole: what it judges, thresholds, its finding's fields, each branch's words."""
    lines = [f"{r.name}  [{r.category}, {r.scope}]"]
    if r.doc:
        lines.append(plain(r.doc))
    lines.append(f"thresholds: {_thresholds(r) or 'none'}")
    from workbench.hypotheses.words import Finding

    common = {f.name for f in dataclasses.fields(Finding)}
    fields = [f.name for f in dataclasses.fields(r.finding) if f.name not in common]
    lines.append(f"finding: {r.finding.__name__} ({', '.join(fields)})")
    for branch, words in r.words.items():
        lines.append("")
        lines.append(f"branch {branch!r}:" if branch else "words:")
        for label, text in (
            ("title", words.title),
            ("observed", words.observed),
            ("mechanism", words.mechanism),
            ("predicted", words.predicted_effect),
            ("falsifier", words.falsifier),
        ):
            lines.append(f"  {label}: {plain(text)}")
        for text in words.confounders:
            lines.append(f"  confounder: {plain(text)}")
        for key, text in words.notes.items():
            lines.append(f"  confounder when {key}: {plain(text)}")
        for key, text in words.parts.items():
            lines.append(f"  part {key} (when it holds): {plain(text)}")
        if words.scope is not None:
            lines.append(f"  scope: {plain(words.scope)}")
        if words.suggested_variants:
            lines.append(f"  fixes: {', '.join(words.suggested_variants)}")
    return "\n".join(lines)
