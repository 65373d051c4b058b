"""The DecisionRecord rendering says the mode it was decided in and shows the gradient checks the
record carries: a real training-path comparison (gradients checked; a candidate whose gradient is
2 % off rejected, the gradient named), timed on a seeded fake clock, in HTML, text and Markdown;
an inference record says no gradient was checked."""

from __future__ import annotations

import pytest

from workbench import render
from workbench.render.decision import gradient_checks, mode_text
from workbench.report import sections

from .conftest import decision_record

torch = pytest.importorskip("torch")

import workbench as wb  # noqa: E402
from workbench.variants.clock import FakeTimer  # noqa: E402


def _step(x, w):
    return torch.tanh(x @ w)


def _copy(x, w):
    return torch.tanh(x @ w)


def _wrong_gradient(x, w):
    y = torch.tanh(x @ w)
    return y.detach() + (y - y.detach()) * 1.02  # the same forward, a gradient 2 % too large


def _inputs():
    return (torch.randn(32, 16, requires_grad=True), torch.randn(16, 8, requires_grad=True))


@pytest.fixture(scope="module")
def training_record():
    timer = FakeTimer({"step": 2.0}, default_ms=1.0, noise=0.02, seed=0, call=False)
    cmp = wb.compare(
        {"step": _step, "copy": _copy, "wrong_grad": _wrong_gradient},
        inputs=_inputs,
        baseline="step",
        timer=timer,
        checks=2,
        profile=False,
        budget_s=0.5,
        min_rounds=10,
    )
    assert cmp.decision.mode == "training" and cmp.decision.variant == "copy"
    return cmp.decision


def test_a_training_record_shows_its_mode_and_gradient_checks_in_three_formats(training_record):
    record = training_record
    page = render.html(record)
    assert "<th style='text-align:left'>Mode</th>" in page and mode_text(record.to_dict()) in page
    assert mode_text(record.to_dict()).startswith("training: outputs checked, and the gradients and state changes")
    assert "<h4>Gradient checks</h4>" in page
    checks = page[page.index("<h4>Gradient checks</h4>") : page.index("<h4>Evidence</h4>")]
    assert "float32 rtol" in checks  # the gradient tolerances it used
    assert "wrong_grad: reject" in checks and "grad arg[0]" in checks and "grad arg[1]" in checks
    out = render.text(record)
    assert "  Mode             training:" in out and "  Gradient checks:" in out
    assert any(
        line.strip().startswith("- rejected alternatives: wrong_grad: reject") and "grad arg[0]" in line
        for line in out.splitlines()
    )
    md = render.markdown(record)
    assert "**Mode:** training:" in md and "#### Gradient checks" in md and "grad arg\\[0\\]" in md
    assert sections.decision_record_html(record.to_dict()) == page  # the report shows the same record


def test_the_gradient_lines_come_from_the_records_fields(training_record):
    lines = gradient_checks(training_record.to_dict())
    assert lines[0].startswith("gradient tolerances: ") and "bfloat16 rtol" in lines[0]
    assert all("grad" in line.lower() or "backward" in line.lower() for line in lines[1:])
    assert len([line for line in lines if line.startswith("rejected alternatives: ")]) == 1


def test_an_inference_record_says_no_gradient_was_checked():
    record = decision_record()
    assert record.mode == "inference" and gradient_checks(record.to_dict()) == []
    page = render.html(record)
    assert "inference: outputs checked, forward timed (no gradient checked)" in page
    assert "Gradient checks" not in page and "Gradient checks" not in render.text(record)
    # a record saved before the mode was recorded reads as inference
    old = {k: v for k, v in record.to_dict().items() if k != "mode"}
    assert "no gradient checked" in sections.decision_record_html(old)
