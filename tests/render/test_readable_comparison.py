"""A comparison's table reads in words: column names with their units, correctness as ✓ / ✗,
setup in adaptive units (never ``2.265e+04``), one baseline row first with every candidate's
speed-up against it, a gradient-error column on a training step; the decision record once."""

from __future__ import annotations

import dataclasses
import re

from workbench import render
from workbench.measurement import Measurement
from workbench.render.comparison import headers, ms_number
from workbench.variants.output_check import CorrectnessResult
from workbench.variants.results import Comparison, VariantResult
from workbench.variants.stats import Speedup

from .conftest import decision_record


def _speedup(point: float) -> Speedup:
    return Speedup(
        point=point,
        ci_low=point * 0.97,
        ci_high=point * 1.03,
        p95_ratio=point,
        bootstrap_low=point * 0.97,
        bootstrap_high=point * 1.03,
        n_pairs=30,
    )


def _comparison(**extra) -> Comparison:
    ok, bad = CorrectnessResult(True, (), 2), CorrectnessResult(False, (), 2)
    compiled = VariantResult(
        name="compiled",
        kind="compiled",
        status="ok",
        correctness=ok,
        timing=Measurement(samples_ms=(1.0, 1.01, 0.99, 1.0), label="compiled"),
        setup_ms=22650.0,
        speedup=_speedup(2.0),
        decision="keep",
        decision_reason="correct and faster",
        **extra,
    )
    doubled = VariantResult(
        name="doubled",
        kind="user",
        status="incorrect",
        correctness=bad,
        setup_ms=0.25,
        decision="reject",
        decision_reason="incorrect: out['loss'] outside tolerance",
        **extra,
    )
    base = VariantResult(
        name="eager",
        kind="baseline",
        status="ok",
        correctness=ok,
        setup_ms=0.0,
        timing=Measurement(samples_ms=(2.0, 2.02, 1.98, 2.0), label="eager"),
        decision="baseline",
        decision_reason="the reference the others are measured against",
    )
    return Comparison(baseline="eager", results=(compiled, doubled, base), decision=decision_record())


def test_the_columns_are_words_with_units_and_the_booleans_are_marks():
    page = render.html(_comparison(), charts=False)
    for header in ("variant", "correct", "median (ms)", "p95 (ms)", "speed-up", "95 % interval", "setup", "decision"):
        assert f"<th>{header}</th>" in page, header
    for raw in ("median_ms", "speedup_ci_low", "setup_ms", ">True<", ">False<"):
        assert raw not in page, raw
    assert "✓" in page and "✗" in page
    assert not re.search(r"\d\.?\d*e[+-]\d", page.split("wb-decision-record")[0])  # no 2.265e+04 in the table
    assert "22.6 s" in page and "250 µs" in page  # setup, adaptive units
    text = render.text(_comparison())
    assert "✓" in text and "✗" in text and "22.6 s" in text and "e+04" not in text


def test_one_baseline_row_first_and_each_speedup_against_it():
    cmp = _comparison()
    page = render.html(cmp, charts=False)
    body = page[page.index("<tbody>") : page.index("</tbody>")]
    rows = body.split("<tr>")[1:]
    assert rows[0].startswith("<td>eager</td>") and "1× (reference)" in rows[0]
    assert sum(r.startswith("<td>eager</td>") for r in rows) == 1
    assert "2×" in rows[1] and "1.94× – 2.06×" in rows[1]
    md = render.markdown(cmp)
    assert md.index("| eager |") < md.index("| compiled |")


def test_the_record_is_in_the_html_once():
    page = render.html(_comparison(), charts=False)
    assert page.count("Decision record:") == 1
    assert render.text(_comparison()).count("Mode ") == 0  # the table alone by default
    assert render.text(_comparison(), record=True).count("  Mode ") == 1  # a shell's display: the record too


def test_a_training_step_shows_its_gradient_error():
    cmp = _comparison(max_grad_rel_err=0.0012)
    assert "gradient error" in headers(cmp)
    assert "<th>gradient error</th>" in render.html(cmp, charts=False) and "0.0012" in render.html(cmp, charts=False)
    plain = dataclasses.replace(cmp, results=tuple(dataclasses.replace(r, max_grad_rel_err=None) for r in cmp.results))
    assert "gradient error" not in headers(plain)


def test_ms_numbers_never_use_scientific_notation():
    assert [ms_number(v).text for v in (22650.0, 4.213, 0.0123, 0.0, 1234567.0)] == [
        "22\u202f650",
        "4.21",
        "0.0123",
        "0",
        "1\u202f234\u202f567",
    ]
    assert ms_number(0.00001234).text == "0.0000123"
