"""Clean timing first, tracing apart: on a fake clock, so the split and the overhead are exact.

The profiled callable advances a fake host clock by CLEAN_MS per call when no profiler runs and by
TRACED_MS under torch.profiler; ``wb.profile`` must put only the clean calls in ``run.timing``,
the traced ones in ``run.traced_timing``, and state the overhead as their ratio. Stakes read from
the trace are then per clean call.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import statistics

import pytest
import torch

import workbench as wb
from workbench.hypotheses.diagnose import ONE_TIME_RULES
from workbench.measurement import Measurement

timing_module = importlib.import_module("workbench.capture.timing")

CLEAN_MS, TRACED_MS, COLD_EXTRA_MS = 2.0, 5.0, 40.0


class FakeClock:
    def __init__(self) -> None:
        self.ns = 0

    def __call__(self) -> int:
        return self.ns

    def advance_ms(self, ms: float) -> None:
        self.ns += int(round(ms * 1e6))


profile_module = importlib.import_module("workbench.capture.profile")


@pytest.fixture
def fake_clock(monkeypatch):
    """A fake host clock, and a run queue on which the thread never waits (unless a test says)."""
    clock = FakeClock()
    monkeypatch.setattr(timing_module, "clock_ns", clock)
    clock.waited_ns = 0
    monkeypatch.setattr(timing_module, "make_wait_reader", lambda: lambda: clock.waited_ns)
    return clock


def _workload(clock: FakeClock):
    calls = {"n": 0}
    x = torch.ones(32, 32)

    def step():
        calls["n"] += 1
        profiled = torch.autograd.profiler._is_profiler_enabled
        clock.advance_ms((TRACED_MS if profiled else CLEAN_MS) + (COLD_EXTRA_MS if calls["n"] == 1 else 0.0))
        return (x @ x).sum()

    return step, calls


def test_timing_is_clean_and_the_traced_pass_is_apart(fake_clock):
    step, calls = _workload(fake_clock)
    run = wb.profile(step, warmup=2, repeat=8, trace_repeat=4)
    assert calls["n"] == 1 + 2 + 8 + 4
    assert run.timing.samples_ms == (CLEAN_MS,) * 8  # no sample taken under the profiler
    assert run.traced_timing.samples_ms == (TRACED_MS,) * 4
    assert run.cold_ms == pytest.approx(CLEAN_MS + COLD_EXTRA_MS)
    assert run.profiler_overhead == pytest.approx(TRACED_MS / CLEAN_MS)
    assert run.trace_scale == pytest.approx(CLEAN_MS / TRACED_MS)
    assert not run.timed_under_profiler and run.traced_calls == 4
    check = run.health.check("profiler_overhead")
    assert check.level == "warn" and "2.50x" in check.observed
    text = run.to_text()
    assert "clean median  2 ms per call" in text and "overhead 2.50x" in text
    assert "clean median 2 ms per call" in repr(run)


def test_a_traced_pass_that_waited_for_a_cpu_is_traced_again_and_the_least_waiting_kept(fake_clock):
    step, calls = _workload(fake_clock)
    traced_calls = {"n": 0}

    def preempted_first_pass():
        if torch.autograd.profiler._is_profiler_enabled:
            traced_calls["n"] += 1
            if traced_calls["n"] <= 3:  # the whole first traced pass waits 3 ms a call
                fake_clock.waited_ns += 3_000_000
        return step()

    run = wb.profile(preempted_first_pass, warmup=0, repeat=5, trace_repeat=3)
    assert calls["n"] == 1 + 5 + 3 + 3  # one more traced pass, no more
    assert run.traced_timing.n == 3 and traced_calls["n"] == 6
    wait = run.health.check("cpu_wait")
    assert wait.level == "ok" and "least of 2" in wait.observed
    assert run.trace is not None and (run.trace.cpu_ops["name"] == "aten::mm").sum() == 3
    import os

    assert os.path.basename(os.path.dirname(run.trace_path)) == "pass-2"


def test_cold_call_is_timed_on_the_same_clock(fake_clock):
    step, _ = _workload(fake_clock)
    run = wb.profile(step, warmup=0, repeat=3, trace=False)
    assert run.cold_ms == pytest.approx(CLEAN_MS + COLD_EXTRA_MS)
    assert run.traced_timing is None and run.profiler_overhead is None
    assert run.health.check("profiler_overhead").level == "ok"


def test_trace_stakes_are_per_clean_call_and_bounded_by_it(matmul_run):
    clean = matmul_run.timing
    step_ms = matmul_run.trace_step_mean_ms
    assert step_ms is not None and step_ms > 0, "the traced pass's calls are its ProfilerStep# spans"
    same = matmul_run.replace(traced_timing=Measurement(clean.samples_ms))
    slow_samples = tuple(4 * max(s, step_ms) for s in clean.samples_ms)
    slow = matmul_run.replace(traced_timing=Measurement(slow_samples))
    # the traced call's time is the larger of its timed median and its span in the trace
    assert same.trace_scale == pytest.approx(clean.median_ms / max(clean.median_ms, step_ms))
    assert slow.trace_scale == pytest.approx(clean.median_ms / statistics.median(slow_samples))
    assert slow.trace_scale < same.trace_scale <= 1.0
    from workbench.hypotheses import diagnose
    from workbench.hypotheses.catalog import list_rules

    trace_rules = {r.name for r in list_rules("trace")}
    at_same = {h.rule: h.time_at_stake_ms for h in diagnose(same).hypotheses if h.rule in trace_rules}
    at_slow = {h.rule: h.time_at_stake_ms for h in diagnose(slow).hypotheses if h.rule in trace_rules}
    # (which trace rules fire depends on this machine's load; whatever fires scales with the run)
    ratio = slow.trace_scale / same.trace_scale
    for rule_name, stake in at_slow.items():
        assert stake <= clean.median_ms + 1e-12
        if rule_name in at_same and at_same[rule_name] < clean.median_ms:
            assert stake == pytest.approx(at_same[rule_name] * ratio)  # share kept, magnitude from the clean time
    for h in list(diagnose(same).hypotheses) + list(diagnose(slow).hypotheses):
        assert h.time_at_stake_ms > 0
        if h.rule not in ONE_TIME_RULES:
            assert h.time_at_stake_ms <= clean.median_ms + 1e-12


def test_per_call_op_times_never_add_up_past_the_clean_call(matmul_run):
    """Shares from the trace, magnitudes from the clean timing: even when the traced samples had
    run-queue waits taken out (short) while the trace's spans kept them (long), the ops' per-call
    self times sum to at most one clean call."""
    clean = matmul_run.timing.median_ms
    fast_traced = matmul_run.replace(
        traced_timing=Measurement(tuple(s * 0.01 for s in matmul_run.traced_timing.samples_ms))
    )  # a traced median far too short
    for run in (matmul_run, fast_traced):
        table = run.per_call_ops(top=None)
        assert len(table) > 0
        assert float(table["self_ms_per_call"].sum()) <= clean * (1 + 1e-9)


def test_new_fields_round_trip_and_older_records_load_with_clear_defaults(matmul_run, tmp_path):
    record = json.loads(json.dumps(matmul_run.to_dict()))
    again = wb.ProfileRun.from_dict(record)
    assert again.traced_timing == matmul_run.traced_timing and again.trace_repeat == matmul_run.trace_repeat
    assert again.health.to_dict() == matmul_run.health.to_dict()
    assert again.profiler_overhead == pytest.approx(matmul_run.profiler_overhead)

    folder = matmul_run.save(tmp_path / "old")
    doc = json.loads((folder / "run.json").read_text())
    for key in ("traced_timing", "trace_repeat", "profiler_overhead", "health", "profiler_stderr"):
        doc["run"].pop(key)
    doc["run"]["timing"]["metadata"]["under_profiler"] = True  # how older runs were timed
    (folder / "run.json").write_text(json.dumps(doc))
    old = wb.load_run(folder)
    assert old.traced_timing is None and old.profiler_overhead is None and old.trace_scale == 1.0
    assert old.trace_repeat == old.repeat and old.traced_calls == old.repeat  # the trace covered the repeats
    assert old.timed_under_profiler
    assert old.health.check("profiler_overhead").level == "warn"
    assert old.health.check("machine_load").level == "unknown"
    assert old.hypotheses is not None and "clean median (per call)" in old._repr_html_()


def test_report_sections_show_clean_timing_overhead_health_and_per_call_ops(matmul_run):
    from workbench.report import sections

    summary = sections.timing_summary(matmul_run)
    assert summary["clean"] is True and summary["median_ms"] == matmul_run.timing.median_ms
    assert summary["traced_n"] == matmul_run.trace_repeat
    assert summary["profiler_overhead"] == pytest.approx(matmul_run.profiler_overhead)
    assert summary["health"]["verdict"] in ("ok", "caution") and summary["health"]["checks"]
    json.dumps(summary)  # summary.json can hold it
    page = sections.timing_html(matmul_run)
    assert "clean median (per call)" in page and "profiler overhead" in page and "profile health" in page
    assert f"{matmul_run.timing.median_ms:.3f} ms" in page  # the exact figure rides along as a tooltip
    ops = sections.top_ops_html(matmul_run)
    assert "self / call" in ops and "aten::mm" in ops and "e+0" not in ops
    hyps = sections.hypotheses_html(matmul_run)
    assert "per call" in hyps
    for h in matmul_run.hypotheses:
        if h.rule not in ONE_TIME_RULES:
            assert h.time_at_stake_ms <= matmul_run.timing.median_ms + 1e-12


def test_one_time_costs_are_spread_over_the_calls_the_user_states(fake_clock, tmp_path):
    from workbench.hypotheses.run_facts import ONE_TIME_COST_CALLS

    step, _ = _workload(fake_clock)
    default = wb.profile(step, warmup=1, repeat=10, trace=False)
    stated = wb.profile(_workload(fake_clock)[0], warmup=1, repeat=10, trace=False, expected_calls=10)
    cold = {r.expected_calls: next(h for h in r.hypotheses if h.rule == "cold_start") for r in (default, stated)}
    assert cold[None].time_at_stake_ms == pytest.approx(COLD_EXTRA_MS / ONE_TIME_COST_CALLS)
    assert cold[10].time_at_stake_ms == pytest.approx(COLD_EXTRA_MS / 10)  # may exceed one call: one-time
    assert wb.load_run(stated.save(tmp_path / "s")).expected_calls == 10
    from workbench.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="expected_calls"):
        wb.profile(step, expected_calls=0)


def test_the_run_queue_wait_is_taken_out_of_each_cpu_sample(fake_clock):
    """A busy neighbour's share of the wall time is not the callable's: 3 ms wall with 1 ms spent
    waiting for a CPU is a 2 ms sample, as in wb.compare's timer."""
    x = torch.ones(8)

    def waits_a_third():
        fake_clock.advance_ms(3.0)
        fake_clock.waited_ns += 1_000_000
        return x + 1

    run = wb.profile(waits_a_third, warmup=0, repeat=6, trace=False)
    assert run.timing.samples_ms == (2.0,) * 6 and run.cold_ms == pytest.approx(2.0)
    assert run.timing.timer == timing_module.WAIT_TIMER_NAME
    assert run.timing.metadata["run_queue_wait_share"] == pytest.approx(1 / 3)
    wait = run.health.check("cpu_wait")
    assert wait.level == "warn" and "33%" in wait.observed and "taken out" in wait.observed

    record = timing_module.TimingRecord()
    fake_clock.waited_ns = 0
    samples = timing_module.time_repeats_cpu_ms(waits_a_third, 2, record=record)
    assert samples == [2.0, 2.0] and record.wall_ms == [3.0, 3.0] and record.wait_share == pytest.approx(1 / 3)


def test_without_a_wait_reader_samples_are_wall_times(fake_clock, monkeypatch):
    monkeypatch.setattr(timing_module, "make_wait_reader", lambda: None)
    step, _ = _workload(fake_clock)
    run = wb.profile(step, warmup=0, repeat=3, trace=False)
    assert run.timing.samples_ms == (CLEAN_MS,) * 3 and run.timing.timer == "perf_counter_ns"
    assert run.health.check("cpu_wait").level == "unknown"
