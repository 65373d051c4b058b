"""Many ranks: exposed (non-overlapped) communication, and stragglers / imbalance between ranks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from workbench.analysis.stragglers import before_collectives
from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.hypothesis import Evidence, Hypothesis
from workbench.hypotheses.registry import Limits, NotJudged, rule
from workbench.hypotheses.rules._common import bounded_ms, pct, rows

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class ExposedCommunicationLimits(Limits):
    """The thresholds of ``exposed_communication``."""

    min_comm_pct: float = 10.0
    max_overlap_pct: float = 50.0


@rule("exposed_communication", category="communication", scope="trace", limits=ExposedCommunicationLimits)
def exposed_communication(f: TraceFacts, limits: ExposedCommunicationLimits):
    """Collective kernels take a large share of the span and little of it overlaps compute."""
    ranks = f.gpu_ranks
    if ranks["comm_us"].sum() <= 0:
        raise NotJudged("no communication kernels in the trace")
    out = []
    for _, r in ranks.iterrows():
        comm_pct = pct(r.comm_us, r.span_us)
        overlap_pct = pct(r.comm_overlap_us, r.comm_us)
        if comm_pct < limits.min_comm_pct or overlap_pct > limits.max_overlap_pct:
            continue
        exposed = r.comm_us - r.comm_overlap_us
        out.append(
            Hypothesis(
                category="communication",
                title=f"Collectives take {comm_pct:.0f}% of the span, {overlap_pct:.0f}% overlapped",
                observed=f"rank {int(r['rank'])}: {r.comm_us / 1e3:.2f} ms of communication kernels, {exposed / 1e3:.2f} ms exposed",
                mechanism="Collectives that do not overlap compute put network time on the critical path.",
                evidence=(
                    Evidence("comm_pct", comm_pct, "%", limits.min_comm_pct, source="kernels (communication)"),
                    Evidence(
                        "comm_overlap_pct", overlap_pct, "%", limits.max_overlap_pct, "<", "kernels (communication)"
                    ),
                ),
                time_at_stake_ms=bounded_ms(exposed, r.span_us),
                predicted_effect="bucketing gradients earlier (DDP bucket_cap_mb) or overlapping with backward hides most exposed time",
                falsifier="run the step on one rank (no collectives): if the step shortens by less than the exposed time, the collectives were not critical",
                confounders=("a straggler makes collectives wait: the wait shows as communication time",),
                confidence="medium",
                suggested_variants=(),  # bucketing and overlap are DDP settings: no catalog fix
                scope=f"rank {int(r['rank'])}",
            )
        )
    return out


@dataclass(frozen=True)
class StragglerRankLimits(Limits):
    """The thresholds of ``straggler_rank``."""

    min_wait_pct: float = 5.0
    min_excess_compute_pct: float = 10.0
    min_explained_fraction: float = 0.5


@rule("straggler_rank", category="load_imbalance", scope="trace", limits=StragglerRankLimits)
def straggler_rank(f: TraceFacts, limits: StragglerRankLimits):
    """Ranks the stragglers table flags hold the others back: they wait for them in collectives. Judged on
    what each rank did before its collectives (compute vs GPU idle), not on wall time."""
    from workbench.analysis.stragglers import collective_activity, stragglers

    if f.has_gpu:
        result = f.stragglers
    elif not f.cpu_ops.empty:  # a CPU-only job (gloo): the stragglers analysis reads its CPU ops and collectives
        result = stragglers(f.subject)
    else:
        raise NotJudged("no GPU kernels or CPU ops in the trace")
    activity, device = collective_activity(f.kernels, f.cpu_ops, f.annotations)
    return judge_stragglers(result, before_collectives(activity), device, f.ranks, limits)


def judge_stragglers(
    result, before_table: "pd.DataFrame", device: str, ranks, limits: StragglerRankLimits
) -> Hypothesis | None:
    """``straggler_rank`` on what it reads: the stragglers analysis (``result``), each rank's activity before
    its collectives (``before_collectives``), the device whose activity that is ("gpu"/"cpu") and the trace's
    ranks. A folder of rank files read by workers gives it the same from the per-rank summaries, so the
    finding is the one a single process makes (``workbench.api.rank_folder``)."""
    table = result.table
    if len(table) < 2:
        raise NotJudged(result.reason or "only one rank in the trace: stragglers need two or more")
    no_kernels = sorted(set(ranks) - {int(r) for r in table["rank"]})
    dev = "GPU" if device == "gpu" else "CPU"
    before = before_table.set_index("rank")
    # a rank with no collective at all has no communication to fall short of: it is not judged, not flagged
    no_comm = sorted(int(r) for r in before.index[before["n_collectives"] == 0])
    table = table[~table["rank"].isin(no_comm)]
    if len(table) < 2:
        raise NotJudged(
            f"fewer than two ranks with collectives: stragglers are judged in collectives "
            f"(ranks without kernels: {', '.join(map(str, no_kernels)) or 'none'}; "
            f"ranks without collectives: {', '.join(map(str, no_comm)) or 'none'})"
        )
    if not result.stragglers:
        return None
    span = float(table["kernel_time_us"].max())
    slow = table[table["is_straggler"]].sort_values("comm_deficit_us", ascending=False)
    if slow.empty:
        return None
    # the others wait for the slowest straggler; waits for several stragglers overlap, they do not add
    wait_us = float(slow["comm_deficit_us"].max())
    wait_pct = pct(wait_us, span)
    if wait_pct < limits.min_wait_pct:
        return None
    merged = table.set_index("rank").join(before, how="left")
    med_compute = float(merged["compute_before_us"].median())
    med_idle = float(merged["idle_before_us"].median())
    worst = [int(r) for r in slow["rank"]]
    s_compute = merged.loc[worst, "compute_before_us"]
    s_idle = merged.loc[worst, "idle_before_us"]
    excess_compute_us = float(s_compute.max()) - med_compute
    excess_pct = pct(excess_compute_us, med_compute)
    excess_idle_us = float(s_idle.max()) - med_idle
    # the cause named is the one that explains the wait: more compute (by share, and enough of it to account
    # for a good part of the wait), else more idle before the collectives (the host arrives late)
    explains = limits.min_explained_fraction * wait_us
    by_compute = (
        excess_pct >= limits.min_excess_compute_pct
        and (excess_compute_us >= explains or excess_idle_us < explains)
        and not (excess_idle_us >= explains and excess_idle_us > excess_compute_us)
    )
    by_host = not by_compute and excess_idle_us >= explains
    names = ", ".join(str(r) for r in worst)
    who = f"Rank {names} is a straggler" if len(worst) == 1 else f"Ranks {names} are stragglers"
    if by_compute:
        cause = (
            f"computing {float(s_compute.max()) / 1e3:.2f} ms before their collectives against a median rank's "
            f"{med_compute / 1e3:.2f} ms (+{excess_pct:.0f}%): more work on them"
        )
        mechanism = (
            f"Every collective waits for the slowest rank; the stragglers do more {dev} work before each collective "
            "(uneven shards, sequence lengths, embedding tables), so the others wait in it."
        )
        predicted = "balancing the work (shards, sequence lengths, table placement) brings the stragglers to the median and removes the others' wait"
    elif not by_host:
        cause = (
            f"with {dev} compute ({float(s_compute.max()) / 1e3:.2f} ms vs {med_compute / 1e3:.2f} ms) and {dev} idle "
            f"({float(s_idle.max()) / 1e3:.2f} ms vs {med_idle / 1e3:.2f} ms) before their collectives near the median "
            f"rank's: neither explains the {wait_us / 1e3:.2f} ms the others wait within the traced window"
        )
        mechanism = (
            "Every collective waits for the slowest rank to reach it; these ranks reach the collectives last, but "
            f"the lateness is not in the {dev} work or idle the trace shows (it lies before the traced window, "
            "or the ranks' traces cover different windows)."
        )
        predicted = (
            "tracing all ranks over the same steps (and from the job's start) shows where the stragglers lose the time"
        )
    else:
        cause = (
            f"with {dev} compute before their collectives at the median ({float(s_compute.max()) / 1e3:.2f} ms vs "
            f"{med_compute / 1e3:.2f} ms) but {float(s_idle.max()) / 1e3:.2f} ms of {dev} idle before them against a "
            f"median {med_idle / 1e3:.2f} ms: their hosts issue the work late"
        )
        mechanism = (
            "Every collective waits for the slowest rank to reach it; these ranks' "
            + (
                "GPUs do no more work than the others but wait longer on their host"
                if device == "gpu"
                else "CPU ops do no more work than the others' but they spend longer outside any op before each collective"
            )
            + " (data loading, Python, CPU contention), so they arrive late."
        )
        predicted = "removing the host-side delay on the stragglers (data loading, CPU pinning, fewer host syncs) removes the others' wait"
    rows_table = merged.reset_index()
    return Hypothesis(
        category="load_imbalance",
        title=f"{who}: the others wait up to {wait_pct:.0f}% of the span",
        observed=f"rank(s) {names} (worst first) spend {float(slow['comm_us'].min()) / 1e3:.2f}-{float(slow['comm_us'].max()) / 1e3:.2f} ms "
        f"in collectives against a median of {float(table['comm_us'].median()) / 1e3:.2f} ms, {cause}",
        mechanism=mechanism,
        evidence=(
            Evidence(
                "wait_caused_pct",
                wait_pct,
                "%",
                limits.min_wait_pct,
                source="stragglers analysis (of the longest rank's span)",
                rows=rows(
                    rows_table,
                    ["rank", "compute_before_us", "idle_before_us", "comm_us", "comm_deficit_us", "is_straggler"],
                    n=len(rows_table),
                    by="comm_deficit_us",
                ),
            ),
            Evidence("max_wait_caused_us", wait_us, "us", source="stragglers analysis (comm_deficit_us)"),
            Evidence(
                "straggler_excess_compute_pct",
                excess_pct,
                "%",
                limits.min_excess_compute_pct,
                ">" if by_compute else "<",
                "computation kernels before each rank's collectives (straggler vs median rank)"
                if device == "gpu"
                else "CPU ops before each rank's collectives (straggler vs median rank)",
            ),
            Evidence(
                "straggler_excess_idle_fraction_of_wait",
                excess_idle_us / wait_us if wait_us > 0 else 0.0,
                "fraction",
                limits.min_explained_fraction,
                ">" if by_host else "<",
                f"{dev} idle before each rank's collectives (straggler - median rank) / the others' wait",
            ),
        ),
        time_at_stake_ms=bounded_ms(wait_us, span),
        predicted_effect=predicted,
        falsifier="give the slow rank the same input as a fast one: if the others still wait for it, the hardware or its host (not the data) is the cause",
        confounders=(
            "ranks may have been traced over different windows",
            "a rank with less communication may simply run fewer collectives",
        )
        + ((f"ranks {', '.join(map(str, no_kernels))} have no kernels in the trace: not judged",) if no_kernels else ())
        + ((f"ranks {', '.join(map(str, no_comm))} run no collectives: not judged",) if no_comm else ()),
        confidence="medium" if by_compute or by_host else "low",
        suggested_variants=(),  # bucketing and overlap are DDP settings: no catalog fix
        scope=f"ranks {names}",
    )
