"""The catalog of fixes in a real JupyterLab, driven by headless chromium (issue 24): the training step of
issue 22 profiled with ``%%gpuprofile``, ``_gpuprofile.fixes`` listing ``sdpa_attention`` at the attention
module and ``fused_optimizer`` at the AdamW, then ``%gpuvariant --fix sdpa_attention,fused_optimizer``
checking both as training steps. The screenshots are kept in test-artifacts/jupyterlab_fixes_*.png."""

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


def test_the_fixes_of_a_training_step_are_listed_and_checked_in_jupyterlab(browser, lab):
    visit = LabVisit(browser, lab["base"])
    page = visit.page
    _open_notebook(visit, lab, "fixes.ipynb")
    try:
        _run_all_cells(page)
        page.wait_for_function(DONE, timeout=600000, polling=1000)
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "jupyterlab_fixes.png"), full_page=True)
    cells = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell")
    for index, name in ((2, "list"), (3, "compare")):
        cells.nth(index).scroll_into_view_if_needed()
        cells.nth(index).screenshot(path=str(ARTIFACTS / f"jupyterlab_fixes_{name}.png"))
    listed = cells.nth(2).locator(".jp-OutputArea").inner_text()
    compared = cells.nth(3).locator(".jp-OutputArea").inner_text()
    assert "sdpa_attention" in listed and "attn" in listed, listed[-2000:]
    # where it applies reads by the prompt of the cell that defines the attention, not ipykernel's file hash
    assert "cell [1], line 17" in listed and ".py:17" not in listed, listed[-2000:]
    assert "fused_optimizer" in listed and "AdamW" in listed, listed[-2000:]
    assert "Traceback" not in compared and compared.count("Decision record") == 1, compared[-3000:]
    assert "sdpa_attention" in compared and "fused_optimizer" in compared, compared[-3000:]
    assert "incorrect" not in compared, compared[-3000:]  # both are right: neither is rejected as wrong
    assert visit.external == [], visit.external
    assert visit.real_errors() == [], visit.errors
    page.close()
