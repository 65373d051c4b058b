"""GPU kernels placed memory- or compute-bound (from analytic work where the launching op's shapes are
known, by kernel-name family otherwise), and chains of memory-bound kernels (fusion candidates).

A kernel whose own name says GEMM, convolution or attention is never a fusion candidate, even when its
launching op's work places it under the bandwidth roof (a small GEMM): fusing elementwise passes does
not remove it, and it breaks a chain. Stakes are per rank (the largest rank's), never summed over ranks."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.gpu_roofline import PLACED_BY_WORK, family_by_name, place_kernels
from workbench.hypotheses.hypothesis import Evidence
from workbench.hypotheses.registry import Limits, rule
from workbench.hypotheses.rules._common import bounded_ms, fusion_fixes, pct, per_rank_max_us, rows, summed_over
from workbench.hypotheses.words import Finding, Words


def _compute_kernels(f: TraceFacts) -> pd.DataFrame:
    """Computation kernels placed memory- or compute-bound (``gpu_roofline.place_kernels``)."""
    cache = f.__dict__.setdefault("_derived", {})
    if "placed_kernels" not in cache:
        k = f.require_gpu()
        k = k[(k["kind"] == "kernel") & (k["kernel_type"] == "computation")]
        placed = place_kernels(k, f.cpu_ops, f.device_properties)
        matrix_name = family_by_name(placed["name"]) == "matrix"
        cache["placed_kernels"] = placed.assign(
            matrix_name=matrix_name, fusable=(placed["family"] == "memory").to_numpy() & ~matrix_name
        )
    return cache["placed_kernels"]


def _placement(k: pd.DataFrame) -> Evidence:
    """How the kernels were placed: by analytic work (shapes known) or by name (the fallback)."""
    by_work = k["placed_by"] == PLACED_BY_WORK
    return Evidence(
        "placed_by_analytic_work_pct",
        pct(k.loc[by_work, "dur_us"].sum(), k["dur_us"].sum()),
        "%",
        source="kernels -> launching op (op_index) -> analytic work; the rest by kernel name",
        rows=rows(
            k.groupby("placed_by", as_index=False).agg(n=("dur_us", "size"), dur_us=("dur_us", "sum")),
            ["placed_by", "n", "dur_us"],
            by="dur_us",
        ),
    )


@dataclass(frozen=True)
class MemoryBoundKernelsLimits(Limits):
    """The thresholds of ``memory_bound_kernels``."""

    min_share_pct: float = 40.0
    min_chain: int = 3


@dataclass(frozen=True, kw_only=True)
class MemoryBoundKernelsFinding(Finding):
    share_pct: float  # of computation-kernel time, in fusable memory-bound kernels
    n_kernels: int  # fusable memory-bound kernels
    memory_ms: float  # their summed time
    busy_ms: float  # summed computation-kernel time
    summed_over: str  # how the ranks' times were summed (empty for one rank)
    n_chains: int  # runs of >= min_chain of them in a row on a stream
    min_chain: int  # the shortest run counted


MEMORY_BOUND_KERNELS_WORDS = Words(
    title="{share_pct:.0f}% of kernel time is in memory-bound kernels",
    observed="{n_kernels} elementwise/reduction/normalisation kernels, {memory_ms:.2f} ms of "
    "{busy_ms:.2f} ms computation-kernel time{summed_over} (GEMM, convolution and attention kernels "
    "excluded); "
    "{n_chains} chains of >= {min_chain} in a row",
    mechanism="Each of these kernels streams its tensors through memory doing little arithmetic per byte; "
    "back-to-back ones re-read what the previous one wrote.",
    predicted_effect="fusing each chain into one pass (torch.compile or a Triton kernel) leaves about one kernel's "
    "time per chain",
    falsifier="compile the region: if the memory-bound kernel time does not fall, the kernels were not fusable or "
    "not bandwidth-limited",
    confounders=(
        "work is analytic (shapes) or, without shapes, read from kernel names; not measured bandwidth",
        "small kernels may be launch-bound instead",
    ),
)


@rule(
    "memory_bound_kernels",
    category="memory_bound",
    scope="trace",
    limits=MemoryBoundKernelsLimits,
    finding=MemoryBoundKernelsFinding,
    words=MEMORY_BOUND_KERNELS_WORDS,
)
def memory_bound_kernels(f: TraceFacts, limits: MemoryBoundKernelsLimits) -> MemoryBoundKernelsFinding | None:
    """Most kernel time is in memory-bound families; chains of them on a stream are fusion candidates."""
    k = _compute_kernels(f)
    busy = float(k["dur_us"].sum())
    mem = k[k["fusable"]]
    share = pct(mem["dur_us"].sum(), busy)
    if k.empty or share < limits.min_share_pct:
        return None
    chains = _chains(k, int(limits.min_chain))
    stake_us = per_rank_max_us(chains, "saveable_us") if not chains.empty else 0.0
    if stake_us <= 0:
        stake_us = per_rank_max_us(mem) / 2
    by_name = mem.groupby(["name", "work_op", "placed_by"], as_index=False).agg(
        n=("dur_us", "size"), dur_us=("dur_us", "sum")
    )
    return MemoryBoundKernelsFinding(
        share_pct=share,
        n_kernels=len(mem),
        memory_ms=mem["dur_us"].sum() / 1e3,
        busy_ms=busy / 1e3,
        summed_over=summed_over(k),
        n_chains=len(chains),
        min_chain=int(limits.min_chain),
        evidence=(
            Evidence(
                "memory_bound_share_pct",
                share,
                "%",
                limits.min_share_pct,
                source="kernels (roofline placement)",
                rows=rows(by_name, ["name", "work_op", "placed_by", "n", "dur_us"], by="dur_us"),
            ),
            Evidence(
                "fusable_chain_us",
                stake_us,
                "us",
                source="kernels (chains on a stream)",
                rows=rows(chains, ["first", "length", "chain_us", "saveable_us"], by="saveable_us"),
            ),
            _placement(k),
        ),
        time_at_stake_ms=bounded_ms(stake_us, f.window_us),
        confidence="medium",
        suggested_variants=fusion_fixes(
            set(mem["name"].astype(str)) | set(mem["work_op"].astype(str)), around=set(k["work_op"].astype(str))
        ),
        scope="all ranks",
    )


def _chains(k: pd.DataFrame, min_len: int) -> pd.DataFrame:
    """Runs of consecutive fusable (memory-bound, not GEMM/convolution/attention) kernels on one stream;
    saveable = run time - its longest kernel."""
    out = []
    for (rank, _), g in k.sort_values("ts_us").groupby(["rank", "stream"]):
        is_mem = g["fusable"].to_numpy(bool)
        run_id = (is_mem != pd.Series(is_mem).shift(1, fill_value=not is_mem[0]).to_numpy()).cumsum()
        for _, run in g[is_mem].groupby(run_id[is_mem]):
            if len(run) >= min_len:
                out.append(
                    {
                        "rank": int(rank),
                        "first": str(run["name"].iloc[0])[:80],
                        "length": len(run),
                        "chain_us": float(run["dur_us"].sum()),
                        "saveable_us": float(run["dur_us"].sum() - run["dur_us"].max()),
                    }
                )
    return pd.DataFrame(out, columns=["rank", "first", "length", "chain_us", "saveable_us"])


@dataclass(frozen=True)
class MatrixKernelsDominateLimits(Limits):
    """The thresholds of ``matrix_kernels_dominate``."""

    min_share_pct: float = 60.0
    max_idle_pct: float = 15.0


@dataclass(frozen=True, kw_only=True)
class MatrixKernelsDominateFinding(Finding):
    share_pct: float  # of computation-kernel time, in matrix kernels
    n_kernels: int  # matrix (GEMM, convolution, attention) kernels
    matrix_ms: float  # their summed time
    summed_over: str  # how the ranks' times were summed (empty for one rank)
    idle_pct: float  # GPU idle share of the ranks' spans


MATRIX_KERNELS_DOMINATE_WORDS = Words(
    title="{share_pct:.0f}% of kernel time is matrix work on a busy GPU",
    observed="{n_kernels} GEMM/convolution kernels, {matrix_ms:.2f} ms{summed_over}; GPU idle {idle_pct:.1f}%",
    mechanism="Time is in arithmetic-heavy kernels; only less arithmetic or faster arithmetic (tensor cores, lower "
    "precision) helps.",
    predicted_effect="bf16/fp16 autocast or TF32 on tensor-core GPUs can about halve matrix time; host changes cannot",
    falsifier="run under autocast(bfloat16): if matrix kernel time does not fall, they were not compute-limited",
    confounders=(
        "work is analytic (shapes) or, without shapes, read from kernel names",
        "small GEMMs are memory- or launch-bound",
    ),
    # faster arithmetic: TF32 for fp32 GEMMs, bf16/fp16 autocast (the fixes judge the kernels' precision)
    suggested_variants=("tf32", "autocast_bf16", "autocast_fp16"),
)


@rule(
    "matrix_kernels_dominate",
    category="compute_bound",
    scope="trace",
    limits=MatrixKernelsDominateLimits,
    finding=MatrixKernelsDominateFinding,
    words=MATRIX_KERNELS_DOMINATE_WORDS,
)
def matrix_kernels_dominate(f: TraceFacts, limits: MatrixKernelsDominateLimits) -> MatrixKernelsDominateFinding | None:
    """The GPU is busy and most of its time is in matrix kernels (GEMM, convolution, attention)."""
    k = _compute_kernels(f)
    busy = float(k["dur_us"].sum())
    mat = k[k["family"] == "matrix"]
    share = pct(mat["dur_us"].sum(), busy)
    ranks = f.gpu_ranks
    idle_pct = pct(ranks["idle_us"].sum(), ranks["span_us"].sum())
    if k.empty or share < limits.min_share_pct or idle_pct > limits.max_idle_pct:
        return None
    by_name = mat.groupby(["name", "work_op", "placed_by"], as_index=False).agg(
        n=("dur_us", "size"), dur_us=("dur_us", "sum")
    )
    return MatrixKernelsDominateFinding(
        share_pct=share,
        n_kernels=len(mat),
        matrix_ms=mat["dur_us"].sum() / 1e3,
        summed_over=summed_over(mat),
        idle_pct=idle_pct,
        evidence=(
            Evidence(
                "matrix_share_pct",
                share,
                "%",
                limits.min_share_pct,
                source="kernels (roofline placement)",
                rows=rows(by_name, ["name", "work_op", "placed_by", "n", "dur_us"], by="dur_us"),
            ),
            Evidence("idle_pct", idle_pct, "%", limits.max_idle_pct, "<", "temporal breakdown"),
            _placement(k),
        ),
        time_at_stake_ms=bounded_ms(per_rank_max_us(mat) / 2, f.window_us),
        confidence="medium",
        scope="all ranks",
    )
