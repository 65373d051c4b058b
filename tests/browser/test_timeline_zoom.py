"""The exported timeline page refines its bins when the user zooms (no Python behind the page)."""

import numpy as np
import pandas as pd
import pytest

from workbench import charts

pytestmark = pytest.mark.browser

MARKS = "() => document.querySelectorAll('.workbench-chart svg g[class*=mark-rect] path').length"


X_AXIS = (
    "() => { const d = [...document.querySelectorAll('.workbench-chart svg .role-axis-domain line, .workbench-chart svg .role-axis-domain path')]"
    ".map(p => p.getBoundingClientRect()).sort((a, b) => b.width - a.width)[0];"
    " return [d.x, d.width, d.y - 40]; }"
)


def _events(n=200_000, seed=5):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "lane": np.where(np.arange(n) % 2, "rank 0 · stream 7", "rank 0 · stream 13"),
            "kind": "kernel",
            "name": "gemm",
            "ts_us": np.sort(rng.uniform(0, 1e6, n)),
            "dur_us": 0.5,
            "shapes": None,
        }
    )


def test_wheel_zoom_draws_finer_bins_in_the_exported_page(visit, tmp_path):
    events = _events()
    levels, _ = charts.timeline.timeline_levels(events, max_marks=2000)
    page = tmp_path / "timeline.html"
    page.write_text(charts.page_html([charts.timeline_chart(events, max_marks=2000)], title="zoom"), encoding="utf-8")
    visit.open(page)
    before = visit.page.evaluate(MARKS)
    assert before == len(levels.view(0))  # whole span: level 0 only
    # zoom at a spot where level 3 is stored (finer levels are kept for the busiest tiles only)
    fine = levels.table[(levels.table["lvl"] == 3) & (levels.table["ind"] == 0)]
    at = (fine["ts_us"].median() - levels.start_us) / levels.span_us
    x0, width, mid_y = visit.page.evaluate(X_AXIS)
    visit.page.mouse.move(x0 + width * at, mid_y)
    for _ in range(10):  # zoom in about 4^3 times
        visit.page.mouse.wheel(0, -400)
        visit.page.wait_for_timeout(100)
    after = visit.page.evaluate(MARKS)
    # without refinement a 1/64 window would show about 1/64 of the level-0 bins (a few per lane)
    assert after > 10 * before / 64, (before, after)
    assert after <= 2 * 2000, after  # the level picked keeps the visible marks within budget
    assert visit.errors == [] and visit.external == []
    visit.screenshot("timeline_zoomed.png")


LABELS_ON_TOP = """() => {
  const labels = [...document.querySelectorAll('.workbench-chart svg .role-axis-label text')]
    .filter(t => /rank 0/.test(t.textContent));
  return labels.map(t => { const b = t.getBoundingClientRect();
    const hit = document.elementFromPoint(b.x + b.width / 2, b.y + b.height / 2);
    return [t.textContent, !!hit && !hit.closest('g[class*=mark-rect]')]; });
}"""


def test_zoomed_bars_clip_at_the_plot_and_leave_the_lane_labels_readable(visit, tmp_path):
    # a long op that starts at 0 and kernels after it: zoomed into its middle, the op's bar reaches far
    # left of the window; clipped, it never paints over the lane labels (issue 12)
    kernels = _events(n=2000, seed=9)
    op = pd.DataFrame(
        {
            "lane": ["rank 0 · thread 1"],
            "kind": ["op"],
            "name": ["aten::long"],
            "ts_us": [0.0],
            "dur_us": [1e6],
            "shapes": [None],
        }
    )
    events = pd.concat([kernels, op], ignore_index=True)
    page = tmp_path / "clip.html"
    page.write_text(charts.page_html([charts.timeline_chart(events, max_marks=2000)], title="clip"), encoding="utf-8")
    visit.open(page)
    x0, width, mid_y = visit.page.evaluate(X_AXIS)
    visit.page.mouse.move(x0 + width * 0.6, mid_y)
    for _ in range(12):
        visit.page.mouse.wheel(0, -400)
        visit.page.wait_for_timeout(100)
    visit.page.mouse.move(x0 + width * 0.5, mid_y)
    visit.page.mouse.down()
    visit.page.mouse.move(x0 + width * 0.9, mid_y, steps=8)  # pan: the window's start moves right again
    visit.page.mouse.up()
    visit.page.wait_for_timeout(300)
    hits = visit.page.evaluate(LABELS_ON_TOP)
    assert len(hits) == 3 and all(clear for _, clear in hits), hits  # no bar under any lane label
    assert visit.errors == [] and visit.external == []
    visit.screenshot("timeline_zoomed_clipped.png")
