"""The notebook face in a real JupyterLab (headless chromium), as a new user meets it.

1. A notebook with `%%gpuprofile`, `%%gpuvariant`, the variant panel and `print('alive')`: every
   cell finishes (the variant magic used to leave the kernel's streams captured, and every later
   cell hung at [*]); the variant magic shows its comparison and decision record; in the panel the
   suggested variant starts checked, Run fills the table and the decision record, the winner's
   code is shown, and `panel.insert_winner()` run in a cell puts it in a new cell below.
2. Every public chart builder, as a cell's last line in a fresh kernel, draws with no request
   leaving 127.0.0.1; the saved notebook carries one copy of vega, not one per chart, and after
   a reload (with the browser's stored copy cleared) every chart draws again.

Screenshots are kept in test-artifacts/ (jupyterlab_face*.png, jupyterlab_charts*.png).
"""

from __future__ import annotations

import json
import urllib.request

import nbformat
import pytest

from tests.browser.lab import (  # noqa: F401 - `lab` is a fixture used by the tests below
    ARTIFACTS,
    NOTEBOOK_READY,
    ROOT,
    LabVisit,
    _run_all_cells,
    _wait_kernel_connected,
    lab,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

FACE_CELLS = [
    "import torch\ntorch.set_num_threads(1)\n%load_ext workbench\nx = torch.randn(200_000)\n"
    "def slow_chain(t):\n    for _ in range(3):\n        y = (t.sin() * 2 + 1).relu()\n    return y\n"
    "def one_chain(t):\n    return (t.sin() * 2 + 1).relu()",
    "%%gpuprofile -w 1 -r 3\ny = slow_chain(x)",
    "%%gpuvariant one_pass -b 0.5 -c 1\ny = one_chain(x)",
    "print('alive')",
    "from workbench.widgets import VariantPanel\n"
    "panel = VariantPanel(slow_chain, lambda: torch.randn(200_000), suggested=['one_pass'],\n"
    "                     user_variants={'one_pass': one_chain, 'also_slow': slow_chain},\n"
    "                     compare_options=dict(checks=1, budget_s=0.5, profile=False))\npanel.widget",
    "panel.insert_winner()",
]
TRACE = ROOT / "tests" / "data" / "gpu" / "h100_bert_small.json.gz"  # has op shapes: roofline points
CHART_SETUP = (
    "import torch\ntorch.set_num_threads(1)\nimport workbench as wb\n"
    f"trace = wb.load_trace({str(TRACE)!r})\n"
    "run = wb.profile(lambda: torch.ones(64, 64) @ torch.ones(64, 64), warmup=1, repeat=5, trace=False)"
)
BUILDERS = {  # every public builder that returns one chart, as a cell's last line
    "timeline_chart": "wb.charts.timeline_chart(trace)",
    "trace_roofline_chart": "wb.charts.trace_roofline_chart(trace)",
    "top_ops_chart": "wb.charts.top_ops_chart(trace.op_breakdown())",
    "top_kernels_chart": "wb.charts.top_kernels_chart(trace.kernel_breakdown())",
    "kernel_types_chart": "wb.charts.kernel_types_chart(trace.kernel_breakdown())",
    "idle_chart": "wb.charts.idle_chart(trace.idle_breakdown())",
    "per_rank_chart": "wb.charts.per_rank_chart(trace.temporal_breakdown())",
    "roofline_chart": "wb.charts.roofline_chart(wb.charts.op_roofline_points(trace)[0], memory_gbps=1500.0, "
    "peak_flops={'fp32': 19.5e12})",
    "variants_roofline_chart": "wb.charts.variants_roofline_chart({'eager': trace, 'again': trace})",
    "comparison_chart": "wb.charts.comparison_chart({'eager': [1.0, 1.1, 1.2], 'fast': [0.5, 0.55, 0.6]}, "
    "baseline='eager')",
    "timing_chart": "wb.charts.timing_chart(run.timing)",
    "message_chart": "wb.charts.message_chart('nothing to draw here', title='A message')",
}
BUNDLE_MARK = "if (!window.vegaEmbed) { (function"

ALL_CELLS_DONE = """n => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  const prompts = [...panel.querySelectorAll('.jp-Cell .jp-InputArea-prompt')].map(e => e.textContent);
  const kernel = panel.querySelector('.jp-Notebook-ExecutionIndicator')?.dataset.status;
  return prompts.length >= n && prompts.slice(0, n).every(t => /\\[\\d+\\]/.test(t)) && kernel === 'idle';
}"""
CHARTS_DRAWN = """n => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  const charts = [...panel.querySelectorAll('.jp-OutputArea .workbench-chart')];
  return charts.length >= n && charts.every(c => c.querySelector('svg'));
}"""


def _put_notebook(lab: dict, name: str, cells: list[str]) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    body = json.dumps({"type": "notebook", "format": "json", "content": json.loads(nbformat.writes(nb))})
    req = urllib.request.Request(
        f"{lab['base']}/api/contents/{name}?token={lab['token']}",
        data=body.encode(),
        method="PUT",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status in (200, 201)


def _get_notebook_text(lab: dict, name: str) -> str:
    url = f"{lab['base']}/api/contents/{name}?token={lab['token']}&content=1&format=text&type=file"
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.load(r)["content"]


def _open_notebook(visit: LabVisit, lab: dict, name: str) -> None:
    """Open ``name`` in a workspace of its own, reset (so no other test's notebook is restored)."""
    page = visit.page
    stem = name.rsplit(".", 1)[0]
    page.goto(
        f"{lab['base']}/lab/workspaces/{stem}/tree/{name}?token={lab['token']}&reset", wait_until="load", timeout=30000
    )
    page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell", timeout=30000)
    _wait_kernel_connected(page, lab, name)
    page.wait_for_function(NOTEBOOK_READY, arg=name, timeout=30000)


def _shot(page, name: str):
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path), full_page=True)
    return path


