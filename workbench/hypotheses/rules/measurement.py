"""Measurement validity beyond the timing's spread: a first profiled step that is an outlier, a
first profiler session in the process (which can mis-time or drop GPU events), and a time per call
below the least time the analytic work allows at the device's ceilings."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.hypothesis import Evidence
from workbench.hypotheses.registry import Limits, NotJudged, rule
from workbench.hypotheses.rules._common import bounded_ms, rows
from workbench.hypotheses.run_facts import RunFacts, field_of
from workbench.hypotheses.words import Finding, Words


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


@dataclass(frozen=True, kw_only=True)
class FirstStepOutlierFinding(Finding):
    first_over_median: float  # the first step over the median of the others (x)
    first_ms: float  # the first step, on the rank where its excess is largest
    median_ms: float  # the median of the other steps there
    n_other_steps: int  # the steps the first is held against


FIRST_STEP_OUTLIER_WORDS = Words(
    title="The first profiled step takes {first_over_median:.1f}x the others",
    observed="first step {first_ms:.3f} ms against a median of {median_ms:.3f} ms over the other {n_other_steps}",
    mechanism="One-time work (lazy initialisation, allocator growth, autotuning, the profiler's own start-up) fell "
    "inside the profiled window, so per-step averages over the trace overstate the steady state.",
    predicted_effect="warming up before profiling (or dropping the first step) leaves steps within noise of each other",
    falsifier="profile again with two more warm-up steps: if the first profiled step is still the slow one, "
    "it does different work, not warm-up",
    confounders=("the first step may legitimately differ (a data-dependent branch)",),
)


@rule(
    "first_step_outlier",
    category="measurement",
    scope="trace",
    limits=FirstStepOutlierLimits,
    finding=FirstStepOutlierFinding,
    words=FIRST_STEP_OUTLIER_WORDS,
)
def first_step_outlier(f: TraceFacts, limits: FirstStepOutlierLimits) -> FirstStepOutlierFinding | None:
    """The first profiled step takes far longer than the others (warm-up or profiler start-up inside the window)."""
    first, median, excess, n = first_step_excess(f, int(limits.min_steps))
    ratio = first / median if median > 0 else float("inf")
    if ratio < limits.min_ratio:
        return None
    steps = f.step_breakdown.table
    return FirstStepOutlierFinding(
        first_over_median=ratio,
        first_ms=first / 1e3,
        median_ms=median / 1e3,
        n_other_steps=n - 1,
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


NOT_RECORDED = "not recorded"  # the profiler_warmup record a finding names where the run recorded none


@dataclass(frozen=True, kw_only=True)
class FirstProfilerSessionFinding(Finding):
    warmup_record: str  # the run's profiler_warmup record (NOT_RECORDED: none)
    first_over_median: float  # the first step over the median of the others (x; nan where steps were not judged)


_FIRST_PROFILER_SESSION_OBSERVED = {
    "outlier": "no warm-up profiler session was recorded ({warmup_record}); the first step takes "
    "{first_over_median:.1f}x the others",
    "no_outlier": "no warm-up profiler session was recorded ({warmup_record})",
}
FIRST_PROFILER_SESSION_WORDS = {
    outlier: Words(
        title="The trace comes from the first profiler session in this process",
        observed=observed,
        mechanism="The first torch.profiler session in a process initialises CUPTI during the measured window and "
        "has been seen to mis-time or drop GPU events (pytorch issues 175790, 192021).",
        predicted_effect="a short throw-away profiler session first gives a trace whose first step matches the others",
        falsifier="profile twice in one process: if the second trace has the same kernels and step times, the first "
        "was fine",
        confounders=("the first step may be slow for other one-time reasons",),
    )
    for outlier, observed in _FIRST_PROFILER_SESSION_OBSERVED.items()
}


@rule(
    "first_profiler_session",
    category="measurement",
    scope="run",
    limits=FirstProfilerSessionLimits,
    finding=FirstProfilerSessionFinding,
    words=FIRST_PROFILER_SESSION_WORDS,
)
def first_profiler_session(f: RunFacts, limits: FirstProfilerSessionLimits) -> FirstProfilerSessionFinding | None:
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
    warmup_record = str(record or NOT_RECORDED)
    ev = [
        Evidence(
            "warm_up_session",
            0.0,
            "sessions",
            1.0,
            "<",
            "run.profiler_warmup",
            rows=({"profiler_warmup": warmup_record},),
        )
    ]
    if outlier:
        ev.append(Evidence("first_over_median_step", min(ratio, 1e12), "x", limits.min_ratio, source="step breakdown"))
    return FirstProfilerSessionFinding(
        branch="outlier" if outlier else "no_outlier",
        warmup_record=warmup_record,
        first_over_median=ratio,
        evidence=tuple(ev),
        time_at_stake_ms=max(excess, 0.0) / 1e3 / max(1, f.calls_in_trace) if outlier else 0.0,
        confidence="high" if outlier else "medium",
        scope="trace",
    )


@dataclass(frozen=True)
class FasterThanRooflineLimits(Limits):
    """The thresholds of ``faster_than_roofline``."""

    margin: float = 0.9
    measured_margin: float = 0.5
    min_streaming_bytes: int = 256 << 20


@dataclass(frozen=True, kw_only=True)
class FasterThanRooflineFinding(Finding):
    per_call_ms: float  # the median sample over the calls in it
    roof_ms: float  # the least time a call's work needs at the ceilings
    gflop_per_call: float  # analytic work a call does
    streamed_mib_per_call: float  # bytes a call streams (ops past the streaming threshold only)
    peak_gflops: float  # the ceiling's compute peak (GFLOP/s)
    memory_gbps: float  # the ceiling's memory bandwidth (GB/s)


FASTER_THAN_ROOFLINE_WORDS = Words(
    title="Measured {per_call_ms:.4g} ms per call, below the {roof_ms:.4g} ms the work needs",
    observed="{gflop_per_call:.3g} GFLOP and {streamed_mib_per_call:.0f} MiB streamed per call need at least "
    "{roof_ms:.4g} ms at {peak_gflops:.0f} GFLOP/s and {memory_gbps:.0f} GB/s; the median call took "
    "{per_call_ms:.4g} ms",
    mechanism="No call can beat the roofline: the timer missed work (asynchronous GPU work not synchronised, a "
    "cached result returned), or the timed calls did less work than the traced ones.",
    predicted_effect="timing with device synchronisation (and fresh inputs) gives a time at or above the roof",
    falsifier="time the call with torch.cuda.synchronize() after it (or block_until_ready): if it stays below the "
    "roof, the analytic work or the ceiling is wrong",
    confounders=("the ceiling may be measured too low", "analytic FLOPs assume the textbook algorithm"),
)


@rule(
    "faster_than_roofline",
    category="measurement",
    scope="run",
    limits=FasterThanRooflineLimits,
    finding=FasterThanRooflineFinding,
    words=FASTER_THAN_ROOFLINE_WORDS,
)
def faster_than_roofline(f: RunFacts, limits: FasterThanRooflineLimits) -> FasterThanRooflineFinding | None:
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
    return FasterThanRooflineFinding(
        per_call_ms=per_call_ms,
        roof_ms=roof_ms,
        gflop_per_call=flops / 1e9,
        streamed_mib_per_call=nbytes / 2**20,
        peak_gflops=ceiling.peak_gflops,
        memory_gbps=ceiling.memory_gbps,
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
        confidence="high",
        scope="timing",
    )
