"""Allocation churn: device malloc/free in the steady state, large allocations repeating every
call, and memory near the device's capacity."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.hypothesis import Evidence
from workbench.hypotheses.registry import Limits, NotJudged, rule
from workbench.hypotheses.rules._common import bounded_ms, pct, rows
from workbench.hypotheses.words import Finding, Words

MALLOC_NAMES = (
    "cudaMalloc",
    "cudaFree",
    "cudaMallocHost",
    "cudaFreeHost",
    "hipMalloc",
    "hipFree",
    "cudaMallocAsync",
    "cudaFreeAsync",
)


@dataclass(frozen=True)
class DeviceMallocInLoopLimits(Limits):
    """The thresholds of ``device_malloc_in_loop``."""

    min_calls: int = 2
    min_time_pct: float = 1.0


@dataclass(frozen=True, kw_only=True)
class DeviceMallocFinding(Finding):
    n_calls: int  # device malloc/free calls in the trace
    malloc_ms: float  # their summed time
    share_pct: float  # of the trace's window
    call_names: str  # the calls' names, joined with ", "


DEVICE_MALLOC_WORDS = Words(
    title="{n_calls} device malloc/free calls during the run",
    observed="{malloc_ms:.2f} ms ({share_pct:.1f}% of the trace) in {call_names}",
    mechanism="The caching allocator cannot reuse blocks (fragmentation, changing sizes, empty_cache) and calls the "
    "driver, which synchronises.",
    predicted_effect="preallocating buffers, fixed shapes, or no torch.cuda.empty_cache() in the loop removes these "
    "calls",
    falsifier="run two more steps and count calls: if they do not repeat after warm-up, it was a one-time cost",
    confounders=("the first step always allocates",),
    # a CUDA graph replays from a private, preallocated pool: it tests the allocation mechanism
    suggested_variants=("cuda_graph", "compiled_reduce_overhead"),
)


@rule(
    "device_malloc_in_loop",
    category="allocation_churn",
    scope="trace",
    limits=DeviceMallocInLoopLimits,
    finding=DeviceMallocFinding,
    words=DEVICE_MALLOC_WORDS,
)
def device_malloc_in_loop(f: TraceFacts, limits: DeviceMallocInLoopLimits) -> DeviceMallocFinding | None:
    """cudaMalloc/cudaFree are called repeatedly while the program runs (caching allocator misses)."""
    rt = f.require_runtime()
    calls = rt[rt["name"].astype(str).isin(MALLOC_NAMES)]
    total = float(calls["dur_us"].sum())
    if len(calls) < limits.min_calls or pct(total, f.window_us) < limits.min_time_pct:
        return None
    by = calls.groupby("name", as_index=False, observed=True).agg(n=("dur_us", "size"), dur_us=("dur_us", "sum"))
    return DeviceMallocFinding(
        n_calls=len(calls),
        malloc_ms=total / 1e3,
        share_pct=pct(total, f.window_us),
        call_names=", ".join(by["name"].astype(str)),
        evidence=(
            Evidence(
                "malloc_time_pct",
                pct(total, f.window_us),
                "%",
                limits.min_time_pct,
                source="runtime",
                rows=rows(by, ["name", "n", "dur_us"], by="dur_us"),
            ),
            Evidence("malloc_calls", len(calls), "calls", limits.min_calls, ">=", "runtime"),
        ),
        time_at_stake_ms=bounded_ms(total, f.window_us),
        confidence="medium",
        scope="all ranks",
    )


def allocating_ops(f: TraceFacts, big: pd.DataFrame) -> pd.DataFrame:
    """The top-level ops (main host thread) inside which the large allocations happen, with the
    bytes each allocated and the time above what moving those bytes at the ceiling needs."""
    from workbench.hypotheses.rules.host_ops import placed_main_ops

    ops = placed_main_ops(f)
    starts, ends = ops["ts_us"].to_numpy(), ops["end_us"].to_numpy()
    order = np.argsort(starts, kind="stable")
    idx = np.searchsorted(starts[order], big["ts_us"].to_numpy(), side="right") - 1
    hit = idx >= 0
    owner = np.where(hit, order[np.clip(idx, 0, None)], -1)
    inside = hit & (ends[np.clip(owner, 0, None)] >= big["ts_us"].to_numpy())
    alloc = pd.DataFrame({"op": owner[inside], "alloc_bytes": big["bytes"].to_numpy()[inside]})
    per_op = alloc.groupby("op", as_index=False)["alloc_bytes"].sum()
    picked = ops.iloc[per_op["op"].to_numpy()]
    found = picked.reset_index(drop=True).assign(
        alloc_bytes=per_op["alloc_bytes"].to_numpy(), op_label=picked.index.to_numpy()
    )
    # the least time an op needs: its roof, and at least writing what it allocated once
    write_us = found["alloc_bytes"] / (f.ceiling.memory_gbps * 1e3)
    floor_us = np.fmax(found["roof_us"].to_numpy(dtype=float), write_us.to_numpy())
    return found.assign(excess_us=(found["dur_us"] - floor_us).clip(lower=0.0))


# ops whose whole work is making a buffer: a copy of data that already exists, or a constant fill
COPY_OR_FILL_OPS = re.compile(
    r"^aten::(?:clone|copy_|_to_copy|to|contiguous|cat|stack|full|full_like|zeros|zeros_like|"
    r"ones|ones_like|empty|empty_like|new_\w+|fill_|zero_|repeat|tile)$"
)


def fresh_copy_or_fill_ops(f: TraceFacts, large_bytes: float = 32 << 20) -> pd.Index:
    """The top-level ops (index of ``placed_main_ops``) that only copy or fill and allocate a large host
    buffer (>= ``large_bytes``) each time: their whole time is making a fresh buffer (allocation churn), not a
    memory pass a fusion would remove."""
    mem = f.memory
    if mem.empty:
        return pd.Index([])
    host = mem[mem["device_type"] == 0] if "device_type" in mem else mem
    big = host[host["bytes"] >= large_bytes]
    if big.empty:
        return pd.Index([])
    found = allocating_ops(f, big)
    copies = found["name"].astype(str).str.match(COPY_OR_FILL_OPS).to_numpy(dtype=bool)
    return pd.Index(found.loc[copies, "op_label"].to_numpy())


def allocation_excess_us(f: TraceFacts, large_bytes: float = 32 << 20) -> pd.Series:
    """Per top-level op (the index of ``placed_main_ops``): the time above its floor spent inside the ops
    that allocate large host buffers (page faults and zeroing of fresh pages), 0 elsewhere; empty when the
    trace has no allocator events. Rules that read op time as work (memory streaming) leave this out."""
    from workbench.hypotheses.rules.host_ops import placed_main_ops

    ops = placed_main_ops(f)
    mem = f.memory
    if mem.empty:
        return pd.Series(dtype=float)
    host = mem[mem["device_type"] == 0] if "device_type" in mem else mem
    big = host[host["bytes"] >= large_bytes]
    if big.empty:
        return pd.Series(0.0, index=ops.index)
    found = allocating_ops(f, big)
    out = pd.Series(0.0, index=ops.index)
    out.loc[found["op_label"].to_numpy()] = found["excess_us"].to_numpy()
    return out


# glibc's dynamic mmap threshold rises to at most 32 MiB on 64-bit: smaller freed blocks are reused
# from the heap, larger ones are mapped (and page-faulted) afresh on every allocation.
@dataclass(frozen=True)
class LargeAllocationsRepeatLimits(Limits):
    """The thresholds of ``large_allocations_repeat``."""

    large_bytes: int = 32 << 20
    min_per_call: float = 1.0
    min_time_pct: float = 10.0


@dataclass(frozen=True, kw_only=True)
class LargeAllocationsFinding(Finding):
    n_allocs: int  # host allocations of at least large_bytes
    large_mib: float  # the size threshold, MiB
    allocs_per_call: float  # of them per traced call
    excess_ms: float  # the allocating ops' time above moving their bytes at the ceiling
    share_pct: float  # that excess, of the trace's window


LARGE_ALLOCATIONS_WORDS = Words(
    title="{n_allocs} allocations of >= {large_mib:.0f} MiB repeat during the run",
    observed="{allocs_per_call:.1f} large allocations per call; the ops that make them take {excess_ms:.2f} ms more "
    "than moving their bytes at the ceiling needs ({share_pct:.0f}% of the trace)",
    mechanism="Fresh large buffers each call pay for allocation and first-touch page faults (on CPU, mmap/munmap "
    "and zeroing of every page), on top of the op's work.",
    predicted_effect="reusing a preallocated buffer (out= arguments, in-place ops) removes the allocation and fault "
    "cost",
    falsifier="preallocate the buffer once outside the loop (out= arguments, in-place ops): if the time per call does "
    "not fall, allocation was not the cost (no variant in the registry preallocates: that experiment is your own "
    "rewrite)",
    confounders=("the excess over the roof may also be cache misses or a slow kernel, not allocation",),
)


@rule(
    "large_allocations_repeat",
    category="allocation_churn",
    scope="trace",
    limits=LargeAllocationsRepeatLimits,
    finding=LargeAllocationsFinding,
    words=LARGE_ALLOCATIONS_WORDS,
)
def large_allocations_repeat(f: TraceFacts, limits: LargeAllocationsRepeatLimits) -> LargeAllocationsFinding | None:
    """Large host buffers are allocated afresh on every call, and the ops making them run far below their roof."""
    mem = f.memory
    if mem.empty:
        raise NotJudged("no allocator events in the trace (profile with profile_memory=True)")
    host = mem[mem["device_type"] == 0] if "device_type" in mem else mem
    big = host[host["bytes"] >= limits.large_bytes]
    calls = max(1, f.n_steps)
    per_call = len(big) / calls
    if per_call < limits.min_per_call or len(big) < 2:
        return None
    found = allocating_ops(f, big)
    stake_us = float(found["excess_us"].sum())
    share = pct(stake_us, f.window_us)
    if share < limits.min_time_pct:
        return None
    by = found.groupby("name", as_index=False, observed=True).agg(
        n=("dur_us", "size"),
        alloc_bytes=("alloc_bytes", "sum"),
        dur_us=("dur_us", "sum"),
        excess_us=("excess_us", "sum"),
    )
    return LargeAllocationsFinding(
        n_allocs=len(big),
        large_mib=limits.large_bytes / 2**20,
        allocs_per_call=per_call,
        excess_ms=stake_us / 1e3,
        share_pct=share,
        evidence=(
            Evidence(
                "large_allocs_per_call",
                per_call,
                "allocs",
                limits.min_per_call,
                ">=",
                "memory",
                rows=rows(big, ["ts_us", "bytes", "total_allocated"], by="bytes"),
            ),
            Evidence(
                "allocation_excess_pct",
                share,
                "%",
                limits.min_time_pct,
                source="cpu_ops containing them + analytic work",
                rows=rows(by, ["name", "n", "alloc_bytes", "dur_us", "excess_us"], by="excess_us"),
            ),
        ),
        time_at_stake_ms=bounded_ms(stake_us / calls, f.window_us / calls),
        confidence="medium",
        scope="host thread",
    )


@dataclass(frozen=True)
class MemoryNearCapacityLimits(Limits):
    """The thresholds of ``memory_near_capacity``."""

    max_fraction: float = 0.9


@dataclass(frozen=True, kw_only=True)
class MemoryNearCapacityFinding(Finding):
    reserved_fraction: float  # peak reserved device memory, of the largest device's capacity
    peak_gib: float  # peak reserved, GiB
    capacity_gib: float  # the largest device's capacity, GiB
    n_calls: int  # device malloc/free calls in the trace
    driver_ms: float  # their summed time


MEMORY_NEAR_CAPACITY_WORDS = Words(
    title="Reserved memory reaches {reserved_fraction:.0%} of the device",
    observed="peak reserved {peak_gib:.2f} GiB of {capacity_gib:.2f} GiB; {n_calls} device malloc/free calls, "
    "{driver_ms:.2f} ms",
    mechanism="Near capacity the caching allocator frees and retries (cudaFree + cudaMalloc, synchronising).",
    predicted_effect="a smaller batch or activation checkpointing leaves headroom; allocator retries disappear",
    falsifier="check torch.cuda.memory_stats()['num_alloc_retries']: zero means no retries happened",
    confounders=("reserved includes cached blocks that are free",),
)


@rule(
    "memory_near_capacity",
    category="allocation_churn",
    scope="trace",
    limits=MemoryNearCapacityLimits,
    finding=MemoryNearCapacityFinding,
    words=MEMORY_NEAR_CAPACITY_WORDS,
)
def memory_near_capacity(f: TraceFacts, limits: MemoryNearCapacityLimits) -> MemoryNearCapacityFinding | None:
    """Reserved device memory comes close to the device's capacity."""
    mem = f.memory
    caps = [int(p.get("totalGlobalMem", 0) or 0) for p in f.device_list]
    if mem.empty or not caps or max(caps) <= 0:
        raise NotJudged("no allocator events or no device capacity in the trace")
    gpu = mem[mem["device_type"] != 0]
    peak = float(gpu["total_reserved"].max()) if not gpu.empty else 0.0
    frac = peak / max(caps)
    if frac < limits.max_fraction:
        return None
    # what near-capacity costs is the allocator's frees and retries: the driver calls the trace shows
    calls = f.runtime[f.runtime["name"].astype(str).isin(MALLOC_NAMES)]
    retry_us = float(calls["dur_us"].sum())
    by = calls.groupby("name", as_index=False, observed=True).agg(n=("dur_us", "size"), dur_us=("dur_us", "sum"))
    return MemoryNearCapacityFinding(
        reserved_fraction=frac,
        peak_gib=peak / 2**30,
        capacity_gib=max(caps) / 2**30,
        n_calls=len(calls),
        driver_ms=retry_us / 1e3,
        evidence=(
            Evidence("peak_reserved_fraction", frac, "fraction", limits.max_fraction, ">=", "memory"),
            Evidence(
                "allocator_driver_us",
                retry_us,
                "us",
                source="runtime (device malloc/free calls)",
                rows=rows(by, ["name", "n", "dur_us"], by="dur_us"),
            ),
        ),
        time_at_stake_ms=bounded_ms(retry_us, f.window_us),
        confidence="low",
        scope="all ranks",
    )


