"""A study's ledger as it reads and grows: the entries its events fold into, the current
baseline's hypotheses with their status, which ranked hypotheses a new baseline proposes (and which
the ledger holds back), and the events a baseline's proposals and a round's tests append.

The events themselves live in the store's ``ledger.jsonl`` (``workbench.study.store``); what an
event and an entry are, and how they fold, is ``workbench.study.ledger``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Sequence

from workbench.study.ledger import LedgerEntry, fold, held_back, hypothesis_key, proposal_event, same_scope

if TYPE_CHECKING:
    from workbench.hypotheses.hypothesis import Hypothesis
    from workbench.study.baseline import Baseline
    from workbench.study.store import StudyStore


class LedgerView:
    """The ledger of the study whose files ``store`` holds."""

    def __init__(self, store: StudyStore) -> None:
        self.store = store

    @property
    def entries(self) -> tuple[LedgerEntry, ...]:
        return tuple(fold(self.store.events))

    def hypotheses(self, base: Baseline | None) -> tuple[Hypothesis, ...]:
        """``base``'s ranked hypotheses, each with its status from the ledger."""
        if base is None:
            return ()
        status = {e.key: e for e in self.entries if e.baseline_id == base.baseline_id}
        out = []
        for h in base.hypotheses:
            entry = status.get(hypothesis_key(h))
            if entry is not None:
                h = dataclasses.replace(h, status=entry.hypothesis.status, confidence=entry.confidence)
            out.append(h)
        return tuple(out)

    @staticmethod
    def screen(
        entries: Sequence[LedgerEntry], ranked: Sequence[Hypothesis], scope_base: dict[str, Any]
    ) -> tuple[list[Hypothesis], list[dict[str, Any]]]:
        """The ``ranked`` hypotheses a baseline of scope ``scope_base`` proposes, and those held back:
        rejected in a round under the same scope (inputs, device), each with why and when to reopen."""
        proposed, held = [], []
        for h in ranked:
            key = hypothesis_key(h)
            scope = {"key": key, **scope_base}
            blocker = held_back(entries, key, scope)
            if blocker is not None:
                held.append(
                    {
                        "key": key,
                        "title": h.title,
                        "rejected_in_round": blocker.round,
                        "rejected_under": blocker.baseline_id,
                        "reopen_when": blocker.reopen_when,
                        "reason": f"rejected in round {blocker.round} under the same scope (inputs, device); "
                        f"not proposed again until {blocker.reopen_when}",
                    }
                )
                continue
            proposed.append(h)
        return proposed, held

    def propose(
        self, entries: Sequence[LedgerEntry], proposed: Sequence[Hypothesis], scope_base: dict[str, Any], at: str
    ) -> None:
        """Record the new baseline ``scope_base["baseline_id"]``'s proposals: a rejection (in
        ``entries``) under another scope reads reopenable, then one proposal event per hypothesis."""
        bid = scope_base["baseline_id"]
        for entry in entries:  # a rejection under another scope may now be tried again
            if entry.status != "rejected":
                continue
            for h in proposed:
                if hypothesis_key(h) == entry.key and not same_scope(
                    entry.evidence_scope, {"key": entry.key, **scope_base}
                ):
                    self.store.append_event(
                        {
                            "event": "reopenable",
                            "key": entry.key,
                            "baseline_id": entry.baseline_id,
                            "status": "reopenable",
                            "round": None,
                            "at": at,
                            "reason": f"proposed again under baseline {bid}, whose scope differs",
                        }
                    )
        for h in proposed:
            self.store.append_event(
                proposal_event(h, baseline_id=bid, scope={"key": hypothesis_key(h), **scope_base}, at=at)
            )

    def record_test(
        self, key: str, *, baseline_id: str, round: int, update: dict[str, Any], tested: list[dict[str, Any]], at: str
    ) -> None:
        """Round ``round`` tested the hypothesis ``key``: its status, confidence and residual after
        (``residuals.combine``), and the variants that tested it as the evidence's scope."""
        self.store.append_event(
            {
                "event": "tested",
                "key": key,
                "baseline_id": baseline_id,
                "round": round,
                "status": update["status_after"],
                "confidence": update["confidence_after"],
                "residual": update["residual"],
                "reason": update["reason"],
                "at": at,
                "evidence_scope": {"round": round, "variants": tested},
            }
        )
