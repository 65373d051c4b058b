"""Memory footprint: what holds the peak (``workbench.analysis.memory``). These rules remove bytes, not
time: each states its stake in bytes (the ``bytes_at_stake`` evidence, and the title); ``time_at_stake_ms``
is 0, so they never outrank a time finding. ``memory_hypotheses`` ranks them by bytes at stake.

- ``activations_dominate_peak``: tensors made in forward and kept (for backward, or by autograd) hold most of
  the peak; named by the module and source line that made most of them.
- ``memory_leak_across_steps``: allocated bytes grow step after step by blocks made in a step and never freed.
- ``temporary_at_peak``: the allocation that makes the peak is an out-of-place elementwise op whose input
  (the same size) is freed right after it: the in-place form would not have allocated it.
- ``allocator_fragmentation``: reserved memory far above allocated at the peak (cached, split segments).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from workbench.analysis import memory as mem
from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.hypothesis import Evidence, Hypothesis
from workbench.hypotheses.registry import Limits, NotJudged, rule
from workbench.hypotheses.words import Finding, Words

MIB = float(1 << 20)
INPLACE_OPS = frozenset(
    {
        "aten::add",
        "aten::sub",
        "aten::mul",
        "aten::div",
        "aten::relu",
        "aten::sigmoid",
        "aten::tanh",
        "aten::exp",
        "aten::neg",
        "aten::clamp",
        "aten::clamp_min",
        "aten::clamp_max",
        "aten::pow",
        "aten::sqrt",
        "aten::rsqrt",
        "aten::abs",
        "aten::silu",
        "aten::hardtanh",
        "aten::leaky_relu",
        "aten::elu",
        "aten::log",
        "aten::sin",
        "aten::cos",
        "aten::masked_fill",
        "aten::addcmul",
        "aten::addcdiv",
        "aten::lerp",
        "aten::square",
        "aten::reciprocal",
        "aten::floor",
        "aten::ceil",
        "aten::round",
        "aten::hardswish",
        "aten::fill",
        "aten::where",
        "aten::threshold",
    }
)
_CACHE: dict[int, tuple[Any, dict[str, Any]]] = {}


def _analysis(f: TraceFacts) -> dict[str, Any]:
    """The memory events, peak and growth of the facts' trace, computed once per facts object."""
    hit = _CACHE.get(id(f))
    if hit is not None and hit[0] is f:
        return hit[1]
    if f.memory is None or f.memory.empty:
        raise NotJudged("no allocator events in the trace (profile with memory=True, or profile_memory=True)")
    subject = f.subject
    events = mem.memory_events(subject)
    out = {
        "events": events,
        "peak": mem.memory_peak(subject, events=events),
        "growth": mem.memory_growth(subject, events=events),
    }
    _CACHE.clear()
    _CACHE[id(f)] = (f, out)
    return out


def _has_backward(events: pd.DataFrame) -> bool:
    return bool((events.get("phase", pd.Series(dtype=object)) == "backward").any())


def _autograd_forward(f: TraceFacts) -> bool:
    """Forward ops recorded by autograd (a ``Sequence number``): grad mode was on."""
    ops = f.cpu_ops
    return bool(len(ops) and "sequence_number" in ops and (ops["sequence_number"].to_numpy() >= 0).any())


def _holding_module(acts: pd.DataFrame, act_bytes: float) -> str:
    """The deepest ``nn.Module`` path whose blocks (its own and its children's) hold at least half the
    activation bytes; "" when none does."""
    sums: dict[str, float] = {}
    for path, nbytes in zip(acts["module"].astype(str), acts["bytes"].to_numpy(np.float64)):
        parts = [p for p in path.split("/") if p]
        for i in range(1, len(parts) + 1):
            key = "/".join(parts[:i])
            sums[key] = sums.get(key, 0.0) + float(nbytes)
    held = [k for k, v in sums.items() if v >= 0.5 * act_bytes]
    return max(held, key=lambda k: (k.count("/"), sums[k])) if held else ""


@dataclass(frozen=True)
class ActivationsDominatePeakLimits(Limits):
    """The thresholds of ``activations_dominate_peak``."""

    min_share: float = 0.5
    min_bytes: int = 1 << 20


