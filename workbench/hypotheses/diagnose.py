"""Run every rule of a scope, collect what fired and what could not be judged, rank.

Ranking: by time at stake, largest first (caveats apart, below). A hypothesis with no evidence, or with nothing at
stake (``time_at_stake_ms <= 0``), is not shown.

Stakes of a run are per clean call. Trace rules read a separate, short traced pass: their stakes
are divided by the traced calls, scaled by the run's ``trace_scale`` (clean median / traced
median: shares from the trace, magnitudes from the clean timing) and bounded by the clean time of
one call. Run rules' per-call stakes are bounded the same way. Stakes holding one-time costs
(``ONE_TIME_RULES``: cold start; the compile time of recompiles and of the extra graphs of graph
breaks) are amortised over a stated number of calls by their rules and are not bounded by one call.

Measurement caveats (``MEASUREMENT_CAVEATS``: about the timing, ``TIMING_CAVEATS``, or about the
traced window: its first step, pauses in a few calls with no cause in the trace, calls whose work the trace did
not record) qualify the findings instead of outranking them: a caveat is about the measurement, not the workload, so it is never of high
confidence and removes no time. Its "stake" is the timing's uncertainty (the half-width of the
median's 95 % interval; the whole median where no such interval exists). A finding whose stake is
larger keeps its confidence; one whose stake is within the uncertainty cannot be told from noise:
it loses one confidence step and says why. In the ranking the caveats stand after every finding
that stands out of the timing's noise (``rank``: a finding's evidence is in the trace or the run, the
caveat only qualifies it); a timing caveat stands before the findings smaller than the uncertainty it
reports, and a caveat saying the timing cannot be judged at all (``NO_INTERVAL_METRIC``: too few samples
for any interval of the median) leads; ``Diagnosis.banner`` states them once above the list. The run's health check qualifies the findings it touches the same way: on a
loaded or oversubscribed machine a preempted process shows idle stretches between its ops, so
host-gap findings
(``LOAD_SENSITIVE_RULES``) lose one confidence step and say why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, cast

from workbench.hypotheses.catalog import list_rules
from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.hypothesis import NO_INTERVAL_METRIC, Hypothesis
from workbench.hypotheses.registry import NotJudged
from workbench.hypotheses.run_facts import RunFacts, field_of

if TYPE_CHECKING:
    from workbench.capture.run import RunRecord
    from workbench.trace import TraceData

CONFIDENCE_ORDER = {"high": 0, "medium": 1, "low": 2}


@dataclass(frozen=True)
class NotJudgedNote:
    rule: str
    category: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"rule": self.rule, "category": self.category, "reason": self.reason}

    @classmethod
    def from_dict(cls, d: dict[str, str]) -> "NotJudgedNote":
        return cls(d["rule"], d["category"], d["reason"])


@dataclass(frozen=True)
class Diagnosis:
    """Ranked hypotheses plus plain statements of what could not be judged, and why."""

    hypotheses: tuple[Hypothesis, ...]
    not_judged: tuple[NotJudgedNote, ...] = ()
    source: str = ""

    def __iter__(self):
        return iter(self.hypotheses)

    def __len__(self) -> int:
        return len(self.hypotheses)

    @property
    def categories(self) -> list[str]:
        return [h.category for h in self.hypotheses]

    @property
    def caveats(self) -> tuple[Hypothesis, ...]:
        """The measurement caveats among the hypotheses: they qualify the run, they are not findings."""
        return tuple(h for h in self.hypotheses if h.rule in MEASUREMENT_CAVEATS)

    @property
    def banner(self) -> str:
        """One line qualifying the run by its timing caveats ("" when there are none)."""
        if not self.caveats:
            return ""
        return (
            "The timing qualifies these findings: "
            + "; ".join(f"{h.title} ({h.observed})" for h in self.caveats)
            + ". Findings within that uncertainty carry one confidence step less."
        )

    def statements(self) -> list[str]:
        """One line per reason, naming the rules it stopped: "no GPU activity ...: rules not judged"."""
        by_reason: dict[str, list[str]] = {}
        for n in self.not_judged:
            by_reason.setdefault(n.reason, []).append(n.rule)
        return [f"{reason}: {', '.join(rules)} not judged" for reason, rules in by_reason.items()]

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "hypotheses": [h.to_dict() for h in self.hypotheses],
            "not_judged": [n.to_dict() for n in self.not_judged],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Diagnosis":
        return cls(
            tuple(Hypothesis.from_dict(h) for h in d.get("hypotheses", ())),
            tuple(NotJudgedNote.from_dict(n) for n in d.get("not_judged", ())),
            d.get("source", ""),
        )

    def to_text(self, **kw) -> str:
        """The ranked hypotheses as plain text (``workbench.hypotheses.ranked.render_text``). Its HTML
        and Markdown are ``workbench.render.html(diag)`` / ``markdown(diag)``; a notebook shows the
        HTML through IPython's display formatter (``workbench.render.ipython``)."""
        from workbench.hypotheses.ranked import render_text

        return render_text(self, **kw)


