"""The training step of issue 22 in a real JupyterLab, driven by headless chromium: ``loss = step()`` profiled
with ``%%gpuprofile``, then ``%%gpuvariant`` cells for a foreach=True AdamW (kept or undecided, never rejected)
and a doubled loss (rejected, on ``loss``), each record shown once. The screenshots are kept in
test-artifacts/jupyterlab_training_*.png for a person to look at."""

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
  return !!last && /Decision record/.test(last.innerText);
}"""


def test_a_training_step_is_checked_in_jupyterlab(browser, lab):
    visit = LabVisit(browser, lab["base"])
    page = visit.page
    _open_notebook(visit, lab, "training.ipynb")
    try:
        _run_all_cells(page)
        page.wait_for_function(DONE, timeout=600000, polling=1000)
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "jupyterlab_training_step.png"), full_page=True)
    cells = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell")
    for index, name in ((3, "foreach"), (4, "doubled")):
        cells.nth(index).scroll_into_view_if_needed()
        cells.nth(index).screenshot(path=str(ARTIFACTS / f"jupyterlab_training_{name}.png"))
    foreach, doubled = (
        cells.nth(3).locator(".jp-OutputArea").inner_text(),
        cells.nth(4).locator(".jp-OutputArea").inner_text(),
    )
    assert "Decision record" in foreach and "Traceback" not in foreach, foreach[-2000:]
    assert "Decision record: reject for foreach" not in foreach, foreach[-2000:]
    assert "Decision record: reject for doubled" in doubled or "reject" in doubled.split("Decision record")[1][:80], (
        doubled[-2000:]
    )
    assert "loss" in doubled and "Traceback" not in doubled
    for text in (foreach, doubled):
        assert text.count("Decision record") == 1, text[-3000:]  # the record is shown once
    assert visit.external == [], visit.external
    assert visit.real_errors() == [], visit.errors
    page.close()
