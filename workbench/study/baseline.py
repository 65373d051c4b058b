"""A baseline: the named, immutable starting point of a round (DESIGN.md "The study")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from workbench.hypotheses.hypothesis import Hypothesis
from workbench.study.records import expect_all, expect_items

BASELINE_FIELDS = {
    "baseline_id": "str",
    "index": "round",
    "label": "str?",
    "created_at": "str?",
    "source_hash": "str",
    "callable_ref": "dict?",
    "variant": "dict?",
    "inputs": "dict?",
    "environment_key": "str?",
    "device": "str?",
    "git": "dict?",
    "reset_procedure": "strs?",
    "settings": "dict?",
    "profile_options": "dict?",
    "run_path": "str?",
    "median_ms": "positive",
    "p95_ms": "nonneg?",
    "iqr_ms": "nonneg?",
    "n": "count?",
    "hypotheses": "dicts?",
    "held_back": "dicts?",
    "parent_id": "str?",
    "accepted_from": "dict?",
    "notes": "strs?",
    "mode": "str?",
}


@dataclass(frozen=True)
class Baseline:
    """One baseline of a study, as recorded when it was set (or accepted) and profiled.

    ``baseline_id`` hashes the callable's source and variant, the inputs' shapes/dtypes/seed, the
    stable environment fingerprint and the git commit/dirty flag (``workbench.study.identity``).
    ``hypotheses`` are the ranked hypotheses of its profile, those rejected under the same scope
    before left out (``held_back`` says which and why). ``run_path`` is its run bundle, relative
    to the study folder."""

    baseline_id: str
    index: int
    label: str
    created_at: str
    source_hash: str
    callable_ref: dict[str, Any]
    variant: dict[str, Any]
    inputs: dict[str, Any]  # seed, signature (shapes, dtypes, devices), inputs_ref
    environment_key: str
    device: str
    git: dict[str, Any] | None
    reset_procedure: tuple[str, ...]
    settings: dict[str, Any]  # torch settings in effect while profiling
    profile_options: dict[str, Any]
    run_path: str
    median_ms: float
    p95_ms: float
    iqr_ms: float
    n: int
    hypotheses: tuple[Hypothesis, ...]
    held_back: tuple[dict[str, Any], ...] = ()
    parent_id: str | None = None
    accepted_from: dict[str, Any] | None = None
    notes: tuple[str, ...] = field(default=(), compare=False)
    mode: str = "inference"  # "training": rounds check gradients and time forward + backward

    @property
    def seed(self) -> int:
        return int(self.inputs.get("seed", 0))

    def to_dict(self) -> dict[str, Any]:
        return {
            "baseline_id": self.baseline_id,
            "index": self.index,
            "label": self.label,
            "created_at": self.created_at,
            "source_hash": self.source_hash,
            "callable_ref": dict(self.callable_ref),
            "variant": dict(self.variant),
            "inputs": dict(self.inputs),
            "environment_key": self.environment_key,
            "device": self.device,
            "git": dict(self.git) if self.git else None,
            "reset_procedure": list(self.reset_procedure),
            "settings": dict(self.settings),
            "profile_options": dict(self.profile_options),
            "run_path": self.run_path,
            "median_ms": self.median_ms,
            "p95_ms": self.p95_ms,
            "iqr_ms": self.iqr_ms,
            "n": self.n,
            "hypotheses": [h.to_dict() for h in self.hypotheses],
            "held_back": [dict(h) for h in self.held_back],
            "parent_id": self.parent_id,
            "accepted_from": dict(self.accepted_from) if self.accepted_from else None,
            "notes": list(self.notes),
            "mode": self.mode,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Baseline":
        return cls(
            baseline_id=d["baseline_id"],
            index=int(d["index"]),
            label=d.get("label", ""),
            created_at=d.get("created_at", ""),
            source_hash=d["source_hash"],
            callable_ref=dict(d.get("callable_ref") or {}),
            variant=dict(d.get("variant") or {}),
            inputs=dict(d.get("inputs") or {}),
            environment_key=d.get("environment_key", ""),
            device=d.get("device", ""),
            git=d.get("git"),
            reset_procedure=tuple(d.get("reset_procedure", ())),
            settings=dict(d.get("settings") or {}),
            profile_options=dict(d.get("profile_options") or {}),
            run_path=d.get("run_path", ""),
            median_ms=float(d["median_ms"]),
            p95_ms=float(d.get("p95_ms") or 0.0),
            iqr_ms=float(d.get("iqr_ms") or 0.0),
            n=int(d.get("n") or 0),
            hypotheses=tuple(Hypothesis.from_dict(h) for h in d.get("hypotheses", ())),
            held_back=tuple(d.get("held_back", ())),
            parent_id=d.get("parent_id"),
            accepted_from=d.get("accepted_from"),
            notes=tuple(d.get("notes", ())),
            mode="training" if d.get("mode") == "training" else "inference",
        )

    @classmethod
    def parse(cls, d: dict[str, Any]) -> "Baseline":
        """A stored baseline, every field type-checked first (ValueError naming the first wrong one)."""
        from workbench.study.ledger import parse_hypothesis

        expect_all(d, BASELINE_FIELDS)
        expect_all(d.get("inputs") or {}, {"seed": "int?", "inputs_ref": "dict?"}, where="inputs")
        expect_all(
            d.get("accepted_from") or {},
            {
                "round": "round?",
                "variant": "str?",
                "decision": "str?",
                "reason": "str?",
                "speedup": "number?",
                "from": "str?",
                "guard": "str?",
                "untested": "bool?",
            },
            where="accepted_from",
        )
        expect_items(d, "held_back", {"key": "str?", "title": "str?", "reason": "str?", "reopen_when": "str?"})
        for i, h in enumerate(d.get("hypotheses") or ()):
            parse_hypothesis(h, where=f"hypotheses[{i}]")
        return cls.from_dict(d)

    def describe(self) -> str:
        git = ""
        if self.git:
            git = f", commit {str(self.git.get('commit', ''))[:10]}{' (dirty)' if self.git.get('dirty') else ''}"
        origin = (
            f", accepted from round {self.accepted_from.get('round')} ({self.accepted_from.get('variant')})"
            if self.accepted_from
            else ""
        )
        mode = ", training path" if self.mode == "training" else ""
        return (
            f"{self.baseline_id} [{self.label}{mode}]: median {self.median_ms:.4g} ms (p95 {self.p95_ms:.4g} ms, "
            f"n={self.n}) on {self.device}{git}{origin}"
        )
