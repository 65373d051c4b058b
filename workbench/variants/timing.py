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
"""
from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from workbench.capture.measurement import Measurement

_ns = time.perf_counter_ns          # our own reference: immune to monkeypatching
MIN_SAMPLE_MS = 2.0                 # CPU: calls per sample chosen so a sample lasts this long
MAX_CALLS_PER_SAMPLE = 10_000
MAX_SAMPLE_MS = 25.0                # ... but the slowest variant's sample stays under this


@dataclass
class Timed:
    """One variant ready to time: its callable and its own copy of the inputs."""

    name: str
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    calls_per_sample: int = 1
    per_call_ms: float = 0.0            # measured by calibrate()


class CpuTimer:
    timer = "perf_counter_ns"
    resolution_ms = 1e-6

    def sample_ms(self, item: Timed) -> float:
        """Mean ms per call over a block of ``calls_per_sample`` calls, after one untimed call."""
        fn, args, k = item.fn, item.args, item.calls_per_sample
        fn(*args)       # settle: the allocator and caches hold this variant's state, not the last one's
        start = _ns()
        for _ in range(k):
            fn(*args)
        return (_ns() - start) / 1e6 / k


class CudaTimer:
    """CUDA events around one call, after an L2 flush (a write of 2x the L2 size)."""

    timer = "cuda_event"
    resolution_ms = 5e-4

    def __init__(self) -> None:
        import torch

        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        l2 = int(getattr(props, "L2_cache_size", 0) or 64 * 2 ** 20)
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


def calibrate(item: Timed, timer: CpuTimer | CudaTimer, one_call_ms: float) -> None:
    """CPU: double the calls per sample until a sample lasts MIN_SAMPLE_MS (measured here, in
    this thread, not guessed from a slower guarded call); GPU: one flushed call per sample."""
    if isinstance(timer, CudaTimer):
        item.calls_per_sample, item.per_call_ms = 1, one_call_ms
        return
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

    def paired(self, a: str, b: str) -> tuple[np.ndarray, np.ndarray]:
        return (np.asarray(self.measurements[a].samples_ms), np.asarray(self.measurements[b].samples_ms))


def run_interleaved(items: list[Timed], timer: CpuTimer | CudaTimer, *, min_rounds: int = 10,
                    max_rounds: int = 60, budget_s: float = 5.0, seed: int = 0) -> InterleavedResult:
    """Rounds until ``budget_s`` is spent (at least ``min_rounds``, at most ``max_rounds``)."""
    rng = np.random.default_rng(seed)
    samples: dict[str, list[float]] = {it.name: [] for it in items}
    orders = []
    deadline = _ns() + budget_s * 1e9
    pool = [it.args for it in items]
    gc_was_enabled = gc.isenabled()
    gc.collect()                 # once: a full collection costs tens of ms with torch loaded
    gc.disable()                 # tensors are freed by reference counting; cycles wait till the end
    try:
        for r in range(max_rounds):
            if r >= min_rounds and _ns() > deadline:
                break
            for i, it in enumerate(items):    # rotate the input copies: no variant keeps the
                it.args = pool[(i + r) % len(pool)]   # luckiest memory placement for itself
            order = [items[i] for i in rng.permutation(len(items))]
            orders.append(tuple(it.name for it in order))
            for it in order:
                samples[it.name].append(timer.sample_ms(it))
    finally:
        if gc_was_enabled:
            gc.enable()
    ms = {it.name: Measurement(tuple(samples[it.name]), label=it.name, timer=timer.timer,
                               calls_per_sample=it.calls_per_sample,
                               timer_resolution_ms=timer.resolution_ms / it.calls_per_sample)
          for it in items}
    return InterleavedResult(ms, len(orders), tuple(orders))
