"""What a notebook shows for a run's hypotheses: the readable rendering, not dataclass reprs."""

from __future__ import annotations

import pytest

from workbench import render
from workbench.hypotheses import HypothesisList, render_text


def _hypothesis(title: str, stake: float):
    from workbench.hypotheses.hypothesis import Hypothesis

    fields = Hypothesis.__dataclass_fields__
    values = dict(
        category="launch_overhead",
        title=title,
        observed="300 ops per call <b>",
        mechanism="per-op dispatch",
        evidence=(),
        time_at_stake_ms=stake,
        predicted_effect="fewer ops: faster",
        falsifier="compile the chain",
        confounders=(),
        confidence="medium",
        status="proposed",
        suggested_variants=("compiled",),
    )
    return Hypothesis(**{k: v for k, v in values.items() if k in fields})


def test_a_hypothesis_list_is_a_list_that_reads_well():
    hyps = HypothesisList(
        [_hypothesis("many short ops", 2.0), _hypothesis("memory bound", 1.0)],
        notes=["no GPU activity: kernel rules not judged"],
    )
    assert isinstance(hyps, list) and len(hyps) == 2 and hyps[0].title == "many short ops"
    assert [h.title for h in hyps[1:]] == ["memory bound"]
    text = repr(hyps)
    assert text.startswith("2 ranked hypotheses") and "1. [launch_overhead] many short ops" in text
    assert "Hypothesis(" not in text and "not judged" in text
    page = render.html(hyps)
    assert "wb-diagnosis" in page
    assert "&lt;b&gt;" in page and "<b>\n" not in page  # data escaped
    assert hyps.to_text() == render_text(hyps) and "### 1." in render.markdown(hyps)
    assert repr(HypothesisList()).startswith("0 ranked hypotheses")


def test_run_hypotheses_display_readably():
    torch = pytest.importorskip("torch")
    import workbench as wb

    run = wb.profile(lambda: torch.ones(8, 8) @ torch.ones(8, 8), warmup=0, repeat=3, trace=False)
    hyps = run.hypotheses
    assert isinstance(hyps, HypothesisList)
    assert isinstance(hyps, list) and "Hypothesis(" not in repr(hyps)
    assert "wb-diagnosis" in render.html(hyps)
