"""Interval arithmetic on numpy arrays, vectorised: unions by sort + cumulative max, no loop per event.

Times are float64 microseconds. An interval is ``[start, end)``; zero-length and negative intervals
contribute nothing to a union.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def union(start_us: np.ndarray, end_us: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge intervals into disjoint, sorted ``(starts, ends)``."""
    start = np.asarray(start_us, dtype=np.float64)
    end = np.asarray(end_us, dtype=np.float64)
    keep = end > start
    start, end = start[keep], end[keep]
    if start.size == 0:
        return start, end
    order = np.argsort(start, kind="stable")
    start, end = start[order], end[order]
    reach = np.maximum.accumulate(end)
    # a new merged interval begins where the start lies beyond everything reached before it
    new = np.empty(start.size, dtype=bool)
    new[0] = True
    new[1:] = start[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.r_[first[1:] - 1, start.size - 1]
    return start[first], reach[last]


def hta_merged(start_us: np.ndarray, end_us: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Holistic Trace Analysis's ``merge_kernel_intervals``, for parity: sorted by start, an interval opens a
    new group when it starts after every end before it; a group spans (min start, max end). Unlike
    ``union``, a negative-length interval (from HTA's rounding) that lands alone forms a group of negative
    length, which then subtracts from the busy time."""
    start = np.asarray(start_us, dtype=np.float64)
    end = np.asarray(end_us, dtype=np.float64)
    if start.size == 0:
        return start, end
    order = np.argsort(start, kind="stable")
    start, end = start[order], end[order]
    reach = np.r_[-np.inf, np.maximum.accumulate(end)[:-1]]
    first = np.flatnonzero(start > reach)
    return start[first], np.maximum.reduceat(end, first)


def union_length(start_us: np.ndarray, end_us: np.ndarray) -> float:
    """Total time covered by at least one interval."""
    s, e = union(start_us, end_us)
    return float(np.sum(e - s))


def union_length_by(group: np.ndarray, start_us: np.ndarray, end_us: np.ndarray) -> dict:
    """``{group value: covered time}``, one sort for all groups (groups are integer codes or labels)."""
    group = np.asarray(group)
    start = np.asarray(start_us, dtype=np.float64)
    end = np.asarray(end_us, dtype=np.float64)
    keep = end > start
    group, start, end = group[keep], start[keep], end[keep]
    if start.size == 0:
        return {}
    codes, uniques = _codes(group)
    order = np.lexsort((start, codes))
    codes, start, end = codes[order], start[order], end[order]
    reach = pd.Series(end).groupby(codes).cummax().to_numpy()
    new = np.empty(start.size, dtype=bool)
    new[0] = True
    new[1:] = (codes[1:] != codes[:-1]) | (start[1:] > reach[:-1])
    first = np.flatnonzero(new)
    last = np.r_[first[1:] - 1, start.size - 1]
    lengths = np.bincount(codes[first], weights=reach[last] - start[first], minlength=len(uniques))
    return {uniques[i]: float(lengths[i]) for i in range(len(uniques))}


def _codes(values: np.ndarray) -> tuple[np.ndarray, list]:
    uniques, codes = np.unique(values, return_inverse=True)
    return codes.astype(np.int64), list(uniques.tolist())


def segments_by_mask(sets: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Sweep over the unions of several interval sets: per elementary segment, the bit mask of the
    sets active in it (bit i for ``sets[i]``) and its length."""
    times, deltas = [], []
    for bit, (s, e) in enumerate(sets):
        us, ue = union(s, e)
        times += [us, ue]
        deltas += [np.full(us.size, 1 << bit, dtype=np.int64), np.full(ue.size, -(1 << bit), dtype=np.int64)]
    t = np.concatenate(times) if times else np.zeros(0)
    if t.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    d = np.concatenate(deltas)
    order = np.argsort(t, kind="stable")
    t, d = t[order], d[order]
    return np.cumsum(d)[:-1], np.diff(t)


def coverage_by_mask(sets: list[tuple[np.ndarray, np.ndarray]]) -> dict[int, float]:
    """Time covered by each combination of interval sets, exclusively.

    ``sets[i]`` is ``(starts, ends)``; the answer maps a bit mask (bit i set when set i is active)
    to the time during which exactly that combination is active. Mask 0 (nothing active) is left out.
    """
    masks, seg = segments_by_mask(sets)
    if masks.size == 0:
        return {}
    sums = np.bincount(masks, weights=seg)
    return {int(m): float(sums[m]) for m in np.flatnonzero(sums) if m > 0}


def intersection_length(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> float:
    """Time during which both interval sets are active."""
    return coverage_by_mask([a, b]).get(3, 0.0)


def covered_within(start_us: np.ndarray, end_us: np.ndarray, cover: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """For each interval ``[start, end)``: how much of it a set of intervals ``cover`` covers (its union is
    taken first), vectorised by the union's cumulative covered length."""
    start = np.asarray(start_us, dtype=np.float64)
    end = np.asarray(end_us, dtype=np.float64)
    cs, ce = union(*cover)
    if cs.size == 0 or start.size == 0:
        return np.zeros(start.size)
    before = np.r_[0.0, np.cumsum(ce - cs)]  # covered length before each union piece starts

    def covered_up_to(x: np.ndarray) -> np.ndarray:
        i = np.searchsorted(cs, x, side="right")  # pieces starting at or before x
        inside = np.where(i > 0, np.clip(x - cs[np.maximum(i - 1, 0)], 0.0, (ce - cs)[np.maximum(i - 1, 0)]), 0.0)
        return before[np.maximum(i - 1, 0)] * (i > 0) + inside

    return np.maximum(covered_up_to(end) - covered_up_to(start), 0.0)
