"""``wb.profile``: run a callable cold once, warm it up, time clean repeats, trace a few calls apart.

The callable runs ``1 + warmup + repeat (+ trace_repeat)`` times: one cold call timed apart,
``warmup`` untimed calls, ``repeat`` timed calls with no profiler running (``run.timing``, the
clean measurement), then, with ``trace=True``, a separate short traced pass of ``trace_repeat``
calls inside one torch.profiler session (``run.traced_timing``; ``run.profiler_overhead`` is its
median over the clean one). Times read from the trace are stated per clean call (shares from the
trace, magnitudes from the clean timing). The profiler's native stderr chatter during the traced
pass is held back and kept on the run; it is shown only if something failed. Every run carries a
health check of the measurement (``run.health``). Whatever happens (an exception in the callable,
KeyboardInterrupt), the profiler is stopped and torch settings changed here are restored; the
exception then propagates unchanged.
"""

from __future__ import annotations

import functools
import math
import shutil
import statistics
import tempfile
import weakref
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Mapping

from workbench.capture.compile_diag import CompileDiagnostics, CompileWatcher
from workbench.capture.compiled_regions import with_compiled_code
from workbench.capture.health import MAX_WAIT_SHARE, health_for, read_minor_faults, read_run_delay_ns, wait_share
from workbench.capture.profiler_check import ProfilerStartWatch, profiler_running
from workbench.capture.profiler_session import ProfilerSession, warm_up_profiler
from workbench.capture.quiet import captured_native_stderr
from workbench.capture.run import RunRecord
from workbench.capture.timing import (
    CUDA_EVENT_RESOLUTION_MS,
    PERF_COUNTER_RESOLUTION_MS,
    WAIT_TIMER_NAME,
    Annotate,
    TimingRecord,
    time_cold_ms,
    time_repeats_ms,
    uses_cuda_timer,
)
from workbench.capture.torch_state import applied_torch_settings
from workbench.capture.trace_link import load_trace
from workbench.errors import InvalidArgumentError
from workbench.measurement import Measurement
from workbench.trace.optimizer_params import OptimizerStepParams
from workbench.trace.statements import StatementLines

DEVICES = ("auto", "cpu", "cuda")
# The traced pass: a few calls, more when calls are short, so that one preemption or timer tick
# inside the trace cannot dominate its shares; ``trace_repeat=None`` picks the count this way.
MIN_TRACE_REPEAT = 3  # steps to compare (the first against the others) and to average over
MAX_TRACE_REPEAT = 20  # the trace stays small and quick to parse
TRACE_TARGET_MS = 50.0  # clean time the traced calls should cover together
DEFAULT_TRACE_REPEAT = MIN_TRACE_REPEAT  # what a call of TRACE_TARGET_MS or longer gets
# A traced pass whose thread waited on the run queue (another process had the CPU) for more than
# MAX_WAIT_SHARE of it is traced again, up to TRACE_ATTEMPTS passes in all; the least-waiting trace
# is kept (preemption shows in a trace as gaps between ops that no host work caused).
TRACE_ATTEMPTS = 3


def auto_trace_repeat(clean_median_ms: float) -> int:
    """Calls in the traced pass when none is given: enough to cover ``TRACE_TARGET_MS`` of clean
    time, between ``MIN_TRACE_REPEAT`` and ``MAX_TRACE_REPEAT``."""
    if not clean_median_ms or clean_median_ms <= 0 or clean_median_ms != clean_median_ms:
        return MAX_TRACE_REPEAT
    return int(min(MAX_TRACE_REPEAT, max(MIN_TRACE_REPEAT, math.ceil(TRACE_TARGET_MS / clean_median_ms))))


@dataclass(frozen=True)
class _Outcome:
    cold_ms: float
    samples_ms: list[float]
    traced_samples_ms: list[float]
    settings: dict[str, Any]
    compile: CompileDiagnostics
    memory: dict[str, Any]
    profiler_warmup: str
    trace_path: Path | None
    profiler_stderr: str
    clean_wait_share: float | None = None
    traced_wait_share: float | None = None
    trace_attempts: int = 0
    trace_skipped: str = ""  # why the traced pass did not run although a trace was asked for
    page_faults_per_call: float | None = None  # minor page faults per clean timed call
    seen: _Seen | None = None  # what the traced pass saw of the code (None: no traced pass)