@dataclass(frozen=True, kw_only=True)
class ActivationsDominatePeakFinding(Finding):
    share_fraction: float  # the activations' bytes over the peak
    activation_mib: float  # activation bytes live at the peak
    peak_mib: float  # the peak (allocated, or live when higher)
    device: str  # the device of the peak
    module: str  # the module holding most of them ("(no module)" when none)
    where: str  # that module, with the source line that made most of them in parentheses when known
    module_mib: float  # the activation bytes made in that module


_ACTIVATIONS = Words(
    title="Activations hold {share_fraction:.0%} of the peak ({activation_mib:,.1f} MiB); most from {where}",
    observed="peak {peak_mib:,.1f} MiB on {device}; activations live at it {activation_mib:,.1f} MiB, "
    "{module_mib:,.1f} MiB of them made in {where}",
    mechanism="Forward outputs are kept alive for the backward pass (autograd saves them), so the peak "
    "holds every layer's activations at once.",
    predicted_effect="activation checkpointing (torch.utils.checkpoint) of {module}, a smaller micro-batch lowers "
    "the peak by up to {activation_mib:,.1f} MiB (recompute costs time)",
    falsifier="profile again with the module checkpointed (or a half micro-batch): if the peak does not fall "
    "by about the activations' bytes, they were not what held it",
    confounders=("the peak moment may differ between steps",),
    scope="{device}: {module}",
)
ACTIVATIONS_WORDS = {
    "backward": _ACTIVATIONS,  # a backward pass ran: autograd keeps forward outputs for it
    "no_backward": replace(  # grad mode on, but nothing runs backward
        _ACTIVATIONS,
        mechanism="Grad mode is on without a backward: autograd keeps forward tensors alive for a graph never used.",
        predicted_effect="torch.inference_mode() (no gradient is needed: nothing runs backward) lowers the peak by "
        "up to {activation_mib:,.1f} MiB (recompute costs time)",
    ),
}


@rule(
    "activations_dominate_peak",
    category="memory_footprint",
    scope="trace",
    limits=ActivationsDominatePeakLimits,
    finding=ActivationsDominatePeakFinding,
    words=ACTIVATIONS_WORDS,
)
def activations_dominate_peak(
    f: TraceFacts, limits: ActivationsDominatePeakLimits
) -> ActivationsDominatePeakFinding | None:
    """Tensors made in forward and kept past their op hold most of the peak."""
    a = _analysis(f)
    peak, events = a["peak"], a["events"]
    if not len(peak.table):
        raise NotJudged("; ".join(peak.notes) or "no blocks could be paired at the peak")
    backward = _has_backward(events)
    if not backward and not _autograd_forward(f):
        return None  # no gradient anywhere: forward tensors are not kept for a backward
    live = peak.top(len(peak.table))
    acts = live[live["category"] == "activation"]
    act_bytes = float(acts["bytes"].sum())
    total = float(max(peak.peak_bytes, peak.live_bytes, 1))
    share = act_bytes / total
    if share < limits.min_share or act_bytes < limits.min_bytes:
        return None
    by = (
        acts.assign(module=acts["module"].replace("", "(no module)"))
        .groupby(["module", "location"], as_index=False)["bytes"]
        .sum()
        .sort_values("bytes", ascending=False)
    )
    module = _holding_module(acts, act_bytes)
    inside = acts[(acts["module"] == module) | acts["module"].str.startswith(module + "/")] if module else acts
    location = str(inside.sort_values("bytes", ascending=False)["location"].iloc[0]) if len(inside) else ""
    module_bytes = float(inside["bytes"].sum())
    holder = module or "(no module)"
    return ActivationsDominatePeakFinding(
        branch="backward" if backward else "no_backward",
        share_fraction=share,
        activation_mib=act_bytes / MIB,
        peak_mib=total / MIB,
        device=str(peak.device),
        module=holder,
        where=holder + (f" ({location})" if location else ""),
        module_mib=module_bytes / MIB,
        evidence=(
            Evidence(
                "activation_share_of_peak",
                share,
                "fraction",
                limits.min_share,
                ">=",
                "memory",
                rows=tuple(
                    {"module": str(r.module), "location": str(r.location), "bytes": int(r.bytes)}
                    for r in by.head(5).itertuples()
                ),
            ),
            Evidence("bytes_at_stake", act_bytes, "bytes", limits.min_bytes, ">=", "memory"),
        ),
        time_at_stake_ms=0.0,
        confidence="high" if share >= 0.7 else "medium",
    )


