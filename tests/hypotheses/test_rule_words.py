"""A rule's judgement and its words are apart: the words are declared, checked at registration, and told.

A rule returns a ``Finding`` of its own class; its ``Words`` blocks (one per branch) are templates over the
finding's fields. These tests hold the contract: words that read a field the finding lacks are refused when
the rule is registered (not when it first fires, on some user's trace), an undeclared note or branch is an
error naming what is declared, and a rule is a few lines of judgement.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from workbench.errors import InvalidArgumentError
from workbench.hypotheses import registry
from workbench.hypotheses.catalog import get_rule, list_rules
from workbench.hypotheses.hypothesis import Evidence, Hypothesis
from workbench.hypotheses.registry import Limits, rule
from workbench.hypotheses.words import Finding, Words, template_fields


@dataclass(frozen=True, kw_only=True)
class SlowOpFinding(Finding):
    op_name: str
    dur_ms: float
    share_pct: float


WORDS = {
    "one": Words(
        title="{op_name} takes {share_pct:.0f}% of op time",
        observed="{op_name} ran for {dur_ms:.2f} ms",
        mechanism="one op does most of the work",
        predicted_effect="a faster {op_name} saves up to {dur_ms:.1f} ms",
        falsifier="time {op_name} alone",
        confounders=("the op may be waiting",),
        notes={"short": "only {dur_ms:.3f} ms were recorded"},
        suggested_variants=("compiled",),
    )
}


@dataclass(frozen=True)
class SlowOpLimits(Limits):
    min_share_pct: float = 50.0


@pytest.fixture
def registered():
    """Register rules for one test and take them out again (the catalog's own test counts the rules)."""
    before = dict(registry._RULES)
    yield
    registry._RULES.clear()
    registry._RULES.update(before)


def _slow_op(facts: dict, limits: SlowOpLimits) -> SlowOpFinding | None:
    """A rule in a few lines of judgement: the words are declared above."""
    share = 100 * facts["dur_ms"] / facts["total_ms"]
    if share < limits.min_share_pct:
        return None
    return SlowOpFinding(
        branch="one",
        op_name=facts["op"],
        dur_ms=facts["dur_ms"],
        share_pct=share,
        evidence=(Evidence("share_pct", share, "%", limits.min_share_pct, ">="),),
        time_at_stake_ms=facts["dur_ms"],
        notes=("short",) if facts["dur_ms"] < 1 else (),
    )


def test_a_finding_is_told_in_its_branch_words(registered):
    rule("test_slow_op", category="host_bound", scope="trace", limits=SlowOpLimits, finding=SlowOpFinding, words=WORDS)(
        _slow_op
    )
    (h,) = registry.registered_rule("test_slow_op")({"op": "aten::mm", "dur_ms": 0.5, "total_ms": 0.8})
    assert h.title == "aten::mm takes 62% of op time"
    assert h.observed == "aten::mm ran for 0.50 ms"
    assert h.predicted_effect == "a faster aten::mm saves up to 0.5 ms"
    assert h.confounders == ("the op may be waiting", "only 0.500 ms were recorded")
    assert (h.rule, h.category, h.suggested_variants, h.time_at_stake_ms) == (
        "test_slow_op",
        "host_bound",
        ("compiled",),
        0.5,
    )
    (long,) = registry.registered_rule("test_slow_op")({"op": "aten::mm", "dur_ms": 5.0, "total_ms": 8.0})
    assert long.confounders == ("the op may be waiting",)  # the note holds only for a short recording
    assert registry.registered_rule("test_slow_op")({"op": "aten::mm", "dur_ms": 1.0, "total_ms": 8.0}) == []


def test_words_reading_a_field_the_finding_lacks_are_refused_at_registration(registered):
    bad = {"one": dataclasses.replace(WORDS["one"], falsifier="time {op} alone")}
    with pytest.raises(InvalidArgumentError, match=r"branch 'one' read \['op'\], which SlowOpFinding does not have"):
        rule("test_bad_words", category="host_bound", scope="trace", finding=SlowOpFinding, words=bad)
    with pytest.raises(InvalidArgumentError, match="positional fields"):
        rule(
            "test_positional",
            category="host_bound",
            scope="trace",
            finding=SlowOpFinding,
            words=Words("{}", "", "", "", ""),
        )
    with pytest.raises(InvalidArgumentError, match="declares their words"):
        rule("test_no_words", category="host_bound", scope="trace", finding=SlowOpFinding)
    assert "test_bad_words" not in registry._RULES


def test_an_undeclared_note_branch_or_finding_class_is_an_error_naming_what_is_declared(registered):
    def notes_unknown(facts, limits):
        return dataclasses.replace(_slow_op(facts, limits), notes=("loud",))

    def branch_unknown(facts, limits):
        return dataclasses.replace(_slow_op(facts, limits), branch="two")

    def other_class(facts, limits):
        return Finding(evidence=(), time_at_stake_ms=1.0, branch="one")

    facts = {"op": "aten::mm", "dur_ms": 5.0, "total_ms": 8.0}
    for name, fn, message in (
        ("test_note", notes_unknown, r"notes \['loud'\] its words do not declare \(\['short'\]\)"),
        ("test_branch", branch_unknown, r"no words for branch 'two'; it declares \['one'\]"),
        ("test_class", other_class, "returned a Finding; it declares SlowOpFinding"),
    ):
        rule(name, category="host_bound", scope="trace", limits=SlowOpLimits, finding=SlowOpFinding, words=WORDS)(fn)
        with pytest.raises(InvalidArgumentError, match=message):
            registry.registered_rule(name)(facts)


def test_template_fields_reads_roots_and_nested_specs():
    assert template_fields("{a:.0f} of {b.c} and {d[0]} at {e:{width}}") == {"a", "b", "d", "e", "width"}
    assert template_fields("no fields, {{escaped}}") == frozenset()


def test_every_rule_declares_its_finding_and_words():
    """No rule's prose lives in its body: each declares a Finding class and at least one Words block."""
    for r in list_rules():
        assert r.finding is not Finding, f"{r.name} declares no finding class of its own"
        assert r.words, f"{r.name} declares no words"
        for branch, block in r.words.items():
            assert block.title and block.observed and block.mechanism, (r.name, branch)
            assert block.fields() <= {f.name for f in dataclasses.fields(r.finding)}, (r.name, branch)


def test_a_rules_words_are_readable_without_running_it():
    """What a rule can say is data: its branches and their texts are there to list (a report, the docs)."""
    r = get_rule("float64_compute")
    assert set(r.words) == {"cpu", "gpu"}
    assert "{share_pct:.0f}" in r.words["cpu"].title
    assert set(r.words["cpu"].notes) == {"no_shapes"}


@dataclass(frozen=True, kw_only=True)
class SyncFinding(Finding):
    n_syncs: int
    per_step: float
    rank: int


SYNC_WORDS = Words(
    title="{n_syncs} host syncs{steps}",
    observed="the host waited {n_syncs} times{steps}",
    mechanism="each sync drains the queue",
    predicted_effect="fewer syncs",
    falsifier="remove one",
    parts={"steps": " ({per_step:.0f} per step)"},
    scope="rank {rank}",
)


def test_an_optional_clause_is_a_part_and_the_scope_a_template(registered):
    def fn(facts, limits):
        return SyncFinding(
            n_syncs=facts["n"],
            per_step=facts["n"] / max(1, facts["steps"]),
            rank=facts["rank"],
            evidence=(),
            time_at_stake_ms=1.0,
            parts=("steps",) if facts["steps"] else (),
        )

    rule("test_syncs", category="host_sync", scope="trace", finding=SyncFinding, words=SYNC_WORDS)(fn)
    (with_steps,) = registry.registered_rule("test_syncs")({"n": 24, "steps": 2, "rank": 1})
    (without,) = registry.registered_rule("test_syncs")({"n": 24, "steps": 0, "rank": 0})
    assert (with_steps.title, with_steps.observed) == (
        "24 host syncs (12 per step)",
        "the host waited 24 times (12 per step)",
    )
    assert (without.title, without.scope) == ("24 host syncs", "rank 0")
    assert with_steps.scope == "rank 1"


def test_a_part_that_reads_a_part_or_shadows_a_field_is_refused(registered):
    with pytest.raises(InvalidArgumentError, match="reads another part"):
        Words("{a}", "", "", "", "", parts={"a": "x", "b": "{a}"})
    with pytest.raises(InvalidArgumentError, match=r"parts \['rank'\] have the names of fields of SyncFinding"):
        rule(
            "test_shadow",
            category="host_sync",
            scope="trace",
            finding=SyncFinding,
            words=dataclasses.replace(SYNC_WORDS, parts={"rank": "x"}),
        )


def test_a_rule_that_builds_its_own_hypothesis_is_refused(registered):
    def prose(facts, limits):
        return Hypothesis("host_bound", "t", "o", "m", (), 1.0, "p", "f")

    rule("test_prose", category="host_bound", scope="trace", finding=SlowOpFinding, words=WORDS)(prose)
    with pytest.raises(InvalidArgumentError, match="returned a Hypothesis: a rule returns its Finding"):
        registry.registered_rule("test_prose")({})
