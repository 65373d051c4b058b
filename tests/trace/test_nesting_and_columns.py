"""Vectorised nesting equals a plain stack walk (overlaps and ties included); column
converters keep odd values out of numeric columns."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

import workbench.trace.args as trace_args
from workbench.trace.nesting import nest


def _stack_walk(ops: pd.DataFrame, calls: pd.DataFrame) -> np.ndarray:
    """Reference: per thread, sorted by start (longer first, ops before calls), a stack of ops."""
    rows = [
        (r.rank, str(r.pid), str(r.tid), r.ts_us, -(r.end_us - r.ts_us), 0, i, r.end_us)
        for i, r in enumerate(ops.itertuples())
    ]
    rows += [
        (r.rank, str(r.pid), str(r.tid), r.ts_us, -(r.end_us - r.ts_us), 1, len(ops) + i, r.end_us)
        for i, r in enumerate(calls.itertuples())
    ]
    parent = [-1] * len(rows)
    stack, thread = [], None
    for rank, pid, tid, ts, _, is_call, i, end in sorted(rows):
        if (rank, pid, tid) != thread:
            thread, stack = (rank, pid, tid), []
        while stack and stack[-1][1] <= ts:
            stack.pop()
        if stack:
            parent[i] = stack[-1][0]
        if not is_call:
            stack.append((i, end))
    return np.array(parent, dtype=np.int64)


_EVENT = st.tuples(
    st.integers(0, 1), st.sampled_from(["1", "2"]), st.sampled_from(["7", "8"]), st.integers(0, 40), st.integers(0, 15)
)


def _frame(events) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "rank": [e[0] for e in events],
            "pid": pd.Categorical([e[1] for e in events]),
            "tid": pd.Categorical([e[2] for e in events]),
            "ts_us": [float(e[3]) for e in events],
            "end_us": [float(e[3] + e[4]) for e in events],
        }
    )


@settings(max_examples=150, deadline=None)
@given(st.lists(_EVENT, max_size=60), st.lists(_EVENT, max_size=25))
def test_nesting_equals_a_stack_walk(op_events, call_events):
    ops, calls = _frame(op_events), _frame(call_events)
    parent, depth, self_us, call_op = nest(ops, calls)
    expected = _stack_walk(ops, calls)
    assert parent.tolist() == expected[: len(ops)].tolist()
    assert call_op.tolist() == expected[len(ops) :].tolist()
    for i, p in enumerate(parent):  # depth counts the ancestors
        chain, k = 0, p
        while k >= 0:
            chain, k = chain + 1, parent[k]
        assert depth[i] == chain
    assert (self_us >= 0).all()


def test_deep_chain_and_long_sibling_runs():
    n = 3000  # one root, a 1000-deep chain, then 2000 siblings under the root
    ts = [0.0] + [float(i) for i in range(1, 1001)] + [2000.0 + i for i in range(n - 1001)]
    end = [10_000.0] + [2000.0 - i for i in range(1, 1001)] + [2000.5 + i for i in range(n - 1001)]
    ops = pd.DataFrame(
        {"rank": 0, "pid": pd.Categorical(["1"] * n), "tid": pd.Categorical(["1"] * n), "ts_us": ts, "end_us": end}
    )
    calls = ops.iloc[:0]
    parent, depth, _, _ = nest(ops, calls)
    assert parent.tolist() == _stack_walk(ops, calls).tolist()
    assert depth.max() == 1000 and (parent[1001:] == 0).all()


def test_ints_keep_only_integers():
    assert trace_args.ints([1, None, 2**40]).tolist() == [1, -1, 2**40]
    assert trace_args.ints([1.0, 2.5, None, float("nan")]).tolist() == [1, -1, -1, -1]
    assert trace_args.ints(["12", True, 3, [1]]).tolist() == [-1, -1, 3, -1]
    assert trace_args.ints([2**63, 5]).tolist() == [-1, 5]
    assert trace_args.ints([2**60 + 1, None]).tolist() == [2**60 + 1, -1]  # no float rounding
    assert trace_args.ints([]).tolist() == []


def test_floats_and_grids():
    assert np.isnan(trace_args.floats([None, "x"])).all() and trace_args.floats([1, 2.5]).tolist() == [1.0, 2.5]
    assert trace_args.dim3([[1, 2, 3], None, [7, 8], [1, 2, 3.5]]).tolist() == [
        [1, 2, 3],
        [-1, -1, -1],
        [7, 8, -1],
        [1, 2, -1],
    ]


def test_compact_json_merges_spellings():
    texts = [b"[[1, 2], []]", b"[[1,2],[]]", b"", b"not json"]
    import msgspec

    values = trace_args.compact_json([msgspec.Raw(t) for t in texts])
    assert list(values.astype(str)) == ["[[1,2],[]]", "[[1,2],[]]", "", "not json"]