def growth_steps(f: TraceFacts) -> pd.DataFrame:
    """The ``aten::cat`` calls of the main host thread that grow a buffer (``analysis.allocations``), placed."""
    from workbench.analysis.allocations import growth_chains
    from workbench.hypotheses.rules.host_ops import placed_main_ops

    cache = f.__dict__.setdefault("_derived", {})
    if "growth_steps" not in cache:
        cache["growth_steps"] = growth_chains(placed_main_ops(f))
    return cache["growth_steps"]


@dataclass(frozen=True)
class BufferGrownByConcatenationLimits(Limits):
    """The thresholds of ``buffer_grown_by_concatenation``."""

    min_steps_per_call: float = 3.0
    min_time_pct: float = 10.0


@dataclass(frozen=True, kw_only=True)
class BufferGrownFinding(Finding):
    steps_per_call: float  # growth steps (a cat fed its previous output) per traced call
    n_steps: int  # growth steps in the trace
    n_chains: int  # chains of them (one per grown buffer)
    written_numel: float  # elements the cats write (every output in full)
    kept_numel: float  # elements a preallocated buffer writes once (each chain's final size)
    growth_ms: float  # the growth steps' summed time
    share_pct: float  # that time, of the trace's window


BUFFER_GROWN_WORDS = Words(
    title="A buffer grown by concatenation: {steps_per_call:.0f} torch.cat calls per call, each copying all before it",
    observed="{n_steps} growth steps in {n_chains} chain(s) write {written_numel:,.0f} elements to keep "
    "{kept_numel:,.0f}; they take {growth_ms:.2f} ms ({share_pct:.0f}% of the trace)",
    mechanism="Each cat allocates a fresh buffer one chunk larger than the last and copies everything gathered so "
    "far into it: the allocations (fresh pages, on CPU mmap and page faults above the allocator's "
    "threshold) and the copies grow with the square of the chunk count.",
    predicted_effect="collecting the chunks in a list and concatenating once (or writing into a preallocated buffer) "
    "writes each element once; the cat time falls by about the removable fraction",
    falsifier="collect the chunks in a Python list and call torch.cat once at the end: if the time per call does "
    "not fall, the growth was not the cost (no variant in the registry rewrites this: it is your own rewrite)",
    confounders=("the chunks may legitimately depend on the buffer so far (then preallocate and fill slices)",),
)


