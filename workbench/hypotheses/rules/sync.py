"""Host synchronisation: synchronize calls, synchronous copies/memsets and blocking async copies,
each traced to the op that caused it (``workbench.analysis.sync_audit``)."""
from __future__ import annotations

from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.model import Evidence, Hypothesis
from workbench.hypotheses.registry import rule
from workbench.hypotheses.rules._common import bounded_ms, pct, rows


def _by_cause(table):
    named = table.assign(cause_op=table["cause_op"].replace("", "(no enclosing op)"),
                         op=table["op"].replace("", "(no enclosing op)"))
    return (named.groupby(["cause_op", "op", "api", "kind"], as_index=False)["blocked_us"]
            .agg(["count", "sum"]).rename(columns={"count": "n", "sum": "blocked_us"}))


@rule("host_sync_calls", category="host_sync", scope="trace", min_sync_pct=5.0, min_calls=1)
def host_sync_calls(f: TraceFacts, t):
    """The host blocks on the device in synchronize calls or synchronous copies/memsets."""
    audit = f.sync_audit
    calls = audit.table
    window = f.window_us
    total = float(audit.blocked_us)
    if len(calls) < t["min_calls"] or pct(total, window) < t["min_sync_pct"]:
        return None
    by_op = _by_cause(calls)
    worst = by_op.sort_values("blocked_us", ascending=False).iloc[0]
    per_step = f" ({len(calls) / f.n_steps:.1f} per step)" if f.n_steps else ""
    return Hypothesis(
        category="host_sync", title=f"The host blocks on the GPU in {len(calls)} sync calls{per_step}",
        observed=f"{total / 1e3:.2f} ms ({pct(total, window):.1f}% of the trace) in synchronising calls; "
                 f"most from {worst['cause_op']} -> {worst['api']} ({worst['kind'].replace('_', ' ')})",
        mechanism="A synchronising call (.item(), .cpu(), .tolist(), torch.cuda.synchronize, a blocking copy) "
                  "waits for all queued GPU work, so the host cannot run ahead and the GPU then starves.",
        evidence=(Evidence("sync_time_pct", pct(total, window), "%", t["min_sync_pct"], source="sync audit",
                           rows=rows(by_op, ["cause_op", "op", "api", "kind", "n", "blocked_us"], by="blocked_us")),
                  Evidence("sync_calls", len(calls), "calls", t["min_calls"], ">=", "sync audit")),
        time_at_stake_ms=bounded_ms(total, window),
        predicted_effect="keeping values on the device (or reading them once per N steps) removes most of the blocked time",
        falsifier="remove the named call (or move it out of the loop): if the step time does not fall, the wait was hidden behind GPU work anyway",
        confounders=("a sync at the end of a step is only as costly as the GPU work it waits for",
                     "profilers add their own synchronisation"),
        confidence="high" if pct(total, window) > 3 * t["min_sync_pct"] else "medium",
        suggested_variants=("cuda_graph", "eager"), scope="all ranks")