def rank(hypotheses: Iterable[Hypothesis]) -> list[Hypothesis]:
    """Best first. Findings (evidence in the trace or the run) by time at stake, largest first (then
    higher confidence, then the rule's name: deterministic), whatever their confidence. Then the
    measurement caveats (``MEASUREMENT_CAVEATS``: the timing caveats, one-time work inside the traced
    window, the profiler's first session), most confident first: a caveat is about the measurement,
    not the workload, removes no time, and qualifies the findings (a banner, one confidence step less
    on those within its uncertainty, ``qualify``) instead of outranking them; its "stake" (the timing's
    uncertainty) does not compete with the findings' stakes. The one exception leads the list: a
    caveat saying the timing cannot be judged at all (``voids_timing``: too few samples for any 95 %
    interval of the median), since then no stake read from the timing stands. A timing caveat
    (``TIMING_CAVEATS``) also stands before the findings whose stakes are smaller than the uncertainty
    it reports: those cannot be told from noise, and the noise is then the first thing to fix; except a
    finding that is a cause of that noise (``SPREAD_CAUSES``: recompiles in the steady state, where the
    timed calls that compiled are the slow ones), which the caveat then follows. Caveats also lead where
    nothing else stands."""
    shown = [h for h in hypotheses if h.has_evidence and h.time_at_stake_ms > 0]

    def key(h: Hypothesis):
        if voids_timing(h):
            return (0, CONFIDENCE_ORDER[h.confidence], -h.time_at_stake_ms, 0, h.rule)
        if h.rule in TIMING_CAVEATS:
            # the timing's uncertainty stands before the findings it is larger than (they cannot be told
            # from noise), after every finding that stands out of it
            return (1, -h.time_at_stake_ms, 1, CONFIDENCE_ORDER[h.confidence], h.rule)
        if h.rule in MEASUREMENT_CAVEATS:
            return (2, CONFIDENCE_ORDER[h.confidence], -h.time_at_stake_ms, 0, h.rule)
        return (1, -h.time_at_stake_ms, 0, CONFIDENCE_ORDER[h.confidence], h.rule)

    ranked = sorted(shown, key=key)
    causes = [i for i, h in enumerate(ranked) if h.rule in SPREAD_CAUSES and h.confidence == "high"]
    if not causes:
        return ranked
    last = causes[-1]
    before = [h for h in ranked[:last] if h.rule in TIMING_CAVEATS and not voids_timing(h)]
    if not before:
        return ranked
    kept = [h for h in ranked[: last + 1] if h not in before]
    return kept + before + ranked[last + 1 :]


def voids_timing(h: Hypothesis) -> bool:
    """A measurement caveat saying the timing cannot be judged at all: its evidence holds
    ``NO_INTERVAL_METRIC`` (too_few_samples below the count any 95 % interval of the median needs)."""
    return h.rule in MEASUREMENT_CAVEATS and any(e.metric == NO_INTERVAL_METRIC and e.value for e in h.evidence)


