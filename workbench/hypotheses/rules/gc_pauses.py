"""Pauses in a few calls, not work in every call: Python's garbage collector (``gc.collect()`` in the
recorded Python stack) or, where the stack does not show a cause, steps far longer than the typical one.

A pause in one call of six is not the cost of the ops around it, nor host work every call does: the gaps it
leaves are taken out of the host-gap finding (``host_ops.cpu_host_gaps``) and said here. With the Python
stack recorded (the traced pass records it), a ``<built-in function collect>`` event names the collector;
without it (or for the collector's automatic runs, which leave no event) the pattern is the evidence: a
minority of steps (the first excepted: ``first_step_outlier`` judges it) many times the median step.
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
from workbench.hypotheses.rules._common import bounded_ms, pct, rows
from workbench.hypotheses.words import Finding, Words

GC_CALL = re.compile(r"^<built-in (?:function|method) collect>?")  # gc.collect() in the Python stack


def gc_spans(f: TraceFacts) -> tuple[np.ndarray, np.ndarray]:
    """The disjoint spans (µs) in which the recorded Python stack shows ``gc.collect()`` running; empty
    where the trace has no Python stack or no collection."""
    calls = f.python_calls
    if calls.empty:
        return np.zeros(0), np.zeros(0)
    hit = calls[calls["name"].astype(str).str.match(GC_CALL)]
    return union(hit["ts_us"].to_numpy(dtype=float), hit["end_us"].to_numpy(dtype=float))


def step_windows(f: TraceFacts) -> pd.DataFrame:
    """The steps (ts_us, dur_us) of the rank with the most of them; empty without step annotations."""
    steps = f.steps
    if steps.empty:
        return pd.DataFrame(columns=["ts_us", "dur_us"])
    busiest = steps["rank"].value_counts().idxmax() if "rank" in steps else None
    own = steps[steps["rank"] == busiest] if busiest is not None else steps
    return own.sort_values("ts_us")[["ts_us", "dur_us"]].reset_index(drop=True)


def paused_steps(durations: np.ndarray, pause_ratio: float) -> np.ndarray:
    """Which steps (the first excepted) take more than ``pause_ratio`` x the median step, when they are a
    minority of the steps (a majority of long steps is the steady state, not a pause)."""
    d = np.asarray(durations, dtype=float)
    out = np.zeros(d.size, dtype=bool)
    if d.size < 4:
        return out
    typical = float(np.median(d[1:]))
    long = d > pause_ratio * typical
    long[0] = False
    if 0 < long.sum() < (d.size - 1) / 2:
        out = long
    return out


@dataclass(frozen=True)
class GcPausesLimits(Limits):
    """The thresholds of ``gc_pauses``."""

    min_share_pct: float = 10.0
    pause_ratio: float = 5.0


@dataclass(frozen=True, kw_only=True)
class GcPausesFinding(Finding):
    n_calls_in_gc: int  # traced calls in which gc.collect() ran
    n_calls: int  # traced calls (steps; one window without step annotations)
    gc_ms: float  # gc.collect()'s time within them
    gc_share_pct: float  # of the traced time
    typical_ms: float  # the median call, the first excepted (nan with fewer than 4 calls: no part "typical")


_PREDICTION = (
    "fewer Python objects alive (or gc.freeze() after set-up, or collecting outside the hot loop) "
    "removes the pauses; the median call does not change, the tail (p95, the mean) does"
)
_FALSIFIER = (
    "run with gc.disable() around the calls (gc.enable() after): if the long calls remain, the pauses "
    "are not the garbage collector"
)
_CONFOUNDERS = (
    "a loaded machine preempts single calls the same way (see the run's health check)",
    "the profiler's Python tracer makes a collection slower than it is untraced",
)
GC_PAUSES_WORDS = Words(
    title="Python's garbage collector runs in {n_calls_in_gc} of {n_calls} calls",
    observed="gc.collect() ran for {gc_ms:.2f} ms in {n_calls_in_gc} of {n_calls} traced calls ({gc_share_pct:.0f}% "
    "of the traced time){typical}",
    mechanism="A garbage collection walks every tracked Python object (a full collection over a large object "
    "graph takes milliseconds to seconds) and stops the calls it falls in; the ops around it are not "
    "slower, and the median call does not show it.",
    predicted_effect=_PREDICTION,
    falsifier=_FALSIFIER,
    confounders=_CONFOUNDERS,
    # where there are enough calls for a median call (4 or more; not one window without step annotations)
    parts={"typical": "; the typical call takes {typical_ms:.3g} ms"},
)


@rule(
    "gc_pauses",
    category="measurement",
    scope="trace",
    limits=GcPausesLimits,
    finding=GcPausesFinding,
    words=GC_PAUSES_WORDS,
)
def gc_pauses(f: TraceFacts, limits: GcPausesLimits) -> GcPausesFinding | None:
    """Python's garbage collector (gc.collect() in the recorded Python stack) stops some calls: a finding,
    its evidence is in the trace."""
    c = _traced_calls(f, limits)
    if not c.collected:
        return None  # gc_pauses speaks where the stack shows the collector, intermittent_pauses elsewhere
    in_gc = int((c.gc_per_step > 0).sum())
    return GcPausesFinding(
        n_calls_in_gc=in_gc,
        n_calls=c.n,
        gc_ms=c.gc_us / 1e3,
        gc_share_pct=pct(c.gc_us, c.total_us),
        typical_ms=c.typical_us / 1e3,
        parts=("typical",) if c.typical_us == c.typical_us else (),
        evidence=(
            Evidence(
                "gc_time_pct",
                pct(c.gc_us, c.total_us),
                "%",
                limits.min_share_pct,
                ">=",
                "python stack (<built-in function collect>) within the steps",
                rows=rows(c.table[c.table["gc_us"] > 0], ["step", "dur_us", "gc_us"], by="gc_us"),
            ),
            *_paused_steps_evidence(c),
        ),
        time_at_stake_ms=bounded_ms(c.gc_us, c.bound_us),
        confidence="high" if c.paused.any() and bool((c.gc_per_step[c.paused] > 0).all()) else "medium",
        scope="host thread",
    )


@dataclass(frozen=True)
class IntermittentPausesLimits(Limits):
    """The thresholds of ``intermittent_pauses``."""

    min_share_pct: float = 10.0
    pause_ratio: float = 5.0


@dataclass(frozen=True, kw_only=True)
class IntermittentPausesFinding(Finding):
    n_paused: int  # traced calls (the first excepted) over pause_ratio x the median call
    n_calls: int  # traced calls
    pause_ratio: float  # the threshold, x the median call
    typical_ms: float  # the median call, the first excepted
    pause_ms: float  # the paused calls' time above the median call
    pause_share_pct: float  # of the traced time


INTERMITTENT_PAUSES_WORDS = Words(
    title="{n_paused} of {n_calls} calls pause for many times a typical call",
    observed="{n_paused} traced calls take over {pause_ratio:.0f}x the median call ({typical_ms:.3g} ms): "
    "{pause_ms:.2f} ms above it ({pause_share_pct:.0f}% of the traced time); the trace shows no gc.collect() call in "
    "them",
    mechanism="Something stops a few calls for far longer than a call takes: Python's automatic garbage "
    "collection (a generation-2 collection leaves no event in the trace), preemption by other "
    "processes, or I/O. The ops are not the cost.",
    predicted_effect=_PREDICTION,
    falsifier=_FALSIFIER,
    confounders=_CONFOUNDERS,
)


@rule(
    "intermittent_pauses",
    category="measurement",
    scope="trace",
    limits=IntermittentPausesLimits,
    finding=IntermittentPausesFinding,
    words=INTERMITTENT_PAUSES_WORDS,
)
def intermittent_pauses(f: TraceFacts, limits: IntermittentPausesLimits) -> IntermittentPausesFinding | None:
    """A few calls (the first excepted) take many times the typical call, with no collection in the stack: a
    caveat on the timing (garbage collection, preemption or I/O: the trace cannot tell which)."""
    c = _traced_calls(f, limits)
    if c.collected or pct(c.pause_us, c.total_us) < limits.min_share_pct:
        return None  # gc_pauses speaks where the stack shows the collector, intermittent_pauses elsewhere
    return IntermittentPausesFinding(
        n_paused=int(c.paused.sum()),
        n_calls=c.n,
        pause_ratio=limits.pause_ratio,
        typical_ms=c.typical_us / 1e3,
        pause_ms=c.pause_us / 1e3,
        pause_share_pct=pct(c.pause_us, c.total_us),
        evidence=(
            Evidence(
                "paused_time_pct",
                pct(c.pause_us, c.total_us),
                "%",
                limits.min_share_pct,
                ">=",
                "step annotations (steps over pause_ratio x the median, the first excepted)",
                rows=rows(c.table[c.paused], ["step", "dur_us"], by="dur_us"),
            ),
            *_paused_steps_evidence(c),
        ),
        time_at_stake_ms=bounded_ms(c.pause_us, c.bound_us),
        confidence="low",
        scope="host thread",
    )


@dataclass(frozen=True)
class _TracedCalls:
    """The traced calls of one trace, what the collector took of them and which paused."""

    n: int  # calls
    total_us: float  # their summed time
    gc_per_step: np.ndarray  # gc.collect()'s time within each call
    gc_us: float  # its sum
    paused: np.ndarray  # which calls paused (``paused_steps``)
    typical_us: float  # the median call, the first excepted (nan with fewer than 4 calls)
    pause_us: float  # the paused calls' time above the median
    collected: bool  # the collector's share reaches min_share_pct
    table: pd.DataFrame  # step, dur_us, gc_us
    bound_us: float  # the most a stake can be: the traced time within the trace's window


def _traced_calls(f: TraceFacts, limits: GcPausesLimits | IntermittentPausesLimits) -> _TracedCalls:
    steps = step_windows(f)
    spans = gc_spans(f)
    if steps.empty and not spans[0].size:
        raise NotJudged(
            "no step annotations and no Python stack in the trace: pauses in a few calls cannot be told "
            "from work in every call"
        )
    if steps.empty:
        starts, ends = np.array([0.0]), np.array([f.window_us])
        lo = min((float(t["ts_us"].min()) for t in (f.cpu_ops, f.kernels) if not t.empty), default=0.0)
        starts, ends = starts + lo, ends + lo
    else:
        starts = steps["ts_us"].to_numpy(dtype=float)
        ends = starts + steps["dur_us"].to_numpy(dtype=float)
    total = float(np.sum(ends - starts))
    gc_per_step = covered_within(starts, ends, spans)
    gc_us = float(gc_per_step.sum())
    paused = paused_steps(ends - starts, limits.pause_ratio)
    typical = float(np.median((ends - starts)[1:])) if len(starts) >= 4 else float("nan")
    pause_us = float(np.sum((ends - starts)[paused] - typical)) if paused.any() else 0.0
    n = len(starts)
    return _TracedCalls(
        n=n,
        total_us=total,
        gc_per_step=gc_per_step,
        gc_us=gc_us,
        paused=paused,
        typical_us=typical,
        pause_us=pause_us,
        collected=pct(gc_us, total) >= limits.min_share_pct,
        table=pd.DataFrame({"step": np.arange(n), "dur_us": ends - starts, "gc_us": gc_per_step}),
        bound_us=min(total, f.window_us) if f.window_us > 0 else total,
    )


def _paused_steps_evidence(c: _TracedCalls) -> tuple[Evidence, ...]:
    """The paused steps, where some paused."""
    if not c.paused.any():
        return ()
    return (
        Evidence(
            "paused_steps",
            int(c.paused.sum()),
            "steps",
            source="step annotations",
            rows=rows(c.table[c.paused], ["step", "dur_us", "gc_us"], by="dur_us"),
        ),
    )
