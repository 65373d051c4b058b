"""wb.profile on real callables: call counts, cold/warm split, trace, restored state, bad input."""

from __future__ import annotations

import importlib
import os
import time

import pytest
import torch

import workbench as wb
from workbench.errors import InvalidArgumentError, NotApplicableError

profile_module = importlib.import_module("workbench.capture.profile")  # the package exports the function


def _counting(fn=lambda: None):
    calls = []

    def wrapped(*args, **kwargs):
        calls.append((args, kwargs))
        return fn(*args, **kwargs)

    return wrapped, calls


def test_calls_cold_once_then_warmup_then_timed_repeats_then_traced_pass(monkeypatch):
    timing_module = importlib.import_module("workbench.capture.timing")
    monkeypatch.setattr(timing_module, "make_wait_reader", lambda: lambda: 0)  # no CPU waits: one traced pass
    fn, calls = _counting(lambda a, b=0: a + b)
    run = wb.profile(fn, 1, warmup=2, repeat=5, trace_repeat=2, b=2)
    assert len(calls) == 1 + 2 + 5 + 2
    assert run.timing.n == 5 and run.traced_timing.n == 2 and run.trace_repeat == 2
    fn, calls = _counting(lambda a, b=0: a + b)
    run = wb.profile(fn, 1, warmup=2, repeat=5, trace=False, b=2)
    assert len(calls) == 1 + 2 + 5
    assert run.traced_timing is None and run.trace_repeat == 0 and run.profiler_overhead is None
    assert calls[0] == ((1,), {"b": 2})
    assert run.timing.n == 5 and run.warmup == 2 and run.repeat == 5
    assert run.timing.timer in ("perf_counter_ns", "perf_counter_ns - run-queue wait")
    assert run.trace is None and run.trace_path is None and run.trace_note == "trace off"
    assert run.name == "_counting.<locals>.wrapped"  # the qualified name by default


def test_cold_call_is_timed_apart_from_warm_repeats():
    state = {"first": True}

    def lazy_init():
        if state["first"]:
            time.sleep(0.05)  # stands for compile / autotune / lazy init
            state["first"] = False

    run = wb.profile(lazy_init, warmup=0, repeat=5, trace=False)
    assert run.cold_ms >= 50
    assert run.timing.max_ms < 25  # the slow first call is not among the samples
    assert run.cold_over_warm > 2


def test_traced_run_parses_ops_with_one_step_per_traced_call(matmul_run):
    run = matmul_run
    assert run.trace is not None, run.trace_note
    assert not run.timed_under_profiler  # the clean repeats ran with no profiler
    n = run.trace_repeat  # not given: a few, enough to cover TRACE_TARGET_MS of clean time
    assert run.timing.n == 6 and n == profile_module.auto_trace_repeat(run.timing.median_ms)
    assert run.traced_timing is not None and run.traced_timing.n == n and run.traced_calls == n
    ops = run.trace.cpu_ops
    assert (ops["name"] == "aten::mm").sum() == n  # the traced pass only: not cold, warm-up or clean
    steps = run.trace.annotations
    step_names = set(steps[steps["name"].str.startswith("ProfilerStep#")]["name"])
    assert step_names == {f"ProfilerStep#{i}" for i in range(n)}
    assert run.profiler_warmup.startswith(("ran", "skipped"))
    assert run.profiler_overhead == pytest.approx(run.traced_timing.median_ms / run.timing.median_ms)
    # the traced call's time: its timed median, or its mean span in the trace when that is longer
    traced_ms = max(run.traced_timing.median_ms, run.trace_step_mean_ms)
    assert run.trace_scale == pytest.approx(run.timing.median_ms / traced_ms)
    assert run.trace_scale <= 1 / run.profiler_overhead + 1e-12


def test_traced_ops_carry_input_shapes(matmul_run):
    mm = matmul_run.trace.cpu_ops.query("name == 'aten::mm'")
    assert len(mm) == matmul_run.trace_repeat
    assert "64" in str(mm["input_dims"].iloc[0])
    assert len(matmul_run.trace.memory) > 0  # profile_memory=True: allocator events


