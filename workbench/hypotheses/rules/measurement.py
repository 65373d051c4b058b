"""Measurement validity beyond the timing's spread: a first profiled step that is an outlier, a
first profiler session in the process (which can mis-time or drop GPU events), and a time per call
below the least time the analytic work allows at the device's ceilings."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.hypothesis import Evidence, Hypothesis
from workbench.hypotheses.registry import Limits, NotJudged, rule
from workbench.hypotheses.rules._common import bounded_ms, rows
from workbench.hypotheses.run_facts import RunFacts, field_of


def first_step_excess(f: TraceFacts, min_steps: int) -> tuple[float, float, float, int]:
    """(first step µs, median of the others µs, excess µs, steps) on the rank where the excess is largest."""
    table = f.step_breakdown.table
    if table.empty:
        raise NotJudged("no ProfilerStep annotations in the trace: steps cannot be compared")
    best = None
    for _, g in table.sort_values("ts_us").groupby("rank"):
        if len(g) < min_steps:
            continue
        first, others = float(g["dur_us"].iloc[0]), float(g["dur_us"].iloc[1:].median())
        if best is None or first - others > best[2]:
            best = (first, others, first - others, len(g))
    if best is None:
        raise NotJudged(f"fewer than {min_steps} steps on every rank: the first step has nothing to be held against")
    return best


@dataclass(frozen=True)
class FirstStepOutlierLimits(Limits):
    """The thresholds of ``first_step_outlier``."""

    min_ratio: float = 2.0
    min_steps: int = 3


@rule("first_step_outlier", category="measurement", scope="trace", limits=FirstStepOutlierLimits)
def first_step_outlier(f: TraceFacts, limits: FirstStepOutlierLimits):
    """The first profiled step takes far longer than the others (warm-up or profiler start-up inside the window)."""
    first, median, excess, n = first_step_excess(f, int(limits.min_steps))
    ratio = first / median if median > 0 else float("inf")
    if ratio < limits.min_ratio:
        return None
    steps = f.step_breakdown.table
    return Hypothesis(
        category="measurement",
        title=f"The first profiled step takes {ratio:.1f}x the others",
        observed=f"first step {first / 1e3:.3f} ms against a median of {median / 1e3:.3f} ms over the other {n - 1}",
        mechanism="One-time work (lazy initialisation, allocator growth, autotuning, the profiler's own start-up) fell "
        "inside the profiled window, so per-step averages over the trace overstate the steady state.",
        evidence=(
            Evidence(
                "first_over_median_step",
                min(ratio, 1e12),
                "x",
                limits.min_ratio,
                source="step breakdown",
                rows=rows(steps.sort_values("ts_us").head(4), ["rank", "step", "dur_us", "n_kernels"]),
            ),
            Evidence("first_step_excess_us", excess, "us", source="step breakdown"),
        ),
        time_at_stake_ms=bounded_ms(excess, f.window_us),
        predicted_effect="warming up before profiling (or dropping the first step) leaves steps within noise of each other",
        falsifier="profile again with two more warm-up steps: if the first profiled step is still the slow one, "
        "it does different work, not warm-up",
        confounders=("the first step may legitimately differ (a data-dependent branch)",),
        confidence="medium" if ratio > 5 else "low",
        scope="first step",
    )


def _warmed_up(record: object) -> bool:
    text = str(record or "").strip().lower()
    return text.startswith("ran") or text.startswith("skipped")


@dataclass(frozen=True)
class FirstProfilerSessionLimits(Limits):
    """The thresholds of ``first_profiler_session``."""

    min_ratio: float = 2.0


@rule("first_profiler_session", category="measurement", scope="run", limits=FirstProfilerSessionLimits)
def first_profiler_session(f: RunFacts, limits: FirstProfilerSessionLimits):
    """The trace came from the process's first profiler session, which can mis-time or drop GPU events."""
    record = field_of(f.run, "profiler_warmup", None)
    tf = f.trace_facts
    if not tf.has_gpu:
        raise NotJudged("no GPU activity: first-session artifacts concern GPU event collection")
    if _warmed_up(record):
        return None
    try:
        first, median, excess, _ = first_step_excess(tf, 3)
        ratio = first / median if median > 0 else float("inf")
    except NotJudged:
        first = median = excess = ratio = float("nan")
    outlier = ratio == ratio and ratio >= limits.min_ratio
    ev = [
        Evidence(
            "warm_up_session",
            0.0,
            "sessions",
            1.0,
            "<",
            "run.profiler_warmup",
            rows=({"profiler_warmup": str(record or "not recorded")},),
        )
    ]
    if outlier:
        ev.append(Evidence("first_over_median_step", min(ratio, 1e12), "x", limits.min_ratio, source="step breakdown"))
    return Hypothesis(
        category="measurement",
        title="The trace comes from the first profiler session in this process",
        observed=f"no warm-up profiler session was recorded ({record or 'not recorded'})"
        + (f"; the first step takes {ratio:.1f}x the others" if outlier else ""),
        mechanism="The first torch.profiler session in a process initialises CUPTI during the measured window and has "
        "been seen to mis-time or drop GPU events (pytorch issues 175790, 192021).",
        evidence=tuple(ev),
        time_at_stake_ms=max(excess, 0.0) / 1e3 / max(1, f.calls_in_trace) if outlier else 0.0,
        predicted_effect="a short throw-away profiler session first gives a trace whose first step matches the others",
        falsifier="profile twice in one process: if the second trace has the same kernels and step times, the first was fine",
        confounders=("the first step may be slow for other one-time reasons",),
        confidence="high" if outlier else "medium",
        scope="trace",
    )


