"""Interval arithmetic over start/end arrays (µs): unions, overlaps, gaps. numpy only."""
from __future__ import annotations

import numpy as np


def merge(starts, ends) -> tuple[np.ndarray, np.ndarray]:
    """Sorted, disjoint intervals covering the same time as the input intervals."""
    s = np.asarray(starts, dtype=np.float64)
    e = np.asarray(ends, dtype=np.float64)
    if s.size == 0:
        return s, e
    order = np.argsort(s, kind="stable")
    s, e = s[order], np.maximum(e[order], s[order])
    run_end = np.maximum.accumulate(e)
    new_block = np.empty(s.size, dtype=bool)
    new_block[0] = True
    new_block[1:] = s[1:] > run_end[:-1]
    idx = np.flatnonzero(new_block)
    block_ends = np.append(run_end[idx[1:] - 1], run_end[-1]) if idx.size > 1 else run_end[-1:]
    return s[idx], block_ends


def union_us(starts, ends) -> float:
    s, e = merge(starts, ends)
    return float(np.sum(e - s)) if s.size else 0.0


def overlap_us(a_starts, a_ends, b_starts, b_ends) -> float:
    """|union(A) ∩ union(B)|."""
    sa, ea = merge(a_starts, a_ends)
    sb, eb = merge(b_starts, b_ends)
    if sa.size == 0 or sb.size == 0:
        return 0.0
    total = union_us(sa, ea) + union_us(sb, eb)
    both = union_us(np.concatenate([sa, sb]), np.concatenate([ea, eb]))
    return float(total - both)


def gaps(starts, ends) -> tuple[np.ndarray, np.ndarray]:
    """The holes between merged intervals: (gap_start_us, gap_dur_us)."""
    s, e = merge(starts, ends)
    if s.size < 2:
        return np.empty(0), np.empty(0)
    return e[:-1], s[1:] - e[:-1]
