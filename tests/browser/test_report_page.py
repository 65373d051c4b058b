"""The exported report in headless chromium: charts draw, nothing leaves the machine, no console error."""

import math

import pandas as pd
import pytest

from workbench import charts
from workbench.report import build_report

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def report_html(tmp_path_factory):
    result = build_report(tmp_path_factory.mktemp("browser") / "demo", repeat=5, warmup=1)
    return result.html_path


@pytest.mark.slow
def test_report_renders_offline_with_marks(visit, report_html):
    from pathlib import Path

    visit.open(Path(report_html))
    marks = visit.marks_per_chart()
    assert len(marks) >= 2 and all(m > 0 for m in marks), marks
    assert visit.external == []
    assert visit.errors == []
    assert visit.screenshot("report.png").stat().st_size > 10_000


def test_hostile_names_and_empty_data_draw_without_errors(visit, tmp_path):
    hostile = "</script><script>document.title='pwned'</script> ∑ 名"
    built = [
        charts.top_ops_chart(pd.DataFrame({"name": [hostile, "b"], "self_us": [2.0, math.nan]})),
        charts.top_ops_chart(pd.DataFrame({"name": [], "self_us": []})),
        charts.comparison_chart({"eager": [2.0, 2.1, 2.2], "compiled": [1.0, 1.1, 0.9]}),
    ]
    page = tmp_path / "charts.html"
    page.write_text(charts.page_html(built, title="hostile"), encoding="utf-8")
    visit.open(page)
    assert visit.page.title() == "hostile"
    assert visit.errors == [] and visit.external == []
    assert all(m > 0 for m in visit.marks_per_chart())
    drawn = visit.page.evaluate("() => document.querySelector('.workbench-chart svg').textContent")
    assert hostile[:35] in drawn  # drawn as text (the axis truncates it), not run as markup
    visit.screenshot("hostile_charts.png")
