"""Operator time placed against the roofline from analytic work (``workbench.hypotheses.roofline``, placing
through ``workbench.analysis.roofline``: memory / compute only away from the ridge; above the roof flagged):
memory-streaming ops, whose back-to-back chains are fusion candidates, vs arithmetic-heavy ops
near the compute roof. CPU-only traces (on a GPU trace the kernel rules judge this)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from workbench.analysis.roofline import ROOF_TOLERANCE
from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.hypothesis import Evidence
from workbench.hypotheses.registry import Limits, rule
from workbench.hypotheses.rules._common import bounded_ms, fusion_fixes, pct, rows
from workbench.hypotheses.rules.host_ops import placed_main_ops, windows
from workbench.hypotheses.words import Finding, Words

MATRIX_BACKWARD = re.compile(
    r"(?:Addmm|Mm|Bmm|Baddbmm|Addbmm|Matmul|Linear|Convolution\w*|Conv\w*|"
    r"ScaledDotProduct\w*|\w*Attention\w*)Backward\d*$"
)


def is_matrix_op(name: str) -> bool:
    """A GEMM, convolution or attention op, or the autograd node of one (``...: AddmmBackward0``)."""
    from workbench.hypotheses.roofline import MATRIX_OPS

    return bool(MATRIX_OPS.match(name) or MATRIX_BACKWARD.search(name))


def typical_share_pct(part: pd.DataFrame, wins: list[tuple[float, float]], total_us: float) -> float:
    """The share (%) of the measured time that ``part`` (ops with ts_us and dur_us) takes in a typical call:
    with 4 or more calls (windows) the median over the calls of each call's share, so that a call stretched by
    a pause (preemption on a loaded machine, a garbage collection) does not dilute what every other call
    shows; with fewer, the share of the whole."""
    if part.empty:
        return 0.0
    if len(wins) < 4:
        return pct(part["dur_us"].sum(), total_us)
    from workbench.analysis.intervals import covered_within

    a = np.array([w[0] for w in wins], dtype=float)
    b = np.array([w[1] for w in wins], dtype=float)
    starts = part["ts_us"].to_numpy(dtype=float)
    inside = covered_within(a, b, (starts, starts + part["dur_us"].to_numpy(dtype=float)))
    return float(np.median(np.where(b > a, 100.0 * inside / np.maximum(b - a, 1e-12), 0.0)))


def _ceiling_row(f: TraceFacts) -> tuple[dict, ...]:
    c = f.ceiling
    return ({"memory_gbps": c.memory_gbps, "peak_gflops": c.peak_gflops, "kind": c.kind, "ceiling": c.source},)


def _by_op(ops: pd.DataFrame) -> pd.DataFrame:
    return ops.groupby("name", as_index=False, observed=True).agg(
        n=("dur_us", "size"), dur_us=("dur_us", "sum"), roof_us=("roof_us", "sum")
    )


@dataclass(frozen=True)
class CpuMemoryBoundOpsLimits(Limits):
    """The thresholds of ``cpu_memory_bound_ops``."""

    min_share_pct: float = 50.0
    min_ops_per_call: float = 1.0


@dataclass(frozen=True, kw_only=True)
class CpuMemoryBoundOpsFinding(Finding):
    share_pct: float  # typical share of the measured time in memory-bound ops
    ops_per_call: float  # memory-bound ops per call (step)
    memory_ms: float  # their summed time
    ridge_flop_per_byte: float  # the device ceiling's ridge point
    matrix_ms: float = 0.0  # of it, matrix ops at low intensity (not fusable)


CPU_MEMORY_BOUND_OPS_WORDS = Words(
    title="{share_pct:.0f}% of the time is in memory-streaming ops",
    observed="{ops_per_call:.1f} memory-bound ops per call (elementwise, reductions, norms, copies), "
    "{memory_ms:.2f} ms in all",
    mechanism="Each op reads and writes whole tensors doing little arithmetic per byte (below the ridge of "
    "{ridge_flop_per_byte:.0f} FLOP/byte): bandwidth sets their time, and a chain re-reads "
    "what the previous op wrote.",
    predicted_effect="fusing the chain into one pass (torch.compile, a Triton kernel) leaves about one pass over memory",
    falsifier="compile the function: if time per call does not drop, the ops were not bandwidth-limited or not fusable",
    confounders=(
        "work is analytic (shapes and dtypes), not measured counters",
        "ops without a formula are placed by name (copies, fills, gathers)",
    ),
    notes={
        "matrix": "{matrix_ms:.2f} ms of it is matrix ops at low intensity (small batches stream their weights): "
        "memory bound, but not fused away; larger batches raise their intensity",
    },
)


@rule(
    "cpu_memory_bound_ops",
    category="memory_bound",
    scope="trace",
    limits=CpuMemoryBoundOpsLimits,
    finding=CpuMemoryBoundOpsFinding,
    words=CPU_MEMORY_BOUND_OPS_WORDS,
)
def cpu_memory_bound_ops(f: TraceFacts, limits: CpuMemoryBoundOpsLimits) -> CpuMemoryBoundOpsFinding | None:
    """Most operator time is in ops whose roof time comes from bytes moved, not FLOPs."""
    ops = placed_main_ops(f)
    total = sum(b - a for a, b in windows(f, ops))
    mem = ops[ops["bound"] == "memory"]
    # time spent faulting in fresh large buffers is allocation (large_allocations_repeat), not streaming
    from workbench.hypotheses.rules.allocation import allocation_excess_us

    faults = allocation_excess_us(f).reindex(mem.index).fillna(0.0) if not mem.empty else pd.Series(dtype=float)
    mem = mem.assign(dur_us=(mem["dur_us"] - faults).clip(lower=0.0)) if not mem.empty else mem
    # a cat that grows a buffer (out = cat([out, chunk])) is allocation churn, not a pass to fuse; so is a copy
    # or fill into a large fresh buffer every call (a backup clone, a mask built anew): no fusion removes it,
    # not making the buffer anew does (buffer_grown_by_concatenation, large_allocations_repeat)
    from workbench.hypotheses.rules.allocation import fresh_copy_or_fill_ops, growth_steps

    made = growth_steps(f).index.union(fresh_copy_or_fill_ops(f))
    mem = mem.drop(index=made.intersection(mem.index))
    share = typical_share_pct(mem, windows(f, ops), total)
    calls = max(1, f.n_steps)
    per_call = len(mem) / calls
    if mem.empty or share < limits.min_share_pct or per_call < limits.min_ops_per_call:
        return None
    # fusing a chain of n passes over the same data leaves about one pass. Matrix ops (GEMM, convolution,
    # attention, and their backward) are memory bound at small sizes (a batch of 2 streams the weights) but
    # are not fused into a chain: their time is memory bound, not saveable by fusion
    fusable = mem[~mem["name"].astype(str).map(is_matrix_op).to_numpy(dtype=bool)]
    fusable_per_call = len(fusable) / calls
    saveable = float(fusable["dur_us"].sum()) * (1 - 1 / max(1.0, fusable_per_call))
    matrix_us = float(mem["dur_us"].sum() - fusable["dur_us"].sum())
    return CpuMemoryBoundOpsFinding(
        share_pct=share,
        ops_per_call=per_call,
        memory_ms=mem["dur_us"].sum() / 1e3,
        ridge_flop_per_byte=f.ceiling.ridge_flops_per_byte,
        matrix_ms=matrix_us / 1e3,
        notes=("matrix",) if matrix_us > 0 else (),
        evidence=(
            Evidence(
                "memory_bound_time_pct",
                share,
                "%",
                limits.min_share_pct,
                source="cpu_ops + analytic work",
                rows=rows(_by_op(mem), ["name", "n", "dur_us", "roof_us"], by="dur_us"),
            ),
            Evidence("memory_ops_per_call", per_call, "ops", limits.min_ops_per_call, ">=", "cpu_ops"),
            Evidence(
                "ridge_flop_per_byte",
                f.ceiling.ridge_flops_per_byte,
                "FLOP/byte",
                source="device ceiling",
                rows=_ceiling_row(f),
            ),
        ),
        time_at_stake_ms=bounded_ms(saveable / calls, total / calls),
        # one pass per call leaves nothing to fuse: the op may already run at its roof
        confidence="high" if share > 75 and fusable_per_call >= 2 else "medium",
        suggested_variants=fusion_fixes(set(fusable["name"].astype(str)), around=set(ops["name"].astype(str))),
        scope="host thread",
    )


@dataclass(frozen=True)
class CpuComputeBoundOpsLimits(Limits):
    """The thresholds of ``cpu_compute_bound_ops``."""

    min_share_pct: float = 50.0


@dataclass(frozen=True, kw_only=True)
class CpuComputeBoundOpsFinding(Finding):
    share_pct: float  # typical share of the measured time in compute-bound ops
    ops_per_call: float  # compute-bound (matrix) ops per call (step)
    ridge_flop_per_byte: float  # the device ceiling's ridge point
    compute_ms: float  # their summed time
    achieved_gflops: float = float("nan")  # analytic FLOPs / measured time (NaN: no op with a FLOP count)
    ceiling_kind: str = ""  # the kind of device ceiling (its peak is what they are held against)
    peak_gflops: float = 0.0  # the ceiling's peak


_CPU_COMPUTE_CONFOUNDERS = (
    "the intensity is analytic, not measured",
    "forward convolutions whose stride/padding the trace did not record are placed by name",
)
_WITHIN_ROOF = Words(
    title="{share_pct:.0f}% of the time is in arithmetic-heavy matrix ops",
    observed="{ops_per_call:.1f} matrix ops per call above the ridge ({ridge_flop_per_byte:.0f} FLOP/byte), "
    "{compute_ms:.2f} ms in all",
    mechanism="These ops do many FLOPs per byte moved; the arithmetic units, not memory or dispatch, set their time.",
    predicted_effect="lower precision (bf16 autocast, TF32 on GPU) or less arithmetic is the only lever; fusion will "
    "not help",
    falsifier="run under bf16 autocast (the autocast_bf16 fix: torch.autocast('cpu', dtype=torch.bfloat16)): if "
    "matmul time does not fall, they were not compute-limited (compiling, which fuses, does not touch this mechanism)",
    confounders=_CPU_COMPUTE_CONFOUNDERS,
    suggested_variants=("autocast_bf16",),
)
CPU_COMPUTE_BOUND_OPS_WORDS = {
    # the ops achieve no more than the ceiling allows (or no FLOP count says what they achieve)
    "within_roof": _WITHIN_ROOF,
    # more than the roof allows: the ceiling (a default?) or the counts are wrong, not a win (said first)
    "above_roof": replace(
        _WITHIN_ROOF,
        confounders=(
            "the ops achieve {achieved_gflops:.0f} GFLOP/s, above the {ceiling_kind} ceiling's "
            "{peak_gflops:.0f} GFLOP/s: an anomaly (wrong ceiling or counts); "
            "measure the ceiling (workbench.devices.measure_cpu_ceiling) before trusting this",
            *_CPU_COMPUTE_CONFOUNDERS,
        ),
    ),
}


@rule(
    "cpu_compute_bound_ops",
    category="compute_bound",
    scope="trace",
    limits=CpuComputeBoundOpsLimits,
    finding=CpuComputeBoundOpsFinding,
    words=CPU_COMPUTE_BOUND_OPS_WORDS,
)
def cpu_compute_bound_ops(f: TraceFacts, limits: CpuComputeBoundOpsLimits) -> CpuComputeBoundOpsFinding | None:
    """Most operator time is in ops whose roof time comes from FLOPs (matrix work above the ridge)."""
    ops = placed_main_ops(f)
    total = sum(b - a for a, b in windows(f, ops))
    comp = ops[ops["bound"] == "compute"]
    share = typical_share_pct(comp, windows(f, ops), total)
    if comp.empty or share < limits.min_share_pct:
        return None
    by = comp.groupby(["name", "input_dims"], as_index=False, observed=True).agg(
        n=("dur_us", "size"), dur_us=("dur_us", "sum"), roof_us=("roof_us", "sum")
    )
    calls = max(1, f.n_steps)
    known = comp["flops"].notna()
    achieved = (comp.loc[known, "flops"].sum() / comp.loc[known, "dur_us"].sum() / 1e3) if known.any() else float("nan")
    ev = [
        Evidence(
            "compute_bound_time_pct",
            share,
            "%",
            limits.min_share_pct,
            source="cpu_ops + analytic work",
            rows=rows(by, ["name", "input_dims", "n", "dur_us", "roof_us"], by="dur_us"),
        )
    ]
    above = achieved == achieved and achieved > f.ceiling.peak_gflops * (1 + ROOF_TOLERANCE)
    if achieved == achieved:
        ev.append(
            Evidence(
                "achieved_gflops",
                achieved,
                "GFLOP/s",
                f.ceiling.peak_gflops,
                "<=" if not above else ">",
                source="analytic work / measured time, against the ceiling's peak",
                rows=_ceiling_row(f),
            )
        )
    return CpuComputeBoundOpsFinding(
        branch="above_roof" if above else "within_roof",
        share_pct=share,
        ops_per_call=len(comp) / calls,
        ridge_flop_per_byte=f.ceiling.ridge_flops_per_byte,
        compute_ms=comp["dur_us"].sum() / 1e3,
        achieved_gflops=achieved,
        ceiling_kind=f.ceiling.kind,
        peak_gflops=f.ceiling.peak_gflops,
        evidence=tuple(ev),
        time_at_stake_ms=bounded_ms(comp["dur_us"].sum() / 2 / calls, total / calls),
        confidence="low" if above else "medium",
        scope="host thread",
    )