# caveats about the clean timing itself: they qualify findings, never outrank a larger stake
TIMING_CAVEATS = frozenset({"too_few_samples", "noisy_timing", "timer_resolution"})
# findings that are a cause of the timing's spread (recompiles in the timed calls: the calls that compiled
# are the slow ones), which a timing caveat does not stand before
SPREAD_CAUSES = frozenset({"recompiles"})
# caveats about the measurement (the timing, or one-time work inside the traced window, or the profiler's
# first session): ranked after the findings they qualify
MEASUREMENT_CAVEATS = TIMING_CAVEATS | frozenset(
    {"first_step_outlier", "first_profiler_session", "intermittent_pauses", "trace_records_no_work"}
)
# stakes holding one-time costs (the cold call; compile time of repeated compiles or of the extra
# graphs a break makes), spread over a number of calls their rules state: not bounded by one call
ONE_TIME_RULES = frozenset({"cold_start", "recompiles", "graph_breaks"})
LOWER_CONFIDENCE = {"high": "medium", "medium": "low", "low": "low"}


def qualify(hypotheses: Iterable[Hypothesis]) -> list[Hypothesis]:
    """Findings within the timing's uncertainty (the largest timing caveat's stake) lose one
    confidence step and say so; the rest are unchanged."""
    from dataclasses import replace

    hyps = [
        replace(h, confidence="medium") if h.rule in MEASUREMENT_CAVEATS and h.confidence == "high" else h
        for h in hypotheses
    ]  # a caveat about the measurement is never a high-confidence finding
    caveats = [h for h in hyps if h.rule in TIMING_CAVEATS and h.has_evidence and h.time_at_stake_ms > 0]
    if not caveats:
        return hyps
    worst = max(caveats, key=lambda h: h.time_at_stake_ms)
    limit = worst.time_at_stake_ms
    out = []
    for h in hyps:
        if h.rule in TIMING_CAVEATS or h.rule in ONE_TIME_RULES or h.time_at_stake_ms > limit:
            out.append(h)
            continue
        note = (
            f"within the timing's uncertainty ({worst.rule}: {limit:.4g} ms per call at stake): "
            f"a stake of {h.time_at_stake_ms:.4g} ms cannot be told from noise"
        )
        out.append(replace(h, confidence=LOWER_CONFIDENCE[h.confidence], confounders=tuple(h.confounders) + (note,)))
    return out


def _run_rules(
    scope: str, facts: RunFacts | TraceFacts, only: Iterable[str] | None = None
) -> tuple[list[Hypothesis], list[NotJudgedNote]]:
    found, notes = [], []
    wanted = set(only) if only is not None else None
    for r in list_rules(scope):
        if wanted is not None and r.name not in wanted:
            continue
        try:
            found.extend(r(facts))
        except NotJudged as nj:
            notes.append(NotJudgedNote(r.name, r.category, nj.reason))
        except Exception as exc:  # a rule bug must not hide the other rules' findings
            notes.append(NotJudgedNote(r.name, r.category, f"{RULE_FAILED}{type(exc).__name__}: {exc}"))
    return found, notes


RULE_FAILED = "the rule raised "


# rules that compare the ranks with each other: run once on every rank's tables (or their summaries),
# never per rank; every other trace rule judges one rank at a time
CROSS_RANK_RULES = ("straggler_rank",)


def _diagnose_trace(trace: "TraceData | TraceFacts", *, rules: Iterable[str] | None = None) -> Diagnosis:
    if rules is not None:
        from workbench.hypotheses.catalog import get_rule

        rules = list(rules)
        for name in rules:
            get_rule(name)  # unknown name -> RegistryError
    if not isinstance(trace, TraceFacts) and len(trace.ranks) > 1:
        return _diagnose_ranks(trace, rules)
    facts = trace if isinstance(trace, TraceFacts) else TraceFacts(trace)
    found, notes = _run_rules("trace", facts, rules)
    from workbench.hypotheses.fold_ranks import fold_ranks

    found = fold_ranks(found, facts.ranks)  # one finding per problem across ranks
    from workbench.hypotheses.critical_cap import cap_by_critical_path

    found = cap_by_critical_path(found, facts)  # no stake above its work's time on the critical path
    return Diagnosis(tuple(rank(found)), tuple(notes), facts.source)


