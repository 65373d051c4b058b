"""The ledger: every hypothesis a study ever proposed, with its status, the round that last moved
it, the scope of the evidence and the condition that would justify trying it again.

The ledger file is a log of events (proposed, tested, held back, reopenable), appended and never
rewritten; ``fold`` replays it into one ``LedgerEntry`` per proposal (a hypothesis under a
baseline). A hypothesis rejected under a scope (the same rule and symptom scope, the same inputs,
the same device) is not proposed again under that scope; under another scope it is proposed
again, and the old entry reads ``reopenable``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from workbench.hypotheses.hypothesis import Hypothesis
from workbench.study.records import expect, expect_all, expect_items

LEDGER_STATUSES = ("proposed", "supported", "weakened", "rejected", "reopenable")
CONFIDENCE_LADDER = ("low", "medium", "high")

REOPEN_WHEN = {
    "memory_bound": "a different lowering of the fused chain (another compiler backend or mode, a hand-written "
    "kernel), a different workload (shapes, dtypes) or a device with another bandwidth-to-compute "
    "ratio",
    "compute_bound": "a different precision or math mode (TF32, bf16), a different matmul library, or other shapes",
    "launch_overhead": "a different way of launching (CUDA graphs, a compiler mode that captures), or larger ops "
    "per launch",
    "host_bound": "a different host (more cores, another Python), or the device work growing past the host work",
    "host_sync": "a change in where the host reads device values (a new .item(), logging, a data-dependent branch)",
    "transfer": "pinned memory, a different copy size or overlap with compute",
    "allocation_churn": "a different allocator setting or a change in tensor lifetimes",
    "graph_break": "a different torch version (new supported constructs) or a rewrite of the breaking line",
    "recompilation": "changing input shapes or guards, or another torch version",
    "cold_start": "a different compile cache, mode, or the number of calls the program makes",
    "precision": "a different device (tensor cores) or an accuracy budget that allows a lower precision",
    "communication": "a different overlap strategy, bucket size or interconnect",
    "load_imbalance": "a different partitioning of work across ranks",
    "measurement": "a quieter machine, more samples or a longer budget",
}
DEFAULT_REOPEN = "a different workload (shapes, dtypes), device, or lowering of the change tested"


def hypothesis_key(h: Hypothesis) -> str:
    """Stable name of a hypothesis across baselines: category, rule and symptom scope."""
    return f"{h.category}:{h.rule or h.title}@{h.scope or 'whole run'}"


def reopen_when(h: Hypothesis) -> str:
    return REOPEN_WHEN.get(h.category, DEFAULT_REOPEN)


def step_confidence(confidence: str, steps: int) -> str:
    i = CONFIDENCE_LADDER.index(confidence) if confidence in CONFIDENCE_LADDER else 1
    return CONFIDENCE_LADDER[max(0, min(len(CONFIDENCE_LADDER) - 1, i + steps))]


def same_scope(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two evidence scopes are the same when the symptom's scope, the inputs and the device agree."""
    return all(a.get(k) == b.get(k) for k in ("key", "inputs", "device"))


@dataclass(frozen=True)
class LedgerEntry:
    """One proposal of a hypothesis, as the ledger's events leave it."""

    key: str
    hypothesis: Hypothesis
    status: str
    baseline_id: str  # the baseline it was proposed under
    round: int | None  # the round that last changed its status (None: not tested yet)
    evidence_scope: dict[str, Any]
    reopen_when: str
    confidence: str
    events: tuple[dict[str, Any], ...] = field(default=(), compare=False)

    @property
    def category(self) -> str:
        return self.hypothesis.category

    @property
    def title(self) -> str:
        return self.hypothesis.title

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "hypothesis": self.hypothesis.to_dict(),
            "status": self.status,
            "baseline_id": self.baseline_id,
            "round": self.round,
            "evidence_scope": dict(self.evidence_scope),
            "reopen_when": self.reopen_when,
            "confidence": self.confidence,
            "events": [dict(e) for e in self.events],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "LedgerEntry":
        return cls(
            key=d["key"],
            hypothesis=Hypothesis.from_dict(d["hypothesis"]),
            status=d["status"],
            baseline_id=d["baseline_id"],
            round=d.get("round"),
            evidence_scope=dict(d.get("evidence_scope", {})),
            reopen_when=d.get("reopen_when", ""),
            confidence=d.get("confidence", "medium"),
            events=tuple(d.get("events", ())),
        )

    def describe(self) -> str:
        where = f"round {self.round}" if self.round is not None else "not tested yet"
        return (
            f"[{self.status}] {self.category}: {self.title} (baseline {self.baseline_id}, {where}, "
            f"confidence {self.confidence}); reopen when {self.reopen_when}"
        )


