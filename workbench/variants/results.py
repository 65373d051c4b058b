"""Frozen results of a comparison: one ``VariantResult`` per variant, and the ``Comparison``."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from workbench.measurement import Measurement
from workbench.variants.decision import DecisionRecord
from workbench.variants.output_check import CorrectnessResult
from workbench.variants.stats import Speedup

STATUSES = ("ok", "not_applicable", "error", "timeout", "incorrect")


@dataclass(frozen=True)
class VariantResult:
    """Everything measured about one variant; ``status`` says how far it got."""

    name: str
    kind: str
    status: str
    reason: str = ""
    numerical_class: str = "exact"
    requires: tuple[str, ...] = ()
    correctness: CorrectnessResult | None = None
    timing: Measurement | None = None
    setup_ms: float | None = None
    speedup: Speedup | None = None
    flags: tuple[str, ...] = ()
    footprint: dict[str, Any] = field(default_factory=dict)
    bytes_moved: int = 0
    achieved_gbps: float | None = None
    bandwidth_share: float | None = None
    timing_meaningful: bool = True
    failure_cases: tuple[str, ...] = ()
    sweep: tuple[dict[str, Any], ...] = ()
    decision: str = ""
    decision_reason: str = ""
    max_diff_vs_baseline: float | None = None  # largest |output - baseline's output| (0: bit-identical)
    max_grad_rel_err: float | None = (
        None  # largest gradient error / that gradient's largest |value| (None: none compared)
    )
    precision: str = ""  # what it computes in reduced precision ("" : the baseline's precision)
    compared: dict[str, int] = field(
        default_factory=dict
    )  # outputs, input/parameter gradients, values, optimizer states, buffers
    stateful: bool = False  # its call changed reached state (gradients, parameters, optimizer, buffers)

    def with_(self, **kw: Any) -> "VariantResult":
        return replace(self, **kw)

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["correctness"] = self.correctness.to_dict() if self.correctness else None
        d["timing"] = self.timing.to_dict() if self.timing else None
        d["speedup"] = self.speedup.to_dict() if self.speedup else None
        for k in ("requires", "flags", "failure_cases", "sweep"):
            d[k] = list(d[k])
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "VariantResult":
        kw = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        kw["correctness"] = CorrectnessResult.from_dict(d["correctness"]) if d.get("correctness") else None
        kw["timing"] = Measurement.from_dict(d["timing"]) if d.get("timing") else None
        kw["speedup"] = Speedup.from_dict(d["speedup"]) if d.get("speedup") else None
        for k in ("requires", "flags", "failure_cases", "sweep"):
            kw[k] = tuple(kw.get(k, ()))
        if kw.get("numerical_class") == "lower precision":  # records saved before the rename
            kw["numerical_class"] = "reduced precision"
        kw["compared"] = dict(kw.get("compared") or {})
        return cls(**kw)

    def row(self) -> dict[str, Any]:
        """One flat table row."""
        t, s, c = self.timing, self.speedup, self.correctness
        lo, hi = t.median_ci_ms() if t else (None, None)
        return {
            "variant": self.name,
            "kind": self.kind,
            "status": self.status,
            "correct": None if c is None else c.passed,
            "max_abs_err": c.max_abs_err if c else None,
            "max_rel_err": c.max_rel_err if c else None,
            "median_ms": t.median_ms if t else None,
            "median_ci_low_ms": lo,
            "median_ci_high_ms": hi,
            "p95_ms": t.p95_ms if t else None,
            "n_samples": t.n if t else 0,
            "speedup": s.point if s else None,
            "speedup_ci_low": s.ci_low if s else None,
            "speedup_ci_high": s.ci_high if s else None,
            "p95_speedup": s.p95_ratio if s else None,
            "setup_ms": self.setup_ms,
            "achieved_gbps": self.achieved_gbps,
            "bandwidth_share": self.bandwidth_share,
            "peak_memory_bytes": (self.footprint or {}).get("peak_memory_bytes"),
            "peak_memory_ratio": _peak_ratio(self.footprint),
            "decision": self.decision,
            "reason": self.decision_reason or self.reason,
            "flags": "; ".join(self.flags),
        }


def _peak_ratio(footprint: dict[str, Any] | None) -> float | None:
    """This variant's peak memory over the baseline's (2.0: doubled); None where either was not measured."""
    if not footprint:
        return None
    peak, delta = footprint.get("peak_memory_bytes"), (footprint.get("delta") or {}).get("peak_memory_bytes")
    if peak is None or delta is None or peak - delta <= 0:
        return None
    return float(peak) / float(peak - delta)


@dataclass(frozen=True)
class Comparison:
    """``table`` (one row per variant), ``decision`` (DecisionRecord), raw samples, hypothesis verdict.

    Displayed in a notebook through ``workbench.render`` (its HTML is registered with IPython by
    type name); its charts are ``workbench.charts.comparison_charts(cmp)`` and
    ``workbench.charts.save_charts(cmp, folder)``."""

    baseline: str
    results: tuple[VariantResult, ...]
    decision: DecisionRecord
    hypothesis_verdict: dict[str, Any] | None = None
    hypothesis: Any = None
    copy_gbps: float | None = None  # large copy (256 MB moved): the DRAM-side roof
    settings: dict[str, Any] = field(default_factory=dict)
    working_set_copy_gbps: float | None = None  # a copy of the variants' working set: their roof
    # variant -> the Chrome trace of its profiled call (a temporary file; not saved with the comparison):
    # what ``workbench.render.comparison`` diffs the winner against the baseline from
    trace_paths: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def table(self):
        import pandas as pd

        return pd.DataFrame([r.row() for r in self.results])

    @property
    def samples_ms(self) -> dict[str, tuple[float, ...]]:
        """Raw per-call samples per timed variant (for the comparison chart)."""
        return {r.name: r.timing.samples_ms for r in self.results if r.timing is not None}

    def __getitem__(self, name: str) -> VariantResult:
        for r in self.results:
            if r.name == name:
                return r
        from workbench.errors import RegistryError

        raise RegistryError(f"no variant {name!r} in this comparison; it has {[r.name for r in self.results]}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "results": [r.to_dict() for r in self.results],
            "decision": self.decision.to_dict(),
            "hypothesis_verdict": self.hypothesis_verdict,
            "copy_gbps": self.copy_gbps,
            "settings": dict(self.settings),
            "working_set_copy_gbps": self.working_set_copy_gbps,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Comparison":
        return cls(
            baseline=d["baseline"],
            results=tuple(VariantResult.from_dict(r) for r in d["results"]),
            decision=DecisionRecord.from_dict(d["decision"]),
            hypothesis_verdict=d.get("hypothesis_verdict"),
            copy_gbps=d.get("copy_gbps"),
            settings=dict(d.get("settings", {})),
            working_set_copy_gbps=d.get("working_set_copy_gbps"),
        )
