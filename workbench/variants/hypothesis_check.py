"""Hold a hypothesis's predicted effect against what a variant measurably changed.

Duck-typed protocol (what ``compare(..., hypothesis=h)`` reads from ``h``):

* ``h.category``: a DESIGN.md category string (picks the default mechanism metric);
* ``h.suggested_variants`` (optional): registry names; the best of those in the comparison is
  judged, else the best candidate;
* ``h.predicted_effect`` (optional): a number (the predicted speedup, e.g. 1.5), or a mapping /
  object with any of ``speedup`` (ratio), ``time_saved_ms``, ``metric`` (a footprint metric:
  op_count, kernel_count, launch_count, sync_count, alloc_count, alloc_bytes,
  peak_memory_bytes, or setup_ms) and ``direction`` ("decrease"/"increase"); free text is kept
  as text and judged on the category's mechanism;
* ``h.status``: set to supported / weakened / rejected (assigned when the object allows it,
  else a frozen dataclass is copied with ``dataclasses.replace``; the copy is returned).

The cases: both the mechanism and the time moved as predicted -> supported; the mechanism moved
but the time did not -> rejected (the cause was removed and the time stayed: the falsifier
fired); the time moved without the mechanism -> weakened (something else explains the gain); the
time moved the other way (the variant was slower) -> "opposite sign", said as such ("1.56x
slower"): weakened when the mechanism moved (the variant's own cost may explain it), untested
otherwise.  A variant that did not touch the mechanism (it did not move, or was not measured, or
the variant is not one the hypothesis suggests) cannot reject it: the verdict is "untested" and
the hypothesis keeps its status.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from workbench.variants.results import VariantResult

MECHANISM_BY_CATEGORY = {
    "launch_overhead": ("launch_count", "op_count"),
    "host_bound": ("op_count",),
    "memory_bound": ("kernel_count", "op_count"),
    "allocation_churn": ("alloc_count", "alloc_bytes"),
    "host_sync": ("sync_count",),
    "cold_start": ("setup_ms",),
    "graph_break": ("op_count",),
}
MECHANISM_MOVE = 0.10  # a metric moved when it changed by >= 10% of the baseline's value
SHORTFALL = 0.5  # time moved "as predicted" when >= half the predicted gain arrived


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key, default)
    return getattr(obj, key, default)


def _prediction(h: Any) -> dict[str, Any]:
    p = getattr(h, "predicted_effect", None)
    if isinstance(p, (int, float)):
        return {"speedup": float(p)}
    if p is None or isinstance(p, str):
        return {"text": p}
    return {k: _get(p, k) for k in ("speedup", "time_saved_ms", "metric", "direction", "text")}


def _metric_values(r: VariantResult, base: VariantResult, metric: str) -> tuple[float | None, float | None]:
    if metric == "setup_ms":
        return base.setup_ms, r.setup_ms
    return (base.footprint.get(metric) if base.footprint else None), (r.footprint.get(metric) if r.footprint else None)


def _mechanism(h: Any, pred: dict, r: VariantResult, base: VariantResult) -> tuple[str | None, Any, Any, bool | None]:
    metrics = (
        [pred["metric"]] if pred.get("metric") else list(MECHANISM_BY_CATEGORY.get(getattr(h, "category", ""), ()))
    )
    for m in metrics:
        before, after = _metric_values(r, base, m)
        if before is None or after is None:
            continue
        change = after - before
        sign = 1 if pred.get("direction") == "increase" else -1
        moved = sign * change >= MECHANISM_MOVE * max(abs(before), 1)
        return m, before, after, moved
    return None, None, None, None


def _pick(h: Any, results: list[VariantResult], baseline: str) -> tuple[VariantResult | None, bool]:
    """(the candidate judged, whether it is one the hypothesis suggests or it suggests none)."""
    cands = [r for r in results if r.name != baseline and r.speedup is not None and r.status == "ok"]
    suggested = set(getattr(h, "suggested_variants", ()) or ())
    named = [r for r in cands if r.name in suggested or r.kind in suggested]
    pool = named or cands
    best = max(pool, key=lambda r: r.speedup.point if r.speedup is not None else 0.0) if pool else None
    return best, bool(named) or not suggested


def judge(h: Any, results: list[VariantResult], baseline: str) -> tuple[dict[str, Any], Any]:
    """(verdict, hypothesis with its status set)."""
    base = next(r for r in results if r.name == baseline)
    r, suggested = _pick(h, results, baseline)
    if r is None or r.speedup is None:  # _pick returns timed candidates only
        return _finish(
            h,
            {
                "status": getattr(h, "status", "proposed"),
                "case": "untested",
                "variant": None,
                "explanation": "no suggested variant ran correctly, so nothing was measured",
            },
        )
    s = r.speedup
    pred = _prediction(h)
    metric, before, after, mech_moved = _mechanism(h, pred, r, base)
    if not suggested and mech_moved is not True:
        mech_moved = None  # a variant it does not suggest, not shown to touch the mechanism
    time_moved = s.faster
    if time_moved and pred.get("speedup"):
        time_moved = (s.point - 1) >= SHORTFALL * (pred["speedup"] - 1)
    case, status = _case(time_moved, mech_moved, s.slower)
    if case == "mechanism_moved_time_did_not" and s.faster:
        case, status = "moved_less_than_predicted", "weakened"  # a shortfall, not a refutation
    if status is None:
        status = getattr(h, "status", "proposed")
    verdict = {
        "variant": r.name,
        "status": status,
        "case": case,
        "metric": metric,
        "metric_before": before,
        "metric_after": after,
        "measured_speedup": s.point,
        "speedup_ci": [s.ci_low, s.ci_high],
        "predicted_speedup": pred.get("speedup"),
        "residual_speedup": (s.point - pred["speedup"]) if pred.get("speedup") else None,
        "prediction_text": pred.get("text"),
    }
    verdict["explanation"] = _explain(verdict)
    return _finish(h, verdict)


def _case(time_moved: bool, mech_moved: bool | None, slower: bool = False) -> tuple[str, str | None]:
    """(case, status); status None: untested, the hypothesis keeps the status it had."""
    if slower:
        return ("opposite_sign", "weakened") if mech_moved else ("opposite_sign_mechanism_untouched", None)
    if mech_moved is None:
        return (
            ("time_moved_mechanism_unmeasured", "supported") if time_moved else ("untested_mechanism_unmeasured", None)
        )
    if time_moved and mech_moved:
        return "both_moved", "supported"
    if not time_moved and not mech_moved:
        return "untested_mechanism_untouched", None
    return ("mechanism_moved_time_did_not", "rejected") if mech_moved else ("time_moved_without_mechanism", "weakened")


def _explain(v: dict[str, Any]) -> str:
    mech = (
        f"{v['metric']} {v['metric_before']} -> {v['metric_after']}"
        if v["metric"]
        else "the mechanism was not measured here"
    )
    pred = (
        f" (predicted x{v['predicted_speedup']:.3g}, residual {v['residual_speedup']:+.3g})"
        if v["predicted_speedup"]
        else ""
    )
    slower = (
        f"{v['variant']} was {1 / v['measured_speedup']:.3g}x slower (x{v['measured_speedup']:.3g})"
        if v["measured_speedup"] < 1
        else ""
    )
    text = {
        "both_moved": "both moved as predicted",
        "mechanism_moved_time_did_not": "rejected: the mechanism moved but the time did not",
        "time_moved_without_mechanism": "the time moved without the mechanism",
        "moved_less_than_predicted": "the mechanism moved, the time less than half as much as predicted",
        "time_moved_mechanism_unmeasured": "the time moved; the mechanism was not measured",
        "untested_mechanism_unmeasured": "untested: the time did not move, but the mechanism was not "
        "measured, so this variant cannot test the hypothesis",
        "untested_mechanism_untouched": "untested: the variant did not change the mechanism, so it "
        "cannot test the hypothesis",
        "opposite_sign": f"opposite sign: {slower}, though the mechanism moved",
        "opposite_sign_mechanism_untouched": f"opposite sign: {slower}; the variant did not change the "
        f"mechanism, so it cannot test the hypothesis",
    }[v["case"]]
    if v["case"].startswith("opposite_sign"):
        return f"{text}{pred}; {mech}"
    return f"{text}: {v['variant']} x{v['measured_speedup']:.3g}{pred}; {mech}"


def _finish(h: Any, verdict: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    status = verdict["status"]
    if status == getattr(h, "status", None):
        return verdict, h
    try:
        setattr(h, "status", status)
        return verdict, h
    except (AttributeError, dataclasses.FrozenInstanceError, TypeError):
        if dataclasses.is_dataclass(h) and not isinstance(h, type):
            return verdict, dataclasses.replace(h, status=status)
        return verdict, h
