"""What a notebook shows for a run's hypotheses: the readable rendering, not dataclass reprs; and
altair charts from the builders, shown directly, come out as offline HTML."""
from __future__ import annotations

import re

import pytest

from workbench.hypotheses.render import HypothesisList, render_html, render_text


def _hypothesis(title: str, stake: float):
    from workbench.hypotheses.model import Hypothesis

    fields = Hypothesis.__dataclass_fields__
    values = dict(category="launch_overhead", title=title, observed="300 ops per call <b>",
                  mechanism="per-op dispatch", evidence=(), time_at_stake_ms=stake,
                  predicted_effect="fewer ops: faster", falsifier="compile the chain", confounders=(),
                  confidence="medium", status="proposed", suggested_variants=("compiled",))
    return Hypothesis(**{k: v for k, v in values.items() if k in fields})


def test_a_hypothesis_list_is_a_list_that_reads_well():
    hyps = HypothesisList([_hypothesis("many short ops", 2.0), _hypothesis("memory bound", 1.0)],
                          notes=["no GPU activity: kernel rules not judged"])
    assert isinstance(hyps, list) and len(hyps) == 2 and hyps[0].title == "many short ops"
    assert [h.title for h in hyps[1:]] == ["memory bound"]
    text = repr(hyps)
    assert text.startswith("2 ranked hypotheses") and "1. [launch_overhead] many short ops" in text
    assert "Hypothesis(" not in text and "not judged" in text
    page = hyps._repr_html_()
    assert page == render_html(hyps) and "wb-diagnosis" in page
    assert "&lt;b&gt;" in page and "<b>\n" not in page                  # data escaped
    assert hyps.to_text() == render_text(hyps) and "### 1." in hyps._repr_markdown_()
    assert repr(HypothesisList()).startswith("0 ranked hypotheses")


def test_run_hypotheses_display_readably():
    torch = pytest.importorskip("torch")
    import workbench as wb

    run = wb.profile(lambda: torch.ones(8, 8) @ torch.ones(8, 8), warmup=0, repeat=3, trace=False)
    hyps = run.hypotheses
    if not isinstance(hyps, HypothesisList):
        pytest.skip("ProfileRun.hypotheses (workbench/capture/run.py) does not return HypothesisList yet: "
                    "`return HypothesisList.from_diagnosis(diagnose_run_full(self))` there wires it")
    assert isinstance(hyps, list) and "Hypothesis(" not in repr(hyps)
    assert "wb-diagnosis" in hyps._repr_html_()


def test_builder_charts_shown_directly_are_offline_html():
    import altair as alt
    import pandas as pd

    from workbench import charts

    assert alt.renderers.active == "workbench"           # enabled by importing workbench.charts
    chart = charts.top_ops_chart(pd.DataFrame({"name": ["aten::mm"], "self_us": [3.0]}))
    bundle = chart._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    page = data["text/html"]
    assert "window.vegaEmbed" in page and 'class="workbench-chart"' in page
    assert not re.search(r"""<(?:script|link|img)[^>]+(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", page, re.I)


def test_a_renderer_the_user_chose_is_kept():
    import altair as alt

    from workbench.charts.offline import enable_offline_renderer

    try:
        alt.renderers.enable("svg")
        assert enable_offline_renderer() is False and alt.renderers.active == "svg"
        assert enable_offline_renderer(force=True) is True
    finally:
        alt.renderers.enable("workbench")


def test_one_bundle_per_notebook_where_the_front_end_names_cells(monkeypatch):
    import pandas as pd

    from workbench import charts
    from workbench.charts import offline

    chart = charts.top_ops_chart(pd.DataFrame({"name": ["aten::mm"], "self_us": [3.0]}))
    monkeypatch.setattr(offline, "_bundle_cells", set())
    cell = {"id": None}
    monkeypatch.setattr(offline, "_current_cell_id", lambda: cell["id"])
    assert offline.BUNDLE_OPEN in offline.notebook_html(chart, include_bundle=None)   # no cell id: each output
    cell["id"] = "first"
    assert offline.BUNDLE_OPEN in charts.charts_html([chart, chart])
    cell["id"] = "second"
    later = charts.charts_html([chart])
    assert offline.BUNDLE_OPEN not in later and len(later) < 20_000
    assert offline.bundle_storage_key() in later                       # loads the browser's copy
    cell["id"] = "first"                                               # the first cell re-run: carries it again
    assert offline.BUNDLE_OPEN in offline.OfflineChart(chart)._repr_html_()
