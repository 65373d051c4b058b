"""Launch-delay outliers: kernels that start long after their launch call returned while their
stream sat idle, so neither the host nor earlier work on the stream held them back."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.analysis.launches import DELAY_OUTLIER_US
from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.hypothesis import Evidence
from workbench.hypotheses.registry import Limits, rule
from workbench.hypotheses.rules._common import bounded_ms, pct, rows
from workbench.hypotheses.words import Finding, Words


@dataclass(frozen=True)
class LaunchDelayOutliersLimits(Limits):
    """The thresholds of ``launch_delay_outliers``."""

    long_delay_us: float = DELAY_OUTLIER_US
    median_factor: float = 10.0
    min_outliers: int = 3
    min_stake_pct: float = 1.0


@dataclass(frozen=True, kw_only=True)
class LaunchDelayOutliersFinding(Finding):
    rank: int  # the rank whose launches were delayed
    n_delayed: int  # launches that waited past the limit while their stream idled
    limit_us: float  # the delay a launch must exceed (the larger of the floor and the median's multiple)
    median_delay_us: float  # the rank's median launch delay
    idle_ms: float  # the stream idle time those launches account for


WORDS = Words(
    title="{n_delayed} kernels start over {limit_us:.0f} µs after launch on an idle stream",
    observed="rank {rank}: median launch delay {median_delay_us:.1f} µs; {n_delayed} launches wait over "
    "{limit_us:.0f} µs while their stream idles ({idle_ms:.2f} ms idle)",
    mechanism="The kernel was queued before its stream went idle, yet started late: it waited on something other "
    "than the host or its stream (an event from another stream, a CUDA-graph or module load, the driver).",
    predicted_effect="removing the cross-stream wait (or loading modules/graphs before the loop) lets the kernels "
    "start on launch",
    falsifier="run the same step with CUDA_LAUNCH_BLOCKING=0 and a single stream: if the delays stay, they are not "
    "stream dependencies",
    confounders=("other streams may be busy, so the device is not idle", "profiler flushes add delays"),
    suggested_variants=("cuda_graph",),
)


@rule(
    "launch_delay_outliers",
    category="launch_overhead",
    scope="trace",
    limits=LaunchDelayOutliersLimits,
    finding=LaunchDelayOutliersFinding,
    words=WORDS,
)
def launch_delay_outliers(f: TraceFacts, limits: LaunchDelayOutliersLimits) -> list[LaunchDelayOutliersFinding]:
    """Some kernels wait far longer than usual between their launch and their start, on an idle stream."""
    L = f.launches
    gaps = f.idle_gaps[["rank", "stream", "ts_us", "gap_us", "idle_category"]]
    out = []
    for rank, lr in L.groupby("rank"):
        limit = max(limits.long_delay_us, limits.median_factor * float(lr["launch_delay_us"].median()))
        slow = lr[lr["launch_delay_us"] > limit]
        slow = slow.merge(
            gaps, left_on=["rank", "stream", "gpu_ts_us"], right_on=["rank", "stream", "ts_us"], how="inner"
        )
        # the launch was issued before the stream went idle (not host wait) and the stream then idled
        slow = slow[(slow["idle_category"] != "host_wait") & (slow["gap_us"] > 0)]
        stake_us = float(np.minimum(slow["gap_us"], slow["launch_delay_us"]).sum())
        span = float(f.gpu_ranks.set_index("rank").loc[rank, "span_us"])
        if len(slow) < limits.min_outliers or pct(stake_us, span) < limits.min_stake_pct:
            continue
        out.append(
            LaunchDelayOutliersFinding(
                rank=rank,
                n_delayed=len(slow),
                limit_us=limit,
                median_delay_us=lr["launch_delay_us"].median(),
                idle_ms=stake_us / 1e3,
                evidence=(
                    Evidence(
                        "delayed_launches",
                        len(slow),
                        "launches",
                        limits.min_outliers,
                        ">=",
                        "launch stats + idle breakdown",
                        rows=rows(slow, ["name", "api", "stream", "launch_delay_us", "gap_us"], by="launch_delay_us"),
                    ),
                    Evidence("delay_idle_pct", pct(stake_us, span), "%", limits.min_stake_pct, source="idle breakdown"),
                ),
                time_at_stake_ms=bounded_ms(stake_us, span),
                confidence="low",
                scope=f"rank {rank}",
            )
        )
    return out
