from dataclasses import dataclass, field

import pytest
import torch

import workbench as wb
from tests.variants.variant_workloads import FAST
from workbench.variants.hypothesis_check import judge
from workbench.variants.results import VariantResult
from workbench.variants.stats import Speedup


@dataclass(frozen=True)
class FrozenHypothesis:  # the shape the hypotheses package is expected to have
    category: str
    predicted_effect: object = None
    suggested_variants: tuple = ()
    status: str = "proposed"


class MutableHypothesis:
    def __init__(self, category, predicted_effect=None, suggested_variants=()):
        self.category, self.predicted_effect = category, predicted_effect
        self.suggested_variants, self.status = suggested_variants, "proposed"


def _speedup(point, lo, hi):
    return Speedup(point, lo, hi, point, lo, hi, 30)


def _results(speedup, ops_after):
    base = VariantResult("eager", "eager", "ok", footprint={"op_count": 40, "alloc_count": 40})
    cand = VariantResult("fused", "user", "ok", speedup=speedup, footprint={"op_count": ops_after, "alloc_count": 40})
    return [base, cand]


@pytest.mark.parametrize(
    "speedup, ops_after, status, case",
    [
        (_speedup(3.0, 2.5, 3.5), 2, "supported", "both_moved"),
        (_speedup(1.0, 0.95, 1.05), 2, "rejected", "mechanism_moved_time_did_not"),
        (_speedup(2.0, 1.8, 2.2), 40, "weakened", "time_moved_without_mechanism"),
        (_speedup(0.64, 0.6, 0.68), 2, "weakened", "opposite_sign"),
    ],
)
def test_the_cases(speedup, ops_after, status, case):
    h = FrozenHypothesis("launch_overhead", predicted_effect=2.0, suggested_variants=("fused",))
    verdict, updated = judge(h, _results(speedup, ops_after), "eager")
    assert (verdict["status"], verdict["case"]) == (status, case)
    assert updated.status == status and h.status == "proposed"  # frozen: a copy carries it
    assert verdict["metric"] == "op_count" and verdict["residual_speedup"] == pytest.approx(speedup.point - 2.0)


@pytest.mark.parametrize(
    "speedup, ops_after, case",
    [
        (_speedup(1.0, 0.95, 1.05), 40, "untested_mechanism_untouched"),
        (_speedup(0.64, 0.6, 0.68), 40, "opposite_sign_mechanism_untouched"),
    ],
)
def test_a_variant_that_does_not_touch_the_mechanism_cannot_reject_it(speedup, ops_after, case):
    h = FrozenHypothesis("launch_overhead", predicted_effect=2.0, suggested_variants=("fused",))
    verdict, updated = judge(h, _results(speedup, ops_after), "eager")
    assert verdict["case"] == case and verdict["status"] == "proposed" and updated is h
    assert "cannot test the hypothesis" in verdict["explanation"]


def test_an_opposite_sign_result_is_said_as_such():
    """A compute-bound hypothesis ('fusion will not help'), a compiled variant that is slower and
    whose mechanism is not measured: "1.56x slower", not "the time did not move"."""
    h = MutableHypothesis("compute_bound", predicted_effect="fusion will not help", suggested_variants=("fused",))
    verdict, _ = judge(h, _results(_speedup(0.64, 0.6, 0.68), 40), "eager")
    assert "1.56x slower" in verdict["explanation"] and "opposite sign" in verdict["explanation"]
    assert "did not move" not in verdict["explanation"]
    assert h.status == "proposed"


def test_a_variant_the_hypothesis_does_not_suggest_cannot_reject_it():
    h = FrozenHypothesis("launch_overhead", predicted_effect=2.0, suggested_variants=("compiled",))
    verdict, _ = judge(h, _results(_speedup(1.0, 0.95, 1.05), 40), "eager")  # only "fused" ran
    assert verdict["status"] == "proposed" and verdict["case"].startswith("untested")


def test_shortfall_against_the_prediction_is_not_support():
    h = MutableHypothesis("launch_overhead", predicted_effect={"speedup": 5.0})
    verdict, updated = judge(h, _results(_speedup(1.3, 1.2, 1.4), 2), "eager")
    assert verdict["status"] == "weakened" and updated is h and h.status == "weakened"


def test_explicit_metric_and_direction():
    h = MutableHypothesis("memory_bound", predicted_effect={"metric": "alloc_count", "direction": "decrease"})
    verdict, _ = judge(h, _results(_speedup(2.0, 1.8, 2.2), 2), "eager")
    assert verdict["metric"] == "alloc_count" and verdict["case"] == "time_moved_without_mechanism"


def _many_tiny_ops(x):
    for _ in range(60):
        x = x + 1
    return x


def test_end_to_end_launch_overhead_is_supported():
    h = MutableHypothesis("launch_overhead", predicted_effect=3.0, suggested_variants=("one_op",))
    cmp = wb.compare(
        {"eager": _many_tiny_ops, "one_op": lambda x: x + 60},
        inputs=lambda: torch.randn(64),
        hypothesis=h,
        **{**FAST, "profile": True, "min_rounds": 20, "budget_s": 1.0, "max_rounds": 200},
    )
    v = cmp.hypothesis_verdict
    assert h.status == "supported" and v["case"] == "both_moved", v
    assert v["metric_before"] >= 60 and v["metric_after"] <= 2
    assert "hypothesis supported" in "\n".join(cmp.decision.evidence)
    assert cmp.decision.bottleneck.startswith("launch_overhead")


def test_the_real_hypothesis_model_gets_a_status_copy():
    model = pytest.importorskip("workbench.hypotheses.hypothesis")
    h = model.Hypothesis(
        category="launch_overhead",
        title="many tiny ops",
        observed="60 adds per call",
        mechanism="dispatch cost per op",
        evidence=(),
        time_at_stake_ms=1.0,
        predicted_effect="fusing the adds removes most of the time",
        falsifier="fuse them",
        suggested_variants=("compiled", "one_op"),
    )
    verdict, updated = judge(h, _results(_speedup(3.0, 2.5, 3.5), 2), "eager")
    assert isinstance(updated, model.Hypothesis) and updated.status == "supported" and h.status == "proposed"
    assert verdict["prediction_text"].startswith("fusing") and verdict["case"] == "both_moved"
