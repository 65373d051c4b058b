"""Recognisers shared by several fixes."""

from __future__ import annotations

from typing import Any

from workbench.fixes.fix import Applicability, Site, absent, applies


def by_hypotheses(fix: Any, context: Any, *, pattern: str = "") -> Applicability:
    """Applies where a hypothesis of the run names this fix (or one of its rules): the sites are the
    hypotheses' scopes, the stake the largest of theirs.  Absent where none does."""
    hyps = context.hypotheses_for(fix)
    if not hyps:
        return absent(fix.name, pattern or "no hypothesis of this run names it")
    if fix.needs_live_code and not context.live:
        from workbench.fixes.fix import not_applicable

        return not_applicable(
            fix.name,
            "the run was loaded from a file: pass the code (run.fixes_for(fn)) to build it",
            hypotheses=tuple(h.title for h in hyps),
            stake_ms=max(h.time_at_stake_ms for h in hyps),
        )
    sites = tuple(dict.fromkeys(Site(h.scope or "whole call", "callable", h.category) for h in hyps))
    return applies(
        fix.name,
        "tests " + "; ".join(f"{h.title} ({h.time_at_stake_ms:.3g} ms at stake)" for h in hyps[:3]),
        sites,
        hypotheses=tuple(h.title for h in hyps),
        stake_ms=max(h.time_at_stake_ms for h in hyps),
    )
