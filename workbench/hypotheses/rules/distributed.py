"""Many ranks: exposed (non-overlapped) communication, and stragglers / imbalance between ranks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from workbench.analysis.stragglers import before_collectives
from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.hypothesis import Evidence, Hypothesis
from workbench.hypotheses.registry import Limits, NotJudged, registered_rule, rule
from workbench.hypotheses.rules._common import bounded_ms, pct, rows
from workbench.hypotheses.words import Finding, Words

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class ExposedCommunicationLimits(Limits):
    """The thresholds of ``exposed_communication``."""

    min_comm_pct: float = 10.0
    max_overlap_pct: float = 50.0


@dataclass(frozen=True, kw_only=True)
class ExposedCommunicationFinding(Finding):
    rank: int  # the rank whose collectives are exposed
    comm_pct: float  # its communication-kernel time, of its GPU span
    overlap_pct: float  # of that time, the share that overlaps compute
    comm_ms: float  # its communication-kernel time
    exposed_ms: float  # the part that overlaps no compute


EXPOSED_COMMUNICATION_WORDS = Words(
    title="Collectives take {comm_pct:.0f}% of the span, {overlap_pct:.0f}% overlapped",
    observed="rank {rank}: {comm_ms:.2f} ms of communication kernels, {exposed_ms:.2f} ms exposed",
    mechanism="Collectives that do not overlap compute put network time on the critical path.",
    predicted_effect="bucketing gradients earlier (DDP bucket_cap_mb) or overlapping with backward hides most exposed time",
    falsifier="run the step on one rank (no collectives): if the step shortens by less than the exposed time, the collectives were not critical",
    confounders=("a straggler makes collectives wait: the wait shows as communication time",),
    suggested_variants=(),  # bucketing and overlap are DDP settings: no catalog fix
    scope="rank {rank}",
)


@rule(
    "exposed_communication",
    category="communication",
    scope="trace",
    limits=ExposedCommunicationLimits,
    finding=ExposedCommunicationFinding,
    words=EXPOSED_COMMUNICATION_WORDS,
)
def exposed_communication(f: TraceFacts, limits: ExposedCommunicationLimits) -> list[ExposedCommunicationFinding]:
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
            ExposedCommunicationFinding(
                rank=int(r["rank"]),
                comm_pct=comm_pct,
                overlap_pct=overlap_pct,
                comm_ms=r.comm_us / 1e3,
                exposed_ms=exposed / 1e3,
                evidence=(
                    Evidence("comm_pct", comm_pct, "%", limits.min_comm_pct, source="kernels (communication)"),
                    Evidence(
                        "comm_overlap_pct", overlap_pct, "%", limits.max_overlap_pct, "<", "kernels (communication)"
                    ),
                ),
                time_at_stake_ms=bounded_ms(exposed, r.span_us),
                confidence="medium",
            )
        )
    return out


@dataclass(frozen=True)
class StragglerRankLimits(Limits):
    """The thresholds of ``straggler_rank``."""

    min_wait_pct: float = 5.0
    min_excess_compute_pct: float = 10.0
    min_explained_fraction: float = 0.5


@dataclass(frozen=True, kw_only=True)
class StragglerRankFinding(Finding):
    straggler_ranks: str  # the stragglers, worst first, joined with ", "
    dev: str  # the device whose activity before the collectives is compared: "GPU" or "CPU"
    wait_pct: float  # the others' wait for the slowest straggler, of the longest rank's span
    wait_ms: float  # that wait
    min_comm_ms: float  # the least time a straggler spends in collectives
    max_comm_ms: float  # the most time a straggler spends in collectives
    median_comm_ms: float  # a median rank's time in collectives
    straggler_compute_ms: float  # the most compute a straggler does before its collectives
    median_compute_ms: float  # a median rank's compute before its collectives
    excess_compute_pct: float  # the straggler's excess compute, of the median rank's
    straggler_idle_ms: float  # the most idle a straggler has before its collectives
    median_idle_ms: float  # a median rank's idle before its collectives
    no_kernels_ranks: str = ""  # ranks without kernels, joined with ", " (note "no_kernels")
    no_comm_ranks: str = ""  # ranks without collectives, joined with ", " (note "no_comm")


_HOST_LATE_OBSERVED = (
    "with {dev} compute before their collectives at the median ({straggler_compute_ms:.2f} ms vs "
    "{median_compute_ms:.2f} ms) but {straggler_idle_ms:.2f} ms of {dev} idle before them against a "
    "median {median_idle_ms:.2f} ms: their hosts issue the work late"
)
_HOST_LATE_PREDICTED = "removing the host-side delay on the stragglers (data loading, CPU pinning, fewer host syncs) removes the others' wait"

# The cause each branch names (the branch's name): what the observation ends with, the mechanism and the
# predicted effect.
_STRAGGLER_CAUSES = {
    "more_compute": (
        "computing {straggler_compute_ms:.2f} ms before their collectives against a median rank's "
        "{median_compute_ms:.2f} ms (+{excess_compute_pct:.0f}%): more work on them",
        "Every collective waits for the slowest rank; the stragglers do more {dev} work before each collective "
        "(uneven shards, sequence lengths, embedding tables), so the others wait in it.",
        "balancing the work (shards, sequence lengths, table placement) brings the stragglers to the median and removes the others' wait",
    ),
    "unexplained": (
        "with {dev} compute ({straggler_compute_ms:.2f} ms vs {median_compute_ms:.2f} ms) and {dev} idle "
        "({straggler_idle_ms:.2f} ms vs {median_idle_ms:.2f} ms) before their collectives near the median "
        "rank's: neither explains the {wait_ms:.2f} ms the others wait within the traced window",
        "Every collective waits for the slowest rank to reach it; these ranks reach the collectives last, but "
        "the lateness is not in the {dev} work or idle the trace shows (it lies before the traced window, "
        "or the ranks' traces cover different windows).",
        "tracing all ranks over the same steps (and from the job's start) shows where the stragglers lose the time",
    ),
    "host_late_gpu": (
        _HOST_LATE_OBSERVED,
        "Every collective waits for the slowest rank to reach it; these ranks' GPUs do no more work than the others "
        "but wait longer on their host (data loading, Python, CPU contention), so they arrive late.",
        _HOST_LATE_PREDICTED,
    ),
    "host_late_cpu": (
        _HOST_LATE_OBSERVED,
        "Every collective waits for the slowest rank to reach it; these ranks' CPU ops do no more work than the "
        "others' but they spend longer outside any op before each collective (data loading, Python, CPU "
        "contention), so they arrive late.",
        _HOST_LATE_PREDICTED,
    ),
}
# The title's subject by how many stragglers there are: the finding lists one of the two parts.
_STRAGGLER_WHO = {"one": "Rank {straggler_ranks} is a straggler", "several": "Ranks {straggler_ranks} are stragglers"}


def _straggler_words(cause: str) -> Words:
    observed_cause, mechanism, predicted = _STRAGGLER_CAUSES[cause]
    return Words(
        title="{one}{several}: the others wait up to {wait_pct:.0f}% of the span",
        observed="rank(s) {straggler_ranks} (worst first) spend {min_comm_ms:.2f}-{max_comm_ms:.2f} ms "
        "in collectives against a median of {median_comm_ms:.2f} ms, " + observed_cause,
        mechanism=mechanism,
        predicted_effect=predicted,
        falsifier="give the slow rank the same input as a fast one: if the others still wait for it, the hardware or its host (not the data) is the cause",
        confounders=(
            "ranks may have been traced over different windows",
            "a rank with less communication may simply run fewer collectives",
        ),
        notes={
            "no_kernels": "ranks {no_kernels_ranks} have no kernels in the trace: not judged",
            "no_comm": "ranks {no_comm_ranks} run no collectives: not judged",
        },
        suggested_variants=(),  # bucketing and overlap are DDP settings: no catalog fix
        parts=_STRAGGLER_WHO,
        scope="ranks {straggler_ranks}",
    )


# a branch per cause named (more compute, the host late on a GPU or CPU job, neither explains the wait); the
# parts "one" / "several" say whether one rank straggles or several
STRAGGLER_RANK_WORDS = {cause: _straggler_words(cause) for cause in _STRAGGLER_CAUSES}


@rule(
    "straggler_rank",
    category="load_imbalance",
    scope="trace",
    limits=StragglerRankLimits,
    finding=StragglerRankFinding,
    words=STRAGGLER_RANK_WORDS,
)
def straggler_rank(f: TraceFacts, limits: StragglerRankLimits) -> StragglerRankFinding | None:
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
    return straggler_finding(result, before_collectives(activity), device, f.ranks, limits)


def judge_stragglers(
    result, before_table: "pd.DataFrame", device: str, ranks, limits: StragglerRankLimits
) -> Hypothesis | None:
    """``straggler_rank`` on what it reads: the stragglers analysis (``result``), each rank's activity before
    its collectives (``before_collectives``), the device whose activity that is ("gpu"/"cpu") and the trace's
    ranks. A folder of rank files read by workers gives it the same from the per-rank summaries, so the
    finding is the one a single process makes (``workbench.api.rank_folder``). The finding told in the rule's
    words (``straggler_finding`` is the finding itself)."""
    found = straggler_finding(result, before_table, device, ranks, limits)
    return None if found is None else registered_rule("straggler_rank").told(found)


def straggler_finding(
    result, before_table: "pd.DataFrame", device: str, ranks, limits: StragglerRankLimits
) -> StragglerRankFinding | None:
    """What ``straggler_rank`` finds, on what ``judge_stragglers`` reads."""
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
    if by_compute:
        cause = "more_compute"
    elif not by_host:
        cause = "unexplained"
    else:
        cause = "host_late_gpu" if device == "gpu" else "host_late_cpu"
    names = ", ".join(str(r) for r in worst)
    rows_table = merged.reset_index()
    return StragglerRankFinding(
        branch=cause,
        straggler_ranks=names,
        dev=dev,
        wait_pct=wait_pct,
        wait_ms=wait_us / 1e3,
        min_comm_ms=float(slow["comm_us"].min()) / 1e3,
        max_comm_ms=float(slow["comm_us"].max()) / 1e3,
        median_comm_ms=float(table["comm_us"].median()) / 1e3,
        straggler_compute_ms=float(s_compute.max()) / 1e3,
        median_compute_ms=med_compute / 1e3,
        excess_compute_pct=excess_pct,
        straggler_idle_ms=float(s_idle.max()) / 1e3,
        median_idle_ms=med_idle / 1e3,
        no_kernels_ranks=", ".join(map(str, no_kernels)),
        no_comm_ranks=", ".join(map(str, no_comm)),
        notes=(("no_kernels",) if no_kernels else ()) + (("no_comm",) if no_comm else ()),
        parts=("one",) if len(worst) == 1 else ("several",),
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
        confidence="medium" if by_compute or by_host else "low",
    )
