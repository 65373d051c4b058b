"""Decision records never contradict themselves: each record's fields are read against each other
and against the comparison they came from.  Timing on seeded fake clocks."""

import re

import pytest
import torch

import workbench as wb
from tests.variants.variant_workloads import chain
from workbench.variants.clock import FakeTimer
from workbench.variants.record_builder import describe_delta, readable_bytes

FAKE = dict(checks=2, budget_s=0.1, min_rounds=10, max_rounds=200, profile=False)
RAW_METRIC = re.compile(r"\b(alloc_bytes|peak_memory_bytes|op_count|alloc_count|kernel_count)\s*[+-]?\d")


def contradictions(cmp) -> list[str]:
    """Every disagreement between a record's fields, its comparison's rows and settings."""
    rec, problems = cmp.decision, []
    text = wb.render.text(rec) + "\n" + wb.render.markdown(rec)  # every field, as written and escaped
    notes = " ".join(cmp.settings.get("notes", ()))
    row = cmp[rec.variant]
    if "fixed inputs" in notes and "fresh" in rec.why_safe:
        problems.append("why_safe says fresh inputs beside a fixed-inputs note")
    if cmp.settings.get("fresh_inputs") is False and "fresh random inputs" in text:
        problems.append("'fresh random inputs' on a comparison with fixed inputs")
    if cmp.settings.get("inputs") == "none" and "random input" in text:
        problems.append("'random inputs' in the record of a callable that takes no inputs")
    if rec.numerical_class == "exact" and row.max_diff_vs_baseline not in (0.0, None):
        problems.append(
            f"numerical class exact but the output differs from the baseline's by {row.max_diff_vs_baseline:g}"
        )
    if (
        rec.numerical_class == "exact"
        and row.correctness
        and row.correctness.passed
        and row.correctness.max_rel_err > 0
        and "bit-identical" not in rec.why_safe
    ):
        problems.append("numerical class exact beside a nonzero error without saying against what")
    if RAW_METRIC.search(text):
        problems.append(f"raw metric in the record: {RAW_METRIC.search(text).group(0)}")
    s = row.speedup
    if s is not None:
        if rec.decision in ("keep", "keep_guarded", "micro_only") and not s.ci_low > 1:
            problems.append(f"{rec.decision} with an interval that does not exclude 1 from below")
        if rec.reason.startswith("slower") and not s.ci_high < 1:
            problems.append("called slower with an interval that includes 1")
        if "within noise" in rec.reason and s.significant:
            problems.append("within noise but the interval excludes 1")
        if ("slower" in rec.result) != s.slower:
            problems.append("result line's 'slower' disagrees with the interval")
        if f"x{s.point:.3g}" not in rec.result:
            problems.append("result line's speedup is not the row's")
    if row.timing is not None and f"{row.timing.median_ms:.4g} ms" not in rec.result:
        problems.append("result line's time is not the row's median")
    if rec.reason != row.decision_reason or rec.decision != row.decision:
        problems.append("the record's decision is not its row's")
    if "cannot judge" in rec.reason and rec.decision != "need_more_evidence":
        problems.append("cannot judge but decided")
    if rec.numerical_class != row.numerical_class:
        problems.append("numerical class differs from the row's")
    for key in ("checks", "budget_s", "min_rounds", "confidence", "seed"):
        if rec.settings.get(key) != cmp.settings.get(key):
            problems.append(f"record setting {key} differs from the comparison's")
    if "float64 run failed" in notes and cmp.settings.get("reference_precision") == "float64":
        problems.append("a float64 failure note beside a float64 reference")
    return problems


def _timer(seed=1, **ms):
    return FakeTimer(ms, seed=seed, call=False)


def test_fixed_inputs_never_read_as_fresh():
    c = wb.compare(
        {"eager": chain, "fast": lambda x: chain(x)},
        inputs=(torch.randn(256),),
        timer=_timer(eager=2.0, fast=1.0),
        **FAKE,
    )
    assert "same fixed inputs" in c.decision.why_safe
    assert contradictions(c) == []


