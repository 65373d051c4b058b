"""Predictions written before a round, and each prediction's residual classified after it.

A prediction (the hypothesis's discriminator) names: the variants that test it, the mechanism
metric that should fall (``MECHANISM_BY_CATEGORY`` of ``workbench.variants.hypothesis_check``),
the direction of the time (faster: the speedup interval above 1), the most it could gain (the
hypothesis's time at stake as a speedup bound), and the falsifier.

After the round each (hypothesis, variant) pair is judged by ``hypothesis_check.judge`` and its
case classified into the study's residual classes:

=============================  =====================================================  ==========
residual                        when                                                   status
=============================  =====================================================  ==========
supported                       the time moved as predicted (and the mechanism, where   supported
                                it was measured)
weakened                        faster, but by less than half the predicted gain        weakened
rejected                        the time did not move and the interval rules out a      rejected
                                gain of ``min_effect``, though the test was fair
mechanism_moved_not_target      the mechanism moved, the time did not                   rejected
target_moved_without_mechanism  the time moved, the mechanism did not                   weakened
opposite_sign                   the variant was slower: kept as evidence; weakened      weakened /
                                where the mechanism moved, else untested                unchanged
untested                        the variant did not touch the mechanism, or it did     unchanged
                                not run correctly, or the interval is too wide
=============================  =====================================================  ==========

The confidence moves one step up on support, one step down when weakened, to ``low`` on a
rejection; each change is written with its reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from workbench.hypotheses.hypothesis import Hypothesis
from workbench.study.ledger import hypothesis_key, step_confidence
from workbench.variants.hypothesis_check import MECHANISM_BY_CATEGORY, judge

if TYPE_CHECKING:
    from workbench.variants.results import VariantResult

RESIDUALS = (
    "supported",
    "weakened",
    "rejected",
    "mechanism_moved_not_target",
    "target_moved_without_mechanism",
    "opposite_sign",
    "untested",
)
STATUS_OF = {
    "supported": "supported",
    "weakened": "weakened",
    "rejected": "rejected",
    "mechanism_moved_not_target": "rejected",
    "target_moved_without_mechanism": "weakened",
}
CASE_TO_RESIDUAL = {
    "both_moved": "supported",
    "time_moved_mechanism_unmeasured": "supported",
    "moved_less_than_predicted": "weakened",
    "mechanism_moved_time_did_not": "mechanism_moved_not_target",
    "time_moved_without_mechanism": "target_moved_without_mechanism",
    "opposite_sign": "opposite_sign",
    "opposite_sign_mechanism_untouched": "opposite_sign",
    "untested_mechanism_untouched": "untested",
    "untested_mechanism_unmeasured": "untested",
    "untested": "untested",
}


@dataclass
class _Probe:
    """What ``judge`` reads from a hypothesis, limited to the variants that test it in this round."""

    category: str
    suggested_variants: tuple[str, ...]
    predicted_effect: Any
    status: str = "proposed"


def speedup_bound(h: Hypothesis, baseline_median_ms: float | None) -> float | None:
    """The largest speedup removing the hypothesis's time at stake could give (an upper bound)."""
    if not baseline_median_ms or baseline_median_ms <= 0:
        return None
    left = baseline_median_ms - min(h.time_at_stake_ms, baseline_median_ms)
    return baseline_median_ms / left if left > 0 else math.inf


def prediction(h: Hypothesis, variants: list[str], baseline_median_ms: float | None) -> dict[str, Any]:
    metrics = list(MECHANISM_BY_CATEGORY.get(h.category, ()))
    bound = speedup_bound(h, baseline_median_ms)
    bound_text = (
        f"at most x{bound:.3g} (its {h.time_at_stake_ms:.3g} ms at stake removed)"
        if bound and math.isfinite(bound)
        else "bounded by its time at stake"
    )
    mech = f"{' or '.join(metrics)} falls by >= 10%" if metrics else "no counted mechanism metric for this category"
    return {
        "key": hypothesis_key(h),
        "category": h.category,
        "title": h.title,
        "variants": list(variants),
        "predicted_effect": h.predicted_effect,
        "mechanism_metrics": metrics,
        "speedup_bound": bound if bound is None or math.isfinite(bound) else None,
        "falsifier": h.falsifier,
        "confidence": h.confidence,
        "status": h.status,
        "discriminator": (
            f"if {h.category} holds, {', '.join(variants)} is faster (speedup interval above 1), "
            f"{bound_text}, and {mech}; if the time does not drop while the mechanism does, "
            f"it is rejected ({h.falsifier})"
        ),
    }


