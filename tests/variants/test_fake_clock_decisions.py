"""Decision and ranking logic on seeded fake clocks: the verdicts, the rounds added while
undecided, the family-wise error over several candidates, the smallest detectable effect, and
the settings written into the record.  No assertion here depends on this machine's timing."""

import dataclasses
import re

import pytest
import torch

import workbench as wb
from tests.variants.variant_workloads import chain
from workbench.errors import InvalidArgumentError
from workbench.variants.clock import FakeTimer, RecordedTimer
from workbench.variants.settings import CompareSettings

BASE = dict(checks=1, profile=False, min_rounds=10)


def _cmp(per_call_ms, *, seed=0, noise=0.02, load=0.0, **kw):
    names = list(per_call_ms)
    variants = {n: (lambda x: chain(x)) for n in names}
    timer = FakeTimer(per_call_ms, noise=noise, load=load, seed=seed, call=False)
    return wb.compare(variants, inputs=lambda: torch.randn(64), timer=timer, **{**BASE, **kw})


def test_each_decision_from_known_clocks():
    c = _cmp({"eager": 2.0, "fast": 1.0, "slow": 2.5, "same": 2.0}, budget_s=0.5)
    assert c["fast"].decision == "keep" and c["fast"].speedup.ci_low > 1.8
    assert c["slow"].decision == "reject" and re.search(r"\(1\.2\d*x slower\)", c["slow"].decision_reason)
    assert c["same"].decision == "need_more_evidence"
    assert "smallest change it could have seen is about" in c["same"].decision_reason
    assert c.decision.decision == "keep" and c.decision.variant == "fast"


def test_rounds_are_added_while_the_interval_is_too_wide_up_to_the_stated_budget():
    # a 4% slowdown in 6% noise: the first 0.2 s cannot decide it; the extension does
    c = _cmp({"eager": 1.0, "slow": 1.04}, noise=0.06, budget_s=0.2, max_budget_s=3.0, seed=3)
    t = c.settings["timing"]
    assert t["extensions"], t
    assert t["rounds"] > t["looks"][0] and t["spent_s"] <= 3.0 + 0.01
    assert c["slow"].decision == "reject", c["slow"].decision_reason
    assert "extendable to 3 s" in t["text"] and "extended" in t["text"]
    assert any(e.startswith("timing: ") and "extended" in e for e in c.decision.evidence)
    # without room to extend, the same comparison cannot decide and says how small an effect it could see
    short = _cmp({"eager": 1.0, "slow": 1.04}, noise=0.06, budget_s=0.2, max_budget_s=0.2, seed=3)
    assert not short.settings["timing"]["extensions"]
    assert short["slow"].decision == "need_more_evidence"
    assert short["slow"].speedup.min_detectable > 0.04
    assert "the timing budget ended before it could decide" in short["slow"].decision_reason


def test_a_clear_difference_is_not_extended():
    c = _cmp({"eager": 2.0, "fast": 1.0}, budget_s=0.3, max_budget_s=5.0)
    assert not c.settings["timing"]["extensions"]


def test_identical_variants_are_rarely_called_different_even_under_bursty_load():
    called = 0
    for seed in range(40):
        c = _cmp({"eager": 1.0, "twin": 1.0}, noise=0.03, load=0.15, seed=seed, budget_s=0.3, max_budget_s=0.9)
        called += c["twin"].speedup.significant
    assert called <= 2, called  # <= 5% of 40


def test_a_ten_percent_slowdown_is_found_under_the_same_load():
    found = sum(
        _cmp({"eager": 1.0, "slow": 1.1}, noise=0.03, load=0.15, seed=seed, budget_s=0.3, max_budget_s=0.9)[
            "slow"
        ].speedup.slower
        for seed in range(20)
    )
    assert found >= 18, found


