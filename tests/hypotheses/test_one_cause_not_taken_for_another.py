"""General fixes for misses on workloads the rules were not tuned on: garbage-collection pauses are not host
work, a buffer grown by concatenation is allocation churn (not a pass to fuse), memory-bound matrix ops are not
fusion savings, fresh pages mapped every call are allocation churn, and a one-time cost is judged against the
steady state."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from tests.hypotheses.builders import (
    calls_with_pauses,
    cpu_ops,
    facts,
    faulting_run,
    fires,
    grown_by_cat,
    memory_events,
    run,
    step_annotations,
)
from workbench.hypotheses.facts import TraceFacts

# a trace with no run behind it is judged against this machine's cached ceiling (which other tests
# measure under load): these tests pin the documented default instead
from workbench.hypotheses.roofline import DEFAULT_CPU_CEILING, cpu_ceiling_from

MEASURED_2_THREADS = cpu_ceiling_from({"cpu_ceiling": {"copy_gbps": 27.6, "matmul_fp32_gflops": 350.0, "threads": 2}})


def test_gc_collect_in_the_stack_is_a_gc_finding_not_host_work():
    f = calls_with_pauses(20_000.0)
    h = fires("gc_pauses", f)[0]
    assert h.category == "measurement" and "garbage collector" in h.title
    assert h.confidence == "high"  # every long call has the collection in it
    assert {e.metric for e in h.evidence} >= {"gc_time_pct", "paused_steps"}
    assert fires("cpu_host_gaps", f) == []  # the gaps are the collection, not the program's host work
    assert fires("intermittent_pauses", f) == []  # the named finding speaks, not the caveat


def test_long_gaps_in_a_few_calls_are_a_pause_caveat_not_host_bound():
    f = calls_with_pauses(20_000.0, gc_named=False)
    assert fires("gc_pauses", f) == []
    h = fires("intermittent_pauses", f)[0]
    assert h.confidence == "low" and "no gc.collect()" in h.observed
    assert fires("cpu_host_gaps", f) == []  # the typical call has no long gap


def test_host_work_in_every_call_stays_host_bound():
    f = calls_with_pauses(400.0, every=1, gc_named=False)  # every call: 200 µs op, 400 µs outside ops
    assert fires("cpu_host_gaps", f)
    assert fires("gc_pauses", f) == [] and fires("intermittent_pauses", f) == []


def test_gc_pauses_needs_steps_or_a_stack():
    from workbench.errors import NotJudged

    with pytest.raises(NotJudged, match="no step annotations and no Python stack"):
        fires("gc_pauses", facts(cpu_ops=cpu_ops(["aten::mm"] * 4, [100.0] * 4, 5.0)))


def test_gc_pauses_rank_as_measurement_after_caveats_only_when_unnamed():
    from workbench.hypotheses.diagnose import MEASUREMENT_CAVEATS

    assert "intermittent_pauses" in MEASUREMENT_CAVEATS and "gc_pauses" not in MEASUREMENT_CAVEATS


def test_a_buffer_grown_by_concatenation_is_allocation_churn():
    f = grown_by_cat()
    h = fires("buffer_grown_by_concatenation", f)[0]
    assert h.category == "allocation_churn" and h.confidence == "high"
    frac = {e.metric: e.value for e in h.evidence}["removable_fraction"]
    assert frac == pytest.approx(1 - 12 / sum(range(1, 13)))  # kept 12 chunks of 78 written
    assert h.time_at_stake_ms == pytest.approx(3 * 12 * 0.4 * frac)
    # the same cats are not claimed as memory passes to fuse
    assert fires("cpu_memory_bound_ops", f) == []


def test_independent_concatenations_are_notgrown_by_cat():
    names = ["aten::cat"] * 12
    dims = ["[[[1000],[1000]],[]]"] * 12  # the same two-piece cat, no accumulator fed back
    ops = cpu_ops(names, [400.0] * 12, 2.0, dims=dims)
    assert fires("buffer_grown_by_concatenation", facts(cpu_ops=ops)) == []


def test_growth_chains_analysis():
    from workbench.analysis.allocations import growth_chains, growth_summary

    ops = pd.DataFrame(
        {
            "name": ["aten::cat"] * 4 + ["aten::add", "aten::cat"],
            "input_dims": [
                "[[[0],[4]],[]]",
                "[[[4],[4]],[]]",
                "[[[8],[4]],[]]",
                "[[[12],[4]],[]]",
                "[]",
                "[[[3],[4]],[]]",
            ],
            "dur_us": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        }
    )
    steps = growth_chains(ops)
    assert list(steps.index) == [0, 1, 2, 3] and steps["chain"].nunique() == 1
    s = growth_summary(steps)
    assert (s["written_numel"], s["kept_numel"]) == (40.0, 16.0)
    assert growth_summary(growth_chains(ops.iloc[4:]))["steps"] == 0


def test_memory_bound_matrix_ops_are_not_fusion_savings():
    # a batch-of-2 linear layer streams its weights: memory bound, but no fusion removes that pass
    gemv = "[[2,4096],[4096,4096],[4096]]"
    ops = cpu_ops(["aten::linear"] * 6, [2000.0] * 6, 5.0, dims=[gemv] * 6)
    found = fires("cpu_memory_bound_ops", facts(cpu_ops=ops))
    assert found == [] or found[0].time_at_stake_ms == 0.0
    ew = "[[4096,4096],[4096,4096]]"
    mixed = cpu_ops(
        ["aten::linear", "aten::add", "aten::mul"] * 2, [2000.0, 600.0, 600.0] * 2, 5.0, dims=[gemv, ew, ew] * 2
    )
    h = fires("cpu_memory_bound_ops", facts(cpu_ops=mixed))[0]
    assert h.time_at_stake_ms * 1e3 == pytest.approx(4 * 600.0 * (1 - 1 / 4), rel=1e-6)
    assert any("matrix ops at low intensity" in c for c in h.confounders)


def test_fresh_pages_every_call_is_allocation_churn():
    h = fires("fresh_pages_every_call", faulting_run(3000.0))[0]
    assert h.category == "allocation_churn"
    ev = {e.metric: e for e in h.evidence}
    assert ev["page_faults_per_call"].value == 3000.0
    # the stake is a stated lower bound: the fresh pages zeroed at the ceiling's bandwidth
    assert h.time_at_stake_ms == pytest.approx(ev["fresh_page_zeroing_ms"].value)
    assert 0 < h.time_at_stake_ms < 5.0
    assert fires("fresh_pages_every_call", faulting_run(100.0)) == []


def test_fresh_pages_not_judged_without_the_count():
    from workbench.errors import NotJudged

    with pytest.raises(NotJudged, match="page-fault count"):
        fires("fresh_pages_every_call", faulting_run(None))


def test_fresh_pages_names_the_allocating_ops_and_joins_the_finding_that_names_the_buffers():
    from workbench.hypotheses.rules.fresh_pages import fold_fresh_pages

    ops = cpu_ops(["aten::clone", "aten::add"] * 3, [3000.0, 200.0] * 3, 10.0)
    mem = memory_events(ops["ts_us"].to_numpy()[::2] + 1.0, [64 << 20] * 3)
    trace = SimpleNamespace(
        cpu_ops=ops,
        memory=mem,
        annotations=step_annotations([3210.0] * 3).assign(
            ts_us=np.arange(3) * 3210.0, end_us=np.arange(3) * 3210.0 + 3210.0
        ),
    )
    pages = fires("fresh_pages_every_call", faulting_run(16_000.0, trace=trace))[0]
    rows = {e.metric: e for e in pages.evidence}["mapped_alloc_mib_per_call"].rows
    assert rows[0]["name"] == "aten::clone" and rows[0]["mib_per_call"] == pytest.approx(64.0)
    churn = fires("large_allocations_repeat", TraceFacts(trace, ceiling=MEASURED_2_THREADS))[0]
    folded = fold_fresh_pages([churn, pages])
    assert [h.rule for h in folded] == ["large_allocations_repeat"]
    assert "page_faults_per_call" in {e.metric for e in folded[0].evidence}
    assert fold_fresh_pages([pages]) == [pages]  # alone, it stands


def test_cold_start_needs_no_absolute_floor_but_a_steady_state_share():
    # a 0.2 ms call with 17 ms once: 46 % of 100 calls' time
    assert fires("cold_start", run([0.2] * 20, cold=17.2))
    # noise-sized: 5.5x a 1 ms call once is 4 % of 100 calls
    assert fires("cold_start", run([1.0] * 20, cold=5.5)) == []


def test_cats_whose_shapes_were_not_recorded_are_not_guessed_to_grow():
    from workbench.analysis.allocations import growth_chains

    ops = cpu_ops(["aten::cat"] * 12, [400.0] * 12, 2.0)  # input_dims "" (record_shapes off)
    assert growth_chains(ops).empty
    assert fires("buffer_grown_by_concatenation", facts(cpu_ops=ops)) == []


def _empty_steps(n_ops_inside: int):
    steps = step_annotations([1500.0] * 10)
    ops = cpu_ops(["aten::mm"] * max(1, n_ops_inside), [100.0] * max(1, n_ops_inside), 20.0)
    if not n_ops_inside:
        ops = ops.assign(ts_us=ops["ts_us"] + 1e6, end_us=ops["end_us"] + 1e6)  # outside every step
    return TraceFacts(SimpleNamespace(cpu_ops=ops, annotations=steps), ceiling=DEFAULT_CPU_CEILING)


def test_calls_with_no_recorded_work_are_said_to_be_unexplained():
    h = fires("trace_records_no_work", _empty_steps(0))[0]
    assert h.category == "measurement" and "no work inside them" in h.title
    assert h.confidence != "high"
    assert fires("trace_records_no_work", _empty_steps(12)) == []  # 1.2 recorded ops a call


def test_no_recorded_work_is_a_caveat_and_needs_steps():
    from workbench.errors import NotJudged
    from workbench.hypotheses.diagnose import MEASUREMENT_CAVEATS

    assert "trace_records_no_work" in MEASUREMENT_CAVEATS
    with pytest.raises(NotJudged, match="no step annotations"):
        fires("trace_records_no_work", facts(cpu_ops=cpu_ops(["aten::mm"], [1.0], 0.0)))


def test_cold_start_confidence_follows_its_share_and_needs_a_resolvable_call():
    # 1.1 ms once before 100 calls of 0.05 ms: 18 % of their time, 23x a call: reported, not with high confidence
    h = fires("cold_start", run([0.05] * 20, cold=1.15))[0]
    assert h.confidence == "medium"
    # 17 ms once before 100 calls of 0.2 ms: 46 % ... and 86x: still medium; most of the calls' time: high
    assert fires("cold_start", run([0.2] * 20, cold=17.2))[0].confidence == "medium"
    assert fires("cold_start", run([0.2] * 20, cold=40.2))[0].confidence == "high"
    # a steady call of 0.2 µs is below what the timer resolves: the cold call is held against the timer's
    # floor (5 µs a call), so 10 µs once is 2x that, not 50x a call; 30 ms once stays a finding
    assert fires("cold_start", run([0.0002] * 20, cold=0.01)) == []
    assert fires("cold_start", run([0.0046] * 20, cold=30.0))


def test_fresh_pages_beside_a_memory_bound_chain_both_stand_and_say_how_they_relate():
    from workbench.hypotheses.rules.fresh_pages import fold_fresh_pages

    pages = fires("fresh_pages_every_call", _faulting_run_for_fold())[0]
    ew = "[[1024,1024],[1024,1024]]"
    chain = fires(
        "cpu_memory_bound_ops", facts(cpu_ops=cpu_ops(["aten::add", "aten::mul"] * 4, [900.0] * 8, 5.0, dims=[ew] * 8))
    )[0]
    folded = fold_fresh_pages([chain, pages])
    assert [h.rule for h in folded] == ["cpu_memory_bound_ops", "fresh_pages_every_call"]
    assert any("faulting in their fresh outputs" in c for c in folded[0].confounders)
    assert folded[0].time_at_stake_ms == chain.time_at_stake_ms


def _faulting_run_for_fold():
    return faulting_run(3000.0)


def test_a_call_stretched_by_a_pause_does_not_dilute_what_the_other_calls_show():
    # six calls of two memory passes (1.8 ms of 2 ms each); one call is preempted for 40 ms after its ops
    ew = "[[1024,1024],[1024,1024]]"
    ops = cpu_ops(["aten::add", "aten::mul"] * 6, [900.0] * 12, 10.0, dims=[ew] * 12)
    ts = ops["ts_us"].to_numpy() + np.repeat(np.arange(6) * 200.0, 2)  # 200 µs outside ops per call
    ts = ts + np.where(np.arange(12) >= 6, 40_000.0, 0.0)  # the pause after call 2
    ops = ops.assign(ts_us=ts, end_us=ts + 900.0)
    starts = ts[::2] - 5.0
    durs = np.full(6, 2010.0)
    durs[2] += 40_000.0
    steps = step_annotations(list(durs)).assign(ts_us=starts, end_us=starts + durs)
    f = facts(cpu_ops=ops, annotations=steps)
    h = fires("cpu_memory_bound_ops", f)[0]
    assert {e.metric: e.value for e in h.evidence}["memory_bound_time_pct"] > 80  # 1.8 of 2 ms, not 10.8 of 52


def test_an_op_with_real_work_is_never_dispatch_bound_however_slowly_it_ran():
    from workbench.devices.ceilings import DEFAULT_CPU_CEILING
    from workbench.hypotheses.roofline import place_ops

    big = "[[512,2048],[512,2048]]"  # 4 MiB operands: hundreds of µs at the roof
    tiny = "[[4],[4]]"
    ops = cpu_ops(["aten::add", "aten::add"], [40 * 1000.0, 30.0], 5.0, dims=[big, tiny])
    placed = place_ops(ops, DEFAULT_CPU_CEILING)
    roof_big = float(placed["roof_us"].iloc[0])
    assert roof_big >= 20.0 and 40_000.0 > 20 * roof_big  # it ran over 20x its roof ...
    assert list(placed["bound"]) == ["memory", "overhead"]  # ... and is still judged by its work