def _diagnose_ranks(trace: "TraceData", rules: list[str] | None) -> Diagnosis:
    """A trace of several ranks: each rank diagnosed on its own tables, the findings folded across ranks,
    then the cross-rank rules on every rank's tables; the one path a rank folder read by workers takes
    too (``combine_ranks``), so one process and many give the same hypotheses."""
    wanted = [r.name for r in list_rules("trace")] if rules is None else list(rules)
    per_rank = [n for n in wanted if n not in CROSS_RANK_RULES]
    diagnoses = {r: scoped_to_rank(_diagnose_trace(trace.rank(r), rules=per_rank), r) for r in trace.ranks}
    cross, cross_notes = _run_rules("trace", TraceFacts(trace), [n for n in wanted if n in CROSS_RANK_RULES])
    return combine_ranks(diagnoses, trace.ranks, cross, cross_notes)


def scoped_to_rank(diagnosis: Diagnosis, rank_number: int) -> Diagnosis:
    """A one-rank diagnosis whose findings all name that rank (scope ``"rank N"``), so that they fold."""
    from dataclasses import replace as _replace

    from workbench.hypotheses.fold_ranks import RANK_SCOPE

    hypotheses = tuple(
        h if RANK_SCOPE.match(h.scope or "") else _replace(h, scope=f"rank {rank_number}") for h in diagnosis.hypotheses
    )
    return _replace(diagnosis, hypotheses=hypotheses)


def combine_ranks(
    per_rank: "dict[int, Diagnosis]",
    ranks: Iterable[int],
    cross: Iterable[Hypothesis] = (),
    cross_notes: Iterable[NotJudgedNote] = (),
) -> Diagnosis:
    """The diagnosis of several ranks from each rank's own (``scoped_to_rank``) and the cross-rank rules'
    findings: the per-rank copies of a finding folded into one (``fold_ranks``: the worst rank's stake),
    the notes said once."""
    from workbench.hypotheses.fold_ranks import fold_ranks

    ranks = list(ranks)
    found: list[Hypothesis] = []
    notes: dict[tuple[str, str], NotJudgedNote] = {}
    for r in sorted(per_rank):
        found.extend(per_rank[r].hypotheses)
        for note in per_rank[r].not_judged:
            notes.setdefault((note.rule, note.reason), note)
    for note in cross_notes:
        notes.setdefault((note.rule, note.reason), note)
    folded = fold_ranks(found, ranks) + list(cross)
    return Diagnosis(tuple(_stragglers_lead(rank(folded))), tuple(notes.values()), f"{len(ranks)} ranks")


# the per-rank findings that a straggler's lateness explains: its own host work is why the others wait
EXPLAINED_BY_STRAGGLER = ("host_bound", "launch_overhead")


def _stragglers_lead(ranked: list[Hypothesis]) -> list[Hypothesis]:
    """A straggler finding (the others wait for ranks R) leads the per-rank host findings confined to R: the
    job is held back by R, and R's host work is the reason (said in those findings' confounders)."""
    from dataclasses import replace as _replace

    from workbench.hypotheses.fold_ranks import scope_ranks

    out = list(ranked)
    for s in [h for h in ranked if h.rule in CROSS_RANK_RULES]:
        slow = set(scope_ranks(s.scope))
        if not slow:
            continue
        explained = [
            h
            for h in out
            if h.category in EXPLAINED_BY_STRAGGLER and scope_ranks(h.scope) and set(scope_ranks(h.scope)) <= slow
        ]
        if not explained:
            continue
        first = min(out.index(h) for h in explained)
        if out.index(s) < first:
            continue
        out.remove(s)
        out.insert(first, s)
        for h in explained:
            note = f"rank(s) {', '.join(map(str, sorted(slow)))} are the straggler(s) the others wait for: this is why"
            out[out.index(h)] = _replace(h, confounders=tuple(h.confounders) + (note,))
    return out