def _cell_text(page, index: int) -> str:
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell").nth(index).inner_text()


def test_profile_variant_panel_then_alive_in_jupyterlab(browser, lab):
    _put_notebook(lab, "face.ipynb", FACE_CELLS)
    visit = LabVisit(browser, lab["base"])
    page = visit.page
    _open_notebook(visit, lab, "face.ipynb")
    try:
        _run_all_cells(page)
        page.wait_for_function(ALL_CELLS_DONE, arg=len(FACE_CELLS), timeout=180000, polling=500)
        assert "alive" in _cell_text(page, 3)
        variant = _cell_text(page, 2)
        assert "Comparison against profiled" in variant and "Decision:" in variant, variant[:2000]
        assert "Problem" in variant and "Evidence" in variant  # the decision record, in full
        box = page.locator(".jp-OutputArea .widget-checkbox", has_text="one_pass")
        assert box.locator("input").is_checked()  # suggested: checked
        # the user's own variants start checked too (issue 22: not only the suggested ones)
        assert page.locator(".jp-OutputArea .widget-checkbox", has_text="also_slow").locator("input").is_checked()
        page.get_by_role("button", name="Run selected").click()
        page.wait_for_function(
            "() => [...document.querySelectorAll('.jp-OutputArea .widget-html')]"
            ".some(e => /done: winner one_pass/.test(e.textContent))",
            timeout=120000,
            polling=500,
        )
        panel_text = _cell_text(page, 4)
        assert "Decision record: one_pass" in panel_text and "Bottleneck" in panel_text
        show = page.get_by_role("button", name="Show the winner's code")
        assert show.is_enabled()
        show.click()
        page.wait_for_function(
            "() => [...document.querySelectorAll('.jp-OutputArea textarea')]"
            ".some(t => t.value.includes('def one_chain'))",
            timeout=30000,
        )
        n_cells = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell").count()
        last = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell").nth(len(FACE_CELLS) - 1)
        last.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Control+Enter")  # run panel.insert_winner() in place
        page.wait_for_function(
            f"() => document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell').length > {n_cells}",
            timeout=60000,
            polling=300,
        )
        inserted = _cell_text(page, len(FACE_CELLS))
        assert "def one_chain" in inserted, inserted
        cells = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell")
        cells.nth(2).screenshot(path=str(ARTIFACTS / "jupyterlab_face_gpuvariant.png"))
        cells.nth(4).screenshot(path=str(ARTIFACTS / "jupyterlab_face_panel.png"))
    finally:
        shot = _shot(page, "jupyterlab_face.png")
    assert visit.external == [], visit.external
    assert visit.real_errors() == [], visit.errors
    assert shot.stat().st_size > 20_000
    page.close()


def test_every_chart_builder_draws_offline_and_after_a_reload(browser, lab):
    _put_notebook(lab, "charts.ipynb", [CHART_SETUP, *BUILDERS.values()])
    visit = LabVisit(browser, lab["base"])
    page = visit.page
    _open_notebook(visit, lab, "charts.ipynb")
    try:
        _run_all_cells(page)
        page.wait_for_function(ALL_CELLS_DONE, arg=1 + len(BUILDERS), timeout=180000, polling=500)
        page.wait_for_function(CHARTS_DRAWN, arg=len(BUILDERS), timeout=60000, polling=500)
    finally:
        shot = _shot(page, "jupyterlab_charts.png")
    cells = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell")
    for i, name in enumerate(BUILDERS, start=1):
        out = cells.nth(i).locator(".jp-OutputArea")
        assert out.locator(".workbench-chart svg").count() == 1, (name, out.inner_text()[:500])
        assert "Error" not in out.inner_text(), (name, out.inner_text()[:500])
    assert visit.external == [], visit.external
    assert visit.real_errors() == [], visit.errors
    assert shot.stat().st_size > 20_000
    # save: one copy of vega in the file, not one per chart
    page.keyboard.press("Control+s")
    page.wait_for_function(
        "() => !document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)').classList.contains('jp-mod-dirty')",
        timeout=30000,
    )
    page.wait_for_timeout(1000)
    saved = _get_notebook_text(lab, "charts.ipynb")
    assert saved.count(BUNDLE_MARK) == 1, saved.count(BUNDLE_MARK)
    assert len(saved) < 1_500_000, len(saved)
    # reload with the browser's stored copy gone: the first chart's output brings vega for all
    page.evaluate("() => localStorage.clear()")
    _open_notebook(visit, lab, "charts.ipynb")
    try:
        page.wait_for_function(CHARTS_DRAWN, arg=len(BUILDERS), timeout=60000, polling=500)
    finally:
        reloaded = _shot(page, "jupyterlab_charts_reloaded.png")
    assert visit.external == [], visit.external
    assert visit.real_errors() == [], visit.errors
    assert reloaded.stat().st_size > 20_000
    page.close()
