"""Ranking a person would agree with, on made-up hypotheses and runs (no timing of this machine):
timing caveats qualify findings instead of outranking them (they stand before only the findings
smaller than the noise they report), nothing-at-stake is not shown, stakes
are per clean call, and one-time costs are spread over a stated number of calls."""

from __future__ import annotations

import dataclasses
import types

import pytest

from workbench.capture.compile_diag import CompileDiagnostics
from workbench.hypotheses import get_rule
from workbench.hypotheses.diagnose import qualify, rank
from workbench.hypotheses.hypothesis import Evidence, Hypothesis
from workbench.hypotheses.run_facts import ONE_TIME_COST_CALLS, RunFacts
from workbench.measurement import Measurement


def _h(rule, category, stake, confidence="medium"):
    return Hypothesis(
        category=category,
        title=rule,
        observed="o",
        mechanism="m",
        evidence=(Evidence("x", 1.0, "u"),),
        time_at_stake_ms=stake,
        predicted_effect="p",
        falsifier="f",
        confidence=confidence,
        rule=rule,
    )


def test_a_finding_above_the_noise_outranks_a_high_confidence_caveat():
    few = _h("too_few_samples", "measurement", 0.2, "high")
    memory = _h("cpu_memory_bound_ops", "memory_bound", 2.5)
    ranked = rank(qualify([few, memory]))
    assert [h.rule for h in ranked] == ["cpu_memory_bound_ops", "too_few_samples"]
    assert ranked[0].confidence == "medium"  # above the uncertainty: not qualified


def test_a_finding_within_the_noise_loses_one_step_and_the_caveat_ranks_before_the_findings_it_exceeds():
    noisy = _h("noisy_timing", "measurement", 1.0, "high")
    gaps = _h("cpu_host_gaps", "host_bound", 1.0, "high")  # tied with the uncertainty
    small = _h("frequent_sequences", "launch_overhead", 0.3, "medium")
    ranked = rank(qualify([gaps, small, noisy]))
    # a caveat qualifies the findings (one confidence step less) and is never "high". It stands after
    # every finding that stands out of the noise (a tie goes to the finding), and before those smaller
    # than the uncertainty it reports: they cannot be told from noise, the noise is the first thing to fix
    assert [h.rule for h in ranked] == ["cpu_host_gaps", "noisy_timing", "frequent_sequences"]
    assert ranked[0].confidence == "medium" and ranked[1].confidence == "medium" and ranked[2].confidence == "low"
    assert any("within the timing's uncertainty" in c for c in ranked[0].confounders)


def test_a_low_confidence_finding_with_a_real_stake_outranks_medium_caveats():
    """The miss: compute_bound (low confidence, 1.81 ms at stake, addmm 94 % of the time) ranked below
    noisy_timing (medium) and too_few_samples (low, an interval exists)."""
    noisy = _h("noisy_timing", "measurement", 0.4, "medium")
    few = get_rule("too_few_samples")(RunFacts(_run([2.0 + 0.01 * i for i in range(8)], cold_ms=2.0)))[0]
    compute = _h("cpu_compute_bound_ops", "compute_bound", 1.81, "low")
    assert [h.rule for h in rank([noisy, few, compute])] == ["cpu_compute_bound_ops", "noisy_timing", "too_few_samples"]


def test_a_caveat_saying_the_timing_cannot_be_judged_leads():
    """Fewer samples than any 95 % interval of the median needs: no stake read from the timing stands."""
    from workbench.hypotheses.diagnose import voids_timing

    three = get_rule("too_few_samples")(RunFacts(_run([2.0, 2.1, 2.2], cold_ms=2.0)))[0]
    eight = get_rule("too_few_samples")(RunFacts(_run([2.0 + 0.01 * i for i in range(8)], cold_ms=2.0)))[0]
    assert voids_timing(three) and not voids_timing(eight)
    compute = _h("cpu_compute_bound_ops", "compute_bound", 1.81, "high")
    assert [h.rule for h in rank([compute, three])] == ["too_few_samples", "cpu_compute_bound_ops"]
    assert [h.rule for h in rank([compute, eight])] == ["cpu_compute_bound_ops", "too_few_samples"]


def test_nothing_at_stake_is_not_shown():
    zero = _h("cpu_memory_bound_ops", "memory_bound", 0.0, "medium")
    assert rank([zero, _h("cold_start", "cold_start", 0.7, "high")])[0].rule == "cold_start"
    assert rank([zero]) == []


def test_equal_stakes_rank_deterministically():
    a, b = _h("b_rule", "host_bound", 1.0, "medium"), _h("a_rule", "host_bound", 1.0, "medium")
    assert [h.rule for h in rank([a, b])] == [h.rule for h in rank([b, a])] == ["a_rule", "b_rule"]


def _run(samples, cold_ms, *, expected_calls=None, traced=None):
    return types.SimpleNamespace(
        name="fake",
        timing=Measurement(tuple(samples)),
        cold_ms=cold_ms,
        warmup=3,
        repeat=len(samples),
        compile=CompileDiagnostics(),
        environment={},
        trace=None,
        profiler_warmup="ran",
        traced_timing=traced,
        trace_repeat=traced.n if traced else 0,
        expected_calls=expected_calls,
    )


