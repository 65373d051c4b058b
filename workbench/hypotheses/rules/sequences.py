"""Frequent kernel (or CPU op) sequences: the same run of n distinct-named kernels repeating across
steps is one fusion or CUDA-graph candidate; the idle time between its kernels is what capturing or
fusing it removes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.lib.stride_tricks import sliding_window_view

from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.hypothesis import Evidence
from workbench.hypotheses.registry import Limits, NotJudged, rule
from workbench.hypotheses.rules._common import bounded_ms, pct
from workbench.hypotheses.words import Finding, Words

MAX_EVENTS = 100_000  # per stream / thread: the latest ones (a steady state repeats within them)
CANDIDATES_PER_LENGTH = 5


def _streams(f: TraceFacts) -> list[tuple[str, pd.DataFrame]]:
    """Ordered event sequences: kernels per (rank, stream) on a GPU trace, top-level ops of the
    busiest host thread on a CPU-only one."""
    if f.has_gpu:
        k = f.kernels[f.kernels["kind"] == "kernel"]
        return [
            (f"rank {r} stream {s}", g.sort_values("ts_us").tail(MAX_EVENTS))
            for (r, s), g in k.groupby(["rank", "stream"], observed=True)
        ]
    from workbench.hypotheses.rules.host_ops import main_thread_ops

    ops = main_thread_ops(f)
    return [(f"rank {int(ops['rank'].iloc[0])} host thread", ops.sort_values("ts_us").tail(MAX_EVENTS))]


def _non_overlapping(starts: np.ndarray, n: int) -> np.ndarray:
    keep, last = [], -n
    for s in starts:
        if s >= last + n:
            keep.append(s)
            last = s
    return np.asarray(keep, dtype=np.int64)


def primitive_period(pattern: np.ndarray) -> int:
    """The shortest p such that ``pattern`` is a repetition of its first p items (p divides n)."""
    n = len(pattern)
    for p in range(1, n):
        if n % p == 0 and np.array_equal(pattern, np.tile(pattern[:p], n // p)):
            return p
    return n


def best_sequence(names: np.ndarray, min_len: int, max_len: int, min_repeats: int):
    """(start positions, length) of the n-gram of >= 2 distinct names whose non-overlapping repeats
    cover the most transitions ((n - 1) x repeats); None when nothing repeats ``min_repeats`` times.
    An n-gram that is itself a shorter pattern repeated (a loop body seen k times) is reported as
    that pattern, with its own repeats: the loop body is what a fusion or a graph would take."""
    codes, _ = pd.factorize(names)
    best, best_score = None, 0
    for n in range(min_len, min(max_len, len(codes)) + 1):
        win = sliding_window_view(codes, n)
        uniq, inverse, counts = np.unique(win, axis=0, return_inverse=True, return_counts=True)
        inverse = inverse.reshape(-1)
        varied = np.array([len(set(u)) >= 2 for u in uniq])
        order = [i for i in np.argsort(-counts) if varied[i] and counts[i] >= min_repeats][:CANDIDATES_PER_LENGTH]
        for i in order:
            starts = _non_overlapping(np.flatnonzero(inverse == i), n)
            score = (n - 1) * len(starts)
            if len(starts) >= min_repeats and score > best_score:
                best, best_score = (starts, n), score
    if best is None:
        return None
    starts, n = best
    period = primitive_period(codes[starts[0] : starts[0] + n])
    if period < n:
        body = codes[starts[0] : starts[0] + period]
        hits = np.flatnonzero((sliding_window_view(codes, period) == body).all(axis=1))
        return _non_overlapping(hits, period), period
    return best


@dataclass(frozen=True)
class FrequentSequencesLimits(Limits):
    """The thresholds of ``frequent_sequences``."""

    min_len: int = 3
    max_len: int = 10
    min_repeats: int = 5
    min_stake_pct: float = 1.0


@dataclass(frozen=True, kw_only=True)
class FrequentSequencesFinding(Finding):
    where: str  # the stream or host thread it repeats on ("rank 0 stream 7")
    unit: str  # what the sequence is of: "kernels" (GPU trace) or "ops" (CPU-only trace)
    sequence_len: int  # the events in one repeat
    n_repeats: int  # its non-overlapping repeats
    sequence_head: str  # its first four names joined with " -> " (part "longer" when it has more)
    sequence_ms: float  # the repeats' summed time, first start to last end
    idle_inside_ms: float  # the summed idle between the events within the repeats


FREQUENT_SEQUENCES_WORDS = Words(
    title="A sequence of {sequence_len} {unit} repeats {n_repeats} times",
    observed="{where}: {sequence_head}{longer} "
    "occurs {n_repeats} times ({sequence_ms:.2f} ms), with {idle_inside_ms:.2f} ms idle between its {unit}",
    mechanism="Each repeat launches the same {sequence_len} {unit} one by one, paying a launch/dispatch each and leaving "
    "gaps between them; one fused kernel or one CUDA-graph replay pays it once.",
    predicted_effect="capturing the sequence as a CUDA graph or fusing it (torch.compile) removes the gaps between its "
    "{unit}; fusion may also cut the memory traffic between them",
    falsifier="compile or graph-capture the region that issues the sequence: if the time per repeat does not fall by "
    "about the gaps, the sequence was not launch-limited",
    confounders=("a repeated sequence is a loop body: its gaps may be host work that capture cannot remove",),
    suggested_variants=("cuda_graph", "compiled"),
    parts={"longer": " -> ..."},
    scope="{where}",
)


@rule(
    "frequent_sequences",
    category="launch_overhead",
    scope="trace",
    limits=FrequentSequencesLimits,
    finding=FrequentSequencesFinding,
    words=FREQUENT_SEQUENCES_WORDS,
)
def frequent_sequences(f: TraceFacts, limits: FrequentSequencesLimits) -> FrequentSequencesFinding | None:
    """The same sequence of kernels (or ops) repeats many times: a fusion or CUDA-graph candidate."""
    if not f.has_gpu and f.cpu_ops.empty:
        raise NotJudged("no GPU kernels and no CPU operator events in the trace")
    found = []
    for where, ev in _streams(f):
        names = ev["name"].astype(str).to_numpy()
        hit = best_sequence(names, int(limits.min_len), int(limits.max_len), int(limits.min_repeats))
        if hit is not None:
            found.append((where, ev, names, *hit))
    if not found:
        return None
    where, ev, names, starts, n = max(found, key=lambda x: (x[4] - 1) * len(x[3]))
    ts, end = ev["ts_us"].to_numpy(float), ev["end_us"].to_numpy(float)
    gap = np.maximum(ts[1:] - end[:-1], 0.0)
    cum = np.concatenate([[0.0], np.cumsum(gap)])
    inside_us = float(np.sum(cum[starts + n - 1] - cum[starts]))
    seq_us = float(np.sum(end[starts + n - 1] - ts[starts]))
    window = f.window_us
    share = pct(inside_us, window)
    if share < limits.min_stake_pct:
        return None
    seq = [str(x)[:70] for x in names[starts[0] : starts[0] + n]]
    unit = "kernels" if f.has_gpu else "ops"
    return FrequentSequencesFinding(
        where=where,
        unit=unit,
        sequence_len=n,
        n_repeats=len(starts),
        sequence_head=" -> ".join(s.split("(")[0][:40] for s in seq[:4]),
        sequence_ms=seq_us / 1e3,
        idle_inside_ms=inside_us / 1e3,
        parts=("longer",) if n > 4 else (),
        evidence=(
            Evidence(
                "gap_inside_repeats_pct",
                share,
                "%",
                limits.min_stake_pct,
                source=f"{unit} in time order",
                rows=tuple({"position": i, "name": s} for i, s in enumerate(seq)),
            ),
            Evidence("repeats", len(starts), "times", limits.min_repeats, ">=", f"{unit} (non-overlapping n-grams)"),
            Evidence("sequence_length", n, unit, limits.min_len, ">=", f"{unit} (non-overlapping n-grams)"),
        ),
        time_at_stake_ms=bounded_ms(inside_us, window),
        confidence="medium" if share > 10.0 else "low",
    )
