"""Timing a callable: the cold first call apart, then warm repeats.

CPU: ``perf_counter_ns`` around each call. CUDA: a start and an end event recorded on the current
stream around each call, one ``synchronize`` after all repeats, then ``elapsed_time`` per pair, so
the host never waits on the device inside the timed loop.

The host clock is injectable (``clock_ns``, like ``Timer._timer_cls`` in torch.utils.benchmark):
tests replace it with a fake clock so the timing logic is checked without this machine's timing.
"""
from __future__ import annotations

import time
from contextlib import nullcontext
from typing import Any, Callable, ContextManager

PERF_COUNTER_RESOLUTION_MS = 1e-6   # perf_counter_ns ticks in ns
CUDA_EVENT_RESOLUTION_MS = 5e-4     # cudaEventElapsedTime: ~0.5 us per the CUDA runtime docs

Annotate = Callable[[int], ContextManager[Any]]
Clock = Callable[[], int]

clock_ns: Clock = time.perf_counter_ns   # the host clock; replaced by tests with a fake one


def _clock(clock: Clock | None) -> Clock:
    return clock if clock is not None else clock_ns


def _no_annotation(_: int) -> ContextManager[Any]:
    return nullcontext()


def uses_cuda_timer(torch: Any, device: str) -> bool:
    """``device`` is "auto" (CUDA when available), "cpu" or "cuda"."""
    if device == "cpu":
        return False
    available = torch.cuda.is_available()
    if device == "cuda" and not available:
        from workbench.errors import NotApplicableError

        raise NotApplicableError("device='cuda' asked for, but torch.cuda.is_available() is False")
    return available


def time_cold_ms(call: Callable[[], Any], torch: Any, cuda: bool, clock: Clock | None = None) -> float:
    """Wall time of one call, the device drained before and after (compile, autotune, lazy init)."""
    __tracebackhide__ = True  # IPython/pytest: show the user's frames, not ours
    now = _clock(clock)
    if cuda:
        torch.cuda.synchronize()
    start = now()
    call()
    if cuda:
        torch.cuda.synchronize()
    return (now() - start) / 1e6


def time_repeats_cpu_ms(call: Callable[[], Any], repeat: int,
                        annotate: Annotate = _no_annotation, clock: Clock | None = None) -> list[float]:
    __tracebackhide__ = True
    samples_ns = [0] * repeat
    clock = _clock(clock)
    for i in range(repeat):
        with annotate(i):
            start = clock()
            call()
            samples_ns[i] = clock() - start
    return [ns / 1e6 for ns in samples_ns]


def time_repeats_cuda_ms(call: Callable[[], Any], repeat: int, torch: Any,
                         annotate: Annotate = _no_annotation) -> list[float]:
    __tracebackhide__ = True
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeat)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeat)]
    torch.cuda.synchronize()  # warm-up work must not spill into the first sample
    for i in range(repeat):
        with annotate(i):
            stream = torch.cuda.current_stream()
            starts[i].record(stream)
            call()
            ends[i].record(torch.cuda.current_stream())
    torch.cuda.synchronize()
    return [float(s.elapsed_time(e)) for s, e in zip(starts, ends)]


def time_repeats_ms(call: Callable[[], Any], repeat: int, torch: Any, cuda: bool,
                    annotate: Annotate = _no_annotation, clock: Clock | None = None) -> list[float]:
    __tracebackhide__ = True
    if cuda:
        return time_repeats_cuda_ms(call, repeat, torch, annotate)
    return time_repeats_cpu_ms(call, repeat, annotate, clock)
