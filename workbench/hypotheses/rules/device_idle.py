"""Device idle: gaps where no kernel runs, attributed to host wait vs kernel wait (HTA's rules),
kernels shorter than their launch, and a full launch queue (host blocked, GPU-bound)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.analysis.intervals import union_length
from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.hypothesis import Evidence
from workbench.hypotheses.registry import Limits, rule
from workbench.hypotheses.rules._common import bounded_ms, pct, rows
from workbench.hypotheses.words import Finding, Words


def _worst_windows(f: TraceFacts, rank: int, n_windows: int = 20) -> tuple[dict, ...]:
    """Utilisation per time window: the least busy windows of a rank's GPU span."""
    k = f.kernels[f.kernels["rank"] == rank]
    lo, hi = float(k["ts_us"].min()), float(k["end_us"].max())
    edges = np.linspace(lo, hi, n_windows + 1)
    out = []
    for a, b in zip(edges[:-1], edges[1:]):
        s = np.clip(k["ts_us"].to_numpy(), a, b)
        e = np.clip(k["end_us"].to_numpy(), a, b)
        busy = union_length(s, e)
        out.append(
            {"window_start_us": round(a, 1), "window_us": round(b - a, 1), "busy_pct": round(pct(busy, b - a), 1)}
        )
    return tuple(sorted(out, key=lambda r: r["busy_pct"])[:3])


@dataclass(frozen=True)
class DeviceIdleHostWaitLimits(Limits):
    """The thresholds of ``device_idle_host_wait``."""

    min_idle_pct: float = 20.0
    min_host_wait_share: float = 0.5
    long_gap_us: float = 50.0


@dataclass(frozen=True, kw_only=True)
class DeviceIdleHostWaitFinding(Finding):
    rank: int  # the rank whose GPU waits
    idle_pct: float  # its GPU idle time, of its GPU span
    idle_ms: float  # its GPU idle time
    span_ms: float  # its GPU span
    n_long_gaps: int  # host-wait gaps at least long_gap_us long
    long_gap_us: float  # the threshold a long gap reaches


DEVICE_IDLE_HOST_WAIT_WORDS = Words(
    title="GPU idle {idle_pct:.0f}% of the time, waiting on the host",
    observed="rank {rank}: idle {idle_ms:.2f} ms of {span_ms:.2f} ms; "
    "{n_long_gaps} gaps >= {long_gap_us:.0f} µs open before the next launch is issued",
    mechanism="The host issues work later than the GPU finishes it (Python, data preparation, CPU compute between launches).",
    predicted_effect="moving the host work off the critical path (prefetch, async data loading, CUDA graphs) removes up to the long host-wait gaps",
    falsifier="replay the same kernels without the host work between them (CUDA graph of one step): if the step time is unchanged, the host was not the bottleneck",
    confounders=("profiler overhead lengthens host gaps", "the first steps include warm-up"),
    suggested_variants=("cuda_graph", "compiled"),
    scope="rank {rank}",
)


@rule(
    "device_idle_host_wait",
    category="host_bound",
    scope="trace",
    limits=DeviceIdleHostWaitLimits,
    finding=DeviceIdleHostWaitFinding,
    words=DEVICE_IDLE_HOST_WAIT_WORDS,
)
def device_idle_host_wait(f: TraceFacts, limits: DeviceIdleHostWaitLimits) -> list[DeviceIdleHostWaitFinding]:
    """The GPU sits idle in long gaps that wait on the host (launch issued after the gap opened)."""
    out = []
    gaps = f.idle_gaps
    for _, r in f.gpu_ranks.iterrows():
        idle_pct = pct(r.idle_us, r.span_us)
        g = gaps[gaps["rank"] == r["rank"]]
        host = g[g["idle_category"] == "host_wait"]
        long_host = host[host["gap_us"] >= limits.long_gap_us]
        share = host["gap_us"].sum() / g["gap_us"].sum() if g["gap_us"].sum() > 0 else 0.0
        if idle_pct < limits.min_idle_pct or share < limits.min_host_wait_share or long_host.empty:
            continue
        stake_us = min(long_host["gap_us"].sum(), r.idle_us)
        out.append(
            DeviceIdleHostWaitFinding(
                rank=int(r["rank"]),
                idle_pct=idle_pct,
                idle_ms=r.idle_us / 1e3,
                span_ms=r.span_us / 1e3,
                n_long_gaps=len(long_host),
                long_gap_us=limits.long_gap_us,
                evidence=(
                    Evidence(
                        "idle_pct",
                        idle_pct,
                        "%",
                        limits.min_idle_pct,
                        source="kernels (temporal breakdown)",
                        rows=_worst_windows(f, r["rank"]),
                    ),
                    Evidence(
                        "host_wait_share_of_idle",
                        share,
                        "fraction",
                        limits.min_host_wait_share,
                        source="idle breakdown (gaps)",
                        rows=rows(long_host, ["stream", "gap_start_us", "gap_us"], by="gap_us"),
                    ),
                    Evidence("long_host_wait_us", long_host["gap_us"].sum(), "us", source="idle gaps"),
                ),
                time_at_stake_ms=bounded_ms(stake_us, r.span_us),
                confidence="high" if idle_pct > 2 * limits.min_idle_pct and share > 0.8 else "medium",
            )
        )
    return out