@dataclass(frozen=True)
class MemoryLeakAcrossStepsLimits(Limits):
    """The thresholds of ``memory_leak_across_steps``."""

    min_growth_bytes: int = 64 << 10
    min_growing_fraction: float = 0.99


@dataclass(frozen=True, kw_only=True)
class MemoryLeakAcrossStepsFinding(Finding):
    growth_mib: float  # allocated memory grown per step
    where: str  # the module (else the top-level op) that made the first kept blocks
    location: str  # their source line ("" when not recorded: no part "located")
    n_growing: int  # steps after the first that grew allocated memory
    n_steps: int  # steps after the first
    device: str  # the device that grew
    kept_mib: float  # bytes made in a step and never freed, per step
    median_kept_blocks: int  # blocks kept per step (median)


LEAK_WORDS = Words(
    title="Memory grows {growth_mib:,.1f} MiB every step: blocks from {where}{located} are never freed",
    observed="{n_growing} of {n_steps} steps after the first grew allocated memory on {device}, {kept_mib:,.1f} MiB "
    "per step kept (median {median_kept_blocks} block(s) per step)",
    mechanism="Something holds a reference to a tensor made each call (a Python list that keeps outputs, a "
    "loss kept with its graph, a cache keyed per call): the allocator can never free it.",
    predicted_effect="dropping the reference (store .item() or .detach().cpu(), clear the list, del the loss) "
    "keeps memory flat across steps; left alone it runs out of memory after enough steps",
    falsifier="run twice as many steps: a leak keeps growing by the same amount; a cache or warm-up plateaus",
    confounders=("a cache that fills over the first steps grows too, then stops",),
    parts={"located": " at {location}"},  # where the kept blocks' source line was recorded
    scope="{device}: {where}",
)


@rule(
    "memory_leak_across_steps",
    category="memory_footprint",
    scope="trace",
    limits=MemoryLeakAcrossStepsLimits,
    finding=MemoryLeakAcrossStepsFinding,
    words=LEAK_WORDS,
)
def memory_leak_across_steps(f: TraceFacts, limits: MemoryLeakAcrossStepsLimits) -> MemoryLeakAcrossStepsFinding | None:
    """Allocated bytes grow every step by blocks made in the step and never freed."""
    a = _analysis(f)
    g = a["growth"]
    if g.steps < 3:
        raise NotJudged(g.notes[0] if g.notes else "fewer than three ProfilerStep# spans with memory events")
    later = g.table.iloc[1:]
    growing = float((later["growth_bytes"] > 0).mean()) if len(later) else 0.0
    kept = float(g.kept_per_step_bytes)
    if (
        growing < limits.min_growing_fraction
        or g.growth_per_step_bytes < limits.min_growth_bytes
        or kept < limits.min_growth_bytes
    ):
        return None
    kept_rows = later[later["kept_bytes"] > 0]
    top = kept_rows.iloc[0] if len(kept_rows) else later.iloc[0]
    where = top["module"] or top["top_op"] or "(no op)"
    stake = float(later["growth_bytes"].sum())
    return MemoryLeakAcrossStepsFinding(
        growth_mib=g.growth_per_step_bytes / MIB,
        where=str(where),
        location=str(top["location"]),
        n_growing=int((later["growth_bytes"] > 0).sum()),
        n_steps=len(later),
        device=str(g.device),
        kept_mib=kept / MIB,
        median_kept_blocks=int(later["kept_blocks"].median()),
        parts=("located",) if top["location"] else (),
        evidence=(
            Evidence(
                "growth_per_step_bytes",
                g.growth_per_step_bytes,
                "bytes",
                limits.min_growth_bytes,
                ">=",
                "memory",
                rows=tuple(
                    {
                        "step": int(r.step),
                        "growth_bytes": int(r.growth_bytes),
                        "kept_bytes": int(r.kept_bytes),
                        "top_op": str(r.top_op),
                        "location": str(r.location),
                    }
                    for r in g.table.itertuples()
                ),
            ),
            Evidence("steps_growing_fraction", growing, "fraction", limits.min_growing_fraction, ">=", "memory"),
            Evidence("bytes_at_stake", stake, "bytes", source="memory"),
        ),
        time_at_stake_ms=0.0,
        confidence="high",
    )


@dataclass(frozen=True)
class TemporaryAtPeakLimits(Limits):
    """The thresholds of ``temporary_at_peak``."""

    min_share: float = 0.1
    min_bytes: int = 256 << 10
    lookahead_events: int = 4


