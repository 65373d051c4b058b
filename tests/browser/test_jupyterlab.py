"""A real JupyterLab, driven by headless chromium: `%%gpuprofile` on the demo shows its charts,
the run's tables and the variant widgets; a live timeline of a real GPU trace, zoomed with the
mouse wheel, is re-queried by the kernel and redrawn event by event. No request leaves 127.0.0.1
and no console error.

The server runs from this interpreter on 127.0.0.1, a free port and a random token, in a temp
root holding two small notebooks; its config dir disables the network features (news,
update check, extension manager listing from PyPI). Screenshots are kept in test-artifacts/.
"""

from __future__ import annotations

import re

import pytest

from tests.browser.lab import (  # noqa: F401 - `lab` is a fixture used by the tests below
    ARTIFACTS,
    LIVE_TRACE,
    OUTPUT_READY,
    LabVisit,
    _open_notebook,
    _run_all_cells,
    lab,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_gpuprofile_in_jupyterlab_shows_charts_tables_and_widgets(browser, lab):
    visit = LabVisit(browser, lab["base"])
    page = visit.page
    _open_notebook(visit, lab, "profile.ipynb")
    try:
        _run_all_cells(page)
        page.wait_for_function(OUTPUT_READY, timeout=60000, polling=500)
    finally:
        shot = ARTIFACTS / "jupyterlab_gpuprofile.png"
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(shot), full_page=True)
    run_output = page.locator(".jp-Cell").nth(1).locator(".jp-OutputArea")
    titles = run_output.locator(".workbench-chart svg").evaluate_all(
        "els => els.map(e => e.getAttribute('aria-label') || e.textContent.slice(0, 80))"
    )
    marks = run_output.locator(".workbench-chart svg g[class*=mark] path").count()
    assert len(titles) >= 4 and marks > 20, (titles, marks)
    assert "aten::mm" in run_output.locator(".workbench-run").inner_text()
    texts = run_output.locator(".workbench-chart").evaluate_all("els => els.map(e => e.textContent)")
    assert any("Roofline" in t for t in texts) and any("Timeline" in t for t in texts), texts
    assert page.locator(".jp-OutputArea .widget-checkbox").count() >= 1
    assert visit.external == [], visit.external
    assert visit.real_errors() == [], visit.errors
    assert shot.stat().st_size > 20_000
    page.close()


LIVE_SNAPSHOT = """() => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  const svg = panel?.querySelector('.jp-OutputArea svg .role-title-subtitle')?.closest('svg');
  const marks = svg ? [...svg.querySelectorAll('g.mark-rect.role-mark path')] : [];
  if (!marks.length) return null;
  const box = svg.querySelector('g.mark-rect.role-mark').getBoundingClientRect();
  return {subtitle: svg.querySelector('.role-title-subtitle text').textContent,
          labels: marks.map(m => m.getAttribute('aria-label') || ''),
          plot: {x: box.x + box.width / 2, y: box.y + box.height / 2}};
}"""
WINDOW_SUBTITLE = re.compile(r"^([\d,]+) of ([\d,]+) events in ([\d,.]+)–([\d,.]+) µs")
MARK_LABEL = re.compile(r"; name: (.*?); duration \(µs\): .*; count: ([\d,]+); ")


def _marks(labels: list[str]) -> list[tuple[str, int]]:
    """(name, events in the mark) of each timeline bar, from the aria-label vega gives it."""
    parsed = [MARK_LABEL.search(label) for label in labels]
    assert all(parsed), [label for label, m in zip(labels, parsed) if not m][:3]
    return [(m.group(1), int(m.group(2).replace(",", ""))) for m in parsed]


def _window_counts(subtitle: str) -> tuple[int, int, float, float]:
    """(events in the window, events in the trace, start_us, end_us) from a windowed subtitle."""
    in_window, total, lo_us, hi_us = (v.replace(",", "") for v in WINDOW_SUBTITLE.match(subtitle).groups())
    return int(in_window), int(total), float(lo_us), float(hi_us)


def _live_events(**options):
    import workbench as wb
    from workbench.charts import timeline_events

    return timeline_events(wb.load_trace(LIVE_TRACE), **options)


def _wheel_zoom(page, x: float, y: float, notches: int = 12) -> None:
    """Scroll up over the plot: each notch zooms the x scale in by ~26% around the pointer."""
    page.mouse.move(x, y)
    for _ in range(notches):
        page.mouse.wheel(0, -300)
        page.wait_for_timeout(40)


def _wait_requeried(page, timeout_ms: int = 30000) -> dict:
    """The chart once its subtitle names a window: one snapshot, so a later swap cannot tear it."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        return page.wait_for_function(
            f"() => {{ const s = ({LIVE_SNAPSHOT})(); "
            f"return !!s && /{WINDOW_SUBTITLE.pattern}/.test(s.subtitle) && s; }}",
            timeout=timeout_ms,
            polling=300,
        ).json_value()
    except PlaywrightTimeout:
        now = page.evaluate(LIVE_SNAPSHOT)
        raise AssertionError(
            f"{timeout_ms / 1000:.0f} s after the wheel zoom the chart still shows no window "
            f"(subtitle: {now and now['subtitle']!r}): the kernel did not re-query and "
            "redraw it (see workbench/charts/live.py)"
        ) from None


def test_live_timeline_zoom_in_jupyterlab_requeries_the_window_event_by_event(browser, lab):
    from workbench.charts.common import shorten
    from workbench.charts.live import MAX_OP_DEPTH

    events = _live_events()
    # a zoom window with room also draws the ops nested in its events (charts/live.py MAX_OP_DEPTH)
    deep = _live_events(op_max_depth=MAX_OP_DEPTH)
    real_names = {shorten(n, 120) for n in deep["name"]}
    kernel_names = {shorten(n, 120) for n in events.loc[events["kind"] == "kernel", "name"]}
    visit = LabVisit(browser, lab["base"])
    page = visit.page
    _open_notebook(visit, lab, "live.ipynb")
    shot = ARTIFACTS / "jupyterlab_live_timeline.png"
    try:
        _run_all_cells(page)
        page.wait_for_function(LIVE_SNAPSHOT, timeout=60000, polling=300)
        before = page.evaluate(LIVE_SNAPSHOT)
        _wheel_zoom(page, before["plot"]["x"], before["plot"]["y"])
        after = _wait_requeried(page)
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(shot), full_page=False)
    # first view: the whole trace, short events summed into bins ("N events; longest: ...")
    assert before["subtitle"].startswith(f"{len(events):,} events; short events summed"), before["subtitle"]
    assert any(count > 1 for _, count in _marks(before["labels"]))
    # after the wheel zoom the kernel re-queried the window: the subtitle counts its events ...
    in_window, total, lo_us, hi_us = _window_counts(after["subtitle"])
    span_us = float((events["ts_us"] + events["dur_us"]).max() - events["ts_us"].min())
    assert len(events) <= total <= len(deep) and 0 < in_window <= 3000
    assert 0 < hi_us - lo_us < span_us / 5, (lo_us, hi_us, span_us)
    assert "summed into" not in after["subtitle"]
    # ... and draws each of them by itself, under its real name (kernels among them)
    marks = _marks(after["labels"])
    assert len(marks) == in_window and all(count == 1 for _, count in marks)
    names = {name for name, _ in marks}
    assert names <= real_names, sorted(names - real_names)[:5]
    assert names & kernel_names
    assert visit.external == [], visit.external
    assert visit.real_errors() == [], visit.errors
    assert shot.stat().st_size > 20_000
    page.close()