@dataclass(frozen=True)
class KernelsShorterThanLaunchLimits(Limits):
    """The thresholds of ``kernels_shorter_than_launch``."""

    min_short_fraction: float = 0.5
    min_kernels: int = 50
    short_gap_us: float = 50.0
    min_stake_pct: float = 5.0


@dataclass(frozen=True, kw_only=True)
class KernelsShorterThanLaunchFinding(Finding):
    rank: int  # the rank whose kernels are short
    short_fraction: float  # kernels shorter than their launch call, of all its kernels
    n_short: int  # kernels shorter than their launch call
    n_kernels: int  # all its launched kernels
    median_kernel_us: float  # median kernel duration
    median_launch_us: float  # median launch call duration
    n_short_gaps: int  # host-wait gaps shorter than short_gap_us


KERNELS_SHORTER_THAN_LAUNCH_WORDS = Words(
    title="{short_fraction:.0%} of kernels are shorter than their launch call",
    observed="rank {rank}: {n_short} of {n_kernels} kernels; median kernel {median_kernel_us:.1f} µs vs "
    "median launch {median_launch_us:.1f} µs; {n_short_gaps} short host-wait gaps",
    mechanism="Each kernel does less work than one launch costs, so the GPU drains the queue and waits for the next launch.",
    predicted_effect="fusing kernels (torch.compile) or replaying them as one CUDA graph removes most of the launch gaps",
    falsifier="capture one step as a CUDA graph: if the step time does not fall by about the short gaps, launches were not the cost",
    confounders=("profiler overhead inflates launch calls", "kernels on other streams may fill the gaps"),
    suggested_variants=("cuda_graph", "compiled"),
    scope="rank {rank}",
)


@rule(
    "kernels_shorter_than_launch",
    category="launch_overhead",
    scope="trace",
    limits=KernelsShorterThanLaunchLimits,
    finding=KernelsShorterThanLaunchFinding,
    words=KERNELS_SHORTER_THAN_LAUNCH_WORDS,
)
def kernels_shorter_than_launch(
    f: TraceFacts, limits: KernelsShorterThanLaunchLimits
) -> list[KernelsShorterThanLaunchFinding]:
    """Most kernels run for less time than it takes the host to launch them."""
    L = f.launches
    out = []
    for rank, lr in L.groupby("rank"):
        if len(lr) < limits.min_kernels:
            continue
        short = lr[lr["shorter_than_launch"]]
        frac = len(short) / len(lr)
        gaps = f.idle_gaps[
            (f.idle_gaps["rank"] == rank)
            & (f.idle_gaps["idle_category"] == "host_wait")
            & (f.idle_gaps["gap_us"] < limits.short_gap_us)
        ]
        span = float(f.gpu_ranks.set_index("rank").loc[rank, "span_us"])
        stake_us = gaps["gap_us"].sum()
        if frac < limits.min_short_fraction or pct(stake_us, span) < limits.min_stake_pct:
            continue
        out.append(
            KernelsShorterThanLaunchFinding(
                rank=rank,
                short_fraction=frac,
                n_short=len(short),
                n_kernels=len(lr),
                median_kernel_us=lr["gpu_us"].median(),
                median_launch_us=lr["runtime_us"].median(),
                n_short_gaps=len(gaps),
                evidence=(
                    Evidence(
                        "short_kernel_fraction",
                        frac,
                        "fraction",
                        limits.min_short_fraction,
                        source="launch stats",
                        rows=rows(
                            short.groupby("name", as_index=False)["gpu_us"]
                            .agg(["count", "median"])
                            .rename(columns={"count": "n", "median": "median_dur_us"}),
                            ["name", "n", "median_dur_us"],
                            by="n",
                        ),
                    ),
                    Evidence("short_host_wait_us", stake_us, "us", source="idle gaps"),
                    Evidence("short_host_wait_pct", pct(stake_us, span), "%", limits.min_stake_pct, source="idle gaps"),
                ),
                time_at_stake_ms=bounded_ms(stake_us, span),
                confidence="high" if frac > 0.75 else "medium",
            )
        )
    return out