def test_holm_holds_the_family_wise_error_over_many_identical_candidates():
    wrong = 0
    for seed in range(30):
        c = _cmp(
            {"eager": 1.0, **{f"twin{i}": 1.0 for i in range(5)}}, noise=0.05, seed=seed, budget_s=0.3, max_budget_s=0.3
        )
        wrong += any(c[f"twin{i}"].speedup.significant for i in range(5))
        assert all(c[f"twin{i}"].speedup.family_size == 5 for i in range(5))
    assert wrong <= 3, wrong  # family-wise, not 5% per candidate (~23% unadjusted)


def test_holm_intervals_agree_with_their_verdicts():
    c = _cmp({"eager": 1.0, "a": 0.9, "b": 1.0, "c": 1.02}, noise=0.05, seed=1, budget_s=0.3, max_budget_s=0.3)
    for name in ("a", "b", "c"):
        s = c[name].speedup
        assert s.confidence >= 0.95 and (s.ci_low > 1 or s.ci_high < 1) == s.significant
        if s.significant:
            assert s.p_value <= 1 - s.confidence + 1e-9


def test_recorded_samples_replay_into_the_same_verdict():
    rec = RecordedTimer({"eager": [1.0, 1.01, 0.99, 1.02] * 10, "b": [0.5, 0.51, 0.49, 0.5] * 10})
    c = wb.compare(
        {"eager": chain, "b": lambda x: chain(x)},
        inputs=lambda: torch.randn(64),
        timer=rec,
        **{**BASE, "budget_s": 0.02, "max_budget_s": 0.02},
    )
    assert c["b"].decision == "keep" and c["b"].speedup.point == pytest.approx(2.0, rel=0.05)
    assert c["eager"].timing.timer == "recorded"


def test_settings_object_and_keywords_are_the_same_and_written_into_the_record():
    spec = CompareSettings(
        checks=1,
        budget_s=0.2,
        min_rounds=10,
        profile=False,
        seed=4,
        timer=FakeTimer({"eager": 2.0, "b": 1.0}, seed=4, call=False),
    )
    c = wb.compare({"eager": chain, "b": lambda x: chain(x)}, inputs=lambda: torch.randn(64), settings=spec)
    assert c.decision.settings["budget_s"] == 0.2 and c.decision.settings["timing_cap_s"] == pytest.approx(0.6)
    assert c.decision.settings["timer"].startswith("FakeTimer(seed=4")
    assert "#### Settings" in wb.render.markdown(c.decision)
    assert c.settings["checks"] == 1 and c.settings["min_effect"] == 0.03
    again = type(c.decision).from_dict(c.decision.to_dict())
    assert again == c.decision
    assert CompareSettings.from_dict(spec.to_dict()) == spec  # the timer is not part of equality
    with pytest.raises(InvalidArgumentError, match="unknown settings"):
        wb.compare({"eager": chain}, inputs=lambda: torch.randn(4), budget=3)
    with pytest.raises(InvalidArgumentError, match="budget_s must be"):
        CompareSettings(budget_s=float("nan"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.budget_s = 1.0


def test_a_difference_smaller_than_min_effect_is_never_decided():
    """A 0.6 % speed-up in little noise is significant, yet below the stated min_effect (3 %): not a keep; with
    min_effect=0.002 it is decided; and 20 seeded identical pairs under bursty load are never decided."""
    small = _cmp({"eager": 1.0, "tiny": 1.0 / 1.006}, noise=0.001, budget_s=0.5)
    assert small["tiny"].speedup.faster, small["tiny"].speedup.describe()
    assert small["tiny"].decision == "need_more_evidence"
    assert "smaller than the comparison's min_effect of 3%" in small["tiny"].decision_reason
    judged = _cmp({"eager": 1.0, "tiny": 1.0 / 1.006}, noise=0.001, budget_s=0.5, min_effect=0.002)
    assert judged["tiny"].decision == "keep", judged["tiny"].decision_reason
    decided = [
        seed
        for seed in range(20)
        if _cmp({"eager": 1.0, "same": 1.0}, seed=seed, noise=0.05, load=0.3, budget_s=0.2)["same"].decision
        != "need_more_evidence"
    ]
    assert decided == []
