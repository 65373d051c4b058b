"""Stakes bounded by the critical path: making work faster returns at most its time on the path.

A kernel that overlaps a longer host gap, or a copy hidden behind compute, buys nothing when made faster.
For a trace with GPU activity, each rank's critical path over the whole trace is computed once
(``workbench.analysis.critical_path``, annotation ``""``); a hypothesis whose named work is a kind of edge on
that path (``CAPPED_KINDS``: kernels for the memory-/compute-bound and precision findings, copies for
transfers, collectives for communication, launch delays, GPU idle gaps and the host's launching work for
launch overhead) has its stake bounded by that work's time on the path (the largest rank's), plus the same
work that ran while a blocking call on the path held the host (HTA's model counts a blocking
``cudaMemcpyAsync`` as host time, though the host waited for the GPU), and says both numbers: "up to
1.2 ms of 3.4 ms on the path; 2.9 ms of this work overlaps".

Left uncapped, and why: host-side findings (``host_bound``, ``host_sync``: the time they name is the host's
Python between ops and its waits, which HTA's model puts on no edge), and those whose work is no event in
the trace (allocation churn, compiles, cold start, stragglers, measurement caveats).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from workbench.hypotheses.hypothesis import Evidence, Hypothesis

CAPPED_KINDS: dict[str, tuple[str, ...]] = {
    "memory_bound": ("kernel",),
    "compute_bound": ("kernel",),
    "precision": ("kernel",),
    "transfer": ("memory",),
    "communication": ("communication",),
    "launch_overhead": ("launch", "gpu_idle", "host"),
}
# the kernel types each kind's work is (for "this much of the work overlaps")
_KERNEL_TYPE = {"kernel": "computation", "memory": "memory", "communication": "communication"}
CAP_METRIC = "critical_path_work_ms"


def _subject(facts: Any) -> Any:
    """The trace behind a ``TraceFacts`` (its sync and Python tables too), unless tables were given by hand."""
    trace = getattr(facts, "trace", None)
    return trace if trace is not None and not getattr(facts, "_overrides", False) else facts


def whole_trace_graphs(subject: Any) -> dict:
    """{rank: PathGraph} over the whole trace, for a trace with GPU activity; {} where none can be built
    (no GPU activity, tables built by hand without the columns a path needs)."""
    from workbench.analysis.critical_path import path_graphs
    from workbench.errors import WorkbenchError

    kernels = getattr(subject, "kernels", None)
    if kernels is None or not len(kernels):
        return {}
    try:
        return path_graphs(subject, annotation="", scopes=False)
    except (WorkbenchError, KeyError, AttributeError, ValueError, IndexError):
        return {}


def cap_by_critical_path(hypotheses: list[Hypothesis], subject: Any, graphs: dict | None = None) -> list[Hypothesis]:
    """Each hypothesis of a capped category with its stake bounded by its work's time on the critical path
    and both numbers stated (in ``observed`` and a ``critical_path_work_ms`` evidence), and its predicted
    effect completed by a what-if on the path's graph (the work twice as fast: the path's new length);
    the others as they are."""
    if not any(h.category in CAPPED_KINDS for h in hypotheses):
        return list(hypotheses)
    subject = _subject(subject)
    graphs = whole_trace_graphs(subject) if graphs is None else graphs
    if not graphs:
        return list(hypotheses)
    kernels = getattr(subject, "kernels", None)
    out = []
    for h in hypotheses:
        kinds = CAPPED_KINDS.get(h.category)
        if kinds is None or any(e.metric == CAP_METRIC for e in h.evidence):
            out.append(h)
            continue
        out.append(_capped(h, kinds, graphs, kernels))
    return out


def _capped(h: Hypothesis, kinds: tuple[str, ...], graphs: dict, kernels) -> Hypothesis:
    paths = {r: g.path for r, g in graphs.items()}

    def on_path(cp) -> tuple[float, float]:
        """The work's edges on the path, and the same work the path's blocking host calls waited for."""
        return (sum(cp.by_kind_us.get(k, 0.0) for k in kinds), sum(cp.waited_on_us.get(k, 0.0) for k in kinds))

    rank, cp = max(paths.items(), key=lambda rp: sum(on_path(rp[1])))
    edges_us, waited_us = on_path(cp)
    on_path_us = edges_us + waited_us
    work_us = _work_us(kinds, rank, kernels, h)
    overlapped_us = max(0.0, work_us - on_path_us)
    cap_ms = on_path_us / 1e3
    stake_ms = min(h.time_at_stake_ms, cap_ms)
    waited = f", {waited_us / 1e3:.3g} ms of it while the host waited in a blocking call" if waited_us > 0 else ""
    said = (
        f"up to {cap_ms:.3g} ms of {cp.length_us / 1e3:.3g} ms on the critical path (rank {rank}{waited}); "
        f"{overlapped_us / 1e3:.3g} ms of this work overlaps"
    )
    evidence = Evidence(
        CAP_METRIC,
        cap_ms,
        "ms",
        source="critical path over the whole trace (HTA's model)",
        rows=(
            {
                "rank": rank,
                "kinds": ",".join(kinds),
                "on_path_ms": cap_ms,
                "waited_on_ms": waited_us / 1e3,
                "path_ms": cp.length_us / 1e3,
                "work_ms": work_us / 1e3,
                "overlapped_ms": overlapped_us / 1e3,
                "stake_before_ms": h.time_at_stake_ms,
            },
        ),
    )
    predicted = h.predicted_effect
    try:
        w = graphs[rank].what_if(kinds={k: 0.5 for k in kinds})
        predicted = (
            f"{predicted}; what-if on the critical path's graph (rank {rank}): this work twice as fast "
            f"shortens the path by {w.saved_us / 1e3:.3g} ms, to {w.after.length_us / 1e3:.3g} ms "
            f"(then bound by {w.after.bound_by})"
        )
    except Exception:  # a prediction is extra: the cap stands without it
        pass
    confounders = tuple(h.confounders)
    if stake_ms < h.time_at_stake_ms:
        confounders += (
            f"stake capped from {h.time_at_stake_ms:.3g} ms to this work's time on the critical path "
            f"({cap_ms:.3g} ms): the rest overlaps longer work and would not shorten the step",
        )
    return replace(
        h,
        time_at_stake_ms=stake_ms,
        observed=f"{h.observed}; {said}",
        predicted_effect=predicted,
        evidence=tuple(h.evidence) + (evidence,),
        confounders=confounders,
    )


def _work_us(kinds: tuple[str, ...], rank: int, kernels, h: Hypothesis) -> float:
    """The named work's whole time on the rank (kernel types' summed durations; for launch overhead, its
    stake: the gaps it names)."""
    if all(k in _KERNEL_TYPE for k in kinds) and kernels is not None and len(kernels):
        k = kernels[kernels["rank"] == rank]
        types = {_KERNEL_TYPE[x] for x in kinds}
        return float(k.loc[k["kernel_type"].astype(str).isin(types), "dur_us"].sum())
    return h.time_at_stake_ms * 1e3