@dataclass(frozen=True)
class Residual:
    key: str
    variant: str
    residual: str
    status: str  # the status this pair alone would give (unchanged: the old one)
    case: str
    measured_speedup: float | None
    speedup_ci: tuple[float | None, float | None]
    speedup_bound: float | None
    explanation: str
    verdict: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "variant": self.variant,
            "residual": self.residual,
            "status": self.status,
            "case": self.case,
            "measured_speedup": self.measured_speedup,
            "speedup_ci": list(self.speedup_ci),
            "speedup_bound": self.speedup_bound,
            "explanation": self.explanation,
            "verdict": dict(self.verdict),
        }


def _precisely_no_gain(result: VariantResult, min_effect: float) -> bool:
    s = result.speedup
    return s is not None and not s.faster and s.ci_high < 1 + min_effect


def classify_pair(
    h: Hypothesis, base: VariantResult, result: VariantResult, pred: dict[str, Any], *, min_effect: float
) -> Residual:
    """Judge one variant's row against one hypothesis's prediction."""
    key = hypothesis_key(h)
    probe = _Probe(h.category, (result.name,), {"text": h.predicted_effect}, h.status)
    verdict, _ = judge(probe, [base, result], base.name)
    case = verdict.get("case", "untested")
    residual = CASE_TO_RESIDUAL.get(case, "untested")
    explanation = verdict.get("explanation", "")
    if result.status != "ok":
        residual, explanation = "untested", f"{result.name} did not run correctly ({result.status}: {result.reason})"
    elif (
        case == "untested_mechanism_unmeasured"
        and result.speedup is not None
        and _precisely_no_gain(result, min_effect)
    ):
        residual = "rejected"
        explanation = (
            f"rejected by its falsifier: {result.name} is not faster ({result.speedup.describe()}), and "
            f"the interval rules out a gain of {min_effect:.0%}; the mechanism was not measured"
        )
    status = STATUS_OF.get(residual)
    if residual == "opposite_sign":
        status = "weakened" if verdict.get("status") == "weakened" else None
    bound = pred.get("speedup_bound")
    s = result.speedup
    measured = s.point if s is not None else None
    if residual == "supported" and bound and measured and measured > bound * 1.05:
        explanation += f"; faster than the bound x{bound:.3g}: the stake was underestimated"
    elif bound and measured:
        explanation += f"; the bound was x{bound:.3g}, residual {measured - bound:+.3g}"
    return Residual(
        key,
        result.name,
        residual,
        status or h.status,
        case,
        measured,
        (s.ci_low, s.ci_high) if s is not None else (None, None),
        bound,
        explanation,
        verdict,
    )


STRENGTH = {
    "supported": 3,
    "rejected": 2,
    "mechanism_moved_not_target": 2,
    "weakened": 1,
    "target_moved_without_mechanism": 1,
    "opposite_sign": 0,
    "untested": -1,
}


def combine(h: Hypothesis, residuals: list[Residual]) -> dict[str, Any]:
    """The hypothesis's update from all the pairs that tested it: the most decisive residual wins
    (a support by any fair test, else a rejection, else a weakening); an explicit confidence change."""
    tested = [r for r in residuals if r.residual != "untested"]
    before_status, before_conf = h.status, h.confidence
    if not tested:
        return {
            "key": hypothesis_key(h),
            "residual": "untested",
            "status_before": before_status,
            "status_after": before_status,
            "confidence_before": before_conf,
            "confidence_after": before_conf,
            "change": f"{before_conf} (unchanged: not tested)",
            "variant": None,
            "reason": "; ".join(r.explanation for r in residuals) or "no variant of this round tested it",
        }
    best = max(tested, key=lambda r: (STRENGTH[r.residual], r.measured_speedup or 0.0))
    residual = best.residual
    status = best.status
    if residual == "supported":
        conf = step_confidence(before_conf, +1)
    elif status == "rejected":
        conf = "low"
    elif status == "weakened":
        conf = step_confidence(before_conf, -1)
    else:
        conf = before_conf
    if conf != before_conf:
        change = f"{before_conf} -> {conf}"
    else:
        change = (
            f"{before_conf} -> {conf} (already the {'highest' if residual == 'supported' else 'lowest'})"
            if residual == "supported" or status in ("rejected", "weakened")
            else f"{before_conf} (unchanged)"
        )
    return {
        "key": hypothesis_key(h),
        "residual": residual,
        "status_before": before_status,
        "status_after": status,
        "confidence_before": before_conf,
        "confidence_after": conf,
        "change": change,
        "variant": best.variant,
        "reason": best.explanation,
    }
