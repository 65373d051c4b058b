"""Run every rule of a scope, collect what fired and what could not be judged, rank.

Ranking: by time at stake, largest first. A hypothesis with no evidence is dropped. A
high-confidence ``measurement`` hypothesis that says the timing cannot be trusted at all (too
few samples) goes first whatever its stake. Noise is ranked by its stake, the half-width of the
median's interval: a finding with a larger stake stands above the noise, a smaller one does not.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.model import Hypothesis
from workbench.hypotheses.registry import NotJudged, list_rules
from workbench.hypotheses.run_facts import RunFacts

CONFIDENCE_ORDER = {"high": 0, "medium": 1, "low": 2}


@dataclass(frozen=True)
class NotJudgedNote:
    rule: str
    category: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"rule": self.rule, "category": self.category, "reason": self.reason}

    @classmethod
    def from_dict(cls, d: dict[str, str]) -> "NotJudgedNote":
        return cls(d["rule"], d["category"], d["reason"])


@dataclass(frozen=True)
class Diagnosis:
    """Ranked hypotheses plus plain statements of what could not be judged, and why."""

    hypotheses: tuple[Hypothesis, ...]
    not_judged: tuple[NotJudgedNote, ...] = ()
    source: str = ""

    def __iter__(self):
        return iter(self.hypotheses)

    def __len__(self) -> int:
        return len(self.hypotheses)

    @property
    def categories(self) -> list[str]:
        return [h.category for h in self.hypotheses]

    def statements(self) -> list[str]:
        """One line per reason, naming the rules it stopped: "no GPU activity ...: rules not judged"."""
        by_reason: dict[str, list[str]] = {}
        for n in self.not_judged:
            by_reason.setdefault(n.reason, []).append(n.rule)
        return [f"{reason}: {', '.join(rules)} not judged" for reason, rules in by_reason.items()]

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "hypotheses": [h.to_dict() for h in self.hypotheses],
                "not_judged": [n.to_dict() for n in self.not_judged]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Diagnosis":
        return cls(tuple(Hypothesis.from_dict(h) for h in d.get("hypotheses", ())),
                   tuple(NotJudgedNote.from_dict(n) for n in d.get("not_judged", ())), d.get("source", ""))

    def to_text(self, **kw) -> str:
        from workbench.hypotheses.render import render_text
        return render_text(self, **kw)

    def to_markdown(self, **kw) -> str:
        from workbench.hypotheses.render import render_markdown
        return render_markdown(self, **kw)

    def _repr_html_(self) -> str:
        from workbench.hypotheses.render import render_html
        return render_html(self)


def rank(hypotheses: Iterable[Hypothesis]) -> list[Hypothesis]:
    shown = [h for h in hypotheses if h.has_evidence]

    def key(h: Hypothesis):
        gate = 0 if (h.category == "measurement" and h.confidence == "high" and h.rule in GATING_RULES) else 1
        return (gate, -h.time_at_stake_ms, CONFIDENCE_ORDER[h.confidence], h.rule)

    return sorted(shown, key=key)


GATING_RULES = frozenset({"too_few_samples", "faster_than_roofline"})


def _run_rules(scope: str, facts: Any, only: Iterable[str] | None = None) -> tuple[list[Hypothesis], list[NotJudgedNote]]:
    found, notes = [], []
    wanted = set(only) if only is not None else None
    for r in list_rules(scope):
        if wanted is not None and r.name not in wanted:
            continue
        try:
            found.extend(r(facts))
        except NotJudged as nj:
            notes.append(NotJudgedNote(r.name, r.category, nj.reason))
        except Exception as exc:  # a rule bug must not hide the other rules' findings
            notes.append(NotJudgedNote(r.name, r.category, f"{RULE_FAILED}{type(exc).__name__}: {exc}"))
    return found, notes


RULE_FAILED = "the rule raised "


def diagnose_trace_full(trace: Any, *, rules: Iterable[str] | None = None) -> Diagnosis:
    facts = trace if isinstance(trace, TraceFacts) else TraceFacts(trace)
    if rules is not None:
        from workbench.hypotheses.registry import get_rule
        for name in rules:
            get_rule(name)   # unknown name -> RegistryError
    found, notes = _run_rules("trace", facts, rules)
    return Diagnosis(tuple(rank(found)), tuple(notes), facts.source)


def diagnose_run_full(run: Any) -> Diagnosis:
    facts = RunFacts(run)
    found, notes = _run_rules("run", facts)
    try:
        tf = facts.trace_facts
        trace_found, trace_notes = _run_rules("trace", tf)
        per_call = max(1, facts.calls_in_trace)
        # trace stakes cover every traced call; run stakes are per call
        cap_ms = facts.timing.median_ms if facts.timing is not None else None
        found.extend(_capped(_per_call(h, per_call, tf.steps.empty), cap_ms) for h in trace_found)
        notes.extend(trace_notes)
    except NotJudged as nj:
        notes.append(NotJudgedNote("(trace rules)", "", nj.reason))
    return Diagnosis(tuple(rank(found)), tuple(notes), "run " + facts.name if facts.name else "run")


def _capped(h: Hypothesis, cap_ms: float | None) -> Hypothesis:
    """A per-call stake cannot exceed the measured (median) call it would shorten."""
    from dataclasses import replace

    if cap_ms is None or h.time_at_stake_ms <= cap_ms:
        return h
    return replace(h, time_at_stake_ms=cap_ms)


def _per_call(h: Hypothesis, calls: int, no_steps: bool) -> Hypothesis:
    from dataclasses import replace

    # rules reading per-step windows already divide by the number of steps
    if h.rule in PER_CALL_RULES:
        return h
    return replace(h, time_at_stake_ms=h.time_at_stake_ms / calls)


PER_CALL_RULES = frozenset({"cpu_dispatch_overhead", "cpu_host_gaps", "cpu_memory_bound_ops", "cpu_compute_bound_ops",
                            "large_allocations_repeat"})


def diagnose_trace(trace: Any, **kw) -> list[Hypothesis]:
    """Ranked hypotheses for a Trace (``Trace.hypotheses()`` calls this)."""
    return list(diagnose_trace_full(trace, **kw).hypotheses)


def diagnose_run(run: Any) -> list[Hypothesis]:
    """Ranked hypotheses for a ProfileRun (``ProfileRun.hypotheses`` calls this)."""
    return list(diagnose_run_full(run).hypotheses)