@dataclass(frozen=True)
class FasterThanRooflineLimits(Limits):
    """The thresholds of ``faster_than_roofline``."""

    margin: float = 0.9
    measured_margin: float = 0.5
    min_streaming_bytes: int = 256 << 20


@rule("faster_than_roofline", category="measurement", scope="run", limits=FasterThanRooflineLimits)
def faster_than_roofline(f: RunFacts, limits: FasterThanRooflineLimits):
    """The time per call is below the least time its FLOPs (and large streamed bytes) need at the device's ceilings.

    Against a datasheet peak (an upper bound no run can beat) a call faster than ``margin`` x the roof
    time is impossible. A measured ceiling is the best this machine reached once (best of a few
    microbenchmark runs, on whatever load the machine had then): a later call can beat it by the
    machine's own fluctuation, so against a measured ceiling only a call faster than
    ``measured_margin`` x the roof time (twice as fast as the best ever measured) is claimed."""
    timing = f.require_timing()
    tf = f.trace_facts
    ceiling = tf.ceiling
    if not ceiling.upper_bound:
        raise NotJudged(
            "the ceiling is a documented default, not a measured or vendor peak: "
            "measure it (workbench.devices.measure_cpu_ceiling) to judge 'faster than the roof'"
        )
    from workbench.hypotheses.roofline import place_ops
    from workbench.hypotheses.rules.host_ops import _under_wrappers_only

    ops = tf.require_cpu_ops()
    top = place_ops(ops[_under_wrappers_only(ops)], ceiling)
    calls = max(1, f.calls_in_trace)
    flops = float(np.nansum(top["flops"])) / calls
    big = top["bytes"] >= limits.min_streaming_bytes  # smaller working sets may stay in cache
    nbytes = float(np.nansum(top.loc[big, "bytes"])) / calls
    roof_ms = max(flops / (ceiling.peak_gflops * 1e6), nbytes / (ceiling.memory_gbps * 1e6))
    per_call_ms = timing.median_ms / max(1, timing.calls_per_sample)
    margin = limits.measured_margin if ceiling.kind == "measured" else limits.margin
    if roof_ms <= 0 or per_call_ms >= margin * roof_ms:
        return None
    return Hypothesis(
        category="measurement",
        title=f"Measured {per_call_ms:.4g} ms per call, below the {roof_ms:.4g} ms the work needs",
        observed=f"{flops / 1e9:.3g} GFLOP and {nbytes / 2**20:.0f} MiB streamed per call need at least {roof_ms:.4g} ms "
        f"at {ceiling.peak_gflops:.0f} GFLOP/s and {ceiling.memory_gbps:.0f} GB/s; the median call took {per_call_ms:.4g} ms",
        mechanism="No call can beat the roofline: the timer missed work (asynchronous GPU work not synchronised, a "
        "cached result returned), or the timed calls did less work than the traced ones.",
        evidence=(
            Evidence(
                "per_call_over_roof",
                per_call_ms / roof_ms,
                "x",
                margin,
                "<",
                f"run.timing + analytic work, against the {ceiling.kind} ceiling",
                rows=(
                    {
                        "per_call_ms": per_call_ms,
                        "roof_ms": roof_ms,
                        "gflop_per_call": flops / 1e9,
                        "streamed_mib_per_call": nbytes / 2**20,
                        "ceiling": ceiling.source,
                    },
                ),
            ),
        ),
        time_at_stake_ms=timing.median_ms,
        predicted_effect="timing with device synchronisation (and fresh inputs) gives a time at or above the roof",
        falsifier="time the call with torch.cuda.synchronize() after it (or block_until_ready): if it stays below the roof, "
        "the analytic work or the ceiling is wrong",
        confounders=("the ceiling may be measured too low", "analytic FLOPs assume the textbook algorithm"),
        confidence="high",
        scope="timing",
    )
