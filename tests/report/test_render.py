"""Rendering a notebook to offline HTML, escaping, and the guard against network sources."""

import math

import nbformat
import pandas as pd
import pytest

from workbench import charts
from workbench.errors import ReportError
from workbench.report import external_sources, render_html

HOSTILE = "<script>alert(1)</script> ∑ 名"


def _notebook(path, html_outputs):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    cell = nbformat.v4.new_code_cell("x")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/html": h}) for h in html_outputs]
    nb.cells = [cell]
    nbformat.write(nb, path)
    return path


def test_render_has_no_network_source_and_keeps_charts(tmp_path):
    chart = charts.top_ops_chart(pd.DataFrame({"name": [HOSTILE, "b"], "self_us": [1.0, math.nan]}))
    table = pd.DataFrame({"name": [HOSTILE]}).to_html(escape=True)
    nb = _notebook(tmp_path / "r.ipynb", [charts.to_offline_html(chart), table])
    html = render_html(nb, tmp_path / "r.html").read_text(encoding="utf-8")
    assert external_sources(html) == []
    assert "cdnjs" not in html and "unpkg" not in html and "jsdelivr" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; ∑ 名" in html
    assert "<script>alert(1)" not in html
    assert 'class="workbench-chart"' in html


def test_render_keeps_one_vega_bundle_for_many_chart_outputs(tmp_path):
    chart = charts.top_ops_chart(pd.DataFrame({"name": ["a", "b"], "self_us": [1.0, 2.0]}))
    nb = _notebook(tmp_path / "r.ipynb", [charts.charts_html([chart, chart]) for _ in range(3)])
    html = render_html(nb, tmp_path / "r.html").read_text(encoding="utf-8")
    assert html.count("if (!window.vegaEmbed) { (function") == 1
    assert html.count('class="workbench-chart"') == 6


def test_render_refuses_a_page_that_would_go_online(tmp_path):
    nb = _notebook(tmp_path / "r.ipynb", ['<script src="https://cdn.example.com/x.js"></script>'])
    with pytest.raises(ReportError, match="network"):
        render_html(nb, tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()


def test_external_sources_finds_protocol_relative_and_ignores_data_urls():
    page = '<script src="//cdn.x/y.js"></script><link href="https://a/b.css"><script src="data:text/javascript,">'
    assert external_sources(page) == ["//cdn.x/y.js", "https://a/b.css"]


def test_environment_table_has_one_row_per_leaf_setting_escaped():
    from types import SimpleNamespace

    from workbench.report.sections import environment_html

    run = SimpleNamespace(
        environment={
            "torch": {"version": "2.13.0", "math_mode": {"float32_matmul_precision": "highest"}},
            "host": {"cpu_model": "<script>x</script>"},
            "seed": 0,
        }
    )
    html = environment_html(run)
    assert "<th>torch.math_mode.float32_matmul_precision</th><td>highest</td>" in html
    assert "<th>torch.version</th><td>2.13.0</td>" in html and "<th>seed</th><td>0</td>" in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "{" not in html  # no dict printed raw


def test_report_kernel_talks_over_unix_sockets_so_ipykernel_has_nothing_to_warn_about(tmp_path, capfd):
    import nbformat as nbf

    from workbench.report.execute import execute_template

    nb = nbf.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    params = nbf.v4.new_code_cell("x = 1")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbf.v4.new_code_cell("print(x + 1)")]
    nbf.write(nb, tmp_path / "t.ipynb")
    out = execute_template(tmp_path / "t.ipynb", tmp_path / "o.ipynb", {"x": 41})
    assert nbf.read(out, 4).cells[-1].outputs[0]["text"] == "42\n"
    captured = capfd.readouterr()
    assert "without encryption" not in captured.err + captured.out


def test_a_markdown_rendering_reads_as_its_original_characters_on_the_rendered_page(tmp_path):
    """A ``text/markdown`` output (``render.markdown``, ``_repr_markdown_``) goes through nbconvert's
    Markdown renderer: quotes, markup and NUL show as the characters they are, no entity shows
    literally (``&\\#x27;``) and nothing runs."""
    import html as html_module
    import re

    import nbformat

    from workbench.render.escape import markdown_text
    from workbench.render.tables import markdown_table

    name = 'it\'s "q" <script>alert(1)</script> a|b *x* #h nul\x00'
    md = f"**{markdown_text(name)}**\n\n" + markdown_table(["op", "n"], [[name, "1"]])
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    cell = nbformat.v4.new_code_cell("x")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/markdown": md})]
    nb.cells = [cell]
    nbformat.write(nb, tmp_path / "m.ipynb")
    page = render_html(tmp_path / "m.ipynb", tmp_path / "m.html").read_text(encoding="utf-8")
    shown = name.replace("\x00", "\ufffd")
    strong = re.search(r"<strong>(.*?)</strong>", page, re.S)
    assert strong is not None and html_module.unescape(strong.group(1)) == shown
    cells = re.findall(r"<td[^>]*>(.*?)</td>", page, re.S)
    assert [html_module.unescape(c.strip()) for c in cells] == [shown, "1"]  # one cell, its text intact
    assert "<script>alert(1)" not in page and "&amp;#x27;" not in page and "&amp;\\#" not in page