@dataclass(frozen=True)
class _Seen:
    """What a traced pass saw of the code beside its trace (``ProfilerSession``'s findings)."""

    module_names: dict[str, str]  # the module scopes' labels -> the modules' names
    optimizer_params: tuple[OptimizerStepParams, ...]  # the parameters each optimizer's step visited
    statements: StatementLines | None  # the statements of the user's code that ran

    @classmethod
    def of(cls, session: ProfilerSession) -> _Seen:
        return cls(session.module_names, session.optimizer_params, session.statements)


PROFILER_ALREADY_RUNNING = (
    "no trace: a torch profiler was already recording when the profile began (two profilers at once "
    "crash torch); the run is timed only. Stop the other profiler, or profile outside it, for a trace"
)
CODE_STARTS_PROFILER = (
    "no trace: the profiled code starts a torch profiler of its own (two profilers at once crash torch); "
    "the run is timed only. Remove the code's own profiler session for a trace"
)


def _check_count(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidArgumentError(
            f"{name} must be an integer >= {minimum}; got {value!r}. "
            f"(warmup counts untimed calls and may be 0; repeat counts timed calls, at least 1; "
            f"trace_repeat counts traced calls, at least 1)"
        )


def validate_options(fn: Any, warmup: Any, repeat: Any, threads: Any, device: Any, trace_repeat: Any = None) -> None:
    if not callable(fn):
        raise InvalidArgumentError(
            f"wb.profile needs a callable as its first argument; got {type(fn).__name__} "
            f"{fn!r:.60}. Pass the function itself (profile(f, x)), not its result (profile(f(x)))"
        )
    _check_count("warmup", warmup, 0)
    _check_count("repeat", repeat, 1)
    if trace_repeat is not None:
        _check_count("trace_repeat", trace_repeat, 1)
    if threads is not None:
        _check_count("threads", threads, 1)
    if device not in DEVICES:
        raise InvalidArgumentError(f"device must be one of {DEVICES}; got {device!r}")


def _memory_stats(torch: ModuleType, cuda: bool) -> dict[str, Any]:
    if not cuda:
        return {"not_applicable": "no CUDA device; host allocations are in the trace (profile_memory=True)"}
    return {
        "peak_allocated_bytes": int(torch.cuda.max_memory_allocated()),
        "peak_reserved_bytes": int(torch.cuda.max_memory_reserved()),
        "allocated_bytes_after": int(torch.cuda.memory_allocated()),
    }


def _measure(
    torch: ModuleType,
    call: Callable[[], Any],
    cuda: bool,
    warmup: int,
    repeat: int,
    folder: Path | None,
    threads: int | None,
    grad_enabled: bool | None,
    trace_repeat: int | None = None,
    memory_inputs: tuple[Any, ...] | None = None,
) -> _Outcome:
    __tracebackhide__ = True
    trace_path: Path | None = None
    traced: list[float] = []
    warm_note, native = "not needed: trace off", ""
    skipped = PROFILER_ALREADY_RUNNING if folder is not None and profiler_running() else ""
    with (
        applied_torch_settings(torch, threads=threads, grad_enabled=grad_enabled) as settings,
        CompileWatcher() as watcher,
    ):
        with ProfilerStartWatch() as own_starts:  # does the code start a profiler of its own?
            cold_ms = time_cold_ms(call, torch, cuda)
            watcher.first_call_done()  # compiles after this are steady-state ones
            for _ in range(warmup):
                call()
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            faults_before = read_minor_faults()
            samples, clean_wait = _timed_with_waits(call, repeat, torch, cuda)  # clean: no profiler running
            faults_after = read_minor_faults()
        memory = _memory_stats(torch, cuda)
        if folder is not None and own_starts.starts and not skipped:
            skipped = CODE_STARTS_PROFILER
        traced_wait, attempts = None, 0
        seen: _Seen | None = None
        if folder is not None and not skipped:  # the traced pass, apart
            if trace_repeat is None:
                trace_repeat = auto_trace_repeat(statistics.median(samples))
            with captured_native_stderr() as held, ProfilerStartWatch(refuse=True):
                warm_note = warm_up_profiler(torch, cuda)
                if memory_inputs is None:
                    traced, trace_path, traced_wait, attempts, seen = _traced_passes(
                        torch, call, cuda, folder, trace_repeat
                    )
                else:  # memory=True: named tensors and (CUDA) the allocator's history around the traced pass
                    traced, trace_path, traced_wait, attempts, seen = _memory_traced_pass(
                        torch, call, cuda, folder, trace_repeat, memory_inputs, memory
                    )
            native = held.text
    faults = (
        None if faults_before is None or faults_after is None else max(0, faults_after - faults_before) / max(1, repeat)
    )
    return _Outcome(
        cold_ms,
        samples,
        traced,
        settings,
        with_compiled_code(watcher.result, call, trace_path),  # graphs and breaks whenever compiled (the trace)
        memory,
        warm_note,
        trace_path,
        native,
        clean_wait,
        traced_wait,
        attempts,
        skipped,
        faults,
        seen,
    )


def _traced_passes(
    torch: ModuleType, call: Callable[[], Any], cuda: bool, folder: Path, trace_repeat: int
) -> tuple[list[float], Path, float | None, int, _Seen]:
    """Trace ``trace_repeat`` calls; again (up to ``TRACE_ATTEMPTS`` passes) while the thread waited
    for a CPU more than ``MAX_WAIT_SHARE`` of the pass. Returns the least-waiting pass's samples,
    its trace file, its wait share, the passes made and what it saw of the code (module names,
    optimizer parameters, statements); the other traces are deleted."""
    __tracebackhide__ = True
    best: tuple[float, list[float], Path, _Seen] | None = None
    attempt = 0
    for attempt in range(1, TRACE_ATTEMPTS + 1):
        target = folder if attempt == 1 else folder / f"pass-{attempt}"
        target.mkdir(parents=True, exist_ok=True)
        with ProfilerSession(torch, cuda, target) as session:  # waits around the calls, not the export
            traced, share = _timed_with_waits(call, trace_repeat, torch, cuda, session.step)
        if best is None or (share if share is not None else 0.0) < best[0]:
            if best is not None and best[2] != session.trace_path:
                best[2].unlink(missing_ok=True)
            best = (
                share if share is not None else 0.0,
                traced,
                session.trace_path,
                _Seen.of(session),
            )
        else:
            session.trace_path.unlink(missing_ok=True)
        if share is None or share <= MAX_WAIT_SHARE:
            break
    assert best is not None
    return best[1], best[2], (best[0] if share is not None else None), attempt, best[3]


def _memory_traced_pass(
    torch: ModuleType,
    call: Callable[[], Any],
    cuda: bool,
    folder: Path,
    trace_repeat: int,
    inputs: tuple[Any, ...],
    memory: dict[str, Any],
) -> tuple[list[float], Path, float | None, int, _Seen]:
    """The traced pass of ``memory=True``: one pass with allocator events, the call's named tensors and (CUDA)
    the allocator's history; then the same calls under the profiler without allocator events, timed only,
    so that ``memory["recording_overhead"]`` says what recording memory cost the traced pass."""
    __tracebackhide__ = True
    from workbench.capture.memory_capture import CudaHistory, TensorRoles

    folder.mkdir(parents=True, exist_ok=True)
    history = CudaHistory(torch, folder) if cuda else None
    with TensorRoles(torch, inputs) as roles:
        if history is not None:
            with history, ProfilerSession(torch, cuda, folder) as session:
                traced, share = _timed_with_waits(call, trace_repeat, torch, cuda, session.step)
        else:
            with ProfilerSession(torch, cuda, folder) as session:
                traced, share = _timed_with_waits(call, trace_repeat, torch, cuda, session.step)
    with ProfilerSession(torch, cuda, folder / "no-memory", profile_memory=False, export=False) as plain:
        untraced, _ = _timed_with_waits(call, trace_repeat, torch, cuda, plain.step)
    with_ms, without_ms = statistics.median(traced), statistics.median(untraced)
    memory["recorded"] = True
    memory["roles"] = roles.records()
    memory["traced_median_ms"] = with_ms
    memory["traced_without_memory_median_ms"] = without_ms
    memory["recording_overhead"] = with_ms / without_ms if without_ms > 0 else None
    if history is not None:
        memory["snapshot_path"] = str(history.path) if history.saved else None
        if history.note:
            memory["snapshot_note"] = history.note
    return traced, session.trace_path, share, 1, _Seen.of(session)


def _timed_with_waits(
    call: Callable[[], Any], repeat: int, torch: ModuleType, cuda: bool, annotate: Annotate | None = None
) -> tuple[list[float], float | None]:
    """Samples (CPU: the run-queue wait taken out of each) and the share of the wall time the
    thread waited for a CPU (None where it cannot be read)."""
    __tracebackhide__ = True
    record = TimingRecord()
    before = read_run_delay_ns() if cuda else None
    samples = (
        time_repeats_ms(call, repeat, torch, cuda, record=record)
        if annotate is None
        else time_repeats_ms(call, repeat, torch, cuda, annotate=annotate, record=record)
    )
    if record.waits_read:
        return samples, record.wait_share
    if cuda:  # device-timed samples: the host's wait against their sum, as an indication
        return samples, wait_share(before, read_run_delay_ns(), sum(samples))
    return samples, None


def _bind(fn: Callable[..., Any], args: tuple, kwargs: dict) -> Callable[[], Any]:
    return functools.partial(fn, *args, **kwargs) if (args or kwargs) else fn


def _default_name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__


def profile(
    fn: Callable[..., Any],
    *args: Any,
    warmup: int = 3,
    repeat: int = 20,
    trace: bool = True,
    name: str | None = None,
    threads: int | None = None,
    grad_enabled: bool | None = None,
    device: str = "auto",
    trace_repeat: int | None = None,
    expected_calls: int | None = None,
    memory: bool = False,
    environment: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> RunRecord:
    """Profile ``fn(*args, **kwargs)``: cold call, ``warmup`` calls, ``repeat`` clean timed calls,
    then (``trace=True``) ``trace_repeat`` calls traced apart under torch.profiler (``None``: a
    few, enough to cover ``TRACE_TARGET_MS`` of clean time, 3 to 20). ``expected_calls``: how many
    calls you expect to make; one-time costs (cold start) are ranked by what they cost spread over
    them (default ``workbench.hypotheses.run_facts.ONE_TIME_COST_CALLS``).

    ``memory=True`` records memory in the traced pass (``workbench.capture.memory_capture``): the profiler's
    allocator events (``profile_memory=True``, as every traced pass has), the tensors the call's modules,
    optimizers and arguments hold (``run.memory["roles"]``), on CUDA the allocator's history and its
    snapshot (``run.memory["snapshot_path"]``); and times the same calls traced without allocator events,
    so that ``run.memory["recording_overhead"]`` says what recording memory cost the traced pass. The clean
    timed repeats never run under any of it.

    ``run.timing`` is the clean timing (no profiler running); ``run.traced_timing`` the traced
    calls; ``run.profiler_overhead`` their ratio; ``run.health`` the measurement's health check.

    ``threads`` sets ``torch.set_num_threads`` and ``grad_enabled`` the grad mode for the
    profile (both restored after). ``device``: "auto" times with CUDA events when a GPU is
    available, "cpu" forces ``perf_counter_ns``, "cuda" requires a GPU. These keyword names are
    taken by profile itself; pass a callable with them bound (functools.partial) if ``fn``
    needs arguments of the same names.

    Returns the capture record (the face's ``wb.profile`` wraps it in its ``ProfileRun``);
    ``environment``: the environment facts it carries (the face passes the device fingerprint;
    this layer measures, it does not fingerprint).
    """
    __tracebackhide__ = True
    validate_options(fn, warmup, repeat, threads, device, trace_repeat)
    if not isinstance(memory, bool):
        raise InvalidArgumentError(f"memory must be True or False; got {memory!r}")
    if memory and not trace:
        raise InvalidArgumentError("memory=True records allocations in the traced pass: it needs trace=True")
    if expected_calls is not None:
        _check_count("expected_calls", expected_calls, 1)
    import torch

    cuda = uses_cuda_timer(torch, device)
    folder = Path(tempfile.mkdtemp(prefix="workbench-run-")) if trace else None
    try:
        outcome = _measure(
            torch,
            _bind(fn, args, kwargs),
            cuda,
            warmup,
            repeat,
            folder,
            threads,
            grad_enabled,
            trace_repeat,
            memory_inputs=(tuple(args) + tuple(kwargs.values())) if memory else None,
        )
    except BaseException:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    run = RunRecord(
        **_run_fields(outcome, name or _default_name(fn), warmup, repeat, cuda, torch),
        environment=dict(environment or {}),
        expected_calls=int(expected_calls) if expected_calls is not None else None,
    )
    if folder is not None:  # the temporary trace goes with the run; run.save keeps a copy
        weakref.finalize(run, shutil.rmtree, str(folder), True)
    return run


def _run_fields(
    outcome: _Outcome, name: str, warmup: int, repeat: int, cuda: bool, torch: ModuleType
) -> dict[str, Any]:
    """The run's fields from what was measured (all but ``environment`` and ``expected_calls``)."""
    device = f"cuda:{torch.cuda.current_device()}" if cuda else "cpu"
    traced = outcome.trace_path is not None
    waits_out = not cuda and outcome.clean_wait_share is not None  # the run-queue wait taken out
    timer = "cuda_event" if cuda else (WAIT_TIMER_NAME if waits_out else "perf_counter_ns")
    resolution = CUDA_EVENT_RESOLUTION_MS if cuda else PERF_COUNTER_RESOLUTION_MS
    timing = Measurement(
        samples_ms=tuple(outcome.samples_ms),
        label=name,
        timer=timer,
        timer_resolution_ms=resolution,
        metadata={"under_profiler": False, "device": device, "run_queue_wait_share": outcome.clean_wait_share},
    )
    traced_timing = (
        Measurement(
            samples_ms=tuple(outcome.traced_samples_ms),
            label=f"{name} (traced)",
            timer=timer,
            timer_resolution_ms=resolution,
            metadata={"under_profiler": True, "device": device, "run_queue_wait_share": outcome.traced_wait_share},
        )
        if traced and outcome.traced_samples_ms
        else None
    )
    parsed, note = (
        load_trace(outcome.trace_path)
        if outcome.trace_path is not None
        else (None, outcome.trace_skipped or "trace off")
    )
    if traced and note and outcome.profiler_stderr.strip():  # something failed: show what it said
        from workbench.capture.quiet import surface

        surface(outcome.profiler_stderr, "from the profiler (the trace could not be read)")
    health = health_for(
        timing,
        traced_timing,
        outcome.profiler_warmup,
        torch,
        torch_threads=outcome.settings.get("num_threads"),
        clean_wait_share=outcome.clean_wait_share,
        traced_wait_share=outcome.traced_wait_share,
        trace_attempts=outcome.trace_attempts,
        page_faults_per_call=outcome.page_faults_per_call,
    )
    return dict(
        name=name,
        timing=timing,
        cold_ms=outcome.cold_ms,
        warmup=warmup,
        repeat=repeat,
        device=device,
        compile=outcome.compile,
        settings=outcome.settings,
        memory=outcome.memory,
        profiler_warmup=outcome.profiler_warmup,
        trace_path=str(outcome.trace_path) if traced else None,
        trace_note=note,
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        trace=parsed,
        traced_timing=traced_timing,
        trace_repeat=len(outcome.traced_samples_ms) if traced else 0,
        health=health,
        profiler_stderr=outcome.profiler_stderr,
        module_names=dict(outcome.seen.module_names) if outcome.seen is not None else {},
        optimizer_params=outcome.seen.optimizer_params if outcome.seen is not None else (),
        statements=outcome.seen.statements if outcome.seen is not None else None,
    )