@rule(
    "buffer_grown_by_concatenation",
    category="allocation_churn",
    scope="trace",
    limits=BufferGrownByConcatenationLimits,
    finding=BufferGrownFinding,
    words=BUFFER_GROWN_WORDS,
)
def buffer_grown_by_concatenation(f: TraceFacts, limits: BufferGrownByConcatenationLimits) -> BufferGrownFinding | None:
    """A buffer is grown by concatenation in a loop: every step allocates a larger buffer and copies all of it."""
    from workbench.analysis.allocations import growth_summary

    steps = growth_steps(f)
    calls = max(1, f.n_steps)
    total = f.window_us
    summary = growth_summary(steps)
    share = pct(summary["dur_us"], total)
    if summary["steps"] / calls < limits.min_steps_per_call or share < limits.min_time_pct:
        return None
    removable = summary["dur_us"] * summary["removable_fraction"]
    by = steps.assign(step=np.arange(len(steps))).head(6)
    return BufferGrownFinding(
        steps_per_call=summary["steps"] / calls,
        n_steps=int(summary["steps"]),
        n_chains=int(summary["chains"]),
        written_numel=summary["written_numel"],
        kept_numel=summary["kept_numel"],
        growth_ms=summary["dur_us"] / 1e3,
        share_pct=share,
        evidence=(
            Evidence(
                "growth_steps_per_call",
                summary["steps"] / calls,
                "cats",
                limits.min_steps_per_call,
                ">=",
                "cpu_ops (a cat fed its previous output)",
                rows=rows(by, ["step", "input_dims", "out_numel", "dur_us"]),
            ),
            Evidence("growth_time_pct", share, "%", limits.min_time_pct, ">=", "cpu_ops"),
            Evidence(
                "removable_fraction",
                summary["removable_fraction"],
                "fraction",
                source="1 - elements kept / elements written",
            ),
        ),
        time_at_stake_ms=bounded_ms(removable, total),
        confidence="high" if summary["removable_fraction"] > 0.5 else "medium",
        scope="host thread",
    )