HYPOTHESIS_FIELDS = {
    "category": "str",
    "title": "str",
    "observed": "str",
    "mechanism": "str",
    "time_at_stake_ms": "nonneg",
    "predicted_effect": "str",
    "falsifier": "str",
    "confounders": "strs?",
    "confidence": "str?",
    "status": "str?",
    "suggested_variants": "strs?",
    "rule": "str?",
    "scope": "str?",
    "evidence": "dicts?",
}
EVENT_FIELDS = {
    "event": "str",
    "key": "str",
    "baseline_id": "str",
    "round": "count?",
    "status": "str?",
    "confidence": "str?",
    "evidence_scope": "dict?",
    "reopen_when": "str?",
    "reason": "str?",
    "at": "str?",
    "residual": "str?",
}


def parse_hypothesis(d: Any, where: str = "hypothesis") -> Hypothesis:
    """A stored hypothesis, its fields type-checked (ValueError naming the first wrong one)."""
    expect_all(d, HYPOTHESIS_FIELDS, where=where)
    expect_items(
        d,
        "evidence",
        {
            "metric": "str",
            "value": "number",
            "unit": "str?",
            "threshold": "number?",
            "comparison": "str?",
            "source": "str?",
            "rows": "dicts?",
        },
        where=where,
    )
    return Hypothesis.from_dict(d)


def parse_event(e: dict[str, Any]) -> dict[str, Any]:
    """A ledger event with the types ``fold`` and the renderings rely on; ValueError otherwise."""
    expect_all(e, EVENT_FIELDS)
    scope = e.get("evidence_scope") or {}
    expect_items(
        scope,
        "variants",
        {"name": "str?", "residual": "str?", "speedup": "number?", "speedup_ci": "numbers?"},
        where="evidence_scope",
    )
    if e["event"] == "proposed":
        parse_hypothesis(expect(e, "hypothesis", "dict"))
    return e


def proposal_event(h: Hypothesis, *, baseline_id: str, scope: dict[str, Any], at: str) -> dict[str, Any]:
    return {
        "event": "proposed",
        "key": hypothesis_key(h),
        "baseline_id": baseline_id,
        "hypothesis": h.to_dict(),
        "status": "proposed",
        "confidence": h.confidence,
        "evidence_scope": scope,
        "reopen_when": reopen_when(h),
        "round": None,
        "at": at,
    }


def fold(events: Iterable[dict[str, Any]]) -> list[LedgerEntry]:
    """Replay the ledger's events into entries, in the order they were first proposed."""
    entries: dict[tuple[str | None, str | None], dict[str, Any]] = {}
    for e in events:
        ident = (e.get("key"), e.get("baseline_id"))
        if e.get("event") == "proposed":
            if ident in entries:
                continue
            try:
                h = Hypothesis.from_dict(e["hypothesis"])
            except (KeyError, TypeError, ValueError):
                continue
            entries[ident] = {
                "key": e["key"],
                "hypothesis": h,
                "status": "proposed",
                "baseline_id": e["baseline_id"],
                "round": None,
                "evidence_scope": dict(e.get("evidence_scope") or {}),
                "reopen_when": e.get("reopen_when") or reopen_when(h),
                "confidence": e.get("confidence") or h.confidence,
                "events": [e],
            }
            continue
        entry = entries.get(ident)
        if entry is None:
            continue
        entry["events"].append(e)
        if e.get("status") in LEDGER_STATUSES:
            entry["status"] = e["status"]
        if e.get("confidence") in CONFIDENCE_LADDER:
            entry["confidence"] = e["confidence"]
        if e.get("round") is not None:
            entry["round"] = e["round"]
        if e.get("evidence_scope"):
            entry["evidence_scope"] = {**entry["evidence_scope"], **e["evidence_scope"]}
    out = []
    for entry in entries.values():
        h = entry["hypothesis"]
        status = entry["status"]
        hyp_status = status if status in ("proposed", "supported", "weakened", "rejected") else "rejected"
        entry["hypothesis"] = h.with_status(hyp_status) if h.status != hyp_status else h
        entry["events"] = tuple(entry["events"])
        out.append(LedgerEntry(**entry))
    return out


def held_back(entries: Iterable[LedgerEntry], key: str, scope: dict[str, Any]) -> LedgerEntry | None:
    """The rejected entry that keeps a hypothesis from being proposed again under ``scope``."""
    for entry in entries:
        if entry.key == key and entry.status == "rejected" and same_scope(entry.evidence_scope, scope):
            return entry
    return None