@dataclass(frozen=True, kw_only=True)
class TemporaryAtPeakFinding(Finding):
    op_name: str  # the out-of-place op whose output makes the peak ("aten::add")
    function_name: str  # its name without the namespace ("add")
    inplace_name: str  # its in-place form ("add_")
    where: str  # its source line, else module, else the op's name
    size_mib: float  # its output (and the freed input)
    peak_mib: float  # the allocated peak
    device: str  # the device of the peak
    n_events_later: int  # allocator events from the peak to the free of the same size


TEMPORARY_WORDS = Words(
    title="A temporary at the peak: {op_name} allocates {size_mib:,.1f} MiB while its input of the same size dies "
    "right after ({where})",
    observed="the peak on {device} ({peak_mib:,.1f} MiB) is reached by {op_name}'s output of {size_mib:,.1f} MiB; "
    "a block of {size_mib:,.1f} MiB is freed {n_events_later} event(s) later",
    mechanism="An out-of-place op keeps its input and its output alive together for a moment; when the input "
    "is not used again, the in-place form writes into it and the second buffer never exists.",
    predicted_effect="x.{inplace_name}(...) (or out=) instead of x = {function_name}(x, ...) lowers the peak by "
    "{size_mib:,.1f} MiB",
    falsifier="use {inplace_name} there and profile again: if the peak does not fall by {size_mib:,.1f} MiB, the "
    "input was still referenced (or autograd needs it: in-place is then refused)",
    confounders=("in-place is not allowed where autograd saved the input for backward",),
    scope="{device}: {where}",
)


@rule(
    "temporary_at_peak",
    category="memory_footprint",
    scope="trace",
    limits=TemporaryAtPeakLimits,
    finding=TemporaryAtPeakFinding,
    words=TEMPORARY_WORDS,
)
def temporary_at_peak(f: TraceFacts, limits: TemporaryAtPeakLimits) -> TemporaryAtPeakFinding | None:
    """The allocation that makes the peak is an out-of-place elementwise op whose same-size input is freed
    right after: an in-place form would not allocate it."""
    a = _analysis(f)
    events, peak = a["events"], a["peak"]
    timeline = mem.memory_timeline(f.subject, events=events)
    dev = timeline.table["device"].to_numpy() == peak.device
    rows_dev = np.flatnonzero(dev)
    if not len(rows_dev):
        return None
    at = rows_dev[int(np.argmax(timeline.table["allocated_bytes"].to_numpy()[rows_dev]))]
    ev = events.iloc[at]
    size = int(ev["bytes"])
    op = str(ev.get("op_name", ""))
    top_op = str(ev.get("top_op", ""))
    name = top_op if top_op in INPLACE_OPS else op
    if size <= 0 or name not in INPLACE_OPS:
        return None
    share = size / max(1.0, float(peak.peak_bytes))
    if share < limits.min_share or size < limits.min_bytes:
        return None
    after = rows_dev[rows_dev > at][: int(limits.lookahead_events)]
    freed = [int(i) for i in after if int(events["bytes"].iloc[i]) == -size]
    if not freed:
        return None
    where = str(ev.get("location", "")) or str(ev.get("module", "")) or name
    return TemporaryAtPeakFinding(
        op_name=name,
        function_name=name.split("::")[-1],
        inplace_name=name.split("::")[-1] + "_",
        where=where,
        size_mib=size / MIB,
        peak_mib=peak.peak_bytes / MIB,
        device=str(peak.device),
        n_events_later=len(after[after <= freed[0]]),
        evidence=(
            Evidence(
                "temporary_share_of_peak",
                share,
                "fraction",
                limits.min_share,
                ">=",
                "memory",
                rows=({"op": name, "bytes": size, "location": where, "ts_us": float(ev["ts_us"])},),
            ),
            Evidence("bytes_at_stake", float(size), "bytes", limits.min_bytes, ">=", "memory"),
        ),
        time_at_stake_ms=0.0,
        confidence="medium",
    )


@dataclass(frozen=True)
class AllocatorFragmentationLimits(Limits):
    """The thresholds of ``allocator_fragmentation``."""

    min_ratio: float = 1.5
    min_gap_bytes: int = 256 << 20


