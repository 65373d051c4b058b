"""Many ranks: exposed (non-overlapped) communication, and stragglers / imbalance between ranks."""
from __future__ import annotations

from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.model import Evidence, Hypothesis
from workbench.hypotheses.registry import NotJudged, rule
from workbench.hypotheses.rules._common import bounded_ms, pct


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


@rule("straggler_rank", category="load_imbalance", scope="trace", max_spread=1.15)
def straggler_rank(f: TraceFacts, t):
    """One rank's compute takes clearly longer than the median rank's."""
    ranks = f.gpu_ranks
    if len(ranks) < 2:
        raise NotJudged("only one rank in the trace: stragglers need two or more")
    med = float(ranks["compute_us"].median())
    worst = ranks.loc[ranks["compute_us"].idxmax()]
    spread = float(worst.compute_us) / med if med > 0 else 0.0
    if spread <= t["max_spread"]:
        return None
    return Hypothesis(
        category="load_imbalance", title=f"Rank {int(worst['rank'])} computes {spread:.2f}x the median rank",
        observed=f"compute per rank from {ranks['compute_us'].min() / 1e3:.2f} to {ranks['compute_us'].max() / 1e3:.2f} ms",
        mechanism="Every collective waits for the slowest rank; the others idle in communication.",
        evidence=(Evidence("max_over_median_compute", spread, "x", t["max_spread"], source="kernels (per rank)",
                           rows=tuple({"rank": int(r["rank"]), "compute_us": round(float(r.compute_us), 1)}
                                      for _, r in ranks.iterrows())[:8]),),
        time_at_stake_ms=bounded_ms(float(worst.compute_us) - med, float(worst.span_us)),
        predicted_effect="balancing the work (shards, sequence lengths) brings every rank to the median compute time",
        falsifier="give the slow rank the same input as a fast one: if it stays slow, the hardware (not the data) is the cause",
        confounders=("ranks may have been traced over different windows",), confidence="medium",
        suggested_variants=("eager",), scope="all ranks")
