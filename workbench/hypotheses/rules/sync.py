"""Host synchronisation: synchronize calls and synchronous copies/memsets, traced to their op."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.model import Evidence, Hypothesis
from workbench.hypotheses.registry import rule
from workbench.hypotheses.rules._common import bounded_ms, pct, rows

SYNC_CALL = re.compile(r"(?:Synchronize$|^(?:cuda|hip)Memcpy$|^(?:cuda|hip)Memset$|^(?:cuda|hip)MemcpyDtoH$)")
MAX_ATTRIBUTED = 500


def sync_calls(f: TraceFacts) -> pd.DataFrame:
    rt = f.require_runtime()
    return rt[rt["name"].astype(str).str.contains(SYNC_CALL)]


def attribute_to_ops(f: TraceFacts, calls: pd.DataFrame) -> pd.DataFrame:
    """For each call, the outermost and innermost CPU op on its thread that contains it."""
    ops = f.cpu_ops
    top = calls.nlargest(MAX_ATTRIBUTED, "dur_us")
    outer, inner = [], []
    for rank, tid, ts, end in top[["rank", "tid", "ts_us"]].assign(end=top["ts_us"] + top["dur_us"]).itertuples(index=False):
        if ops.empty:
            outer.append(""); inner.append(""); continue
        m = ops[(ops["rank"] == rank) & (ops["tid"] == tid) & (ops["ts_us"] <= ts) & (ops["end_us"] >= end)]
        if m.empty:
            outer.append("(no enclosing op)"); inner.append("(no enclosing op)"); continue
        by_depth = m.sort_values("depth") if "depth" in m else m.sort_values("ts_us")
        outer.append(str(by_depth["name"].iloc[0])); inner.append(str(by_depth["name"].iloc[-1]))
    return top.assign(op=outer, inner_op=inner)


@rule("host_sync_calls", category="host_sync", scope="trace", min_sync_pct=5.0, min_calls=1)
def host_sync_calls(f: TraceFacts, t):
    """The host blocks on the device in synchronize calls or synchronous copies/memsets."""
    calls = sync_calls(f)
    window = f.window_us
    total = float(calls["dur_us"].sum())
    if len(calls) < t["min_calls"] or pct(total, window) < t["min_sync_pct"]:
        return None
    attributed = attribute_to_ops(f, calls)
    by_op = (attributed.groupby(["op", "inner_op", "name"], as_index=False)["dur_us"]
             .agg(["count", "sum"]).rename(columns={"count": "n", "sum": "blocked_us", "name": "call"}))
    worst = by_op.sort_values("blocked_us", ascending=False).iloc[0]
    per_step = f" ({len(calls) / f.n_steps:.1f} per step)" if f.n_steps else ""
    return Hypothesis(
        category="host_sync", title=f"The host blocks on the GPU in {len(calls)} sync calls{per_step}",
        observed=f"{total / 1e3:.2f} ms ({pct(total, window):.1f}% of the trace) in synchronising calls; "
                 f"most from {worst['op']} -> {worst['call']}",
        mechanism="A synchronising call (.item(), .cpu(), .tolist(), torch.cuda.synchronize, a blocking copy) "
                  "waits for all queued GPU work, so the host cannot run ahead and the GPU then starves.",
        evidence=(Evidence("sync_time_pct", pct(total, window), "%", t["min_sync_pct"], source="runtime",
                           rows=rows(by_op, ["op", "inner_op", "call", "n", "blocked_us"], by="blocked_us")),
                  Evidence("sync_calls", len(calls), "calls", t["min_calls"], ">=", "runtime")),
        time_at_stake_ms=bounded_ms(total, window),
        predicted_effect="keeping values on the device (or reading them once per N steps) removes most of the blocked time",
        falsifier="remove the named call (or move it out of the loop): if the step time does not fall, the wait was hidden behind GPU work anyway",
        confounders=("a sync at the end of a step is only as costly as the GPU work it waits for",
                     "profilers add their own synchronisation"),
        confidence="high" if pct(total, window) > 3 * t["min_sync_pct"] else "medium",
        suggested_variants=("cuda_graph", "eager"), scope="all ranks")