def test_cold_start_is_one_time_and_spread_over_a_stated_number_of_calls():
    run = _run([4.0] * 20, cold_ms=204.0)
    h = get_rule("cold_start")(RunFacts(run))[0]
    assert h.time_at_stake_ms == pytest.approx(200.0 / ONE_TIME_COST_CALLS)
    assert "one-time" in h.observed and f"over {ONE_TIME_COST_CALLS} calls" in h.observed
    rows = {k: v for e in h.evidence for r in e.rows for k, v in r.items()}
    assert rows["one_time_ms"] == pytest.approx(200.0) and rows["spread_over_calls"] == ONE_TIME_COST_CALLS
    stated = get_rule("cold_start")(RunFacts(_run([4.0] * 20, cold_ms=204.0, expected_calls=10)))[0]
    assert stated.time_at_stake_ms == pytest.approx(20.0)  # over the calls the user states


def test_too_few_samples_without_an_interval_holds_the_whole_median():
    four = get_rule("too_few_samples")(RunFacts(_run([1.0, 1.01, 1.02, 1.03], cold_ms=1.0)))[0]
    assert four.time_at_stake_ms == pytest.approx(1.015, rel=1e-6)
    assert "no 95% interval" in four.observed
    eight = get_rule("too_few_samples")(RunFacts(_run([1.0 + 0.01 * i for i in range(8)], cold_ms=1.0)))[0]
    assert eight.time_at_stake_ms < 0.1  # an interval exists: its half-width


def test_trace_scale_reads_the_traced_pass():
    clean = [2.0] * 10
    assert RunFacts(_run(clean, 2.0)).trace_scale == 1.0  # no traced pass: unscaled
    facts = RunFacts(_run(clean, 2.0, traced=Measurement((5.0, 5.0, 5.0))))
    assert facts.trace_scale == pytest.approx(0.4) and facts.clean_ms == pytest.approx(2.0)
    assert facts.calls_profiled == 1 + 3 + 10 + 3


def test_stake_text_says_once_for_one_time_costs_and_per_call_otherwise():
    from workbench.render.run import stake_text

    cold = get_rule("cold_start")(RunFacts(_run([4.0] * 20, cold_ms=204.0)))[0]
    assert stake_text(cold).startswith("200 ms once; ranked as 2 ms a call over 100 calls")
    assert stake_text(_h("cpu_host_gaps", "host_bound", 0.0123)) == "up to 12.3 µs per call at stake"
    assert dataclasses.is_dataclass(cold)


def test_a_loaded_machine_qualifies_host_gap_findings():
    from workbench.capture.health import MachineState, check_health
    from workbench.hypotheses.diagnose import qualify_by_health

    gaps = _h("cpu_host_gaps", "host_bound", 1.0, "high")
    memory = _h("cpu_memory_bound_ops", "memory_bound", 1.0, "high")
    timing = Measurement((1.0,) * 20)
    loaded = check_health(timing, machine=MachineState(load_avg_1m=7.5, usable_cores=2, torch_threads=1))
    quiet = check_health(timing, machine=MachineState(load_avg_1m=0.2, usable_cores=2, torch_threads=1))
    out = qualify_by_health([gaps, memory], loaded)
    assert [h.confidence for h in out] == ["medium", "high"]
    assert "preempted" in out[0].confounders[-1] and "load average 7.50" in out[0].confounders[-1]
    assert qualify_by_health([gaps, memory], quiet) == [gaps, memory]
    assert qualify_by_health([gaps], None) == [gaps]


def test_recompiles_in_the_timed_calls_lead_the_noise_they_cause():
    """Eight timed calls of a function that recompiles on each new shape: the calls that compiled are the slow
    ones, so the timing's spread (noisy_timing, too_few_samples: larger stakes) is the recompiles' doing and
    follows a high-confidence recompile finding; the findings smaller than the noise still follow the caveats."""
    noisy = _h("noisy_timing", "measurement", 6.56, "low")
    few = _h("too_few_samples", "measurement", 6.5, "low")
    recompiles = _h("recompiles", "recompilation", 3.27, "high")
    small = _h("cpu_host_gaps", "host_bound", 0.4)
    ranked = rank([noisy, few, small, recompiles])
    assert [h.rule for h in ranked] == ["recompiles", "noisy_timing", "too_few_samples", "cpu_host_gaps"]
    # a recompile finding the rule is not sure of does not move the caveats
    unsure = dataclasses.replace(recompiles, confidence="medium")
    assert [h.rule for h in rank([noisy, unsure])] == ["noisy_timing", "recompiles"]
    # a caveat saying the timing cannot be judged at all still leads
    void = dataclasses.replace(few, evidence=(Evidence("no_median_interval", 1.0, ""),))
    assert [h.rule for h in rank([void, recompiles])] == ["too_few_samples", "recompiles"]