def _diagnose_run(run: "RunRecord") -> Diagnosis:
    facts = RunFacts(run)
    run_found, notes = _run_rules("run", facts)
    cap_ms = facts.clean_ms  # the clean time of one call: no per-call stake above it
    found = [h if h.rule in ONE_TIME_RULES else _capped(h, cap_ms) for h in run_found]
    try:
        tf = facts.trace_facts
        trace_found, trace_notes = _run_rules("trace", tf)
        from workbench.hypotheses.critical_cap import cap_by_critical_path

        trace_found = cap_by_critical_path(trace_found, tf)  # bounded by the work's time on the critical path
        per_call = max(1, facts.calls_in_trace)
        scale = facts.trace_scale
        # trace stakes cover every traced call, under the profiler: per traced call, then to the
        # clean call (shares from the trace, magnitude from the clean timing), bounded by it
        found.extend(_capped(_scaled(_per_call(h, per_call, tf.steps.empty), scale), cap_ms) for h in trace_found)
        notes.extend(trace_notes)
    except NotJudged as nj:
        notes.append(NotJudgedNote("(trace rules)", "", nj.reason))
    from workbench.hypotheses.rules.fresh_pages import fold_fresh_pages

    found = fold_fresh_pages(found)  # the page faults join the churn finding that names the buffers
    found = qualify_by_health(qualify(found), field_of(run, "health"))
    return Diagnosis(tuple(rank(found)), tuple(notes), "run " + facts.name if facts.name else "run")


LOAD_SENSITIVE_RULES = frozenset({"cpu_host_gaps"})
_LOAD_CHECKS = ("machine_load", "thread_oversubscription", "cpu_wait")


def qualify_by_health(hypotheses: list[Hypothesis], health: Any) -> list[Hypothesis]:
    """Findings a loaded machine can fake (preemption shows as gaps between ops) lose one
    confidence step, with the health check's words as a confounder."""
    from dataclasses import replace

    check = getattr(health, "check", None)  # a ProfileHealth; a hand-built run may give None or a dict
    if check is None:
        return hypotheses
    loaded = [c for c in (check(name) for name in _LOAD_CHECKS) if c is not None and c.level == "warn"]
    if not loaded:
        return hypotheses
    note = (
        "the machine was loaded while profiling ("
        + "; ".join(c.observed for c in loaded)
        + "): a preempted process shows idle stretches between its ops; profile again on a quiet machine"
    )
    return [
        replace(h, confidence=LOWER_CONFIDENCE[h.confidence], confounders=tuple(h.confounders) + (note,))
        if h.rule in LOAD_SENSITIVE_RULES
        else h
        for h in hypotheses
    ]


def _capped(h: Hypothesis, cap_ms: float | None) -> Hypothesis:
    """A per-call stake cannot exceed the measured (clean median) call it would shorten."""
    from dataclasses import replace

    if cap_ms is None or h.time_at_stake_ms <= cap_ms:
        return h
    return replace(h, time_at_stake_ms=cap_ms)


def _scaled(h: Hypothesis, scale: float) -> Hypothesis:
    """A stake per traced call as a stake per clean call (``scale`` = clean / traced median)."""
    from dataclasses import replace

    if scale == 1.0 or not h.time_at_stake_ms:
        return h
    return replace(h, time_at_stake_ms=h.time_at_stake_ms * scale)


def _per_call(h: Hypothesis, calls: int, no_steps: bool) -> Hypothesis:
    from dataclasses import replace

    # rules reading per-step windows already divide by the number of steps
    if h.rule in PER_CALL_RULES:
        return h
    return replace(h, time_at_stake_ms=h.time_at_stake_ms / calls)


PER_CALL_RULES = frozenset(
    {
        "cpu_dispatch_overhead",
        "cpu_host_gaps",
        "cpu_memory_bound_ops",
        "cpu_compute_bound_ops",
        "large_allocations_repeat",
    }
)


def diagnose(subject: "RunRecord | TraceData | TraceFacts", *, rules: Iterable[str] | None = None) -> Diagnosis:
    """The one entry point: the ``Diagnosis`` of a profiled run (it has ``timing``: run rules and its
    trace's rules, stakes per clean call) or of a trace (``Trace``, its tables, or ``TraceFacts``:
    trace rules, stakes over the whole trace; ``rules`` names a subset). ``.hypotheses`` are ranked,
    best first; ``.statements()`` say what could not be judged and why."""
    if hasattr(subject, "timing"):
        if rules is not None:
            from workbench.errors import InvalidArgumentError

            raise InvalidArgumentError(
                "diagnose(run, rules=...): a subset of rules applies to a trace; "
                "pass run.trace to judge a subset of its rules"
            )
        return _diagnose_run(cast("RunRecord", subject))  # only a run has .timing
    return _diagnose_trace(subject, rules=rules)
