import json

import numpy as np
import pytest

from workbench import render
from workbench.variants.decision import DecisionRecord, classify
from workbench.variants.stats import median_rank_interval, paired_speedup


def test_median_interval_covers_at_95_percent():
    rng = np.random.default_rng(1)
    hits = 0
    for _ in range(2000):
        x = np.sort(rng.lognormal(0, 0.3, size=25))
        lo, hi = median_rank_interval(25)
        hits += x[lo] <= 1.0 <= x[hi]  # the lognormal's true median is 1
    assert 0.94 <= hits / 2000 <= 0.99


def test_paired_speedup_detects_a_shift_and_not_identity():
    rng = np.random.default_rng(2)
    drift = np.linspace(1, 3, 30)  # a whole-round drift, shared by the pair
    base = drift * rng.lognormal(0, 0.03, 30)
    same = drift * rng.lognormal(0, 0.03, 30)
    slow = 1.1 * drift * rng.lognormal(0, 0.03, 30)
    assert not paired_speedup(base, same).significant
    s = paired_speedup(base, slow)
    assert s.slower and s.point == pytest.approx(1 / 1.1, rel=0.05)


def test_classify_covers_every_decision():
    from workbench.variants.stats import Speedup

    fast, noise, slow = (
        Speedup(2, 1.8, 2.2, 2, 1.8, 2.2, 30),
        Speedup(1, 0.9, 1.1, 1, 0.9, 1.1, 30),
        Speedup(0.5, 0.45, 0.55, 0.5, 0.45, 0.55, 30),
    )
    common = dict(status="ok", reason="", flags=(), timing_meaningful=True, saving_ms=1.0)
    assert classify(**common, speedup=fast).decision == "keep"
    assert classify(**common, speedup=fast, failure_cases=("(1,) float32: wrong",)).decision == "keep_guarded"
    assert classify(**common, speedup=fast, end_to_end_ms=1000).decision == "micro_only"
    assert classify(**common, speedup=noise).decision == "need_more_evidence"
    assert classify(**common, speedup=slow).decision == "reject"
    assert classify(**common, speedup=fast, setup_ms=1e9).decision == "reject"  # too costly
    assert (
        classify(**{**common, "status": "not_applicable", "reason": "no GPU"}, speedup=None).decision
        == "need_more_evidence"
    )
    assert classify(**{**common, "flags": ("patched timer: x",)}, speedup=fast).decision == "reject"


def test_decision_record_renders_and_roundtrips():
    rec = DecisionRecord(
        "keep",
        "compiled",
        "faster",
        "slow chain",
        "memory_bound: passes",
        "compiled",
        "reordered",
        "matches float64",
        "none",
        "eager",
        ("a", "b"),
        "10 ms -> 2 ms",
        ("cuda_graph: need_more_evidence",),
        ("few checks",),
        (),
        {"torch": "2.13"},
    )
    md = render.markdown(rec)
    assert "### Decision: `keep` — compiled" in md and "**Fallback:** eager" in md and "- cuda\\_graph" in md
    assert DecisionRecord.from_dict(json.loads(rec.to_json())) == rec


def _bursty_log_ratios(rng, n: int, phi: float, sigma: float = 0.02) -> np.ndarray:
    """Log ratios of identical variants under interference that lasts several rounds (AR(1))."""
    e = rng.normal(0, sigma * np.sqrt(1 - phi**2), n)
    d = np.empty(n)
    d[0] = rng.normal(0, sigma)
    for i in range(1, n):
        d[i] = phi * d[i - 1] + e[i]
    return d


def test_block_medians_keep_bursty_interference_from_calling_identical_variants_different():
    from workbench.variants.stats import walsh_interval

    rng = np.random.default_rng(5)
    trials, rank_only, reported, detected = 120, 0, 0, 0
    for _ in range(trials):
        d = _bursty_log_ratios(rng, 200, phi=0.6)
        _, lo, hi = walsh_interval(d)
        rank_only += lo > 0 or hi < 0
        s = paired_speedup(np.exp(d), np.ones(200))
        reported += s.significant
        detected += paired_speedup(np.exp(d), np.full(200, 1.1)).slower
        assert s.ci_low <= s.block_low and s.ci_high >= s.block_high
    assert rank_only / trials > 0.2  # the signed-rank interval alone is far too narrow here
    assert reported / trials <= 0.1
    assert detected == trials  # a 10% slowdown is still found every time


def test_the_p_value_is_dual_to_the_interval():
    from workbench.variants.stats import PairedEvidence

    rng = np.random.default_rng(7)
    for n, shift in ((8, 1.05), (25, 1.02), (80, 1.01), (80, 1.0)):
        e = PairedEvidence(rng.lognormal(0, 0.03, n), shift * rng.lognormal(0, 0.03, n))
        p = e.p_value()
        if 1e-15 < p < 1.0:  # 1e-15: excluded at every level (the floor)
            assert e.excludes_one(1 - p * 1.001) and not e.excludes_one(1 - p * 0.999)
        elif p <= 1e-15:
            assert e.excludes_one(1 - 1e-12)
        else:
            assert not e.excludes_one(0.5)


def test_holm_steps_down_and_never_contradicts_an_interval():
    from workbench.variants.stats import holm

    out = holm({"a": 0.001, "b": 0.015, "c": 0.03, "d": 0.5})
    assert out["a"] == (True, pytest.approx(1 - 0.05 / 4)) and out["b"] == (True, pytest.approx(1 - 0.05 / 3))
    assert out["c"] == (False, pytest.approx(1 - 0.05 / 4)) and out["d"][0] is False
    assert holm({"only": 0.04}) == {"only": (True, pytest.approx(0.95))}


def test_smallest_detectable_effect_grows_with_the_interval():
    from workbench.variants.stats import min_detectable_effect

    narrow, wide = min_detectable_effect(0.99, 1.01), min_detectable_effect(0.9, 1.1)
    assert 0.01 < narrow < 0.02 and wide > 5 * narrow
