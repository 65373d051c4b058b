"""CPU-side rules over operator events: per-op dispatch overhead, host time outside any op,
and where op time sits against the roofline (matrix work vs memory-streaming work).

These judge the host thread that ran the most operators; on a GPU trace the same rules read
the host side, on a CPU-only trace they are the whole picture.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from workbench.analysis.intervals import covered_within, union
from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.hypothesis import Evidence
from workbench.hypotheses.registry import Limits, NotJudged, rule
from workbench.hypotheses.roofline import OVERHEAD_ROOF_FRACTION
from workbench.hypotheses.rules._common import bounded_ms, pct, rows
from workbench.hypotheses.words import Finding, Words

PROFILER_NOISE = re.compile(r"^(?:ProfilerStep|workbench|Torch-Compiled Region|CompiledFunction|##)")


def main_thread_ops(f: TraceFacts) -> pd.DataFrame:
    """Top-level operators of the busiest host thread (profiler/step markers excluded).

    Only for CPU-only traces: with a GPU, operator time on the host is launch time, and the
    device-side rules judge where time went."""
    if f.has_gpu:
        raise NotJudged("the trace has GPU activity: host operator time is judged through kernels and launches")
    ops = f.require_cpu_ops()
    ops = ops[_under_wrappers_only(ops)]
    if ops.empty:
        raise NotJudged("no top-level CPU operators in the trace")
    counts = ops.groupby(["rank", "tid"], observed=True).size()
    rank, tid = counts.idxmax()
    return ops[(ops["rank"] == rank) & (ops["tid"] == tid)].sort_values("ts_us")


def _under_wrappers_only(ops: pd.DataFrame) -> np.ndarray:
    """Ops that are not markers (profiler steps, compiled-region wrappers) and whose every ancestor
    is one: the top level of the work, looking through ``Torch-Compiled Region`` and the like."""
    wrapper = ops["name"].astype(str).str.contains(PROFILER_NOISE).to_numpy()
    if "parent" not in ops or "depth" not in ops:
        return ~wrapper & (ops["depth"].to_numpy() == 0 if "depth" in ops else True)
    parent = ops["parent"].to_numpy()
    depth = ops["depth"].to_numpy()
    clear = np.zeros(len(ops), dtype=bool)  # every ancestor (and itself) is a wrapper
    order = np.argsort(depth, kind="stable")
    for i in order:  # parents come before children by depth
        p = parent[i]
        above = p < 0 or (0 <= p < len(ops) and clear[p])
        clear[i] = wrapper[i] and above
    top = np.array([(parent[i] < 0 or (0 <= parent[i] < len(ops) and clear[parent[i]])) for i in range(len(ops))])
    return ~wrapper & top


def placed_main_ops(f: TraceFacts) -> pd.DataFrame:
    """``main_thread_ops`` placed against the roofline (bound: overhead / memory / compute / unknown)."""
    cache = f.__dict__.setdefault("_derived", {})
    if "placed_main_ops" not in cache:
        from workbench.hypotheses.roofline import place_ops

        placed = place_ops(main_thread_ops(f), f.ceiling)
        cache["placed_main_ops"] = _composites_by_children(f, placed)
    return cache["placed_main_ops"]


def _composites_by_children(f: TraceFacts, placed: pd.DataFrame) -> pd.DataFrame:
    """A top-level op with no work formula of its own (an autograd backward node such as
    ``autograd::engine::evaluate_function: MmBackward0``, ``aten::gru_cell``, a module's composite op)
    is judged by the work of the ops it called: its *work frontier*, the descendants that have a
    formula with no ancestor below it that has one (so nothing is counted twice: ``aten::linear`` is
    counted, not also its ``aten::addmm``). The op keeps its inclusive time (the time that did that
    work). A frontier-less leaf descendant with no known work counts only when it is short
    (``SHORT_OP_US``); a long one leaves the op ``unknown`` (nothing is guessed).

    With the work summed: ``overhead`` when the roof time of that work is far below the op's time and
    it made at least two calls (per-op dispatch of the children sets its time), else memory /
    compute / uncertain from the summed FLOPs and bytes (``analysis.roofline.bound_of``)."""
    from workbench.analysis.roofline import ROOF_TOLERANCE, bound_of
    from workbench.hypotheses.roofline import SHORT_OP_US, place_ops

    unknown = placed["bound"].to_numpy() == "unknown"
    every = f.cpu_ops
    if not unknown.any() or "parent" not in every or not isinstance(every.index, pd.RangeIndex):
        return placed
    tops = placed.index.to_numpy()[unknown]
    frontier = _work_frontier(every, tops)
    if frontier.empty:
        return placed
    kids = place_ops(every.loc[frontier["row"].to_numpy()], f.ceiling)
    known = kids["roof_us"].notna().to_numpy()
    short = kids["dur_us"].to_numpy(dtype=float) < SHORT_OP_US
    judged = pd.DataFrame(
        {
            "top": frontier["top"].to_numpy(),
            "roof_us": np.where(known, kids["roof_us"], 0.0),
            "flops": np.where(known, kids["flops"], 0.0),
            "bytes": np.where(known, kids["bytes"], 0.0),
            "ok": known | short,
            "n": 1,
            "work": known.astype(int),
        }
    )
    per = judged.groupby("top").agg(
        roof_us=("roof_us", "sum"),
        flops=("flops", "sum"),
        bytes=("bytes", "sum"),
        ok=("ok", "all"),
        n=("n", "sum"),
        work=("work", "sum"),
    )
    per = per.reindex(tops)
    dur = placed.loc[tops, "dur_us"].to_numpy(dtype=float)
    ok = per["ok"].fillna(False).to_numpy(dtype=bool)
    roof = per["roof_us"].to_numpy(dtype=float)
    calls = per["n"].fillna(0).to_numpy()
    with_work = ok & (per["work"].fillna(0).to_numpy() > 0)
    # dispatch-bound: the children's work is far below the op's time and small a call (SHORT_OP_US at the roof)
    overhead = ok & (calls >= 2) & (roof < OVERHEAD_ROOF_FRACTION * dur) & (roof < SHORT_OP_US * np.maximum(calls, 1))
    by_work = with_work & ~overhead
    if not (overhead.any() or by_work.any()):
        return placed
    out = placed.copy()
    hit = tops[overhead]
    out.loc[hit, "bound"] = "overhead"
    out.loc[hit, "roof_us"] = roof[overhead]
    if by_work.any():
        sel = tops[by_work]
        flops, nbytes = per.loc[sel, "flops"].to_numpy(float), per.loc[sel, "bytes"].to_numpy(float)
        out.loc[sel, "flops"] = flops
        out.loc[sel, "bytes"] = nbytes
        out.loc[sel, "roof_us"] = roof[by_work]
        fraction = roof[by_work] / np.maximum(dur[by_work], 1e-9)
        out.loc[sel, "roof_fraction"] = fraction
        out.loc[sel, "above_roof"] = fraction > 1 + ROOF_TOLERANCE
        out.loc[sel, "bound"] = bound_of(flops, nbytes, f.ceiling)
    return out


def _work_frontier(every: pd.DataFrame, tops: np.ndarray) -> pd.DataFrame:
    """For each op of ``tops``: its descendants that carry the work (``row``, ``top``, ``leaf``): those
    with a work formula and no formula-bearing ancestor below the top op, and the leaves under no such
    op (their work is unknown). ``every`` has a RangeIndex and ``parent`` (row of the parent, -1 none)."""
    from workbench.analysis.work_formulas import FORMULAS

    parent = every["parent"].to_numpy()
    n = len(every)
    has_formula = every["name"].astype(str).map(lambda name: name in FORMULAS).to_numpy(dtype=bool)
    depth = every["depth"].to_numpy() if "depth" in every else np.zeros(n)
    top_of = np.full(n, -1)
    covered = np.zeros(n, dtype=bool)  # some ancestor below the top op has a formula
    is_top = np.zeros(n, dtype=bool)
    is_top[tops] = True
    has_child = np.zeros(n, dtype=bool)
    valid = (parent >= 0) & (parent < n)
    has_child[parent[valid]] = True
    for i in np.argsort(depth, kind="stable"):  # parents before children
        p = parent[i]
        if not (0 <= p < n):
            continue
        if is_top[p]:
            top_of[i] = p
        elif top_of[p] >= 0:
            top_of[i] = top_of[p]
            covered[i] = covered[p] or has_formula[p]
    under = (top_of >= 0) & ~covered
    carries = under & (has_formula | ~has_child)
    rows = np.flatnonzero(carries)
    return pd.DataFrame({"row": rows, "top": top_of[rows], "leaf": ~has_child[rows] & ~has_formula[rows]})


def windows(f: TraceFacts, ops: pd.DataFrame) -> list[tuple[float, float]]:
    """The measured windows: each step on that rank, or the span of the ops when there are none."""
    steps = f.steps[f.steps["rank"] == ops["rank"].iloc[0]] if not f.steps.empty else f.steps
    if not steps.empty:
        return [(float(a), float(a + d)) for a, d in zip(steps["ts_us"], steps["dur_us"])]
    return [(float(ops["ts_us"].min()), float(ops["end_us"].max()))]


def gaps_in_windows(ops: pd.DataFrame, wins: list[tuple[float, float]]) -> pd.DataFrame:
    """Host time inside the windows not covered by any top-level op, window by window.

    Linear in ops + windows (a trace of 20,000 steps has 20,000 windows): the ops' union is taken
    once, and each window's gaps are the pieces of its complement that the window overlaps, found
    by binary search, not by filtering every op for every window."""
    if not wins:
        return pd.DataFrame(columns=["gap_start_us", "gap_us"])
    us, ue = union(ops["ts_us"].to_numpy(dtype=float), ops["end_us"].to_numpy(dtype=float))
    free_start, free_end = np.r_[-np.inf, ue], np.r_[us, np.inf]  # the complement of the union
    a = np.array([w[0] for w in wins], dtype=float)
    b = np.array([w[1] for w in wins], dtype=float)
    lo = np.searchsorted(free_end, a, side="right")  # first free piece ending after the window starts
    hi = np.searchsorted(free_start, b, side="left")  # first free piece starting at or after its end
    counts = np.maximum(hi - lo, 0)
    window = np.repeat(np.arange(len(wins)), counts)
    piece = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts) + np.repeat(lo, counts)
    start = np.maximum(free_start[piece], a[window])
    end = np.minimum(free_end[piece], b[window])
    keep = end > start
    return pd.DataFrame({"gap_start_us": start[keep], "gap_us": (end - start)[keep]})


CACHE_LOOKUP = "TorchDynamo Cache Lookup"
LOOKUP_TOLERANCE_US = 2.0


def _after_cache_lookup(ops: pd.DataFrame, gap_starts: np.ndarray) -> np.ndarray:
    """Which gaps start where a top-level ``TorchDynamo Cache Lookup`` ends (within ``LOOKUP_TOLERANCE_US``)."""
    ends = np.sort(ops.loc[ops["name"].astype(str) == CACHE_LOOKUP, "end_us"].to_numpy(dtype=float))
    if not len(ends) or not len(gap_starts):
        return np.zeros(len(gap_starts), dtype=bool)
    i = (
        np.clip(np.searchsorted(ends, gap_starts), 1, len(ends) - 1)
        if len(ends) > 1
        else np.zeros(len(gap_starts), int)
    )
    near = np.minimum(np.abs(ends[i] - gap_starts), np.abs(ends[np.maximum(i - 1, 0)] - gap_starts))
    return near <= LOOKUP_TOLERANCE_US


def _window_total(wins) -> float:
    return float(sum(b - a for a, b in wins))


@dataclass(frozen=True)
class CpuDispatchOverheadLimits(Limits):
    """The thresholds of ``cpu_dispatch_overhead``."""

    min_ops_per_call: int = 20
    min_share_pct: float = 30.0
    short_gap_us: float = 50.0


@dataclass(frozen=True, kw_only=True)
class CpuDispatchOverheadFinding(Finding):
    ops_per_call: float  # dispatch-bound top-level ops per call
    n_overhead: int  # dispatch-bound top-level ops
    n_ops: int  # top-level ops of the thread
    over_roof_x: float = 1 / OVERHEAD_ROOF_FRACTION  # an overhead op takes over this many times its roof time
    median_us: float  # the dispatch-bound ops' median time
    share_pct: float  # they and the short gaps between them, of the measured time


DISPATCH_WORDS = Words(
    title="{ops_per_call:.0f} dispatch-bound ops per call: per-op overhead dominates",
    observed="{n_overhead} of {n_ops} top-level ops take over {over_roof_x:.0f}x their roof time "
    "(median {median_us:.1f} µs); they and the gaps between them are {share_pct:.0f}% of the measured time",
    mechanism="Each PyTorch op pays a fixed dispatch cost (Python, dispatcher, allocation, and on GPU a kernel "
    "launch) that is larger than its work at these sizes.",
    predicted_effect="fusing the ops (torch.compile) or batching them into fewer, larger ops removes most of the "
    "per-op cost",
    falsifier="compile the function: if time per call does not fall, dispatch was not the cost",
    confounders=("profiler overhead inflates very short ops (x1.2-1.35 seen)",),
    suggested_variants=("compiled", "cuda_graph"),
)


@rule(
    "cpu_dispatch_overhead",
    category="launch_overhead",
    scope="trace",
    limits=CpuDispatchOverheadLimits,
    finding=CpuDispatchOverheadFinding,
    words=DISPATCH_WORDS,
)
def cpu_dispatch_overhead(f: TraceFacts, limits: CpuDispatchOverheadLimits) -> CpuDispatchOverheadFinding | None:
    """Many ops take many times their roof time: per-op dispatch cost, not the work, fills the time."""
    ops = placed_main_ops(f)
    wins = windows(f, ops)
    total = _window_total(wins)
    calls = max(1, len(wins) if not f.steps.empty else f.n_steps)
    short = ops[ops["bound"] == "overhead"]
    g = gaps_in_windows(ops, wins)
    small_gaps = g[g["gap_us"] < limits.short_gap_us]
    # the small gaps between ops are dispatch too (Python, argument parsing): the overhead ops' share of them
    stake_us = float(short["dur_us"].sum() + small_gaps["gap_us"].sum() * len(short) / max(1, len(ops)))
    share = pct(stake_us, total)
    if len(short) / calls < limits.min_ops_per_call or share < limits.min_share_pct:
        return None
    by = short.groupby("name", as_index=False, observed=True).agg(
        n=("dur_us", "size"), median_us=("dur_us", "median"), roof_us=("roof_us", "median")
    )
    return CpuDispatchOverheadFinding(
        ops_per_call=len(short) / calls,
        n_overhead=len(short),
        n_ops=len(ops),
        median_us=short["dur_us"].median(),
        share_pct=share,
        evidence=(
            Evidence(
                "overhead_ops_per_call",
                len(short) / calls,
                "ops",
                limits.min_ops_per_call,
                ">=",
                "cpu_ops + analytic work",
                rows=rows(by, ["name", "n", "median_us", "roof_us"], by="n"),
            ),
            Evidence("overhead_time_pct", share, "%", limits.min_share_pct, source="cpu_ops"),
        ),
        time_at_stake_ms=bounded_ms(stake_us / calls, total / calls),
        confidence="high" if share > 60 else "medium",
        scope="host thread",
    )


@dataclass(frozen=True)
class CpuHostGapsLimits(Limits):
    """The thresholds of ``cpu_host_gaps``."""

    long_gap_us: float = 50.0
    min_share_pct: float = 30.0


@dataclass(frozen=True, kw_only=True)
class CpuHostGapsFinding(Finding):
    share_pct: float  # the long gaps, of the measured time
    n_gaps: int  # long gaps between top-level ops (compiles, collections and collectives taken out)
    long_gap_us: float  # the length a gap must reach to count
    gaps_ms: float  # the long gaps' summed time
    compile_ms: float = 0.0  # gaps right after a TorchDynamo cache lookup, left out (note "compiles")
    gc_ms: float = 0.0  # gap time in which gc.collect() ran, left out (note "gc")
    comm_ms: float = 0.0  # gap time while a collective ran, left out (note "collectives")


GAPS_WORDS = Words(
    title="{share_pct:.0f}% of the time is host work outside PyTorch ops",
    observed="{n_gaps} gaps of >= {long_gap_us:.0f} µs between ops, {gaps_ms:.2f} ms in total",
    mechanism="Python code, data preparation or other libraries run between tensor ops; the device (or the op "
    "stream) waits.",
    predicted_effect="moving that host work out of the loop (precompute, vectorise, DataLoader workers) removes up "
    "to the gap time",
    falsifier="time the function with the host work replaced by precomputed values: if the time does not drop, the "
    "gaps were not the cost (no variant in the registry moves host work off the critical path: that experiment is "
    "your own rewrite)",
    confounders=("ops not recorded by the profiler (custom C++ code) also show as gaps",),
    notes={
        "compiles": "{compile_ms:.2f} ms of gaps right after a TorchDynamo cache lookup (compiles) are left out",
        "gc": "{gc_ms:.2f} ms of gaps in which gc.collect() ran are left out (garbage collection pauses)",
        "collectives": "{comm_ms:.2f} ms of gaps while a collective ran are left out (waiting for the other ranks)",
    },
)


@rule(
    "cpu_host_gaps",
    category="host_bound",
    scope="trace",
    limits=CpuHostGapsLimits,
    finding=CpuHostGapsFinding,
    words=GAPS_WORDS,
)
def cpu_host_gaps(f: TraceFacts, limits: CpuHostGapsLimits) -> CpuHostGapsFinding | None:
    """Long stretches of host time inside the measured call where no PyTorch op runs."""
    ops = main_thread_ops(f)
    wins = windows(f, ops)
    total = _window_total(wins)
    calls = max(1, len(wins) if not f.steps.empty else f.n_steps)
    g = gaps_in_windows(ops, wins)
    long_gaps = g[g["gap_us"] >= limits.long_gap_us]
    # a long gap right after dynamo's cache lookup is a compile (a miss), not host work of the program:
    # the compile rules (recompiles, cold start) carry that time
    compiling = _after_cache_lookup(ops, long_gaps["gap_start_us"].to_numpy(dtype=float))
    compile_us = float(long_gaps.loc[compiling, "gap_us"].sum())
    long_gaps = long_gaps[~compiling]
    # Python's garbage collector running in a gap is a pause of some calls, not host work of the program
    # (rules/gc_pauses.py says it): the collection's time is taken out of the gaps it falls in
    from workbench.hypotheses.rules.gc_pauses import gc_spans

    starts = long_gaps["gap_start_us"].to_numpy(dtype=float)
    in_gc = covered_within(starts, starts + long_gaps["gap_us"].to_numpy(dtype=float), gc_spans(f))
    gc_us = float(in_gc.sum())
    long_gaps = long_gaps.assign(gap_us=long_gaps["gap_us"] - in_gc)
    # a gap while a collective runs (gloo's gloo:all_reduce on its worker thread after c10d::allreduce_ was
    # enqueued) is this rank waiting for the others, not host work of its program: the straggler rule
    # (rules/distributed.py) judges whom it waits for
    starts = long_gaps["gap_start_us"].to_numpy(dtype=float)
    in_comm = covered_within(starts, starts + long_gaps["gap_us"].to_numpy(dtype=float), collective_spans(f))
    comm_us = float(in_comm.sum())
    long_gaps = long_gaps.assign(gap_us=long_gaps["gap_us"] - in_comm)
    long_gaps = long_gaps[long_gaps["gap_us"] >= limits.long_gap_us]
    share = pct(long_gaps["gap_us"].sum(), total)
    if long_gaps.empty or share < limits.min_share_pct:
        return None
    # host work of the program recurs in every call; long gaps in a few calls only are pauses (an automatic
    # collection, preemption: rules/gc_pauses.py), and the typical call does not have them
    steady = _steady_share(long_gaps, wins)
    if steady is not None and steady < limits.min_share_pct:
        return None
    notes = (("compiles",) if compile_us else ()) + (("gc",) if gc_us else ()) + (("collectives",) if comm_us else ())
    return CpuHostGapsFinding(
        share_pct=share,
        n_gaps=len(long_gaps),
        long_gap_us=limits.long_gap_us,
        gaps_ms=long_gaps["gap_us"].sum() / 1e3,
        compile_ms=compile_us / 1e3,
        gc_ms=gc_us / 1e3,
        comm_ms=comm_us / 1e3,
        evidence=(
            Evidence(
                "host_gap_pct",
                share,
                "%",
                limits.min_share_pct,
                source="cpu_ops (gaps between top-level ops)",
                rows=rows(long_gaps, ["gap_start_us", "gap_us"], by="gap_us"),
            ),
        ),
        time_at_stake_ms=bounded_ms(long_gaps["gap_us"].sum() / calls, total / calls),
        notes=notes,
        confidence="high" if share > 60 else "medium",
        scope="host thread",
    )


def collective_spans(f: TraceFacts) -> tuple[np.ndarray, np.ndarray]:
    """The disjoint spans (µs) in which a collective runs on the host, on any thread: the collective CPU ops
    (``c10d::allreduce_``) and annotations (``gloo:all_reduce``, ``nccl:all_reduce``); empty without any."""
    import workbench.trace.classify as classify

    parts_lo, parts_hi = [], []
    ann = f.annotations
    if ann is not None and len(ann):
        names = ann["name"].astype(str)
        cpu_side = (ann["kind"].astype(str) != "gpu_user").to_numpy() if "kind" in ann.columns else True
        hit = ann[names.map(classify.is_collective).to_numpy(bool) & cpu_side]
        parts_lo.append(hit["ts_us"].to_numpy(dtype=float))
        parts_hi.append((hit["ts_us"] + hit["dur_us"]).to_numpy(dtype=float))
    ops = f.cpu_ops
    if ops is not None and len(ops):
        kinds = classify.host_activity_types(pd.Categorical(ops["name"].astype(str)))
        hit = ops[np.asarray(kinds) == "communication"]
        parts_lo.append(hit["ts_us"].to_numpy(dtype=float))
        parts_hi.append(hit["end_us"].to_numpy(dtype=float))
    if not parts_lo:
        return np.zeros(0), np.zeros(0)
    return union(np.concatenate(parts_lo), np.concatenate(parts_hi))


def _steady_share(long_gaps: pd.DataFrame, wins: list[tuple[float, float]]) -> float | None:
    """The long-gap share of the median window (call), in %: what a typical call spends outside ops. None
    with fewer than 4 windows (no pattern to read)."""
    if len(wins) < 4:
        return None
    a = np.array([w[0] for w in wins], dtype=float)
    b = np.array([w[1] for w in wins], dtype=float)
    starts = long_gaps["gap_start_us"].to_numpy(dtype=float)
    ends = starts + long_gaps["gap_us"].to_numpy(dtype=float)
    inside = covered_within(a, b, (starts, ends))
    return float(np.median(pct_array(inside, b - a)))


def pct_array(part: np.ndarray, whole: np.ndarray) -> np.ndarray:
    return np.where(whole > 0, 100.0 * part / np.maximum(whole, 1e-12), 0.0)
