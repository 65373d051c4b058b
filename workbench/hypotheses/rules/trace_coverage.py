"""The trace recorded the calls (their step annotations) but no work inside them: the work ran where the
profiler does not record (threads it was not enabled on, such as a ``concurrent.futures`` pool's workers,
another process) or outside PyTorch. Then no rule that reads ops or kernels can explain the time, and the
diagnosis says so instead of staying silent: a caveat on the measurement."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.hypothesis import Evidence
from workbench.hypotheses.registry import Limits, NotJudged, rule
from workbench.hypotheses.rules._common import bounded_ms
from workbench.hypotheses.words import Finding, Words


def _inside(ts: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> int:
    """How many of the times ``ts`` fall inside one of the (sorted, disjoint) windows."""
    if not ts.size or not starts.size:
        return 0
    i = np.searchsorted(starts, ts, side="right") - 1
    ok = i >= 0
    return int(np.sum(ok & (ts < ends[np.clip(i, 0, None)])))


@dataclass(frozen=True)
class TraceRecordsNoWorkLimits(Limits):
    """The thresholds of ``trace_records_no_work``."""

    min_events_per_step: float = 1.0


@dataclass(frozen=True, kw_only=True)
class TraceRecordsNoWorkFinding(Finding):
    n_calls: int  # traced calls (step annotations)
    traced_ms: float  # their summed time
    n_events: int  # recorded ops and kernels that start inside them


NO_WORK_WORDS = Words(
    title="The trace holds {n_calls} calls but {almost}no work inside them",
    observed="{n_calls} traced calls ({traced_ms:.3g} ms) with {n_events} recorded ops or kernels in them",
    mechanism="The calls ran their work where the profiler does not record it: on threads it was not enabled on "
    "(a thread pool's workers), in another process, or outside PyTorch (Python, NumPy, I/O). The "
    "timing is real, but no rule can say from this trace where it went.",
    predicted_effect="profiling the work on the thread that runs it (or the pool's function itself) shows its ops",
    falsifier="profile the function the pool (or the other process) runs, directly: if its trace holds the ops, "
    "they were on an unrecorded thread",
    confounders=(
        "many threads on few cores also make such calls slow and their timing noisy (see the run's "
        "health check: thread oversubscription, CPU wait)",
    ),
    parts={"almost": "almost "},  # some ops or kernels inside the calls, fewer than one a call (else not one)
)


@rule(
    "trace_records_no_work",
    category="measurement",
    scope="trace",
    limits=TraceRecordsNoWorkLimits,
    finding=TraceRecordsNoWorkFinding,
    words=NO_WORK_WORDS,
)
def trace_records_no_work(f: TraceFacts, limits: TraceRecordsNoWorkLimits) -> TraceRecordsNoWorkFinding | None:
    """The traced calls hold (almost) no recorded op or kernel, fewer than one a call: the trace cannot explain
    where their time went."""
    steps = f.steps
    if steps.empty:
        raise NotJudged("no step annotations in the trace: which recorded work belongs to a call is unknown")
    order = steps.sort_values("ts_us")
    starts = order["ts_us"].to_numpy(dtype=float)
    ends = starts + order["dur_us"].to_numpy(dtype=float)
    events = sum(_inside(t["ts_us"].to_numpy(dtype=float), starts, ends) for t in (f.cpu_ops, f.kernels) if not t.empty)
    per_step = events / len(starts)
    if per_step >= limits.min_events_per_step:
        return None
    total = float(np.sum(ends - starts))
    return TraceRecordsNoWorkFinding(
        n_calls=len(starts),
        traced_ms=total / 1e3,
        n_events=events,
        parts=("almost",) if events else (),
        evidence=(
            Evidence(
                "events_per_step",
                per_step,
                "events",
                limits.min_events_per_step,
                "<",
                "cpu_ops and kernels within the step annotations",
                rows=({"steps": len(starts), "traced_ms": round(total / 1e3, 4), "events": events},),
            ),
        ),
        time_at_stake_ms=bounded_ms(total, total),
        confidence="medium",
        scope="traced calls",
    )