def test_a_callable_with_no_inputs_is_never_said_to_run_on_random_inputs():
    data = torch.randn(256)
    c = wb.compare(
        {"eager": lambda: chain(data), "fast": lambda: chain(data) + 0.0},
        timer=_timer(eager=2.0, fast=1.0),
        **FAKE,
    )
    assert c.settings.get("inputs") == "none"
    assert any("on the same data" in r for r in c.decision.remaining_risk), c.decision.remaining_risk
    assert contradictions(c) == []


def test_a_declared_exact_variant_that_differs_is_recorded_as_reordered():
    def base(x):
        return x.sum(dim=0)

    def reordered(x):  # the same sum in another order: last-bit differences
        return x.flip(0).cumsum(dim=0)[-1]

    c = wb.compare(
        {"eager": base, "reordered": reordered},
        inputs=lambda: torch.randn(4096, 16),
        timer=_timer(eager=2.0, reordered=1.0),
        **FAKE,
    )
    row = c["reordered"]
    assert row.correctness.passed and row.max_diff_vs_baseline > 0
    assert c.decision.numerical_class == "reordered" and row.numerical_class == "reordered"
    assert contradictions(c) == []


def test_a_bit_identical_variant_is_exact_and_says_against_what_its_error_is():
    c = wb.compare(
        {"eager": chain, "same": lambda x: chain(x)},
        inputs=lambda: torch.randn(1024),
        timer=_timer(eager=2.0, same=1.0),
        **FAKE,
    )
    assert c.decision.numerical_class == "exact" and c["same"].max_diff_vs_baseline == 0
    assert "bit-identical to eager's output" in c.decision.why_safe
    assert contradictions(c) == []


def test_what_changed_is_said_in_readable_units():
    def many(x):
        for _ in range(6):
            x = x * 1.0001
        return x

    c = wb.compare(
        {"eager": many, "one": lambda x: x * (1.0001**6)},
        inputs=lambda: torch.randn(1 << 20),
        timer=_timer(eager=6.0, one=1.0),
        **{**FAKE, "profile": True, "checks": 1},
    )
    changed = next(e for e in c.decision.evidence if e.startswith("what changed"))
    assert "fewer operators" in changed and "MB less allocated" in changed, changed
    assert contradictions(c) == []
    assert describe_delta("alloc_bytes", -151455744) == "151 MB less allocated"
    assert describe_delta("op_count", -1) == "1 fewer operator" and readable_bytes(512) == "512 B"


def test_an_nn_module_record_has_no_float64_failure_note():
    torch.manual_seed(0)
    block = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    c = wb.compare(
        {"eager": block, "scripted": lambda x: block(x)},
        inputs=lambda: (torch.randn(4, 32),),
        timer=_timer(eager=1.0, scripted=1.0),
        **FAKE,
    )
    assert not any("float64" in e for e in c.decision.evidence if e.startswith("note:"))
    assert "float64 reference" in c.decision.why_safe
    assert contradictions(c) == []


@pytest.mark.parametrize(
    "ms, decision",
    [
        ({"eager": 1.0, "b": 1.3}, "reject"),
        ({"eager": 1.0, "b": 1.0}, "need_more_evidence"),
        ({"eager": 2.0, "b": 1.0}, "keep"),
    ],
)
def test_every_decision_class_reads_consistently(ms, decision):
    c = wb.compare(
        {"eager": chain, "b": lambda x: chain(x)}, inputs=lambda: torch.randn(256), timer=_timer(seed=2, **ms), **FAKE
    )
    assert c.decision.decision == decision
    assert contradictions(c) == []


def test_a_cannot_judge_record_reads_consistently():
    c = wb.compare(
        {"eager": lambda x: x * 1e-3, "b": lambda x: x * 1e-3},
        inputs=lambda: torch.randn(64) * 1e-4,
        timer=_timer(eager=2.0, b=1.0),
        **FAKE,
    )
    assert c.decision.decision == "need_more_evidence" and "cannot judge" in c.decision.reason
    assert contradictions(c) == []
