"""The profile-health check on made-up inputs: machine states, samples and overheads are given,
never read from this machine."""

from __future__ import annotations

import json

import pytest

from workbench import render
from workbench.capture.health import (
    MAX_PROFILER_OVERHEAD,
    MachineState,
    ProfileHealth,
    check_health,
    read_machine_state,
)
from workbench.measurement import Measurement

QUIET = MachineState(
    load_avg_1m=0.5,
    usable_cores=8,
    torch_threads=4,
    omp_wait_policy="PASSIVE",
    cpu_governor="performance",
    cpu_cur_mhz=3000.0,
    cpu_max_mhz=3000.0,
)
STEADY = Measurement(tuple(10.0 + 0.01 * (i % 3) for i in range(20)))


def _health(timing=STEADY, traced=None, warmup="ran: one short session", waits=(0.01, 0.02), attempts=1, **machine):
    m = QUIET.__class__(**{**QUIET.to_dict(), **machine})
    return check_health(
        timing,
        traced=traced,
        profiler_warmup=warmup,
        machine=m,
        clean_wait_share=waits[0],
        traced_wait_share=waits[1],
        trace_attempts=attempts,
    )


def _level(health, name):
    return health.check(name).level


def test_a_quiet_machine_and_a_cheap_profiler_are_ok():
    h = _health(traced=Measurement((10.5, 10.4, 10.6)))
    assert h.verdict == "ok" and h.ok and not h.problems
    assert all(c.level == "ok" for c in h.checks), h.to_text()
    assert h.headline() == "profile health: ok"


def test_profiler_overhead_above_the_limit_warns_and_says_what_to_do():
    h = _health(traced=Measurement((15.0, 15.2, 14.9)))
    c = h.check("profiler_overhead")
    assert c.level == "warn" and c.value == pytest.approx(1.5, rel=0.01) and c.threshold == 1 + MAX_PROFILER_OVERHEAD
    assert "scaled to the clean time" in c.advice
    assert h.verdict == "caution" and "profiler overhead" in h.headline()
    assert _level(_health(traced=Measurement((11.5, 11.6, 11.4))), "profiler_overhead") == "ok"  # 15 %


def test_no_warm_up_session_and_a_slow_first_traced_call():
    assert _level(_health(traced=Measurement((10.0,) * 3), warmup=""), "first_session_artifacts") == "warn"
    slow_first = _health(traced=Measurement((31.0, 10.0, 10.2)))
    assert _level(slow_first, "first_session_artifacts") == "note"
    assert "3.1x" in slow_first.check("first_session_artifacts").observed


@pytest.mark.parametrize("n, fragment", [(4, "no 95 % interval"), (8, "95 % interval is")])
def test_too_few_samples(n, fragment):
    h = _health(timing=Measurement(tuple(10.0 + i * 0.01 for i in range(n))))
    c = h.check("too_few_samples")
    assert c.level == "warn" and fragment in c.observed and "at least 10" in c.advice


def test_noisy_samples():
    noisy = Measurement(tuple([10.0, 14.0] * 10))
    assert _level(_health(timing=noisy), "noisy_timing") == "warn"
    assert _level(_health(), "noisy_timing") == "ok"


def test_a_loaded_machine():
    assert _level(_health(load_avg_1m=7.9, usable_cores=4), "machine_load") == "warn"
    assert _level(_health(load_avg_1m=2.0, usable_cores=4), "machine_load") == "ok"
    assert _level(_health(load_avg_1m=None), "machine_load") == "unknown"


def test_waiting_for_a_cpu_during_the_measurement():
    c = _health(waits=(0.35, 0.05), attempts=3).check("cpu_wait")
    assert c.level == "warn" and "35%" in c.observed and "least of 3" in c.observed
    assert _level(_health(waits=(0.02, None)), "cpu_wait") == "ok"
    assert _level(_health(waits=(None, None)), "cpu_wait") == "unknown"


def test_threads_oversubscribed():
    assert _level(_health(torch_threads=16, usable_cores=8), "thread_oversubscription") == "warn"
    # 4 torch threads plus ~7 runnable threads of other work on 8 cores
    crowded = _health(torch_threads=4, usable_cores=8, load_avg_1m=11.0)
    assert _level(crowded, "thread_oversubscription") == "warn"
    assert "other work" in crowded.check("thread_oversubscription").observed
    assert _level(_health(torch_threads=4, usable_cores=8, load_avg_1m=4.0), "thread_oversubscription") == "ok"
    assert _level(_health(torch_threads=1, usable_cores=2, load_avg_1m=3.0), "thread_oversubscription") == "ok"


@pytest.mark.parametrize("policy, level", [("PASSIVE", "ok"), ("passive", "ok"), ("ACTIVE", "warn"), (None, "note")])
def test_omp_wait_policy(policy, level):
    c = _health(omp_wait_policy=policy).check("omp_wait_policy")
    assert c.level == level
    if level != "ok":
        assert "spin" in c.observed and "OMP_WAIT_POLICY=PASSIVE" in c.advice


def test_unset_omp_policy_on_a_loaded_machine_with_threads_warns():
    assert _level(_health(omp_wait_policy=None, load_avg_1m=12.0, usable_cores=8), "omp_wait_policy") == "warn"


def test_clocks_where_readable():
    assert _level(_health(cpu_governor="powersave"), "cpu_clock") == "note"
    assert _level(_health(cpu_governor=None, cpu_cur_mhz=None), "cpu_clock") == "unknown"


def test_checks_are_ordered_worst_first_and_round_trip():
    h = _health(traced=Measurement((15.0,) * 3), omp_wait_policy=None, load_avg_1m=30.0)
    levels = [c.level for c in h.checks]
    assert levels == sorted(levels, key=["warn", "note", "unknown", "ok"].index)
    again = ProfileHealth.from_dict(json.loads(json.dumps(h.to_dict())))
    assert again == h and again.to_dict() == h.to_dict()
    html = render.html(h)
    assert "CAUTION" in html and "what to do" in html


def test_a_run_without_a_record_says_so():
    h = ProfileHealth.from_dict(None)
    assert h.verdict == "not recorded" and "older run bundle" in h.headline()
    legacy = check_health(STEADY, legacy_under_profiler=True)
    assert legacy.check("profiler_overhead").level == "warn"
    assert legacy.check("machine_load").level == "unknown"


def test_read_machine_state_from_given_files_and_environment(tmp_path):
    (tmp_path / "scaling_governor").write_text("powersave\n")
    (tmp_path / "scaling_cur_freq").write_text("1200000\n")
    (tmp_path / "cpuinfo_max_freq").write_text("3600000\n")
    m = read_machine_state(environ={"OMP_WAIT_POLICY": "ACTIVE"}, cpufreq=tmp_path)
    assert m.omp_wait_policy == "ACTIVE" and m.cpu_governor == "powersave"
    assert m.cpu_cur_mhz == pytest.approx(1200.0) and m.cpu_max_mhz == pytest.approx(3600.0)
    assert m.usable_cores and m.usable_cores >= 1
    empty = read_machine_state(environ={}, cpufreq=tmp_path / "missing")
    assert empty.omp_wait_policy is None and empty.cpu_governor is None and empty.cpu_cur_mhz is None
