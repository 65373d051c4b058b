"""The round summary, in the method's terms: what was fixed before the round (baseline, reset
procedure, hypotheses and their discriminators, the variants), what was measured (a baseline
check per variant, the results), and what follows (confidence updates, residuals, the
disposition, the next re-profile or reopening condition). A frozen value with ``to_dict`` /
``from_dict`` and text and Markdown renderings."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from workbench.study.records import expect_all, expect_items

TUPLE_FIELDS = (
    "reset_procedure",
    "hypotheses",
    "variants",
    "baseline_checks",
    "results",
    "confidence_updates",
    "residuals",
    "disposition",
    "reopen_conditions",
    "notes",
)


@dataclass(frozen=True)
class RoundSummary:
    study: str
    round: int
    baseline_id: str
    reset_procedure: tuple[str, ...]
    hypotheses: tuple[dict[str, Any], ...]  # each with its discriminator, written before the round
    variants: tuple[dict[str, Any], ...]  # name, kind, description, the hypotheses it tests
    baseline_checks: tuple[dict[str, Any], ...]  # per variant: paired rounds, the baseline's drift
    results: tuple[dict[str, Any], ...]  # per variant: correctness, timing, speedup, decision
    confidence_updates: tuple[dict[str, Any], ...]  # per hypothesis: status and confidence before -> after
    residuals: tuple[dict[str, Any], ...]  # per (hypothesis, variant): the residual class
    disposition: tuple[dict[str, Any], ...]  # per variant: what to do with it
    next_step: str
    reopen_conditions: tuple[dict[str, Any], ...]
    started_at: str = ""
    finished_at: str = ""
    timing: str = ""
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        for k in TUPLE_FIELDS:
            d[k] = [dict(x) if isinstance(x, dict) else x for x in d[k]]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RoundSummary":
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        for k in TUPLE_FIELDS:
            kw[k] = tuple(kw.get(k) or ())
        return cls(**kw)

    @classmethod
    def parse(cls, d: dict[str, Any]) -> "RoundSummary":
        """A stored summary, each field the renderings use type-checked first (ValueError naming
        the first wrong one)."""
        expect_all(
            d,
            {
                "study": "str",
                "round": "round",
                "baseline_id": "str",
                "reset_procedure": "strs?",
                "next_step": "str?",
                "started_at": "str?",
                "finished_at": "str?",
                "timing": "str?",
                "notes": "strs?",
            },
        )
        expect_items(
            d,
            "hypotheses",
            {"key": "str", "confidence": "str?", "status": "str?", "discriminator": "str?", "variants": "strs?"},
        )
        expect_items(
            d,
            "variants",
            {
                "name": "str",
                "kind": "str?",
                "description": "str?",
                "tests": "strs?",
                "source_hash": "str?",
                "qualname": "str?",
                "options": "dict?",
            },
        )
        expect_items(d, "baseline_checks", {"variant": "str", "text": "str?", "status": "str?"})
        expect_items(
            d,
            "results",
            {
                "variant": "str",
                "decision": "str?",
                "speedup": "number?",
                "speedup_ci": "numbers?",
                "correct": "bool?",
                "median_ms": "number?",
                "reason": "str?",
                "text": "str?",
            },
        )
        expect_items(
            d,
            "confidence_updates",
            {
                "key": "str",
                "status_before": "str?",
                "status_after": "str?",
                "residual": "str?",
                "reason": "str?",
                "change": "str?",
            },
        )
        expect_items(d, "residuals", {"key": "str", "variant": "str", "residual": "str", "explanation": "str?"})
        expect_items(d, "disposition", {"variant": "str", "action": "str?", "decision": "str?"})
        expect_items(d, "reopen_conditions", {"key": "str", "status": "str?", "reopen_when": "str?"})
        for r in d.get("results") or ():
            ci = r.get("speedup_ci")
            if ci is not None and len(ci) != 2:
                raise ValueError(f"results: speedup_ci of {r['variant']!r} holds {len(ci)} values, not 2")
        summary = cls.from_dict(d)
        summary.to_text()
        return summary

    @property
    def kept(self) -> tuple[str, ...]:
        return tuple(r["variant"] for r in self.results if r.get("decision") in ("keep", "keep_guarded"))

    # -- rendering ------------------------------------------------------------------------
    def sections(self) -> list[tuple[str, list[str]]]:
        """The summary as (title, lines) pairs, in reading order: what its text and every rendering show."""
        hyps = [
            f"{h['key']} ({h.get('confidence', '?')} confidence, {h.get('status', '?')}): {h.get('discriminator', '')}"
            for h in self.hypotheses
        ] or ["none tested by this round"]
        variants = [
            f"{v['name']} ({v.get('kind', '?')}): {v.get('description', '') or '—'}; tests "
            f"{', '.join(v.get('tests', ())) or 'no hypothesis'}"
            for v in self.variants
        ]
        checks = [f"{c['variant']}: {c.get('text', '')}" for c in self.baseline_checks]
        results = [f"{r['variant']}: {r.get('decision', '?')} — {r.get('text', '')}" for r in self.results]
        updates = [
            f"{u['key']}: {u.get('status_before')} -> {u.get('status_after')}, confidence "
            f"{u.get('change', 'unchanged')} ({u.get('residual')}: {u.get('reason', '')})"
            for u in self.confidence_updates
        ] or ["none"]
        residuals = [
            f"{r['key']} x {r['variant']}: {r['residual']} — {r.get('explanation', '')}" for r in self.residuals
        ] or ["none"]
        disposition = [f"{d['variant']}: {d.get('action', '')}" for d in self.disposition]
        reopen = [f"{r['key']} ({r.get('status')}): reopen when {r.get('reopen_when')}" for r in self.reopen_conditions]
        return [
            ("Baseline", [self.baseline_id]),
            ("Reset procedure", list(self.reset_procedure)),
            ("Hypotheses and discriminators", hyps),
            ("Variants", variants),
            ("Baseline check per variant", checks),
            ("Results", results + ([self.timing] if self.timing else [])),
            ("Confidence updates", updates),
            ("Residuals", residuals),
            ("Disposition", disposition),
            ("Next", [self.next_step] + reopen),
            ("Notes", list(self.notes)),
        ]

    def to_text(self) -> str:
        lines = [f"Study {self.study!r}, round {self.round} against baseline {self.baseline_id}"]
        for title, items in self.sections():
            if not items:
                continue
            lines.append(f"{title}:")
            lines += [f"  - {x}" for x in items]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()
