"""Decision classes for a variant, and the DecisionRecord that writes one down.

``keep``: correct and faster end to end; ``keep_guarded``: faster only in a named domain (the
sweep found shapes where it is slower or wrong), fallback stated; ``micro_only``: faster in
isolation but the saving is negligible against the end-to-end time; ``reject``: incorrect,
failing, cheating, slower, or too costly to set up; ``need_more_evidence``: the difference is
within noise, or it could not be measured here (not applicable, timing not meaningful).

A record of a variant built from a catalog fix carries ``fix``: the fix's name, what it changes,
where it was applied (``variant.options["fix_where"]``) and why, its numerical class (measured, and as
the fix declares it) and the tolerance its outputs and gradients were judged with
(``record_builder.fix_record``); ``{}`` for any other variant.

Its HTML, text and Markdown are ``workbench.render.html(record)`` / ``text`` / ``markdown``
(``workbench.render.decision``), and a notebook shows it through IPython's display formatter
(``workbench.render.ipython``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workbench.variants.stats import Speedup

DECISIONS = ("keep", "keep_guarded", "micro_only", "reject", "need_more_evidence")
MICRO_ONLY_SHARE = 0.02  # saving below 2% of the end-to-end time: micro_only
MAX_BREAK_EVEN_CALLS = 100_000  # setup cost needing more calls than this to pay back: too costly


CHEAT_PREFIXES = ("patched timer", "work moved", "output changed", "precision lowered", "faster than the roofline")
POWER_TEXT = "80%"


@dataclass(frozen=True)
class Verdict:
    decision: str
    reason: str


def classify(
    *,
    status: str,
    reason: str,
    flags: tuple[str, ...],
    speedup: Speedup | None,
    timing_meaningful: bool,
    failure_cases: tuple[str, ...] = (),
    saving_ms: float = 0.0,
    setup_ms: float = 0.0,
    end_to_end_ms: float | None = None,
    min_effect: float = 0.0,
) -> Verdict:
    """The decision for one candidate row (see the module docstring for the classes). ``min_effect``: a
    speed-up whose point estimate is within it of 1 (either way) is never decided on its timing."""
    if status == "not_applicable":
        return Verdict("need_more_evidence", f"not applicable here: {reason}; measure it where it can run")
    if status != "ok":
        return Verdict("reject", f"{status}: {reason}")
    cheats = [f for f in flags if f.startswith(CHEAT_PREFIXES)]
    if cheats:
        return Verdict("reject", cheats[0])
    leaks = [f for f in flags if f.startswith("changed global state")]
    if leaks:
        return Verdict(
            "reject",
            f"{leaks[0]}: a drop-in replacement must leave process-wide settings as it "
            f"found them (here they were restored after each call; in a program they would "
            f"leak into everything after it)",
        )
    unjudged = [f for f in flags if f.startswith("cannot judge")]
    if unjudged:
        timed = f"; its timing ({speedup.describe()}) is shown for information" if speedup is not None else ""
        return Verdict("need_more_evidence", f"{unjudged[0]}{timed}")
    if not timing_meaningful:
        return Verdict(
            "need_more_evidence",
            "correct, but its timing here is not meaningful (e.g. Triton's CPU interpreter); time it on a GPU",
        )
    assert speedup is not None, "a correct row with a meaningful timing has a speedup"
    return _classify_timing(speedup, failure_cases, saving_ms, setup_ms, end_to_end_ms, min_effect)


def _classify_timing(
    speedup: Speedup,
    failure_cases: tuple[str, ...],
    saving_ms: float,
    setup_ms: float,
    end_to_end_ms: float | None,
    min_effect: float = 0.0,
) -> Verdict:
    s = speedup.describe()
    if (speedup.faster or speedup.slower) and min_effect > 0 and 1 / (1 + min_effect) < speedup.point < 1 + min_effect:
        change = speedup.point - 1
        return Verdict(
            "need_more_evidence",
            f"a change of {change:+.2%} (speedup {s}) is smaller than the "
            f"comparison's min_effect of {min_effect:.0%}: too small to decide on; "
            "pass a smaller min_effect= to judge changes this small",
        )
    if speedup.slower:
        return Verdict("reject", f"slower: speedup {s}")
    if not speedup.faster:
        mde = speedup.min_detectable
        seen = (
            f"the smallest change it could have seen is about {mde:.1%} (at {POWER_TEXT} power, "
            f"{speedup.n_pairs} rounds)"
            if mde < 10
            else "the interval is too wide to bound the change"
        )
        return Verdict(
            "need_more_evidence",
            f"difference within noise: speedup {s} includes 1; {seen}; "
            f"for a smaller effect run a longer budget or a larger input",
        )
    if saving_ms > 0 and setup_ms / saving_ms > MAX_BREAK_EVEN_CALLS:
        return Verdict(
            "reject",
            f"too costly: {setup_ms:.4g} ms of setup needs "
            f"{setup_ms / saving_ms:.3g} calls to pay back (> {MAX_BREAK_EVEN_CALLS})",
        )
    if failure_cases:
        return Verdict(
            "keep_guarded", f"faster ({s}) but slower or wrong on {len(failure_cases)} swept case(s): guard it"
        )
    if end_to_end_ms and saving_ms < MICRO_ONLY_SHARE * end_to_end_ms:
        return Verdict(
            "micro_only",
            f"faster in isolation ({s}) but saves {saving_ms:.3g} ms of a "
            f"{end_to_end_ms:.4g} ms end-to-end run (< {MICRO_ONLY_SHARE:.0%})",
        )
    return Verdict("keep", f"correct and faster: speedup {s}")


@dataclass(frozen=True)
class DecisionRecord:
    """What was decided about a change and the numbers that justify it (DESIGN.md's fields)."""

    decision: str
    variant: str
    reason: str
    problem: str
    bottleneck: str
    change: str
    numerical_class: str
    why_safe: str
    guard: str
    fallback: str
    evidence: tuple[str, ...]
    result: str
    rejected_alternatives: tuple[str, ...]
    remaining_risk: tuple[str, ...]
    failure_cases: tuple[str, ...]
    environment: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)  # the CompareSettings it was decided under
    mode: str = "inference"  # "training": gradients checked too, forward and backward timed
    fix: dict[str, Any] = field(default_factory=dict)  # the catalog fix the variant was built from ({}: none)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("evidence", "rejected_alternatives", "remaining_risk", "failure_cases"):
            d[k] = list(d[k])
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "DecisionRecord":
        kw = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        for k in ("evidence", "rejected_alternatives", "remaining_risk", "failure_cases"):
            kw[k] = tuple(kw.get(k, ()))
        if kw.get("numerical_class") == "lower precision":  # records saved before the rename
            kw["numerical_class"] = "reduced precision"
        kw["fix"] = dict(kw.get("fix") or {})
        return cls(**kw)

    def to_json(self, **kw: Any) -> str:
        return json.dumps(self.to_dict(), indent=kw.pop("indent", 2), default=str, **kw)
