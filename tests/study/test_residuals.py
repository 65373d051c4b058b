"""Each residual class from known rows: the variant's speedup interval and its counted mechanism
(the comparison's footprint), held against a hypothesis's prediction; and the confidence change."""

import pytest

from tests.study.conftest import hypothesis
from workbench.study.ledger import step_confidence
from workbench.study.residuals import classify_pair, combine, prediction, speedup_bound
from workbench.variants.results import VariantResult
from workbench.variants.stats import Speedup


def _speedup(point, lo, hi):
    return Speedup(point=point, ci_low=lo, ci_high=hi, p95_ratio=point, bootstrap_low=lo, bootstrap_high=hi, n_pairs=40)


def _rows(speedup, ops_after, ops_before=8, status="ok"):
    base = VariantResult(name="baseline", kind="user", status="ok", footprint={"op_count": ops_before})
    row = VariantResult(
        name="fused",
        kind="user",
        status=status,
        speedup=speedup,
        footprint={"op_count": ops_after} if ops_after is not None else {},
    )
    return base, row


H = hypothesis("memory_bound", suggested=("fused",), stake=1.5, confidence="medium")
PRED = prediction(H, ["fused"], 2.0)


@pytest.mark.parametrize(
    "speedup, ops_after, residual, status",
    [
        (_speedup(2.0, 1.8, 2.2), 1, "supported", "supported"),  # both moved
        (_speedup(2.0, 1.8, 2.2), None, "supported", "supported"),  # mechanism not measured
        (_speedup(1.0, 0.99, 1.01), 1, "mechanism_moved_not_target", "rejected"),  # the falsifier fired
        (_speedup(1.0, 0.99, 1.01), None, "rejected", "rejected"),  # no gain, precisely
        (_speedup(1.0, 0.8, 1.25), None, "untested", "proposed"),  # too wide to say
        (_speedup(1.5, 1.4, 1.6), 8, "target_moved_without_mechanism", "weakened"),
        (_speedup(0.6, 0.55, 0.65), 1, "opposite_sign", "weakened"),  # slower though ops fell
        (_speedup(0.6, 0.55, 0.65), 8, "opposite_sign", "proposed"),  # slower, mechanism untouched
        (_speedup(1.0, 0.99, 1.01), 8, "untested", "proposed"),  # did not touch the mechanism
    ],
)
def test_each_residual_class(speedup, ops_after, residual, status):
    base, row = _rows(speedup, ops_after)
    r = classify_pair(H, base, row, PRED, min_effect=0.03)
    assert (r.residual, r.status) == (residual, status), r.explanation
    assert r.explanation


def test_a_variant_that_did_not_run_correctly_tests_nothing():
    base, row = _rows(None, 1, status="incorrect")
    r = classify_pair(H, base, row, PRED, min_effect=0.03)
    assert r.residual == "untested" and "did not run correctly" in r.explanation


def test_prediction_states_the_discriminator_and_the_bound():
    assert speedup_bound(H, 2.0) == pytest.approx(4.0)
    assert PRED["speedup_bound"] == pytest.approx(4.0)
    assert PRED["mechanism_metrics"] == ["kernel_count", "op_count"]
    assert "at most x4" in PRED["discriminator"] and H.falsifier in PRED["discriminator"]


def test_the_bound_is_held_against_the_measured_speedup():
    base, row = _rows(_speedup(5.0, 4.5, 5.5), 1)
    r = classify_pair(H, base, row, PRED, min_effect=0.03)
    assert r.residual == "supported" and "stake was underestimated" in r.explanation


def test_combine_takes_the_most_decisive_pair_and_moves_confidence_explicitly():
    base, good = _rows(_speedup(2.0, 1.8, 2.2), 1)
    _, flat = _rows(_speedup(1.0, 0.99, 1.01), 1)
    flat = flat.with_(name="other")
    pairs = [classify_pair(H, base, flat, PRED, min_effect=0.03), classify_pair(H, base, good, PRED, min_effect=0.03)]
    u = combine(H, pairs)
    assert (u["residual"], u["status_after"], u["variant"]) == ("supported", "supported", "fused")
    assert u["change"] == "medium -> high"
    rejected = combine(H, pairs[:1])
    assert rejected["status_after"] == "rejected" and rejected["confidence_after"] == "low"
    assert combine(H, [])["change"] == "medium (unchanged: not tested)"
    top = combine(hypothesis(confidence="high", suggested=("fused",)), pairs)
    assert top["change"] == "high -> high (already the highest)"
    assert step_confidence("high", +1) == "high" and step_confidence("low", -1) == "low"
