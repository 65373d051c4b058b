"""A comparison (and a study round) shows what changed between the baseline's profiled call and the winner's
(issue 28): kernels or ops matched by name and call-tree place (``workbench.analysis.diff``), from the traces
the profiled calls left; none without them."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import workbench as wb  # noqa: E402
from workbench import render  # noqa: E402
from workbench.render.comparison import winner_diff  # noqa: E402
from workbench.variants.clock import FakeTimer  # noqa: E402

FAST = dict(checks=2, budget_s=0.2, min_rounds=4, max_rounds=8)


def chain(x):
    return ((x * 2).sin() + 1).relu().sum()


def fused(x):  # the same values by another route: no sin of a doubled copy, fewer ops
    return torch.relu(torch.sin(x + x) + 1).sum()


def _timer():
    return FakeTimer({"eager": 2.0, "fused": 1.0}, seed=0, call=False)


def test_the_winner_is_diffed_against_the_baseline():
    c = wb.compare({"eager": chain, "fused": fused}, inputs=lambda: (torch.randn(4096),), timer=_timer(), **FAST)
    assert c.decision.decision == "keep" and set(c.trace_paths) == {"eager", "fused"}
    d = winner_diff(c)
    assert d is not None and d.label_a == "eager" and d.label_b == "fused"
    statuses = dict(zip(d.table["name"] if "name" in d.table else d.table["path"], d.table["status"]))
    assert any(s == "disappeared" for s in statuses.values()) or any(s == "changed" for s in statuses.values())
    assert "What changed in one profiled call: fused against eager" in render.html(c)
    assert "what changed in one profiled call: " in render.text(c)


def test_no_diff_without_profiled_calls_or_from_a_saved_comparison():
    c = wb.compare(
        {"eager": chain, "fused": fused}, inputs=lambda: (torch.randn(4096),), timer=_timer(), profile=False, **FAST
    )
    assert c.trace_paths == {} and winner_diff(c) is None
    assert "What changed in one profiled call" not in render.html(c)
    again = type(c).from_dict(c.to_dict())  # the traces are not saved with the comparison
    assert winner_diff(again) is None
