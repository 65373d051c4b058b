"""``wb.profile``: run a callable cold once, warm it up, time repeats, trace them, return a ProfileRun.

The callable runs ``1 + warmup + repeat`` times: one cold call timed apart, ``warmup`` untimed
calls, then ``repeat`` timed calls. With ``trace=True`` the timed repeats run inside one
torch.profiler session (so the samples include the profiler's per-op overhead; the run says so).
Whatever happens (an exception in the callable, KeyboardInterrupt), the profiler is stopped and
torch settings changed here are restored; the exception then propagates unchanged.
"""
from __future__ import annotations

import functools
import shutil
import tempfile
import weakref
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from workbench.capture.compile_diag import CompileDiagnostics, CompileWatcher
from workbench.capture.measurement import Measurement
from workbench.capture.profiler_session import ProfilerSession, warm_up_profiler
from workbench.capture.run import ProfileRun
from workbench.capture.timing import (
    CUDA_EVENT_RESOLUTION_MS, PERF_COUNTER_RESOLUTION_MS, time_cold_ms, time_repeats_ms,
    uses_cuda_timer,
)
from workbench.capture.torch_state import applied_torch_settings
from workbench.capture.trace_link import load_trace
from workbench.errors import InvalidArgumentError

DEVICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class _Outcome:
    cold_ms: float
    samples_ms: list[float]
    settings: dict[str, Any]
    compile: CompileDiagnostics
    memory: dict[str, Any]
    profiler_warmup: str
    trace_path: Path | None


def _check_count(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidArgumentError(
            f"{name} must be an integer >= {minimum}; got {value!r}. "
            f"(warmup counts untimed calls and may be 0; repeat counts timed calls, at least 1)")


def validate_options(fn: Any, warmup: Any, repeat: Any, threads: Any, device: Any) -> None:
    if not callable(fn):
        raise InvalidArgumentError(
            f"wb.profile needs a callable as its first argument; got {type(fn).__name__} "
            f"{fn!r:.60}. Pass the function itself (profile(f, x)), not its result (profile(f(x)))")
    _check_count("warmup", warmup, 0)
    _check_count("repeat", repeat, 1)
    if threads is not None:
        _check_count("threads", threads, 1)
    if device not in DEVICES:
        raise InvalidArgumentError(f"device must be one of {DEVICES}; got {device!r}")


def _memory_stats(torch: Any, cuda: bool) -> dict[str, Any]:
    if not cuda:
        return {"not_applicable": "no CUDA device; host allocations are in the trace "
                                  "(profile_memory=True)"}
    return {"peak_allocated_bytes": int(torch.cuda.max_memory_allocated()),
            "peak_reserved_bytes": int(torch.cuda.max_memory_reserved()),
            "allocated_bytes_after": int(torch.cuda.memory_allocated())}


def _measure(torch: Any, call: Callable[[], Any], cuda: bool, warmup: int, repeat: int,
             folder: Path | None, threads: int | None, grad_enabled: bool | None) -> _Outcome:
    __tracebackhide__ = True
    trace_path = None
    with applied_torch_settings(torch, threads=threads, grad_enabled=grad_enabled) as settings, \
            CompileWatcher() as watcher:
        cold_ms = time_cold_ms(call, torch, cuda)
        for _ in range(warmup):
            call()
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        if folder is None:
            warm_note = "not needed: trace off"
            samples = time_repeats_ms(call, repeat, torch, cuda)
        else:
            warm_note = warm_up_profiler(torch, cuda)
            with ProfilerSession(torch, cuda, folder) as session:
                samples = time_repeats_ms(call, repeat, torch, cuda, session.step)
            trace_path = session.trace_path
        memory = _memory_stats(torch, cuda)
    return _Outcome(cold_ms, samples, settings, watcher.result, memory, warm_note, trace_path)


def _bind(fn: Callable[..., Any], args: tuple, kwargs: dict) -> Callable[[], Any]:
    return functools.partial(fn, *args, **kwargs) if (args or kwargs) else fn


def _default_name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__


def profile(fn: Callable[..., Any], *args: Any, warmup: int = 3, repeat: int = 20,
            trace: bool = True, name: str | None = None, threads: int | None = None,
            grad_enabled: bool | None = None, device: str = "auto", **kwargs: Any) -> ProfileRun:
    """Profile ``fn(*args, **kwargs)``: cold call, ``warmup`` calls, ``repeat`` timed calls.

    ``threads`` sets ``torch.set_num_threads`` and ``grad_enabled`` the grad mode for the
    profile (both restored after). ``device``: "auto" times with CUDA events when a GPU is
    available, "cpu" forces ``perf_counter_ns``, "cuda" requires a GPU. These keyword names are
    taken by profile itself; pass a callable with them bound (functools.partial) if ``fn``
    needs arguments of the same names.
    """
    __tracebackhide__ = True
    validate_options(fn, warmup, repeat, threads, device)
    import torch

    cuda = uses_cuda_timer(torch, device)
    folder = Path(tempfile.mkdtemp(prefix="workbench-run-")) if trace else None
    try:
        outcome = _measure(torch, _bind(fn, args, kwargs), cuda, warmup, repeat, folder,
                           threads, grad_enabled)
    except BaseException:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    run = _build_run(outcome, name or _default_name(fn), warmup, repeat, cuda, torch)
    if folder is not None:  # the temporary trace goes with the run; run.save keeps a copy
        weakref.finalize(run, shutil.rmtree, str(folder), True)
    return run


def _build_run(outcome: _Outcome, name: str, warmup: int, repeat: int, cuda: bool,
               torch: Any) -> ProfileRun:
    from workbench.devices.fingerprint import environment_fingerprint

    device = f"cuda:{torch.cuda.current_device()}" if cuda else "cpu"
    traced = outcome.trace_path is not None
    timing = Measurement(
        samples_ms=tuple(outcome.samples_ms), label=name,
        timer="cuda_event" if cuda else "perf_counter_ns",
        timer_resolution_ms=CUDA_EVENT_RESOLUTION_MS if cuda else PERF_COUNTER_RESOLUTION_MS,
        metadata={"under_profiler": traced, "device": device},
    )
    parsed, note = load_trace(outcome.trace_path) if traced else (None, "trace off")
    return ProfileRun(
        name=name, timing=timing, cold_ms=outcome.cold_ms, warmup=warmup, repeat=repeat,
        device=device, compile=outcome.compile, environment=environment_fingerprint(),
        settings=outcome.settings, memory=outcome.memory, profiler_warmup=outcome.profiler_warmup,
        trace_path=str(outcome.trace_path) if traced else None, trace_note=note,
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"), trace=parsed,
    )