@dataclass(frozen=True)
class LaunchQueueFullLimits(Limits):
    """The thresholds of ``launch_queue_full``."""

    slow_launch_us: float = 50.0
    long_delay_us: float = 100.0
    min_outliers: int = 10
    max_idle_pct: float = 10.0


@dataclass(frozen=True, kw_only=True)
class LaunchQueueFullFinding(Finding):
    rank: int  # the rank whose launches block
    n_blocked: int  # launches slower than slow_launch_us whose kernels start over long_delay_us later
    slow_launch_us: float  # the threshold a slow launch call passes
    long_delay_us: float  # the threshold a long launch-to-start delay passes
    idle_pct: float  # its GPU idle time, of its GPU span


LAUNCH_QUEUE_FULL_WORDS = Words(
    title="Launch queue full: the host blocks, the GPU is the bottleneck",
    observed="rank {rank}: {n_blocked} launches over {slow_launch_us:.0f} µs whose kernels start over "
    "{long_delay_us:.0f} µs later; GPU idle only {idle_pct:.1f}%",
    mechanism="The launch queue is full, so launch calls wait for the GPU to drain it: host-side optimisation cannot help.",
    predicted_effect="only faster kernels (lower precision, fusion, better algorithms) shorten the step",
    falsifier="halve the work per kernel (smaller batch): if launch calls stay slow, the queue was not full",
    confounders=("a synchronising call inside the launch path also blocks",),
    suggested_variants=("compiled", "autocast_bf16", "tf32"),
    scope="rank {rank}",
)


@rule(
    "launch_queue_full",
    category="compute_bound",
    scope="trace",
    limits=LaunchQueueFullLimits,
    finding=LaunchQueueFullFinding,
    words=LAUNCH_QUEUE_FULL_WORDS,
)
def launch_queue_full(f: TraceFacts, limits: LaunchQueueFullLimits) -> list[LaunchQueueFullFinding]:
    """Launch calls block (queue full) and kernels start long after launch: the GPU is the bottleneck."""
    L = f.launches
    out = []
    for _, r in f.gpu_ranks.iterrows():
        lr = L[L["rank"] == r["rank"]]
        slow = lr[(lr["runtime_us"] > limits.slow_launch_us) & (lr["launch_delay_us"] > limits.long_delay_us)]
        idle_pct = pct(r.idle_us, r.span_us)
        if len(slow) < limits.min_outliers or idle_pct > limits.max_idle_pct:
            continue
        out.append(
            LaunchQueueFullFinding(
                rank=int(r["rank"]),
                n_blocked=len(slow),
                slow_launch_us=limits.slow_launch_us,
                long_delay_us=limits.long_delay_us,
                idle_pct=idle_pct,
                evidence=(
                    Evidence(
                        "blocked_launches",
                        len(slow),
                        "launches",
                        limits.min_outliers,
                        source="launch stats",
                        rows=rows(slow, ["name", "api", "runtime_us", "launch_delay_us"], by="launch_delay_us"),
                    ),
                    Evidence("idle_pct", idle_pct, "%", limits.max_idle_pct, "<", "kernels (temporal breakdown)"),
                ),
                time_at_stake_ms=bounded_ms(slow["runtime_us"].sum(), r.span_us),
                confidence="low",
            )
        )
    return out
