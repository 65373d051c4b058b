"""Offline HTML: vega inlined once, specs that cannot break out of their script, static export."""

import re
from pathlib import Path

import pandas as pd
import pytest

from workbench import charts
from workbench.charts import offline
from workbench.errors import InvalidArgumentError

HOSTILE = "</script><script>alert('x')</script> <!-- ∑\u2028名"
EXTERNAL_SRC = re.compile(r"""<(?:script|link|img)[^>]+(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", re.I)


def _chart():
    return charts.top_ops_chart(pd.DataFrame({"name": [HOSTILE, "aten::mm"], "self_us": [3.0, 2.0]}))


def test_fragment_carries_vega_and_the_spec_cannot_close_its_script():
    html = charts.to_offline_html(_chart())
    assert "window.vegaEmbed" in html and len(html) > 500_000
    assert html.count("</script>") == 2  # the bundle's and the embed call's, nothing from the data
    assert "alert('x')</script>" not in html and "\\u003c/script\\u003e" in html
    assert "\u2028" not in html.split("var spec")[1]
    assert not EXTERNAL_SRC.search(html)


def test_without_bundle_the_div_says_what_is_missing():
    html = charts.to_offline_html(_chart(), include_bundle=False)
    assert len(html) < 20_000 and "vega JavaScript is not loaded" in html


def test_every_notebook_output_carries_the_bundle_once():
    # an output must draw on its own (browser reload, saved notebook, outputs above cleared)
    for html in (
        charts.OfflineChart(_chart())._repr_html_(),
        charts.OfflineChart(_chart())._repr_html_(),
        charts.charts_html([_chart(), _chart(), _chart()]),
    ):
        assert html.count("if (!window.vegaEmbed) { (function") == 1 and len(html) > 500_000
    assert charts.charts_html([_chart(), _chart()]).count('class="workbench-chart"') == 2


def test_dedupe_keeps_the_first_bundle_of_a_page_and_every_chart():
    outputs = [charts.charts_html([_chart()]) for _ in range(3)]
    page = "<html><body>" + "<p>between</p>".join(outputs) + "</body></html>"
    deduped, removed = offline.dedupe_bundles(page)
    assert removed == 2 and deduped.count("if (!window.vegaEmbed) { (function") == 1
    assert deduped.count('class="workbench-chart"') == 3 and deduped.count("<p>between</p>") == 2
    assert deduped.index("window.vegaEmbed) { (function") < deduped.index('class="workbench-chart"')
    assert offline.dedupe_bundles("<p>no charts</p>") == ("<p>no charts</p>", 0)


def test_page_html_inlines_one_bundle_for_many_charts():
    page = charts.page_html([_chart(), _chart()], title="<t>")
    assert page.count('class="workbench-chart"') == 2
    assert page.count("if (!window.vegaEmbed) { (function") == 1
    assert "<title>&lt;t&gt;</title>" in page


@pytest.mark.parametrize(
    "suffix,magic", [(".svg", b"<svg"), (".png", b"\x89PNG"), (".html", b"<!DOCTYPE"), (".json", b"{")]
)
def test_save_writes_each_format(tmp_path, suffix, magic):
    path = charts.save(_chart(), tmp_path / f"chart{suffix}")
    data = path.read_bytes()
    assert data.lstrip()[: len(magic)] == magic
    if suffix == ".svg":
        assert b"aten::mm" in data and b"<script>alert" not in data


def test_save_unknown_suffix_is_a_clear_error(tmp_path):
    with pytest.raises(InvalidArgumentError, match=r"\.gif"):
        charts.save(_chart(), tmp_path / "x.gif")


def test_display_of_a_list_is_one_output_with_one_bundle(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    charts.display([_chart(), _chart(), _chart()])
    [html] = [obj.data for obj in shown]
    assert html.count("if (!window.vegaEmbed) { (function") == 1
    assert html.count('class="workbench-chart"') == 3


def test_builder_charts_shown_directly_are_offline_html():
    import altair as alt
    import pandas as pd

    from workbench import charts

    assert alt.renderers.active == "workbench"  # enabled by importing workbench.charts
    chart = charts.top_ops_chart(pd.DataFrame({"name": ["aten::mm"], "self_us": [3.0]}))
    bundle = chart._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    page = data["text/html"]
    assert "window.vegaEmbed" in page and 'class="workbench-chart"' in page
    assert not EXTERNAL_SRC.search(page)


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
    assert offline.BUNDLE_OPEN in offline.notebook_html(chart, include_bundle=None)  # no cell id: each output
    cell["id"] = "first"
    assert offline.BUNDLE_OPEN in charts.charts_html([chart, chart])
    cell["id"] = "second"
    later = charts.charts_html([chart])
    assert offline.BUNDLE_OPEN not in later and len(later) < 20_000
    assert offline.bundle_storage_key() in later  # loads the browser's copy
    cell["id"] = "first"  # the first cell re-run: carries it again
    assert offline.BUNDLE_OPEN in offline.OfflineChart(chart)._repr_html_()


class _Kernel:
    def __init__(self):
        self.parent = {}

    def get_parent(self, channel):
        return self.parent


def test_a_kernel_that_names_no_cells_still_gets_one_bundle_per_notebook(monkeypatch):
    # nbclient / papermill send no cell id: a cell is known by its code, so a saved notebook of many
    # chart outputs carries one copy of vega (issue 12: ~0.9 MB per chart output before)
    import IPython

    from workbench.charts import offline

    kernel = _Kernel()
    monkeypatch.setattr(IPython, "get_ipython", lambda: type("Shell", (), {"kernel": kernel})())
    monkeypatch.setattr(offline, "_bundle_cells", set())

    def run_cell(code):
        kernel.parent = {"header": {"msg_type": "execute_request"}, "content": {"code": code}, "metadata": {}}
        return offline.notebook_html(_chart(), include_bundle=None)

    assert offline.BUNDLE_OPEN in run_cell("charts.top_ops_chart(t)")
    later = [run_cell("charts.top_ops_chart(t, n=1)"), run_cell("charts.comparison_chart(s)")]
    assert all(offline.BUNDLE_OPEN not in html and len(html) < 20_000 for html in later)
    assert all(offline.bundle_storage_key() in html for html in later)  # they load the stored copy
    assert offline.BUNDLE_OPEN in run_cell("charts.top_ops_chart(t)")  # the first cell re-run: carries it
    kernel.parent = {
        "header": {"msg_type": "execute_request"},
        "content": {"code": "x"},
        "metadata": {"cellId": "lab-cell-1"},
    }
    assert offline._current_cell_id() == "lab-cell-1"  # a front end's own id wins


def test_a_notebook_executed_by_nbclient_with_three_charts_carries_vega_once(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    root = str(Path(__file__).resolve().parents[2])
    cells = [
        f"import sys; sys.path.insert(0, {root!r})\nimport pandas as pd\nfrom workbench import charts\n"
        "t = pd.DataFrame({'name': ['aten::mm', 'aten::add'], 'self_us': [3.0, 2.0]})",
        "charts.top_ops_chart(t)",
        "charts.top_ops_chart(t, n=1)",
        "charts.comparison_chart({'a': [1.0, 1.1], 'b': [0.5, 0.6]}, baseline='a')",
    ]
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    path = tmp_path / "three_charts.ipynb"
    nbformat.write(nb, path)
    text = path.read_text(encoding="utf-8")
    assert text.count('class=\\"workbench-chart\\"') == 3
    assert text.count(offline.BUNDLE_OPEN.split("\n")[0].split(">", 1)[1]) == 1
    assert path.stat().st_size < 1_200_000, path.stat().st_size  # one copy (~0.9 MB), was ~2.8 MB
