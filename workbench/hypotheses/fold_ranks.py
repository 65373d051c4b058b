"""One finding per problem across ranks.

A trace rule that judges each rank apart returns one hypothesis per rank (scope ``"rank N"``). When the
same rule fires on several ranks, those copies are one problem: ``fold_ranks`` folds them into one
hypothesis that names the ranks (worst first, by time at stake), states the spread of its first
metric across them, and keeps each rank's numbers in an evidence row. Its numbers stay per rank: the
stake is the worst rank's (ranks run at the same time, so fixing the problem on every rank shortens
the job by at most the worst rank's stake, not by the sum), the percentages are that rank's.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Iterable, Sequence

from workbench.hypotheses.hypothesis import Evidence, Hypothesis

RANK_SCOPE = re.compile(r"^rank (\d+)$")
RANKS_SCOPE = re.compile(r"^ranks ([\d, ]+)(?: \(of \d+\))?$")


def scope_ranks(scope: str) -> tuple[int, ...]:
    """The ranks a hypothesis's scope names: ``"rank 3"`` -> (3,), ``"ranks 1, 3 (of 8)"`` -> (1, 3)."""
    m = RANK_SCOPE.match(scope or "")
    if m:
        return (int(m.group(1)),)
    m = RANKS_SCOPE.match(scope or "")
    if m:
        return tuple(int(x) for x in m.group(1).replace(" ", "").split(",") if x)
    return ()


def fold_ranks(hypotheses: Iterable[Hypothesis], all_ranks: Sequence[int] = ()) -> list[Hypothesis]:
    """Fold the per-rank copies of each rule's finding into one hypothesis (see the module docstring).
    The folded hypothesis takes the place of the first copy; everything else keeps its order."""
    hyps = list(hypotheses)
    groups: dict[tuple[str, str], list[Hypothesis]] = {}
    for h in hyps:
        if h.rule and RANK_SCOPE.match(h.scope or ""):
            groups.setdefault((h.rule, h.category), []).append(h)
    out: list[Hypothesis] = []
    done: set[tuple[str, str]] = set()
    for h in hyps:
        key = (h.rule, h.category)
        if key not in groups or len(groups[key]) < 2:
            out.append(h)
            continue
        if key in done:
            continue
        done.add(key)
        out.append(fold(groups[key], all_ranks))
    return out


def fold(copies: Sequence[Hypothesis], all_ranks: Sequence[int] = ()) -> Hypothesis:
    """One hypothesis from one rule's per-rank copies, worst rank first."""
    ordered = sorted(copies, key=lambda h: (-h.time_at_stake_ms, scope_ranks(h.scope)))
    worst = ordered[0]
    ranks = [scope_ranks(h.scope)[0] for h in ordered]
    names = ", ".join(str(r) for r in ranks)
    of = f" (of {len(set(all_ranks))})" if all_ranks and len(set(all_ranks)) > len(ranks) else ""
    metrics = [e.metric for e in worst.evidence]
    per_rank = []
    for r, h in zip(ranks, ordered):
        row = {"rank": r, "time_at_stake_ms": round(h.time_at_stake_ms, 4)}
        by_metric = {e.metric: e.value for e in h.evidence}
        row.update({m: round(by_metric[m], 4) for m in metrics if m in by_metric})
        per_rank.append(row)
    spread = ""
    extra: tuple[Evidence, ...] = ()
    if worst.evidence:
        first = worst.evidence[0]
        values = [row[first.metric] for row in per_rank if first.metric in row]
        lo, hi = min(values), max(values)
        spread = f"{first.metric} {lo:.4g}-{hi:.4g} {first.unit}".rstrip()
        extra = (
            Evidence(
                f"{first.metric}_spread_across_ranks",
                hi - lo,
                first.unit,
                source=f"{first.source}; one row per rank, worst first",
                rows=tuple(per_rank),
            ),
        )
    stakes = [h.time_at_stake_ms for h in ordered]
    title = f"{worst.title} (rank {ranks[0]}; {len(ranks)} ranks)"
    observed = (
        f"on ranks {names}{of}, worst first; {spread} across them; stake {min(stakes):.3g}-{max(stakes):.3g} ms "
        f"per rank (the worst rank's is the one counted). Worst, {worst.observed}"
    )
    return replace(
        worst,
        title=title,
        observed=observed,
        evidence=tuple(worst.evidence) + extra,
        time_at_stake_ms=max(stakes),
        scope=f"ranks {names}{of}",
    )