def test_traced_calls_by_default_cover_a_target_of_clean_time():
    auto = profile_module.auto_trace_repeat
    assert auto(100.0) == auto(profile_module.TRACE_TARGET_MS) == profile_module.MIN_TRACE_REPEAT == 3
    assert auto(10.0) == 5 and auto(0.01) == profile_module.MAX_TRACE_REPEAT == 20
    assert auto(0.0) == auto(float("nan")) == 20


def test_profiler_warm_up_runs_once_per_process():
    from workbench.capture.profiler_session import warm_up_profiler

    warm_up_profiler(torch, cuda=False)
    assert warm_up_profiler(torch, cuda=False).startswith("skipped")


def test_exception_propagates_unchanged_and_profiler_is_stopped(monkeypatch):
    folders = []
    real_mkdtemp = profile_module.tempfile.mkdtemp
    monkeypatch.setattr(
        profile_module.tempfile, "mkdtemp", lambda **kw: folders.append(real_mkdtemp(**kw)) or folders[-1]
    )
    fn, calls = _counting()

    def fails_on_third():
        fn()
        if len(calls) == 3:
            raise ValueError("bad batch")

    with pytest.raises(ValueError, match="bad batch"):
        wb.profile(fails_on_third, warmup=1, repeat=5)
    assert not torch.autograd.profiler._is_profiler_enabled
    with torch.profiler.profile():  # a new session can start
        torch.ones(2).sum()
    assert folders and not os.path.exists(folders[0]), "the partial trace folder is left behind"


def test_keyboard_interrupt_mid_repeats_stops_profiler_and_restores_threads():
    fn, calls = _counting()
    before = torch.get_num_threads()

    def interrupted():
        fn()
        if len(calls) == 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        wb.profile(interrupted, warmup=1, repeat=10, threads=2)
    assert not torch.autograd.profiler._is_profiler_enabled
    assert torch.get_num_threads() == before


def test_threads_and_grad_mode_apply_inside_and_are_restored():
    seen = []
    run = wb.profile(
        lambda: seen.append((torch.get_num_threads(), torch.is_grad_enabled())),
        warmup=0,
        repeat=2,
        trace=False,
        threads=2,
        grad_enabled=False,
    )
    assert set(seen) == {(2, False)}
    assert run.settings == {"num_threads": 2, "grad_enabled": False}
    assert torch.get_num_threads() == 1 and torch.is_grad_enabled()


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"warmup": -1}, "warmup must be an integer >= 0"),
        ({"repeat": 0}, "repeat must be an integer >= 1"),
        ({"repeat": 2.5}, "repeat must be an integer >= 1"),
        ({"repeat": True}, "repeat must be an integer >= 1"),
        ({"threads": 0}, "threads must be an integer >= 1"),
        ({"device": "tpu"}, "device must be one of"),
        ({"trace_repeat": 0}, "trace_repeat must be an integer >= 1"),
    ],
)
def test_bad_options_raise_invalid_argument(kwargs, fragment):
    fn, calls = _counting()
    with pytest.raises(InvalidArgumentError, match=fragment):
        wb.profile(fn, **kwargs)
    assert calls == []


def test_non_callable_says_pass_the_function_itself():
    with pytest.raises(InvalidArgumentError, match=r"not its result"):
        wb.profile(torch.ones(3))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only refusal")
def test_cuda_device_on_cpu_machine_is_not_applicable():
    with pytest.raises(NotApplicableError, match="torch.cuda.is_available"):
        wb.profile(lambda: None, device="cuda")


def test_run_records_environment_and_memory_reason():
    run = wb.profile(lambda: torch.ones(4).sum(), warmup=0, repeat=2, trace=False)
    assert run.environment["torch"]["version"] == torch.__version__
    assert run.device == ("cuda:0" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        assert "no CUDA device" in run.memory["not_applicable"]
