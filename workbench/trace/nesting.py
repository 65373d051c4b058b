"""CPU op nesting by interval containment per (rank, pid, tid): parent, depth, self time.

Runtime calls are placed into the same walk as leaves, which gives each call its innermost
enclosing CPU op (the op that launched the kernel).
"""
from __future__ import annotations

import numpy as np
import pandas as pd


def _thread_keys(frame: pd.DataFrame) -> np.ndarray:
    keys = frame["rank"].astype(str) + "/" + frame["pid"].astype(str) + "/" + frame["tid"].astype(str)
    return keys.to_numpy()


def nest(ops: pd.DataFrame, calls: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(parent, depth, self_us) for ``ops`` and the enclosing op index for ``calls``.

    Indexes are row positions in ``ops``; -1 where there is none.
    """
    n_ops, n_calls = len(ops), len(calls)
    keys = pd.Categorical(np.concatenate([_thread_keys(ops), _thread_keys(calls)])).codes
    ts = np.concatenate([ops["ts_us"].to_numpy(), calls["ts_us"].to_numpy()])
    end = np.concatenate([ops["end_us"].to_numpy(), calls["end_us"].to_numpy()])
    is_op = np.arange(n_ops + n_calls) < n_ops
    # thread, then start; at equal start the longer (the parent) first, ops before calls
    order = np.lexsort((~is_op, -(end - ts), ts, keys))
    parent_all = _walk(order.tolist(), keys.tolist(), end.tolist(), ts.tolist(), n_ops)
    parent = parent_all[:n_ops]
    depth = _depths(parent)
    dur = (end - ts)[:n_ops]
    child_sum = np.bincount(parent[parent >= 0], weights=dur[parent >= 0], minlength=n_ops)
    self_us = np.maximum(dur - child_sum[:n_ops], 0.0)
    return parent, depth, self_us, parent_all[n_ops:]


def _walk(order: list[int], keys: list[int], end: list[float], ts: list[float], n_ops: int) -> np.ndarray:
    parent = [-1] * len(order)
    stack: list[int] = []
    current = None
    for i in order:
        if keys[i] != current:
            current = keys[i]
            stack.clear()
        start = ts[i]
        while stack and end[stack[-1]] <= start:
            stack.pop()
        if stack:
            parent[i] = stack[-1]
        if i < n_ops:
            stack.append(i)
    return np.asarray(parent, dtype=np.int64)


def _depths(parent: np.ndarray) -> np.ndarray:
    depth = np.zeros(len(parent), dtype=np.int64)
    current = parent.copy()
    while True:
        has = current >= 0
        if not has.any():
            return depth
        depth[has] += 1
        current[has] = parent[current[has]]
