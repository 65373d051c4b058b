"""Charts of a real variant Comparison: samples and speedup, and variants that were not timed."""

import pytest

import workbench as wb
from workbench import charts


def _values(spec):
    return [row for rows in spec.get("datasets", {}).values() for row in rows]


@pytest.fixture(scope="module")
def comparison():
    import torch

    def slow(x):
        return sum(x * i for i in range(30))

    def fast(x):
        return x * sum(range(30))

    return wb.compare(
        {"eager": slow, "rewrite": fast, "graph": wb.variants.cuda_graph(slow)},
        inputs=lambda: (torch.randn(64, 64, dtype=torch.float64),),
        budget_s=0.3,
        min_rounds=5,
        max_rounds=8,
        checks=1,
        profile=False,
    )


def test_comparison_charts_show_samples_speedup_and_untimed_variants(comparison):
    drawn, untimed = charts.comparison_charts(comparison)
    spec = drawn.to_dict()
    samples = [r for r in _values(spec) if "sample_ms" in r]
    assert {r["variant"] for r in samples} == {"eager", "rewrite"}
    assert len(samples) == sum(len(v) for v in comparison.samples_ms.values())
    speed = {r["variant"]: r for r in _values(spec) if "speedup" in r}
    assert speed["eager"]["speedup"] == pytest.approx(1.0)
    assert speed["rewrite"]["ci_low"] <= speed["rewrite"]["speedup"] <= speed["rewrite"]["ci_high"]
    text = untimed.to_dict()["usermeta"]["workbench_empty"]
    assert text.startswith("not timed: graph: not_applicable") and "cuda" in text


def test_comparison_html_draws_offline(comparison):
    from workbench.render.charts import comparison_html
    from workbench.report import external_sources

    html = comparison_html(comparison)
    assert html.count('class="workbench-chart"') == 2 and external_sources(html) == []
