"""Where a training step's time went, in a real JupyterLab driven by headless chromium (issue 25): the step
written the ordinary way (a loss function closing over the model, ``loss = step()``, a per-tensor AdamW)
profiled with its trace, then ``_gpuprofile.attribution``: modules by their names in the model, each with its
backward and its share of the optimizer's step, and the statements of the cell that ran. The screenshot is
kept in test-artifacts/jupyterlab_attribution.png."""

from __future__ import annotations

import pytest

from tests.browser.lab import (  # noqa: F401 - `lab` is a fixture used by the test below
    ARTIFACTS,
    LabVisit,
    _open_notebook,
    _run_all_cells,
    lab,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

DONE = """() => {
  const cells = document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell');
  const last = cells[cells.length - 1]?.querySelector('.jp-OutputArea');
  return !!last && /source line/.test(last.innerText);
}"""


def test_a_training_steps_time_by_module_and_line_in_jupyterlab(browser, lab):
    visit = LabVisit(browser, lab["base"])
    page = visit.page
    _open_notebook(visit, lab, "attribution.ipynb")
    try:
        _run_all_cells(page)
        page.wait_for_function(DONE, timeout=600000, polling=1000)
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "jupyterlab_attribution_page.png"), full_page=True)
    cell = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell").nth(2)
    cell.scroll_into_view_if_needed()
    cell.screenshot(path=str(ARTIFACTS / "jupyterlab_attribution.png"))
    shown = cell.locator(".jp-OutputArea").inner_text()
    assert "backward per call" in shown and "optimizer per call" in shown, shown[:3000]
    assert "attn.qkv" in shown and "head" in shown, shown[:3000]  # modules by their names in the model
    assert "in 'optimizer per call'" in shown, shown[-2000:]  # the step is split, and the footer says how much
    assert "cell [1], line" in shown, shown[-2000:]  # source lines read by the cell's prompt
    assert visit.real_errors() == []
