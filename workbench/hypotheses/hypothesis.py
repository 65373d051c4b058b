"""The hypothesis model (DESIGN.md "Hypotheses"): frozen values with to_dict/from_dict.

A ``Hypothesis`` is a falsifiable claim about where time went, built by one rule from
measured evidence. No torch, IPython or altair here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from workbench.errors import InvalidArgumentError
from workbench.units import format_ms

CATEGORIES: tuple[str, ...] = (
    "launch_overhead",
    "host_bound",
    "memory_bound",
    "compute_bound",
    "host_sync",
    "transfer",
    "allocation_churn",
    "graph_break",
    "recompilation",
    "cold_start",
    "precision",
    "communication",
    "load_imbalance",
    "measurement",
    # memory, not time: the peak and what holds it (stakes in bytes, in the evidence; time_at_stake_ms 0)
    "memory_footprint",
)
CONFIDENCES: tuple[str, ...] = ("high", "medium", "low")
# the evidence metric of a measurement caveat saying the timing cannot be judged at all (no interval of
# the median can be formed): such a caveat leads the ranking (``diagnose.voids_timing``)
NO_INTERVAL_METRIC = "no_median_interval"
STATUSES: tuple[str, ...] = ("proposed", "supported", "weakened", "rejected")


def _check_choice(value: str, allowed: tuple[str, ...], what: str) -> None:
    if value not in allowed:
        raise InvalidArgumentError(f"{what} must be one of {', '.join(allowed)}; got {value!r}")


def _plain(value: Any) -> Any:
    """numpy scalars and tuples -> plain JSON-able Python values."""
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            return value.item()
        except (ValueError, TypeError):
            pass
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class Evidence:
    """One measured number, the threshold it was held against, and where it shows.

    ``rows`` are small records (an op name and its time, a gap's start and length) that let a
    reader find the symptom in the trace; ``source`` names the table or result it came from.
    """

    metric: str
    value: float
    unit: str
    threshold: float | None = None
    comparison: str = ">"  # how value relates to threshold when the rule fires
    source: str = ""
    rows: tuple[dict[str, Any], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", float(self.value))
        if self.threshold is not None:
            object.__setattr__(self, "threshold", float(self.threshold))
        object.__setattr__(self, "rows", tuple(_plain(dict(r)) for r in self.rows))
        if not math.isfinite(self.value):
            raise InvalidArgumentError(f"evidence {self.metric!r} needs a finite value; got {self.value}")

    def describe(self) -> str:
        text = f"{self.metric} = {_fmt(self.value, self.unit)}"
        if self.threshold is not None:
            text += f" ({self.comparison} threshold {_fmt(self.threshold, self.unit)})"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "value": self.value,
            "unit": self.unit,
            "threshold": self.threshold,
            "comparison": self.comparison,
            "source": self.source,
            "rows": [dict(r) for r in self.rows],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Evidence":
        return cls(
            metric=d["metric"],
            value=d["value"],
            unit=d.get("unit", ""),
            threshold=d.get("threshold"),
            comparison=d.get("comparison", ">"),
            source=d.get("source", ""),
            rows=tuple(d.get("rows", ())),
        )


_TIME_UNITS = {"us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1e3}


def _fmt(x: float, unit: str = "") -> str:
    """A value with its unit for people: times in adaptive units (``workbench.units``), large counts
    with thousands separators, never scientific notation between 1e-3 and 1e12."""
    if unit in _TIME_UNITS:
        return format_ms(x * _TIME_UNITS[unit])
    if x == 0 or 1e-3 <= abs(x) < 1e12:
        number = f"{x:,.0f}" if abs(x) >= 1e4 else f"{x:,.4g}" if abs(x) >= 1000 else f"{x:.4g}"
    else:
        number = f"{x:.3e}"
    return f"{number} {unit}".rstrip()


@dataclass(frozen=True)
class Hypothesis:
    """A ranked, falsifiable explanation of a performance symptom."""

    category: str
    title: str
    observed: str
    mechanism: str
    evidence: tuple[Evidence, ...]
    time_at_stake_ms: float
    predicted_effect: str
    falsifier: str
    confounders: tuple[str, ...] = ()
    confidence: str = "medium"
    status: str = "proposed"
    suggested_variants: tuple[str, ...] = ()
    rule: str = ""
    scope: str = ""  # "rank 0", "whole run", an op name ...

    def __post_init__(self) -> None:
        _check_choice(self.category, CATEGORIES, "category")
        _check_choice(self.confidence, CONFIDENCES, "confidence")
        _check_choice(self.status, STATUSES, "status")
        stake = float(self.time_at_stake_ms)
        if not math.isfinite(stake) or stake < 0:
            raise InvalidArgumentError(f"time_at_stake_ms must be finite and >= 0; got {stake}")
        object.__setattr__(self, "time_at_stake_ms", stake)
        object.__setattr__(self, "evidence", tuple(self.evidence))
        object.__setattr__(self, "confounders", tuple(self.confounders))
        object.__setattr__(self, "suggested_variants", tuple(self.suggested_variants))

    @property
    def has_evidence(self) -> bool:
        return len(self.evidence) > 0

    def with_status(self, status: str) -> "Hypothesis":
        return replace(self, status=status)

    def to_dict(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "title": self.title,
            "observed": self.observed,
            "mechanism": self.mechanism,
            "evidence": [e.to_dict() for e in self.evidence],
            "time_at_stake_ms": self.time_at_stake_ms,
            "predicted_effect": self.predicted_effect,
            "falsifier": self.falsifier,
            "confounders": list(self.confounders),
            "confidence": self.confidence,
            "status": self.status,
            "suggested_variants": list(self.suggested_variants),
            "rule": self.rule,
            "scope": self.scope,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Hypothesis":
        return cls(
            category=d["category"],
            title=d["title"],
            observed=d["observed"],
            mechanism=d["mechanism"],
            evidence=tuple(Evidence.from_dict(e) for e in d.get("evidence", ())),
            time_at_stake_ms=d["time_at_stake_ms"],
            predicted_effect=d["predicted_effect"],
            falsifier=d["falsifier"],
            confounders=tuple(d.get("confounders", ())),
            confidence=d.get("confidence", "medium"),
            status=d.get("status", "proposed"),
            suggested_variants=tuple(d.get("suggested_variants", ())),
            rule=d.get("rule", ""),
            scope=d.get("scope", ""),
        )