@dataclass(frozen=True, kw_only=True)
class AllocatorFragmentationFinding(Finding):
    ratio: float  # peak reserved over peak allocated
    gap_mib: float  # reserved but not allocated at the peak
    allocated_mib: float  # the peak allocated
    reserved_mib: float  # the peak reserved
    device: str  # the GPU that reserved most


FRAGMENTATION_WORDS = Words(
    title="Reserved memory is {ratio:.1f}x the allocated peak ({gap_mib:,.1f} MiB cached but unused)",
    observed="{device}: peak allocated {allocated_mib:,.1f} MiB, peak reserved {reserved_mib:,.1f} MiB",
    mechanism="The caching allocator keeps freed blocks in segments sized for earlier requests; changing "
    "sizes split them, and a large request cannot reuse the scattered free space.",
    predicted_effect="PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets segments grow in place: reserved "
    "falls towards allocated",
    falsifier="rerun with expandable_segments:True and compare torch.cuda.max_memory_reserved(): no drop, no "
    "fragmentation (the cache was simply warm)",
    confounders=("reserved also holds blocks freed at the end and cached for the next step",),
    scope="{device}",
)


@rule(
    "allocator_fragmentation",
    category="memory_footprint",
    scope="trace",
    limits=AllocatorFragmentationLimits,
    finding=AllocatorFragmentationFinding,
    words=FRAGMENTATION_WORDS,
)
def allocator_fragmentation(
    f: TraceFacts, limits: AllocatorFragmentationLimits
) -> AllocatorFragmentationFinding | None:
    """Reserved memory far above allocated at the peak: the caching allocator holds split, cached segments."""
    a = _analysis(f)
    devices = a["peak"].devices
    gpu = devices[(devices["device"].astype(str) != "cpu") & (devices["reserved_peak_bytes"] > 0)]
    if not len(gpu):
        raise NotJudged("no reserved totals for a GPU in the trace (CPU memory has no caching allocator segments)")
    row = gpu.sort_values("reserved_peak_bytes").iloc[-1]
    reserved, allocated = float(row["reserved_peak_bytes"]), float(max(1, row["peak_bytes"]))
    ratio, gap = reserved / allocated, reserved - allocated
    if ratio < limits.min_ratio or gap < limits.min_gap_bytes:
        return None
    return AllocatorFragmentationFinding(
        ratio=ratio,
        gap_mib=gap / MIB,
        allocated_mib=allocated / MIB,
        reserved_mib=reserved / MIB,
        device=str(row["device"]),
        evidence=(
            Evidence("reserved_over_allocated", ratio, "ratio", limits.min_ratio, ">=", "memory"),
            Evidence("bytes_at_stake", gap, "bytes", limits.min_gap_bytes, ">=", "memory"),
        ),
        time_at_stake_ms=0.0,
        confidence="medium",
    )


def bytes_at_stake(h: Hypothesis) -> float:
    for e in h.evidence:
        if e.metric == "bytes_at_stake":
            return float(e.value)
    return 0.0


def memory_hypotheses(hypotheses) -> list[Hypothesis]:
    """The memory-footprint hypotheses among ``hypotheses``, by bytes at stake (most first), the most specific
    cause (a leak, a temporary) before the general one at equal confidence."""
    order = {
        "memory_leak_across_steps": 0,
        "temporary_at_peak": 1,
        "activations_dominate_peak": 2,
        "allocator_fragmentation": 3,
    }
    found = [h for h in hypotheses if h.category == "memory_footprint"]
    return sorted(found, key=lambda h: (order.get(h.rule, 9), -bytes_at_stake(h)))


MEMORY_RULES = ("memory_leak_across_steps", "temporary_at_peak", "activations_dominate_peak", "allocator_fragmentation")


def diagnose_memory(trace: Any) -> tuple[list[Hypothesis], list[tuple[str, str]]]:
    """The memory rules on ``trace`` (a Trace or TraceFacts): their hypotheses, most specific first
    (``memory_hypotheses``; the time ranking leaves them out: they stake bytes, not time), and (rule, reason)
    for each rule that could not judge it."""
    from workbench.hypotheses.registry import registered_rule

    facts = trace if isinstance(trace, TraceFacts) else TraceFacts(trace)
    found: list[Hypothesis] = []
    notes: list[tuple[str, str]] = []
    for name in MEMORY_RULES:
        try:
            found.extend(registered_rule(name)(facts))
        except NotJudged as nj:
            notes.append((name, nj.reason))
    return memory_hypotheses(found), notes
