"""A notebook executed without a front end (nbclient, as papermill and the report run it) carries one
copy of vega for all its chart outputs, and reopened in JupyterLab, with the browser's stored copy
cleared and no network, every chart draws (issue 12: saved notebooks grew ~0.9 MB per chart output).

Screenshot kept in test-artifacts/saved_notebook_reopened.png.
"""

from __future__ import annotations

import json
import urllib.request

import nbformat
import pytest

from tests.browser.lab import (  # noqa: F401 - `lab` is a fixture used below
    ARTIFACTS,
    ROOT,
    LabVisit,
    _open_notebook,
    lab,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CELLS = [
    f"import sys; sys.path.insert(0, {str(ROOT)!r})\nimport pandas as pd\nfrom workbench import charts\n"
    "t = pd.DataFrame({'name': ['aten::mm', 'aten::add'], 'self_us': [3.0, 2.0]})",
    "charts.top_ops_chart(t)",
    "charts.top_ops_chart(t, n=1)",
    "charts.comparison_chart({'a': [1.0, 1.1], 'b': [0.5, 0.6]}, baseline='a')",
]
BUNDLE_MARK = "if (!window.vegaEmbed) { (function"
MAX_BYTES = 1_200_000  # one copy of vega (~0.9 MB) and three small charts; before: ~2.8 MB
DRAWN = """n => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  const charts = [...panel.querySelectorAll('.jp-OutputArea .workbench-chart')];
  return charts.length >= n && charts.every(c => c.querySelector('svg g[class*=mark] path'));
}"""


def _executed() -> nbformat.NotebookNode:
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    return nb


def _put(lab: dict, name: str, nb: nbformat.NotebookNode) -> None:
    content = json.loads(nbformat.writes(nb))
    for cell in content["cells"]:  # the user's own executed notebook: trusted (the server signs it), so
        cell["metadata"]["trusted"] = True  # its outputs' scripts run (nbformat.writes drops the flag)
    body = json.dumps({"type": "notebook", "format": "json", "content": content})
    req = urllib.request.Request(
        f"{lab['base']}/api/contents/{name}?token={lab['token']}",
        data=body.encode(),
        method="PUT",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status in (200, 201)


def test_a_saved_notebook_of_three_charts_is_small_and_draws_when_reopened(browser, lab):
    nb = _executed()
    text = nbformat.writes(nb)
    assert text.count(BUNDLE_MARK) == 1 and len(text.encode()) < MAX_BYTES, (text.count(BUNDLE_MARK), len(text))
    _put(lab, "saved_charts.ipynb", nb)
    visit = LabVisit(browser, lab["base"])
    page = visit.page
    page.goto(f"{lab['base']}/lab?token={lab['token']}", wait_until="load", timeout=30000)
    page.evaluate("() => localStorage.clear()")  # no stored copy: the first output must bring vega
    _open_notebook(visit, lab, "saved_charts.ipynb")
    try:
        page.wait_for_function(DRAWN, arg=3, timeout=60000, polling=500)
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "saved_notebook_reopened.png"), full_page=True)
    outputs = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea")
    assert "not loaded" not in outputs.all_inner_texts().__str__()
    assert visit.external == [], visit.external
    assert visit.real_errors() == [], visit.errors
    page.close()
