"""Interleaved timing: variants take turns in rounds, in a fresh random order each round.

Each variant times on its own copy of the inputs, and the copies rotate between variants
from round to round, so that no variant keeps a luckier memory placement (alignment,
page, cache set) than another.  Interleaving puts slow drift (other processes, clocks, thermal state) on every variant alike;
the per-round pairing is what the speedup interval in ``stats.py`` uses.  On CPU a sample is a
block of calls timed with ``perf_counter_ns`` (held here, so a variant that patches
``time.perf_counter`` cannot change our numbers), after one untimed call of the same variant:
without it a variant pays for the state the previous one left (measured on the demo chain: the
compiled pass after eager's eight allocating passes took 1075 us instead of 574 us at 2 calls per
sample, with ~2900 page faults per round as glibc handed the freed intermediates back to the OS),
and the copy roof it is held against is timed back to back too.  On a GPU a sample is one call between CUDA
events, after writing a buffer larger than the L2 cache so no variant inherits a warm cache.

Under load (another process on the same cores) a CPU sample's wall time holds the time the
scheduler gave to others; where Linux reports the timing thread's run-queue wait (schedstat),
it is taken out of the sample (``CpuTimer``): with one busy process on a 2-core machine the
log-ratio spread of identical variants fell from 0.87 to 0.09.

``TimingSession`` runs the rounds and can extend them; every sample runs under the comparison's
time limit and a watch on process-wide settings, and a variant that fails on a later call drops
out with its reason while the others stay paired.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Protocol

import numpy as np

from workbench.measurement import Measurement

if TYPE_CHECKING:
    from workbench.variants.isolation import CallDeadline, SettingsWatch


class Timer(Protocol):
    """What the rounds ask of a timer (``CpuTimer``, ``CudaTimer``, ``clock.FakeTimer`` or one of
    yours): its name, resolution, one sample of an item (ms per call) and the clock the budget is
    spent on. Optional, read where present: ``calibrate(item, one_call_ms)``, ``measures``,
    ``waited_share()``."""

    @property
    def timer(self) -> str: ...

    @property
    def resolution_ms(self) -> float: ...

    def sample_ms(self, item: Timed) -> float: ...

    def clock_s(self) -> float: ...


_ns = time.perf_counter_ns  # our own reference: immune to monkeypatching
MIN_SAMPLE_MS = 2.0  # CPU: calls per sample chosen so a sample lasts this long
MAX_CALLS_PER_SAMPLE = 10_000
MAX_SAMPLE_MS = 25.0  # ... but the slowest variant's sample stays under this


@dataclass
class Timed:
    """One variant ready to time: its callable and its own copy of the inputs."""

    name: str
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    calls_per_sample: int = 1
    per_call_ms: float = 0.0  # measured by calibrate()


GAP_NS = 50_000  # a schedstat read that took longer than this was itself preempted


class RunQueueWait:
    """This thread's time spent runnable but waiting for a CPU (Linux ``/proc/.../schedstat``,
    second field, ns): the time other processes took from it.  None where it cannot be read."""

    def __init__(self) -> None:
        import os
        import threading

        self.fd: int | None = None
        self.tid = threading.get_native_id()
        try:
            self.fd = os.open(f"/proc/self/task/{self.tid}/schedstat", os.O_RDONLY)
            self.read()
        except (OSError, ValueError, IndexError):
            self.close()

    def read(self) -> int:
        import os

        if self.fd is None:
            raise OSError("the schedstat file is not open")
        return int(os.pread(self.fd, 128, 0).split()[1])

    def __del__(self) -> None:
        self.close()

    def close(self) -> None:
        import os

        fd = getattr(self, "fd", None)  # __del__ after a failed __init__: no fd attribute yet
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass
            self.fd = None


class CpuTimer:
    """The default CPU timer. Timers are injectable (``CompareSettings(timer=...)``, like
    ``torch.utils.benchmark.Timer``'s ``_timer_cls``): anything with ``timer`` (a name),
    ``resolution_ms``, ``sample_ms(item)``, ``calibrate(item, one_call_ms)`` and ``clock_s()`` (the
    clock the timing budget is spent on) will do; ``workbench.variants.clock`` has seeded fakes.

    Under load a sample's wall time includes the time the scheduler gave the CPU to other
    processes; where Linux reports it (schedstat), that run-queue wait of the timing thread is
    taken out of each sample (``subtract_waits``), so a busy neighbour does not decide a
    comparison.  Sleeps and I/O waits of the variant itself stay in (they are voluntary).  A
    sample whose own reading was preempted keeps its wall time."""

    resolution_ms = 1e-6

    def __init__(self, subtract_waits: bool = True) -> None:
        self._wait: RunQueueWait | None = None
        self.subtract_waits = subtract_waits
        self.waited_ns: dict[str, int] = {}
        self.wall_ns: dict[str, int] = {}

    @property
    def timer(self) -> str:
        return "perf_counter_ns - run-queue wait" if self.subtract_waits else "perf_counter_ns"

    def clock_s(self) -> float:
        return _ns() / 1e9

    def calibrate(self, item: "Timed", one_call_ms: float) -> None:
        _calibrate_blocks(item, self, one_call_ms)

    def _waits(self) -> RunQueueWait | None:
        import threading

        if not self.subtract_waits:
            return None
        if self._wait is None or self._wait.tid != threading.get_native_id():
            self._wait = RunQueueWait()
        return self._wait if self._wait.fd is not None else None

    def sample_ms(self, item: Timed) -> float:
        """Mean ms per call over a block of ``calls_per_sample`` calls, after one untimed call."""
        fn, args, k = item.fn, item.args, item.calls_per_sample
        fn(*args)  # settle: the allocator and caches hold this variant's state, not the last one's
        rq = self._waits()
        if rq is None:
            start = _ns()
            for _ in range(k):
                fn(*args)
            return (_ns() - start) / 1e6 / k
        before = _ns()
        w0 = rq.read()
        start = _ns()
        for _ in range(k):
            fn(*args)
        end = _ns()
        w1 = rq.read()
        after = _ns()
        wall = end - start
        waited = 0
        if start - before < GAP_NS and after - end < GAP_NS:
            waited = min(max(w1 - w0, 0), wall)
        self.waited_ns[item.name] = self.waited_ns.get(item.name, 0) + waited
        self.wall_ns[item.name] = self.wall_ns.get(item.name, 0) + wall
        return (wall - waited) / 1e6 / k

    def waited_share(self) -> float | None:
        """Share of the timed wall time spent waiting for a CPU (None: not measured)."""
        wall = sum(self.wall_ns.values())
        return sum(self.waited_ns.values()) / wall if wall else None


class CudaTimer:
    """CUDA events around one call, after an L2 flush (a write of 2x the L2 size)."""

    timer = "cuda_event"
    resolution_ms = 5e-4

    def clock_s(self) -> float:
        return _ns() / 1e9

    def calibrate(self, item: "Timed", one_call_ms: float) -> None:
        item.calls_per_sample, item.per_call_ms = 1, one_call_ms

    def __init__(self) -> None:
        import torch

        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        l2 = int(getattr(props, "L2_cache_size", 0) or 64 * 2**20)
        self.flush_buf = torch.empty(2 * l2 // 4 + 1, dtype=torch.float32, device="cuda")
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)

    def sample_ms(self, item: Timed) -> float:
        self.flush_buf.fill_(1.0)
        self.start.record()
        for _ in range(item.calls_per_sample):
            item.fn(*item.args)
        self.end.record()
        self.end.synchronize()
        return self.start.elapsed_time(self.end) / item.calls_per_sample


def pick_timer(on_cuda: bool) -> CpuTimer | CudaTimer:
    return CudaTimer() if on_cuda else CpuTimer()


def calibrate(item: Timed, timer: Timer, one_call_ms: float) -> None:
    """CPU: double the calls per sample until a sample lasts MIN_SAMPLE_MS (measured here, in
    this thread, not guessed from a slower guarded call); GPU: one flushed call per sample; an
    injected timer: its own ``calibrate``."""
    own = getattr(timer, "calibrate", None)
    if own is not None:
        own(item, one_call_ms)
    else:
        _calibrate_blocks(item, timer, one_call_ms)


def _calibrate_blocks(item: Timed, timer: Timer, one_call_ms: float) -> None:
    item.per_call_ms = one_call_ms
    k = int(min(MAX_CALLS_PER_SAMPLE, max(1, MIN_SAMPLE_MS // max(one_call_ms, 1e-3) // 4)))
    while k < MAX_CALLS_PER_SAMPLE:
        item.calls_per_sample = k
        item.per_call_ms = timer.sample_ms(item)
        if item.per_call_ms * k >= MIN_SAMPLE_MS:
            break
        k *= 2
    item.calls_per_sample = min(k, MAX_CALLS_PER_SAMPLE)


def shared_calls_per_sample(items: list[Timed]) -> int:
    """One count for every variant: the fastest one's, capped so the slowest one's sample stays
    under MAX_SAMPLE_MS (a variant 1000x faster must not make the baseline run for minutes)."""
    fastest_k = max(it.calls_per_sample for it in items)
    slowest_per_call_ms = max(max(it.per_call_ms for it in items), 1e-6)
    return int(max(1, min(fastest_k, MAX_SAMPLE_MS // slowest_per_call_ms)))


@dataclass(frozen=True)
class InterleavedResult:
    measurements: dict[str, Measurement]
    rounds: int
    orders: tuple[tuple[str, ...], ...]
    failures: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (status, reason)
    state_changes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    spent_s: float = 0.0
    looks: tuple[int, ...] = ()  # the round counts at which the decision was looked at

    def paired(self, a: str, b: str) -> tuple[np.ndarray, np.ndarray]:
        return (np.asarray(self.measurements[a].samples_ms), np.asarray(self.measurements[b].samples_ms))


class TimingSession:
    """Interleaved rounds that can be extended: ``run(...)`` adds rounds, ``result()`` reads them.

    Each sample runs under a time limit (``limit_s``, a VariantTimeout past it) and a watch on the
    process-wide settings (restored after every sample, the change named for the variant that made
    it). A variant that raises, calls ``sys.exit`` or times out during the rounds drops out with
    its reason; the others go on, still paired round by round.  ``before_sample`` (a stateful
    step's snapshot restore) runs before every sample, outside the timed region.  A variant known to change its
    inputs (``mutating``) times on a private copy restored before each sample, outside the rotation
    of input copies, so it cannot corrupt the others' inputs."""

    def __init__(
        self,
        items: list[Timed],
        timer: Timer,
        *,
        seed: int = 0,
        limit_s: float | None = None,
        mutating: tuple[str, ...] = (),
        before_sample: Callable[[], None] | None = None,
    ) -> None:
        self.items = list(items)
        self.timer = timer
        self.rng = np.random.default_rng(seed)
        self.samples: dict[str, list[float]] = {it.name: [] for it in items}
        self.orders: list[tuple[str, ...]] = []
        self.failures: dict[str, tuple[str, str]] = {}
        self.state_changes: dict[str, list[str]] = {}
        self.limit_s = limit_s
        self.spent_s = 0.0
        self.looks: list[int] = []
        self.collected = False
        self.mutating = set(mutating)
        self.before_sample = before_sample  # e.g. restore a stateful step's snapshot: outside the timed region
        self.pristine = {it.name: _clone(it.args) for it in items if it.name in self.mutating}
        self.pool_names = [it.name for it in items if it.name not in self.mutating]
        self.pool = [it.args for it in items if it.name not in self.mutating]

    @property
    def rounds(self) -> int:
        return len(self.orders)

    @property
    def active(self) -> list[Timed]:
        return [it for it in self.items if it.name not in self.failures]

    def run(self, *, min_rounds: int, max_rounds: int, budget_s: float) -> None:
        """Add rounds until ``budget_s`` more seconds (on the timer's clock) are spent, at least
        ``min_rounds`` and at most ``max_rounds`` more."""
        from workbench.variants.isolation import CallDeadline, SettingsWatch

        clock = self.timer.clock_s
        start = clock()
        gc_was_enabled = gc.isenabled()
        if not getattr(self.timer, "measures", True):
            gc_was_enabled = False  # a fake clock: nothing to keep quiet
        elif not self.collected:
            gc.collect()  # once: a full collection costs tens of ms with torch loaded
            self.collected = True
        if gc_was_enabled:
            gc.disable()  # tensors are freed by reference counting; cycles wait till the end
        watch = SettingsWatch()
        try:
            with CallDeadline(self.limit_s or 1e9) as deadline:
                for r in range(max_rounds):
                    if r >= min_rounds and clock() - start > budget_s:
                        break
                    if not self._round(deadline, watch):
                        break
        finally:
            self.spent_s += clock() - start
            if gc_was_enabled:
                gc.enable()

    def _round(self, deadline: CallDeadline, watch: SettingsWatch) -> bool:
        active = self.active
        if not active:
            return False
        r = self.rounds
        pool_items = [it for it in active if it.name not in self.mutating]
        for i, it in enumerate(pool_items):  # rotate the input copies: no variant keeps the
            it.args = self.pool[(i + r) % len(self.pool)]  # luckiest memory placement for itself
        order = [active[i] for i in self.rng.permutation(len(active))]
        self.orders.append(tuple(it.name for it in order))
        for it in order:
            if it.name in self.mutating:
                it.args = _clone(self.pristine[it.name])
            if self.before_sample is not None:
                self.before_sample()
            self._sample(it, deadline, watch)
        return True

    def _sample(self, it: Timed, deadline: CallDeadline, watch: SettingsWatch) -> None:
        from workbench.variants.isolation import VariantTimeout

        deadline.arm()
        try:
            ms = self.timer.sample_ms(it)
            deadline.disarm()
        except VariantTimeout:
            deadline.disarm()
            self._drop(
                it,
                "timeout",
                f"a call during the timed rounds did not return within {self.limit_s:g} s "
                f"(round {self.rounds}); not timed (raise time_limit_s if it is just slow)",
            )
            return
        except KeyboardInterrupt:
            deadline.disarm()
            raise
        except BaseException as exc:  # noqa: BLE001 - SystemExit too: the variant's, not ours
            deadline.disarm()
            self._drop(it, "error", f"{_describe_exit(exc)} on a later call (round {self.rounds} of the timing)")
            return
        finally:
            changed = watch.restore()
            if changed:
                known = self.state_changes.setdefault(it.name, [])
                known += [c for c in changed if c not in known]
        self.samples[it.name].append(ms)

    def _drop(self, it: Timed, status: str, reason: str) -> None:
        self.failures[it.name] = (status, reason)  # the survivors stay paired round by round

    def result(self) -> InterleavedResult:
        ms = {}
        n = min((len(self.samples[it.name]) for it in self.active), default=0)
        for it in self.active:
            samples = self.samples[it.name][:n]
            if samples:
                ms[it.name] = Measurement(
                    tuple(samples),
                    label=it.name,
                    timer=self.timer.timer,
                    calls_per_sample=it.calls_per_sample,
                    timer_resolution_ms=self.timer.resolution_ms / it.calls_per_sample,
                )
        return InterleavedResult(
            ms,
            self.rounds,
            tuple(self.orders),
            dict(self.failures),
            {k: tuple(v) for k, v in self.state_changes.items()},
            self.spent_s,
            tuple(self.looks),
        )


def _clone(args: Any) -> Any:
    from workbench.variants.tree import clone_tensors

    return clone_tensors(args)


def _describe_exit(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"called sys.exit({exc.code!r})"
    text = str(exc).splitlines()[0][:200] if str(exc) else ""
    return f"raised {type(exc).__name__}: {text}" if text else f"raised {type(exc).__name__}"


def run_interleaved(
    items: list[Timed],
    timer: Timer,
    *,
    min_rounds: int = 10,
    max_rounds: int = 60,
    budget_s: float = 5.0,
    seed: int = 0,
    limit_s: float | None = None,
) -> InterleavedResult:
    """Rounds until ``budget_s`` is spent (at least ``min_rounds``, at most ``max_rounds``)."""
    session = TimingSession(items, timer, seed=seed, limit_s=limit_s)
    session.run(min_rounds=min_rounds, max_rounds=max_rounds, budget_s=budget_s)
    return session.result()
