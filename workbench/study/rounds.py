"""A study's rounds as records: ``StudyRound`` (one closed round: its summary, a DecisionRecord per
variant and the comparison behind them) and the type-checked reading of a ``rounds.jsonl`` line
(``parse_round_record``: a plan, an abort or a closed round).

Running a round is ``workbench.study.orchestration``; the file is ``workbench.study.store``'s.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from workbench.study.records import expect, expect_all, expect_items
from workbench.study.summary import RoundSummary
from workbench.variants.decision import DecisionRecord

if TYPE_CHECKING:
    from workbench.variants.results import Comparison

# the fields of a stored DecisionRecord, type-checked on reading
DECISION_FIELDS = {
    "decision": "str",
    "variant": "str",
    "reason": "str",
    "problem": "str?",
    "bottleneck": "str?",
    "change": "str?",
    "numerical_class": "str?",
    "why_safe": "str?",
    "guard": "str?",
    "fallback": "str?",
    "result": "str?",
    "evidence": "strs?",
    "rejected_alternatives": "strs?",
    "remaining_risk": "strs?",
    "failure_cases": "strs?",
    "environment": "dict?",
    "settings": "dict?",
    "mode": "str?",
    "fix": "dict?",
}


@dataclass(frozen=True)
class StudyRound:
    """One round: its summary, a DecisionRecord per variant and the comparison behind them."""

    index: int
    baseline_id: str
    summary: RoundSummary
    decisions: dict[str, DecisionRecord]
    comparison: Comparison | None = dataclasses.field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "baseline_id": self.baseline_id,
            "summary": self.summary.to_dict(),
            "decisions": {k: v.to_dict() for k, v in self.decisions.items()},
            "comparison": self.comparison.to_dict() if self.comparison is not None else None,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "StudyRound":
        comparison = None
        if d.get("comparison"):
            from workbench.variants.results import Comparison

            try:
                comparison = Comparison.from_dict(d["comparison"])
            except (KeyError, TypeError, ValueError):
                comparison = None
        return cls(
            int(d["index"]),
            d["baseline_id"],
            RoundSummary.from_dict(d["summary"]),
            {k: DecisionRecord.from_dict(v) for k, v in (d.get("decisions") or {}).items()},
            comparison,
        )

    def to_text(self) -> str:
        return self.summary.to_text()


def parse_round_record(rec: dict[str, Any]) -> dict[str, Any]:
    """A rounds.jsonl record, type-checked: {round, outcome (a StudyRound for a closed round),
    comparison_error}; ValueError naming what is wrong."""
    expect_all(rec, {"event": "str", "round": "round"})
    n = rec["round"]
    out: dict[str, Any] = {"round": n, "outcome": None, "comparison_error": None}
    if rec["event"] == "planned":
        expect_all(rec, {"baseline_id": "str?", "at": "str?"})
        expect_items(rec, "predictions", {"key": "str"})
        expect_items(rec, "variants", {"name": "str"})
    elif rec["event"] == "aborted":
        expect_all(rec, {"reason": "str?", "at": "str?"})
    elif rec["event"] == "closed":
        outcome = expect(rec, "outcome", "dict")
        expect_all(
            outcome,
            {"index": "round", "baseline_id": "str", "summary": "dict", "decisions": "dict?", "comparison": "dict?"},
            where="outcome",
        )
        if outcome["index"] != n:
            raise ValueError(f"the outcome is of round {outcome['index']}, the line says round {n}")
        summary = RoundSummary.parse(outcome["summary"])
        decisions = {}
        for name, d in (outcome.get("decisions") or {}).items():
            expect_all(d, DECISION_FIELDS, where=f"decisions[{name!r}]")
            decisions[name] = DecisionRecord.from_dict(d)
        comparison = None
        if outcome.get("comparison"):
            from workbench.variants.results import Comparison

            try:
                comparison = Comparison.from_dict(outcome["comparison"])
            except Exception as exc:  # noqa: BLE001 - the round stands without it; the reader warns
                out["comparison_error"] = f"{type(exc).__name__}: {exc}"[:300]
        out["outcome"] = StudyRound(n, outcome["baseline_id"], summary, decisions, comparison)
    return out
