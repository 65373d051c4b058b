"""Host synchronisation: synchronize calls, synchronous copies/memsets and blocking async copies,
each traced to the op that caused it (``workbench.analysis.sync_audit``)."""

from __future__ import annotations

from dataclasses import dataclass

from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.hypothesis import Evidence
from workbench.hypotheses.registry import Limits, rule
from workbench.hypotheses.rules._common import bounded_ms, pct, rows
from workbench.hypotheses.words import Finding, Words


def _copies_dominate(table) -> bool:
    """Most of the blocked time is in blocking copies (staged through pageable memory)."""
    copies = table.loc[table["kind"] == "blocking_copy", "blocked_us"].sum()
    return bool(copies > 0.5 * table["blocked_us"].sum())


def _by_cause(table):
    named = table.assign(
        cause_op=table["cause_op"].replace("", "(no enclosing op)"), op=table["op"].replace("", "(no enclosing op)")
    )
    return (
        named.groupby(["cause_op", "op", "api", "kind"], as_index=False)["blocked_us"]
        .agg(["count", "sum"])
        .rename(columns={"count": "n", "sum": "blocked_us"})
    )


@dataclass(frozen=True)
class HostSyncCallsLimits(Limits):
    """The thresholds of ``host_sync_calls``."""

    min_sync_pct: float = 5.0
    min_calls: int = 1


@dataclass(frozen=True, kw_only=True)
class HostSyncCallsFinding(Finding):
    rank: int  # the rank that blocked
    n_calls: int  # its synchronising calls
    calls_per_step: float = 0.0  # those calls per step of the rank (part "per_step")
    blocked_ms: float  # the time the host was blocked in them
    share_pct: float  # of the rank's traced window
    window_ms: float  # the rank's traced window
    cause_op: str  # the op that caused the most blocked time ("(no enclosing op)" if none)
    api: str  # the synchronising API it called
    kind_words: str  # the kind of sync, in words ("blocking copy", "sync call", ...)


# the fixes are decided by the finding: a blocking copy from pageable memory is what pinned memory removes;
# other syncs (.item(), .cpu(), synchronize) are the code's own: no catalog fix removes them (a CUDA graph
# cannot even be captured around one)
SYNC_WORDS = Words(
    title="The host blocks on the GPU in {n_calls} sync calls{per_step}",
    observed="rank {rank}: {blocked_ms:.2f} ms ({share_pct:.1f}% of the rank's {window_ms:.2f} ms traced window) "
    "in synchronising calls; most from {cause_op} -> {api} ({kind_words})",
    mechanism="A synchronising call (.item(), .cpu(), .tolist(), torch.cuda.synchronize, a blocking copy) "
    "waits for all queued GPU work, so the host cannot run ahead and the GPU then starves.",
    predicted_effect="keeping values on the device (or reading them once per N steps) removes most of the blocked time",
    falsifier="remove the named call (or move it out of the loop): if the step time does not fall, the wait was "
    "hidden behind GPU work anyway",
    confounders=(
        "a sync at the end of a step is only as costly as the GPU work it waits for",
        "profilers add their own synchronisation",
    ),
    parts={"per_step": " ({calls_per_step:.1f} per step)"},  # where the rank's steps are annotated
    scope="rank {rank}",
)


@rule(
    "host_sync_calls",
    category="host_sync",
    scope="trace",
    limits=HostSyncCallsLimits,
    finding=HostSyncCallsFinding,
    words=SYNC_WORDS,
)
def host_sync_calls(f: TraceFacts, limits: HostSyncCallsLimits) -> list[HostSyncCallsFinding] | None:
    """The host blocks on the device in synchronize calls or synchronous copies/memsets (one finding per
    rank: its blocked time as a share of that rank's own window, its calls per step of that rank)."""
    audit = f.sync_audit
    calls = audit.table
    if calls.empty:
        return None
    windows = f.rank_windows_us
    out = []
    for rank, mine in calls.groupby("rank"):
        rank = int(rank)
        window = windows.get(rank, f.window_us)
        total = float(mine["blocked_us"].sum())
        share = pct(total, window)
        if len(mine) < limits.min_calls or share < limits.min_sync_pct:
            continue
        by_op = _by_cause(mine)
        worst = by_op.sort_values("blocked_us", ascending=False).iloc[0]
        steps = f.steps_on(rank)
        out.append(
            HostSyncCallsFinding(
                rank=rank,
                n_calls=len(mine),
                calls_per_step=len(mine) / steps if steps else 0.0,
                parts=("per_step",) if steps else (),
                blocked_ms=total / 1e3,
                share_pct=share,
                window_ms=window / 1e3,
                cause_op=worst["cause_op"],
                api=worst["api"],
                kind_words=worst["kind"].replace("_", " "),
                evidence=(
                    Evidence(
                        "sync_time_pct",
                        share,
                        "%",
                        limits.min_sync_pct,
                        source="sync audit (of the rank's window)",
                        rows=rows(by_op, ["cause_op", "op", "api", "kind", "n", "blocked_us"], by="blocked_us"),
                    ),
                    Evidence("sync_calls", len(mine), "calls", limits.min_calls, ">=", "sync audit"),
                ),
                time_at_stake_ms=bounded_ms(total, window),
                confidence="high" if share > 3 * limits.min_sync_pct else "medium",
                suggested_variants=("pin_memory",) if _copies_dominate(mine) else (),
            )
        )
    return out
