"""Which module a backward op serves, and which ops ran inside the optimizer's step.

Backward runs outside every ``nn.Module`` scope (autograd's engine calls the gradient functions after
``forward`` has returned, on a thread of its own where there is a GPU), so a module breakdown by the
scopes open at the time puts all of it, and the optimizer, "outside any module". The profiler links
the two passes: a forward op that records an autograd node carries that node's ``Sequence number``,
and the engine's ``autograd::engine::evaluate_function: <Node>`` op for it carries the same number
(as the PyTorch profiler's TensorBoard plugin links them). So a backward op is attributed to the
module of the forward op with its sequence number, and every op under it (and every kernel they
launch) with it, as TensorBoard's module view did for forward and backward alike.

What is not linked: ``AccumulateGrad`` (it records no sequence number: the gradient of a leaf, a
parameter, not of an op), a backward op whose forward op is outside the trace or outside any module,
and sequence numbers that two forward threads both used (autograd counts them per thread; a trace
holds no thread for them that matches its own), which are dropped rather than guessed.

``optimizer_spans_on``: per row of some points, whether it started inside an ``Optimizer.step#…``
span on its thread (torch records the step as a user annotation; older traces as a CPU op).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from workbench.trace.nesting import nest

BACKWARD_PREFIX = "autograd::engine::evaluate_function: "
OPTIMIZER_STEP_PREFIX = "Optimizer.step#"
_MAX_DEPTH = 512  # op nesting walked up looking for the gradient function an op runs under


def backward_module_paths(ops: pd.DataFrame, forward_path: np.ndarray) -> np.ndarray:
    """Per row of ``ops`` (the trace's ``cpu_ops``): the module path of the forward op whose backward
    it runs in ("" where it runs in none, or its forward op is in no module or not in the trace).

    ``forward_path``: per op, the module path of the scope open when it started (the forward
    attribution: "" outside any module)."""
    n = len(ops)
    out = np.full(n, "", dtype=object)
    if not n or "sequence_number" not in ops or "parent" not in ops:
        return out
    names = ops["name"].astype(str).to_numpy()
    seq = ops["sequence_number"].to_numpy(np.int64)
    rank = ops["rank"].to_numpy(np.int64)
    is_gradient_fn = np.char.startswith(names.astype(str), BACKWARD_PREFIX)
    parent = ops["parent"].to_numpy(np.int64)
    under = _enclosing_gradient_fn(parent, is_gradient_fn)
    forward = (seq >= 0) & (under < 0) & ~is_gradient_fn & (forward_path != "")
    if not forward.any() or not is_gradient_fn.any():
        return out
    # (rank, sequence number) -> the innermost module of its forward ops (nested ops share the number)
    table = pd.DataFrame({"rank": rank[forward], "seq": seq[forward], "path": forward_path[forward]})
    table["depth"] = table["path"].str.count("/")
    table = table.sort_values("depth", kind="stable").drop_duplicates(["rank", "seq"], keep="last")
    # a number used on two forward paths that do not nest is ambiguous (two threads): dropped
    spread = pd.DataFrame({"rank": rank[forward], "seq": seq[forward], "path": forward_path[forward]})
    spread = spread.drop_duplicates()
    merged = spread.merge(table[["rank", "seq", "path"]], on=["rank", "seq"], suffixes=("", "_inner"))
    nests = [
        inner == path or inner.startswith(path + "/")
        for path, inner in zip(merged["path"], merged["path_inner"], strict=True)
    ]
    bad = merged.loc[~np.asarray(nests, dtype=bool), ["rank", "seq"]].drop_duplicates()
    if len(bad):
        table = table.merge(bad.assign(_bad=True), on=["rank", "seq"], how="left")
        table = table[table["_bad"].isna()].drop(columns="_bad")
    fn_rows = np.flatnonzero(is_gradient_fn)
    wanted = pd.DataFrame({"rank": rank[fn_rows], "seq": seq[fn_rows]})
    found = wanted.merge(table[["rank", "seq", "path"]], on=["rank", "seq"], how="left", validate="many_to_one")
    fn_path = found["path"].fillna("").to_numpy(dtype=object)  # left merge: wanted's order kept
    path_of_fn = np.full(n, "", dtype=object)
    path_of_fn[fn_rows] = fn_path
    inside = under >= 0
    out[inside] = path_of_fn[under[inside]]
    return out


def _enclosing_gradient_fn(parent: np.ndarray, is_gradient_fn: np.ndarray) -> np.ndarray:
    """Per op: the nearest op at or above it that is a gradient function (-1: none). A gradient
    function nested in another (a custom Function's backward calling autograd) counts as its own."""
    n = len(parent)
    out = np.where(is_gradient_fn, np.arange(n, dtype=np.int64), -1)
    cur = np.where(is_gradient_fn, -1, parent)
    for _ in range(_MAX_DEPTH):
        live = (out < 0) & (cur >= 0) & (cur < n)
        if not live.any():
            break
        hit = live.copy()
        hit[live] = is_gradient_fn[cur[live]]
        out[hit] = cur[hit]
        move = live & ~hit
        cur[move] = parent[cur[move]]
        cur[~move] = -1
    return out


def optimizer_step_spans(annotations: pd.DataFrame | None, cpu_ops: pd.DataFrame | None) -> pd.DataFrame:
    """The ``Optimizer.step#…`` spans (``named_spans`` with that prefix)."""
    return named_spans(annotations, cpu_ops, OPTIMIZER_STEP_PREFIX)


def named_spans(annotations: pd.DataFrame | None, cpu_ops: pd.DataFrame | None, prefix: str) -> pd.DataFrame:
    """The spans whose name starts with ``prefix`` (rank, pid, tid, name, ts_us, dur_us, end_us; pid and tid
    as text, by start): torch records ``Optimizer.step#…`` / ``Optimizer.zero_grad#…`` as user annotations
    (``record_function`` in ``Optimizer.profile_hook_step``), older traces and hand-built ones as CPU ops;
    both are read, a span recorded in both is counted once."""
    cols = ["rank", "pid", "tid", "name", "ts_us", "dur_us", "end_us"]
    parts = []
    for table in (annotations, cpu_ops):
        if table is None or not len(table) or "name" not in table:
            continue
        hit = table[table["name"].astype(str).str.startswith(prefix).to_numpy()]
        if len(hit):
            parts.append(hit.reindex(columns=cols))
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype="float64" if c.endswith("_us") else "object") for c in cols})
    spans = pd.concat(parts, ignore_index=True)
    spans["rank"] = spans["rank"].fillna(0).astype(int)
    spans["pid"], spans["tid"], spans["name"] = (spans[c].astype(str) for c in ("pid", "tid", "name"))
    spans = spans.drop_duplicates(subset=["rank", "pid", "tid", "ts_us", "end_us"])
    return spans.sort_values("ts_us", kind="stable").reset_index(drop=True)


def in_spans(spans: pd.DataFrame, points: pd.DataFrame) -> np.ndarray:
    """Per row of ``points`` (rank, pid, tid, ts_us, end_us): whether it started inside one of ``spans``
    on its thread."""
    if not len(spans) or not len(points):
        return np.zeros(len(points), dtype=bool)
    typed = points.astype({"pid": str, "tid": str})
    return nest(spans.reset_index(drop=True), typed)[3] >= 0
