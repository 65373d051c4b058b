"""Launch-delay outliers: kernels that start long after their launch call returned while their
stream sat idle, so neither the host nor earlier work on the stream held them back."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.analysis.launches import DELAY_OUTLIER_US
from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.hypothesis import Evidence, Hypothesis
from workbench.hypotheses.registry import Limits, rule
from workbench.hypotheses.rules._common import bounded_ms, pct, rows


@dataclass(frozen=True)
class LaunchDelayOutliersLimits(Limits):
    """The thresholds of ``launch_delay_outliers``."""

    long_delay_us: float = DELAY_OUTLIER_US
    median_factor: float = 10.0
    min_outliers: int = 3
    min_stake_pct: float = 1.0


@rule("launch_delay_outliers", category="launch_overhead", scope="trace", limits=LaunchDelayOutliersLimits)
def launch_delay_outliers(f: TraceFacts, limits: LaunchDelayOutliersLimits):
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
            Hypothesis(
                category="launch_overhead",
                title=f"{len(slow)} kernels start over {limit:.0f} µs after launch on an idle stream",
                observed=f"rank {rank}: median launch delay {lr['launch_delay_us'].median():.1f} µs; {len(slow)} launches wait over "
                f"{limit:.0f} µs while their stream idles ({stake_us / 1e3:.2f} ms idle)",
                mechanism="The kernel was queued before its stream went idle, yet started late: it waited on something other "
                "than the host or its stream (an event from another stream, a CUDA-graph or module load, the driver).",
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
                predicted_effect="removing the cross-stream wait (or loading modules/graphs before the loop) lets the kernels start on launch",
                falsifier="run the same step with CUDA_LAUNCH_BLOCKING=0 and a single stream: if the delays stay, they are not stream dependencies",
                confounders=("other streams may be busy, so the device is not idle", "profiler flushes add delays"),
                confidence="low",
                suggested_variants=("cuda_graph",),
                scope=f"rank {rank}",
            )
        )
    return out
