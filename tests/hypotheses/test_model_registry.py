from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from workbench import render
from workbench.errors import InvalidArgumentError, RegistryError
from workbench.hypotheses import CATEGORIES, Diagnosis, Evidence, Hypothesis, get_rule, list_rules, rank
from workbench.hypotheses.diagnose import NotJudgedNote
from workbench.hypotheses.ranked import render_text
from workbench.hypotheses.registry import Limits


def hyp(category="host_bound", stake=1.0, confidence="medium", evidence=True, title="t"):
    ev = (
        (Evidence("idle_pct", 50.0, "%", 20.0, source="kernels", rows=({"name": "<b>k</b>", "gap_us": 1.5},)),)
        if evidence
        else ()
    )
    return Hypothesis(
        category=category,
        title=title,
        observed="o",
        mechanism="m",
        evidence=ev,
        time_at_stake_ms=stake,
        predicted_effect="p",
        falsifier="f",
        confounders=("c",),
        confidence=confidence,
        suggested_variants=("compiled",),
        rule="r",
    )


def test_hypothesis_round_trips_through_dict():
    h = hyp()
    assert Hypothesis.from_dict(h.to_dict()) == h
    d = Diagnosis((h,), (NotJudgedNote("x", "host_sync", "no GPU activity"),), "s")
    assert Diagnosis.from_dict(d.to_dict()) == d


@pytest.mark.parametrize("field,value", [("category", "slow"), ("confidence", "sure"), ("status", "done")])
def test_hypothesis_rejects_unknown_choices(field, value):
    kw = hyp().to_dict()
    kw[field] = value
    with pytest.raises(InvalidArgumentError, match=field):
        Hypothesis.from_dict(kw)


def test_negative_stake_rejected():
    with pytest.raises(InvalidArgumentError):
        hyp(stake=-1.0)


def test_rank_orders_by_stake_and_drops_hypotheses_without_evidence():
    a, b, c = hyp(stake=1.0, title="a"), hyp(stake=5.0, title="b"), hyp(stake=9.0, evidence=False, title="c")
    assert [h.title for h in rank([a, b, c])] == ["b", "a"]


def test_caveats_stand_after_every_finding_larger_than_their_noise():
    from dataclasses import replace

    few = replace(hyp("measurement", stake=0.1, confidence="low", title="few"), rule="too_few_samples")
    noise = replace(hyp("measurement", stake=50.0, confidence="medium", title="noise"), rule="noisy_timing")
    big = hyp("host_bound", stake=100.0, title="big")
    small = hyp("host_bound", stake=0.2, title="small")
    weak = hyp("memory_bound", stake=80.0, confidence="low", title="weak")
    # a caveat removes no time and never outranks a finding that stands out of the noise; a timing caveat
    # stands before the findings smaller than the uncertainty it reports (small's 0.2 ms cannot be told
    # from 50 ms of noise), a caveat's confidence does not lift it over a finding (weak's 80 ms is first)
    assert [h.title for h in rank([weak, big, noise, small, few])] == ["big", "weak", "noise", "small", "few"]
    # a caveat saying the timing cannot be judged at all (no interval of the median) leads
    void = replace(few, evidence=few.evidence + (Evidence("no_median_interval", 1, "flag"),), title="void")
    assert [h.title for h in rank([big, void, noise])] == ["void", "big", "noise"]
    # a low-confidence caveat (an interval exists, the findings within it qualified) outranks nothing
    assert [h.title for h in rank([few, weak, small])] == ["weak", "small", "few"]
    assert [h.title for h in rank([few, noise])] == ["noise", "few"]  # alone, they lead
    assert [h.title for h in rank([hyp("host_bound", stake=0.0, title="zero"), small])] == ["small"]


def test_a_timing_caveat_is_never_high_confidence_and_weakens_the_findings_within_it():
    from dataclasses import replace

    from workbench.hypotheses.diagnose import qualify

    noise = replace(hyp("measurement", stake=1.0, confidence="high", title="noise"), rule="noisy_timing")
    inside = hyp("host_bound", stake=0.5, confidence="high", title="inside")
    clear = hyp("host_bound", stake=5.0, confidence="high", title="clear")
    by_title = {h.title: h for h in qualify([noise, inside, clear])}
    assert by_title["noise"].confidence == "medium"
    assert (
        by_title["inside"].confidence == "medium" and "cannot be told from noise" in by_title["inside"].confounders[-1]
    )
    assert by_title["clear"].confidence == "high"


