"""How a Comparison shows in a notebook, and ``micro_only`` against an end-to-end time."""

import html

import pytest
import torch

import workbench as wb
from tests.variants.variant_workloads import FAST, chain
from workbench.variants.clock import FakeTimer

ODD_NAME = "<b>one&pass</b>"
STEADY = {**FAST, "budget_s": 1.0, "min_rounds": 20, "max_rounds": 80}  # enough pairs for a firm interval


def three_passes(x):
    for _ in range(3):
        y = chain(x)
    return y


@pytest.fixture(scope="module")
def cmp():
    return wb.compare(
        {"eager": three_passes, ODD_NAME: chain, "cpu <gpu>": wb.variants.cuda_graph(chain)},
        inputs=lambda: torch.randn(50_000),
        **FAST,
    )


def test_html_shows_the_escaped_table_the_decision_and_the_chart(cmp):
    page = wb.render.html(cmp)
    assert html.escape(ODD_NAME) in page and ODD_NAME not in page  # names escaped, never markup
    assert 'class="workbench-chart"' in page  # the comparison chart, offline
    assert "Decision: <code>" in page and html.escape(cmp.decision.reason) in page
    if not torch.cuda.is_available():
        assert "Variants without timing" in page  # the untimed variant is named
    assert "<table" in page and "<th>median" in page  # "median" or "median (ms)"


def test_micro_only_when_the_saving_is_small_against_the_whole():
    """On a seeded fake clock (three passes 3 ms, one pass 1 ms): the decision logic, not this
    machine's timing, is what is tested."""

    def timer():
        return FakeTimer({"eager": 3.0, "one": 1.0}, seed=0, call=False)

    whole = wb.compare(
        {"eager": three_passes, "one": chain},
        inputs=lambda: torch.randn(50_000),
        end_to_end_ms=1e5,
        timer=timer,
        **STEADY,
    )
    row = whole["one"]
    assert row.speedup.faster and row.decision == "micro_only", row.decision_reason
    assert "1e+05 ms end-to-end" in row.decision_reason
    assert whole.settings["end_to_end_ms"] == 1e5
    alone = wb.compare({"eager": three_passes, "one": chain}, inputs=lambda: torch.randn(50_000), timer=timer, **STEADY)
    assert alone["one"].decision == "keep" and alone.settings["end_to_end_ms"] is None
