"""CPU op nesting by interval containment per (rank, pid, tid): parent, depth, self time.

Runtime calls are placed into the same walk as leaves, which gives each call its innermost
enclosing CPU op (the op that launched the kernel).

Within a thread, sorted by start (the longer first at equal start, ops before calls), the
parent of an event is the nearest earlier op that ends after the event starts: what a
stack walk finds, computed here for all events at once by pointer jumping (numpy, no loop
per event; a few dozen rounds on real traces).
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def _codes(a: pd.Series, b: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Codes of two text columns (categoricals or not) in one shared numbering."""
    labels_a, labels_b = _labels(a), _labels(b)
    shared = pd.Index(labels_a[0]).append(pd.Index(labels_b[0])).unique()
    return (
        shared.get_indexer(labels_a[0])[labels_a[1]] if len(a) else np.zeros(0, np.int64),
        shared.get_indexer(labels_b[0])[labels_b[1]] if len(b) else np.zeros(0, np.int64),
    )


def _labels(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.cat.categories.astype(str).to_numpy(), column.cat.codes.to_numpy()
    codes, uniques = pd.factorize(column.astype(str))
    return np.asarray(uniques), codes


def _thread_keys(ops: pd.DataFrame, calls: pd.DataFrame) -> np.ndarray:
    pid_ops, pid_calls = _codes(ops["pid"], calls["pid"])
    tid_ops, tid_calls = _codes(ops["tid"], calls["tid"])
    rank = pd.factorize(np.concatenate([ops["rank"].to_numpy(), calls["rank"].to_numpy()]))[0]
    pid = np.concatenate([pid_ops, pid_calls]).astype(np.int64)
    tid = np.concatenate([tid_ops, tid_calls]).astype(np.int64)
    n_pid, n_tid = int(pid.max(initial=0)) + 1, int(tid.max(initial=0)) + 1
    return (rank.astype(np.int64) * n_pid + pid) * n_tid + tid


def nest(ops: pd.DataFrame, calls: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(parent, depth, self_us) for ``ops`` and the enclosing op index for ``calls``.

    Indexes are row positions in ``ops``; -1 where there is none.
    """
    n_ops = len(ops)
    keys = _thread_keys(ops, calls)
    ts = np.concatenate([ops["ts_us"].to_numpy(), calls["ts_us"].to_numpy()])
    end = np.concatenate([ops["end_us"].to_numpy(), calls["end_us"].to_numpy()])
    is_op = np.arange(len(ts)) < n_ops
    # thread, then start; at equal start the longer (the parent) first, ops before calls
    order = np.lexsort((~is_op, -(end - ts), ts, keys))
    parent_sorted = _enclosing(keys[order], ts[order], np.where(is_op, end, -np.inf)[order])
    parent_all = np.full(len(ts), -1, dtype=np.int64)
    found = parent_sorted >= 0
    parent_all[order[found]] = order[parent_sorted[found]]
    parent = parent_all[:n_ops]
    depth = _depths(parent)
    dur = (end - ts)[:n_ops]
    child_sum = np.bincount(parent[parent >= 0], weights=dur[parent >= 0], minlength=n_ops)
    self_us = np.maximum(dur - child_sum[:n_ops], 0.0)
    return parent, depth, self_us, parent_all[n_ops:]


def _enclosing(keys: np.ndarray, ts: np.ndarray, op_end: np.ndarray) -> np.ndarray:
    """For each position i (sorted): the nearest j < i of the same key with op_end[j] > ts[i], else -1.

    Every candidate that fails for i also fails for all of i's later events, and so do the
    positions it had already ruled out, so i may jump to that candidate's own answer (or its
    current candidate): pointer jumping, O(n log n) at worst.
    """
    n = len(ts)
    answer = np.full(n, -1, dtype=np.int64)
    cand = np.arange(n, dtype=np.int64) - 1
    if n:
        cand[np.flatnonzero(np.diff(keys) != 0) + 1] = -1
        cand[0] = -1
    done = cand < 0
    todo = np.flatnonzero(~done)
    while len(todo):
        c = cand[todo]
        hit = op_end[c] > ts[todo]
        answer[todo[hit]] = c[hit]
        done[todo[hit]] = True
        miss, c = todo[~hit], c[~hit]
        jump = np.where(done[c], answer[c], cand[c])
        cand[miss] = jump
        ended = jump < 0
        done[miss[ended]] = True
        todo = miss[~ended]
    return answer


def _depths(parent: np.ndarray) -> np.ndarray:
    depth = np.zeros(len(parent), dtype=np.int64)
    current = parent.copy()
    while True:
        has = current >= 0
        if not has.any():
            return depth
        depth[has] += 1
        current[has] = parent[current[has]]
