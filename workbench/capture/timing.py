"""Timing a callable: the cold first call apart, then warm repeats.

CPU: ``perf_counter_ns`` around each call. CUDA: a start and an end event recorded on the current
stream around each call, one ``synchronize`` after all repeats, then ``elapsed_time`` per pair, so
the host never waits on the device inside the timed loop.

Under load a CPU sample's wall time holds the time the scheduler gave the CPU to other processes.
Where Linux reports this thread's run-queue wait (``/proc/self/task/<tid>/schedstat``), that wait
is taken out of each CPU sample, as ``wb.compare``'s timer does (``workbench.variants.timing``), so
the headline and a comparison measure the same thing and a busy neighbour does not set either.
Sleeps and I/O waits of the callable stay in (they are its own). A sample whose wait reading was
itself preempted keeps its wall time. The wall times and the waits are kept (``TimingRecord``).

The host clock and the wait reader are injectable (``clock_ns``, ``make_wait_reader``, like
``Timer._timer_cls`` in torch.utils.benchmark): tests replace them with fakes so the timing logic
is checked without this machine's timing.
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable, ContextManager

PERF_COUNTER_RESOLUTION_MS = 1e-6  # perf_counter_ns ticks in ns
CUDA_EVENT_RESOLUTION_MS = 5e-4  # cudaEventElapsedTime: ~0.5 us per the CUDA runtime docs

Annotate = Callable[[int], ContextManager[Any]]
Clock = Callable[[], int]

clock_ns: Clock = time.perf_counter_ns  # the host clock; replaced by tests with a fake one
GAP_NS = 50_000  # a wait reading that took longer than this was itself preempted: keep the wall time
WAIT_TIMER_NAME = "perf_counter_ns - run-queue wait"


def _clock(clock: Clock | None) -> Clock:
    return clock if clock is not None else clock_ns


def _schedstat_reader() -> Callable[[], int] | None:
    """A reader of this thread's run-queue wait in ns (schedstat's second field); None where it
    cannot be read (not Linux, schedstats off)."""
    try:
        fd = os.open(f"/proc/self/task/{threading.get_native_id()}/schedstat", os.O_RDONLY)
    except OSError:
        return None

    def read() -> int:
        return int(os.pread(fd, 128, 0).split()[1])

    try:
        read()
    except (OSError, ValueError, IndexError):
        os.close(fd)
        return None
    read.close = lambda: os.close(fd)  # type: ignore[attr-defined]
    return read


make_wait_reader: Callable[[], Callable[[], int] | None] = _schedstat_reader  # replaced by tests


@dataclass
class TimingRecord:
    """What a CPU timing loop saw besides its samples: wall times and run-queue waits (ms)."""

    wall_ms: list[float] = field(default_factory=list)
    waited_ms: list[float] = field(default_factory=list)
    waits_read: bool = False

    @property
    def wait_share(self) -> float | None:
        wall = sum(self.wall_ms)
        return sum(self.waited_ms) / wall if self.waits_read and wall > 0 else None


def _open_reader() -> Callable[[], int] | None:
    try:
        return make_wait_reader()
    except Exception:  # a broken reader must not stop the timing
        return None


def _close_reader(reader: Any) -> None:
    close = getattr(reader, "close", None)
    if close is not None:
        try:
            close()
        except OSError:
            pass


def _timed_ns(call: Callable[[], Any], now: Clock, reader: Callable[[], int] | None) -> tuple[int, int]:
    """(wall ns, waited ns) of one call."""
    __tracebackhide__ = True
    if reader is None:
        start = now()
        call()
        return now() - start, 0
    before = now()
    w0 = reader()
    start = now()
    call()
    end = now()
    w1 = reader()
    after = now()
    wall = end - start
    if start - before < GAP_NS and after - end < GAP_NS:
        return wall, min(max(w1 - w0, 0), wall)
    return wall, 0


def _no_annotation(_: int) -> ContextManager[Any]:
    return nullcontext()


def uses_cuda_timer(torch: ModuleType, device: str) -> bool:
    """``device`` is "auto" (CUDA when available), "cpu" or "cuda"."""
    if device == "cpu":
        return False
    available = torch.cuda.is_available()
    if device == "cuda" and not available:
        from workbench.errors import NotApplicableError

        raise NotApplicableError("device='cuda' asked for, but torch.cuda.is_available() is False")
    return available


def time_cold_ms(
    call: Callable[[], Any],
    torch: ModuleType,
    cuda: bool,
    clock: Clock | None = None,
    record: TimingRecord | None = None,
) -> float:
    """Time of one call, the device drained before and after (compile, autotune, lazy init); on
    CPU without the run-queue wait, as the repeats."""
    __tracebackhide__ = True  # IPython/pytest: show the user's frames, not ours
    now = _clock(clock)
    if cuda:
        torch.cuda.synchronize()
        start = now()
        call()
        torch.cuda.synchronize()
        return (now() - start) / 1e6
    reader = _open_reader()
    try:
        wall, waited = _timed_ns(call, now, reader)
    finally:
        _close_reader(reader)
    if record is not None:
        record.wall_ms.append(wall / 1e6)
        record.waited_ms.append(waited / 1e6)
        record.waits_read = reader is not None
    return (wall - waited) / 1e6


def time_repeats_cpu_ms(
    call: Callable[[], Any],
    repeat: int,
    annotate: Annotate = _no_annotation,
    clock: Clock | None = None,
    record: TimingRecord | None = None,
) -> list[float]:
    """Per-call ms: wall time less this thread's run-queue wait where it is readable."""
    __tracebackhide__ = True
    wall_ns, waited_ns = [0] * repeat, [0] * repeat
    now = _clock(clock)
    reader = _open_reader()
    try:
        for i in range(repeat):
            with annotate(i):
                wall_ns[i], waited_ns[i] = _timed_ns(call, now, reader)
    finally:
        _close_reader(reader)
    if record is not None:
        record.wall_ms = [ns / 1e6 for ns in wall_ns]
        record.waited_ms = [ns / 1e6 for ns in waited_ns]
        record.waits_read = reader is not None
    return [(w - q) / 1e6 for w, q in zip(wall_ns, waited_ns)]


def time_repeats_cuda_ms(
    call: Callable[[], Any], repeat: int, torch: ModuleType, annotate: Annotate = _no_annotation
) -> list[float]:
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


def time_repeats_ms(
    call: Callable[[], Any],
    repeat: int,
    torch: ModuleType,
    cuda: bool,
    annotate: Annotate = _no_annotation,
    clock: Clock | None = None,
    record: TimingRecord | None = None,
) -> list[float]:
    __tracebackhide__ = True
    if cuda:
        return time_repeats_cuda_ms(call, repeat, torch, annotate)
    return time_repeats_cpu_ms(call, repeat, annotate, clock, record)
