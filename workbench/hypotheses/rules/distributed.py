"""Many ranks: exposed (non-overlapped) communication, and stragglers / imbalance between ranks."""
from __future__ import annotations

from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.model import Evidence, Hypothesis
from workbench.hypotheses.registry import NotJudged, rule
from workbench.hypotheses.rules._common import bounded_ms, pct, rows


@rule("exposed_communication", category="communication", scope="trace", min_comm_pct=10.0, max_overlap_pct=50.0)
def exposed_communication(f: TraceFacts, t):
    """Collective kernels take a large share of the span and little of it overlaps compute."""
    ranks = f.gpu_ranks
    if ranks["comm_us"].sum() <= 0:
        raise NotJudged("no communication kernels in the trace")
    out = []
    for _, r in ranks.iterrows():
        comm_pct = pct(r.comm_us, r.span_us)
        overlap_pct = pct(r.comm_overlap_us, r.comm_us)
        if comm_pct < t["min_comm_pct"] or overlap_pct > t["max_overlap_pct"]:
            continue
        exposed = r.comm_us - r.comm_overlap_us
        out.append(Hypothesis(
            category="communication", title=f"Collectives take {comm_pct:.0f}% of the span, {overlap_pct:.0f}% overlapped",
            observed=f"rank {int(r['rank'])}: {r.comm_us / 1e3:.2f} ms of communication kernels, {exposed / 1e3:.2f} ms exposed",
            mechanism="Collectives that do not overlap compute put network time on the critical path.",
            evidence=(Evidence("comm_pct", comm_pct, "%", t["min_comm_pct"], source="kernels (communication)"),
                      Evidence("comm_overlap_pct", overlap_pct, "%", t["max_overlap_pct"], "<", "kernels (communication)")),
            time_at_stake_ms=bounded_ms(exposed, r.span_us),
            predicted_effect="bucketing gradients earlier (DDP bucket_cap_mb) or overlapping with backward hides most exposed time",
            falsifier="run the step on one rank (no collectives): if the step shortens by less than the exposed time, the collectives were not critical",
            confounders=("a straggler makes collectives wait: the wait shows as communication time",),
            confidence="medium", suggested_variants=("eager",), scope=f"rank {int(r['rank'])}"))
    return out


@rule("straggler_rank", category="load_imbalance", scope="trace", min_wait_pct=5.0)
def straggler_rank(f: TraceFacts, t):
    """One rank holds the others back: they wait for it in collectives (``analysis.stragglers``)."""
    result = f.stragglers
    table = result.table
    if len(table) < 2:
        raise NotJudged(result.reason or "only one rank in the trace: stragglers need two or more")
    if not result.stragglers:
        if "no communication kernels" in result.reason:
            raise NotJudged(result.reason)
        return None
    span = float(table["kernel_time_us"].max())
    slow = table[table["is_straggler"]]
    # the others wait for the slowest straggler; waits for several stragglers overlap, they do not add
    wait_us = float(slow["comm_deficit_us"].max())
    wait_pct = pct(wait_us, span)
    if wait_pct < t["min_wait_pct"]:
        return None
    med_compute = float(table["compute_us"].median())
    names = ", ".join(str(r) for r in result.stragglers)
    who = f"Rank {names} is a straggler" if len(result.stragglers) == 1 else f"Ranks {names} are stragglers"
    return Hypothesis(
        category="load_imbalance", title=f"{who}: the others wait up to {wait_pct:.0f}% of the span",
        observed=f"rank(s) {names} spend {float(slow['comm_us'].min()) / 1e3:.2f} ms in collectives against a median of "
                 f"{float(table['comm_us'].median()) / 1e3:.2f} ms, computing {float(slow['compute_us'].max()) / 1e3:.2f} ms "
                 f"(median rank {med_compute / 1e3:.2f} ms)",
        mechanism="Every collective waits for the slowest rank; the others' extra communication time is time spent waiting for it.",
        evidence=(Evidence("wait_caused_pct", wait_pct, "%", t["min_wait_pct"], source="stragglers analysis",
                           rows=rows(table, ["rank", "compute_us", "comm_us", "comm_deficit_us", "is_straggler"],
                                     n=8, by="comm_deficit_us")),
                  Evidence("max_wait_caused_us", wait_us, "us", source="stragglers analysis (comm_deficit_us)")),
        time_at_stake_ms=bounded_ms(wait_us, span),
        predicted_effect="balancing the work (shards, sequence lengths) brings the straggler to the median and removes the others' wait",
        falsifier="give the slow rank the same input as a fast one: if the others still wait for it, the hardware (not the data) is the cause",
        confounders=("ranks may have been traced over different windows",
                     "a rank with less communication may simply run fewer collectives"),
        confidence="medium", suggested_variants=("eager",), scope="all ranks")
