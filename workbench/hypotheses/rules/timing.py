"""Rules over ProfileRun-level facts: cold start, measurement validity, torch.compile."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

from workbench.hypotheses.hypothesis import NO_INTERVAL_METRIC, Evidence
from workbench.hypotheses.registry import Limits, NotJudged, rule
from workbench.hypotheses.run_facts import RunFacts, field_of
from workbench.hypotheses.words import Finding, Words


def _branch(*parts: str) -> str:
    """The name of the branch where each of a rule's independent choices of words took the part named: the
    words hold one block per combination (``Words`` has no clause that shows only sometimes but its notes)."""
    return "/".join(parts)


@dataclass(frozen=True)
class ColdStartLimits(Limits):
    """The thresholds of ``cold_start``."""

    min_ratio: float = 5.0
    min_one_time_share_pct: float = 10.0


@dataclass(frozen=True, kw_only=True)
class ColdStartFinding(Finding):
    cold_over_steady: float  # the cold call over a steady call (x)
    cold_ms: float  # the first (cold) call
    median_ms: float  # the clean median call
    steady_ms: float  # the steady call the cold one is held against (the median, or the timer's floor above it)
    excess_ms: float  # the cold call less the steady one
    share_pct: float  # the excess, of the time of the calls it is spread over
    n_calls: int  # the calls a one-time cost is spread over (RunFacts.one_time_cost_calls)
    ranked_ms: float  # the one-time cost a call, as ranked
    one_time_basis: str  # how a one-time cost is ranked, in words (RunFacts.one_time_basis)
    compile_ms: float = 0.0  # torch.compile's compile time (compiled)


# the cold_start words: one block per (whether torch.compile compiled, whether the median is below what the timer
# resolves)
_COLD_START_CAUSE = {
    "compiled": "torch.compile ({compile_ms:.0f} ms of compilation) and lazy initialisation",
    "eager": "lazy initialisation, caches or autotuning",
}
_COLD_START_FLOOR = {
    "below_timer": " (below what the timer resolves: held against {steady_ms:.3g} ms)",
    "resolved": "",
}
COLD_START_WORDS = {
    _branch(cause, floor): Words(
        title="First call costs {cold_over_steady:.0f}x a steady-state call",
        observed="cold call {cold_ms:.1f} ms vs clean median {median_ms:.3g} ms"
        + _COLD_START_FLOOR[floor]
        + ": {excess_ms:.1f} ms extra, one-time (once per process, not per call), {share_pct:.0f}% of the time of "
        "{n_calls} calls; ranked as {ranked_ms:.3g} ms a call, {one_time_basis}",
        mechanism="One-time work on the first call: " + _COLD_START_CAUSE[cause] + ".",
        predicted_effect="warming up (or caching compiled artefacts) removes up to {excess_ms:.1f} ms from the first "
        "call; steady state unchanged",
        falsifier="call the function twice in a fresh process: if the second call is as slow as the first, it is not "
        "a cold-start cost",
        confounders=(
            "the first call may also page in data or warm CPU caches",
            "a shared machine can slow any single call",
        ),
        suggested_variants=(),  # warming up is the user's own change; compiling only adds to the first call
    )
    for cause, floor in product(_COLD_START_CAUSE, _COLD_START_FLOOR)
}
# a finding's scope is a plain text (``Words`` has no template for it): this one is told here
COLD_START_SCOPE = "first call (one-time: {once_ms:.3g} ms once)"


@rule(
    "cold_start",
    category="cold_start",
    scope="run",
    limits=ColdStartLimits,
    finding=ColdStartFinding,
    words=COLD_START_WORDS,
)
def cold_start(f: RunFacts, limits: ColdStartLimits) -> ColdStartFinding | None:
    """The first call costs much more than a steady-state call, and that one-time cost is a real part of
    the calls the user makes.

    Judged relative to the steady state, never against an absolute floor: the cold call must be clearly
    unlike a steady call (``min_ratio``), and its one-time excess must be at least
    ``min_one_time_share_pct`` of the time of all the calls it is spread over (the run's
    ``expected_calls``, else the stated default ``ONE_TIME_COST_CALLS``): 17 ms once before 100 calls of
    0.2 ms is half the time those calls take, 17 ms once before 100 calls of 50 ms is not worth a line."""
    timing = f.require_timing()
    if f.cold_ms is None:
        raise NotJudged("the run did not record its first (cold) call")
    median = timing.median_ms
    # a steady call below what the timer resolves is held against the least time the timer resolves, not
    # against its (untrustworthy) median: a 10 µs first call is not 50x a "0.2 µs" call
    steady = max(median, _timer_floor_ms(timing))
    excess = float(f.cold_ms) - steady
    ratio = float(f.cold_ms) / steady if steady > 0 else float("inf")
    calls = f.one_time_cost_calls
    whole_ms = calls * steady + max(excess, 0.0)
    share = 100.0 * excess / whole_ms if whole_ms > 0 else 0.0
    if ratio <= limits.min_ratio or excess <= 0 or share < limits.min_one_time_share_pct:
        return None
    compile_ms = field_of(f.compile, "compile_time_ms")
    from workbench.hypotheses.rules.torch_compile import break_compile_ms

    owed_elsewhere = break_compile_ms(f)  # the graph-break hypothesis carries the extra graphs' compile
    # a one-time cost: stated once; ranked against per-call costs by what it costs spread over a
    # stated number of calls (the run's expected_calls, else ONE_TIME_COST_CALLS)
    once_ms = max(0.0, excess - owed_elsewhere)
    ev = [
        Evidence("cold_over_median", min(ratio, 1e12), "x", limits.min_ratio, source="run.cold_ms"),
        Evidence(
            "one_time_share_pct",
            share,
            "%",
            limits.min_one_time_share_pct,
            ">=",
            source=f"run.cold_ms against {calls} steady calls ({f.one_time_basis})",
            rows=(
                {
                    "cold_ms": round(float(f.cold_ms), 3),
                    "median_ms": round(median, 4),
                    "cold_excess_ms": round(excess, 3),
                    "one_time_ms": round(once_ms, 3),
                    "spread_over_calls": calls,
                },
            ),
        ),
    ]
    if compile_ms:
        ev.append(Evidence("compile_time_ms", compile_ms, "ms", source="run.compile"))
    return ColdStartFinding(
        branch=_branch("compiled" if compile_ms else "eager", "below_timer" if steady > median else "resolved"),
        cold_over_steady=ratio,
        cold_ms=float(f.cold_ms),
        median_ms=median,
        steady_ms=steady,
        excess_ms=excess,
        share_pct=share,
        n_calls=calls,
        ranked_ms=once_ms / calls,
        one_time_basis=f.one_time_basis,
        compile_ms=float(compile_ms) if compile_ms else 0.0,
        evidence=tuple(ev),
        time_at_stake_ms=once_ms / calls,
        # high only where the one-time cost is most of the time of the stated calls, not merely visible in it
        confidence="high" if ratio > 20 and share >= HIGH_ONE_TIME_SHARE_PCT else "medium",
        scope=COLD_START_SCOPE.format(once_ms=once_ms),
    )


HIGH_ONE_TIME_SHARE_PCT = 50.0  # a one-time cost this share of the stated calls' time is the main cost of them


def _timer_floor_ms(timing) -> float:
    """The least per-sample time the timer resolves by ``timer_resolution``'s own limits (``min_ticks`` ticks,
    ``min_call_us`` a call): below it a median is timer overhead, not the call."""
    limits = TimerResolutionLimits()
    return max(
        limits.min_ticks * max(timing.timer_resolution_ms, 0.0),
        limits.min_call_us * 1e-3 * max(1, timing.calls_per_sample),
    )


@dataclass(frozen=True, kw_only=True)
class NoisyTimingFinding(Finding):
    relative_iqr: float  # the IQR over the median (fraction)
    median_ms: float  # the median sample
    ci_low_ms: float  # the 95% interval of the median, low end
    ci_high_ms: float  # and high end
    iqr_ms: float  # the interquartile range
    p95_ms: float  # the 95th percentile sample
    n_samples: int  # timed samples


NOISY_TIMING_WORDS = Words(
    title="Timing is noisy: IQR is {relative_iqr:.0%} of the median",
    observed="median {median_ms:.4g} ms (95% interval {ci_low_ms:.4g}-{ci_high_ms:.4g} ms), IQR {iqr_ms:.3g} ms, "
    "p95 {p95_ms:.4g} ms over {n_samples} samples",
    mechanism="Run-to-run variation (other processes, frequency scaling, data-dependent work, "
    "Python garbage collection) is large against the signal, so differences under it are not real.",
    predicted_effect="a quiet machine or more samples shrinks the interval; the median may move by up to its "
    "half-width",
    falsifier="repeat the profile with 3x the samples on an idle machine: if the IQR stays above the threshold the "
    "noise is in the workload itself",
    confounders=("the workload may do data-dependent work each call", "a shared machine preempts single samples"),
)


def _noise(f: RunFacts, limits: NoisyTimingLimits) -> NoisyTimingFinding | None:
    timing = f.require_timing()
    if timing.n < 4:
        return None
    rel = timing.relative_iqr
    if rel <= limits.max_relative_iqr:
        return None
    lo, hi = timing.median_ci_ms()
    half_ci_ms = max(hi - lo, 0.0) / 2
    rel_ci = half_ci_ms / timing.median_ms if timing.median_ms > 0 else float("inf")
    # outliers (a shared machine's preemptions) widen the IQR; only a wide interval on the
    # median makes the number itself untrustworthy. A caveat about the measurement is never of
    # high confidence as a finding about the workload: at most medium.
    confidence = "medium" if rel_ci > limits.max_relative_ci else "low"
    from workbench.hypotheses.rules.torch_compile import steady_recompiles

    recompiled = f.compile_record is not None and steady_recompiles(f.compile_record) > 0
    if recompiled:
        confidence = "low"  # the spread is explained by compiles during the timed calls
    return NoisyTimingFinding(
        relative_iqr=rel,
        median_ms=timing.median_ms,
        ci_low_ms=lo,
        ci_high_ms=hi,
        iqr_ms=timing.iqr_ms,
        p95_ms=timing.p95_ms,
        n_samples=timing.n,
        evidence=(
            Evidence(
                "relative_iqr",
                rel,
                "fraction",
                limits.max_relative_iqr,
                source="run.timing",
                rows=(
                    {
                        "min_ms": timing.min_ms,
                        "median_ms": timing.median_ms,
                        "p95_ms": timing.p95_ms,
                        "max_ms": timing.max_ms,
                    },
                ),
            ),
            Evidence(
                "median_ci_half_width_rel",
                min(rel_ci, 1e12),
                "fraction",
                limits.max_relative_ci,
                source="run.timing (95% interval of the median)",
            ),
        ),
        time_at_stake_ms=min(half_ci_ms, timing.median_ms),
        confidence=confidence,
        scope="timing",
    )


@dataclass(frozen=True)
class NoisyTimingLimits(Limits):
    """The thresholds of ``noisy_timing``."""

    max_relative_iqr: float = 0.10
    max_relative_ci: float = 0.05


@rule(
    "noisy_timing",
    category="measurement",
    scope="run",
    limits=NoisyTimingLimits,
    finding=NoisyTimingFinding,
    words=NOISY_TIMING_WORDS,
)
def noisy_timing(f: RunFacts, limits: NoisyTimingLimits) -> NoisyTimingFinding | None:
    """The spread of the timing samples is large against their median."""
    return _noise(f, limits)


NO_INTERVAL_BELOW = 6  # 2 * 0.5**n > 0.05 for n < 6: no order-statistic 95 % interval of the median


@dataclass(frozen=True)
class TooFewSamplesLimits(Limits):
    """The thresholds of ``too_few_samples``."""

    min_samples: int = 10


@dataclass(frozen=True, kw_only=True)
class TooFewSamplesFinding(Finding):
    n_samples: int  # timed samples
    min_interval_samples: int  # the fewest samples an interval of the median can be formed from (NO_INTERVAL_BELOW)
    min_ms: float  # the shortest sample
    max_ms: float  # the longest sample
    ci_low_ms: float  # the 95% interval of the median, low end (interval)
    ci_high_ms: float  # and high end (interval)


_TOO_FEW_SAMPLES_OBSERVED = {
    "no_interval": "{n_samples} samples: fewer than {min_interval_samples}, so no 95% interval of the median "
    "can be formed (they span {min_ms:.4g}-{max_ms:.4g} ms)",
    "interval": "{n_samples} samples; the 95% interval of the median is {ci_low_ms:.4g}-{ci_high_ms:.4g} ms",
}
TOO_FEW_SAMPLES_WORDS = {
    interval: Words(
        title="Only {n_samples} timing samples",
        observed=observed,
        mechanism="With few samples the median's interval is wide; any comparison inherits that width, and "
        "findings whose stake is within it cannot be told from noise.",
        predicted_effect="more repeats narrow the interval; the median itself should stay inside it",
        falsifier="profile again with repeat >= 20: if the median moves outside this interval, the first result was "
        "not trustworthy",
    )
    for interval, observed in _TOO_FEW_SAMPLES_OBSERVED.items()
}


@rule(
    "too_few_samples",
    category="measurement",
    scope="run",
    limits=TooFewSamplesLimits,
    finding=TooFewSamplesFinding,
    words=TOO_FEW_SAMPLES_WORDS,
)
def too_few_samples(f: RunFacts, limits: TooFewSamplesLimits) -> TooFewSamplesFinding | None:
    """Too few timed samples for a tight interval on the median."""
    timing = f.require_timing()
    if timing.n >= limits.min_samples:
        return None
    lo, hi = timing.median_ci_ms()
    evidence = [Evidence("n_samples", timing.n, "samples", limits.min_samples, "<", "run.timing")]
    if timing.n < NO_INTERVAL_BELOW:
        # no distribution-free 95 % interval of the median exists: the whole median is uncertain, the
        # timing cannot be judged at all, and this caveat leads the ranking (diagnose.voids_timing)
        stake = timing.median_ms
        evidence.append(
            Evidence(
                NO_INTERVAL_METRIC,
                1,
                "flag",
                source=f"run.timing (order statistics: fewer than {NO_INTERVAL_BELOW} samples)",
            )
        )
    else:
        stake = min(max(hi - lo, 0.0) / 2, timing.median_ms)
    return TooFewSamplesFinding(
        branch="no_interval" if timing.n < NO_INTERVAL_BELOW else "interval",
        n_samples=timing.n,
        min_interval_samples=NO_INTERVAL_BELOW,
        min_ms=timing.min_ms,
        max_ms=timing.max_ms,
        ci_low_ms=lo,
        ci_high_ms=hi,
        evidence=tuple(evidence),
        time_at_stake_ms=stake + 1e-9,
        # about the measurement, not the workload: never high; with an interval (n >= 6) the
        # interval's width says how much, and the findings within it are qualified
        confidence="medium" if timing.n < NO_INTERVAL_BELOW else "low",
        scope="timing",
    )


@dataclass(frozen=True)
class TimerResolutionLimits(Limits):
    """The thresholds of ``timer_resolution``."""

    min_ticks: float = 100.0
    min_call_us: float = 5.0


@dataclass(frozen=True, kw_only=True)
class TimerResolutionFinding(Finding):
    per_call_us: float  # the median sample over the calls in it
    median_us: float  # the median sample
    n_calls_per_sample: int  # calls timed in one sample


TIMER_RESOLUTION_WORDS = Words(
    title="Each timed call takes only {per_call_us:.2f} µs",
    observed="median {median_us:.3f} µs per sample, {n_calls_per_sample} call(s) per sample",
    mechanism="Timer overhead and resolution (and, on GPU, launch latency) are a large part of so short a sample.",
    predicted_effect="timing many calls per sample gives a per-call time that does not depend on the timer",
    falsifier="time 100 calls per sample: if the per-call time stays the same, the single-call samples were fine",
    confounders=("very short calls may be legitimately this fast",),
)


@rule(
    "timer_resolution",
    category="measurement",
    scope="run",
    limits=TimerResolutionLimits,
    finding=TimerResolutionFinding,
    words=TIMER_RESOLUTION_WORDS,
)
def timer_resolution(f: RunFacts, limits: TimerResolutionLimits) -> TimerResolutionFinding | None:
    """A sample is so short that the timer's resolution and call overhead dominate it."""
    timing = f.require_timing()
    ticks = timing.median_ms / timing.timer_resolution_ms if timing.timer_resolution_ms > 0 else float("inf")
    per_call_us = timing.median_ms * 1e3 / max(1, timing.calls_per_sample)
    if ticks >= limits.min_ticks and per_call_us >= limits.min_call_us:
        return None
    return TimerResolutionFinding(
        per_call_us=per_call_us,
        median_us=timing.median_ms * 1e3,
        n_calls_per_sample=timing.calls_per_sample,
        evidence=(
            Evidence("per_call_us", per_call_us, "us", limits.min_call_us, "<", "run.timing"),
            Evidence("timer_ticks", min(ticks, 1e12), "ticks", limits.min_ticks, "<", "run.timing"),
        ),
        time_at_stake_ms=timing.median_ms,
        confidence="medium",
        scope="timing",
    )