def test_unknown_rule_is_a_registry_error_naming_the_known_ones():
    with pytest.raises(RegistryError, match="no rule named 'nope'.*cold_start"):
        get_rule("nope")


def test_unknown_threshold_override_rejected():
    with pytest.raises(InvalidArgumentError, match="min_ratio"):
        get_rule("cold_start")(object(), min_rattio=2)


def test_every_rule_has_category_thresholds_and_doc():
    rules = list_rules()
    assert len(rules) >= 25
    assert {r.category for r in rules} >= set(CATEGORIES) - {"precision"} | {"precision"}
    for r in rules:
        assert r.doc, r.name


def test_every_rule_declares_its_thresholds_as_a_frozen_value_of_its_own():
    classes = set()
    for r in list_rules():
        limits = r.limits
        assert isinstance(limits, Limits) and dataclasses.is_dataclass(limits), r.name
        assert dataclasses.fields(limits) or type(limits) is Limits, r.name
        assert type(limits) not in classes, f"{r.name} shares its Limits class"
        classes.add(type(limits))
        assert dict(r.thresholds) == limits.as_dict()
        if limits.as_dict():
            name = next(iter(limits.as_dict()))
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(limits, name, 0)
            assert getattr(limits.overridden(r.name, **{name: 7}), name) == 7
            assert getattr(r.limits, name) != 7 or limits.as_dict()[name] == 7  # the default is untouched


def test_a_rule_reads_its_thresholds_as_attributes_and_no_rule_looks_one_up_by_string():
    import re
    from pathlib import Path

    import workbench.hypotheses.rules as rules_package

    folder = Path(rules_package.__file__).parent
    lookups = [
        f"{p.name}:{i}"
        for p in folder.glob("*.py")
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"limits\[|limits\.get\(|thresholds\[", line)
    ]
    assert lookups == []


def test_registering_a_rule_without_a_limits_class_is_refused():
    from workbench.hypotheses.registry import rule

    with pytest.raises(InvalidArgumentError, match="limits must be a frozen Limits dataclass"):
        rule("made_up_rule", category="measurement", scope="run", limits=dict)  # type: ignore[arg-type]


def test_renderings_escape_trace_strings():
    d = Diagnosis((hyp(title="<script>x</script>"),), (NotJudgedNote("r", "c", "no <GPU>"),))
    html_out = render.html(d)
    assert "<script>" not in html_out and "&lt;script&gt;" in html_out and "&lt;b&gt;k" in html_out
    assert "&lt;GPU&gt;" in html_out
    md = render.markdown(d)
    assert "<script>" not in md
    text = render_text(d)
    assert "1. [host_bound]" in text and "Not judged:" in text and "no <GPU>: r not judged" in text


def test_hypotheses_layer_imports_no_torch_ipython_or_altair():
    code = (
        "import sys, workbench.hypotheses as h; h.list_rules(); "
        "bad=[m for m in ('torch','IPython','altair') if m in sys.modules]; assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_evidence_reads_in_adaptive_time_units_and_never_in_scientific_notation():
    from workbench.hypotheses.hypothesis import Evidence

    assert Evidence("long_host_wait_us", 523_600.0, "us").describe() == "long_host_wait_us = 524 ms"
    assert Evidence("excess_ms", 0.0004, "ms", 0.01).describe() == "excess_ms = 400 ns (> threshold 10 µs)"
    assert Evidence("alloc_bytes", 12_345_678.0, "bytes").describe() == "alloc_bytes = 12,345,678 bytes"
    assert Evidence("idle_pct", 50.08, "%", 20.0).describe() == "idle_pct = 50.08 % (> threshold 20 %)"
    assert "e+" not in Evidence("events", 2.5e9, "").describe()


def test_the_diagnosis_states_its_measurement_caveats_once_in_a_banner():
    from dataclasses import replace

    noise = replace(hyp("measurement", stake=1.0, confidence="medium", title="Timing is noisy"), rule="noisy_timing")
    finding = hyp("host_bound", stake=5.0, title="host")
    diag = Diagnosis(tuple(rank([noise, finding])))
    assert [h.rule for h in diag.caveats] == ["noisy_timing"]
    assert diag.banner.startswith("The timing qualifies these findings: Timing is noisy")
    assert Diagnosis((finding,)).banner == ""
