"""Timeline on a million events built from a real trace: build time, chromium render time, page size.

Repeats the events of a real Kineto trace (default: the TraceLens H100 owlv2 trace, 132k events,
or the V100 ResNet-50 trace in tests/data where the shared copy is missing)
back to back in time until there are at least ``--events`` of them, then:
  * build: timeline_chart(...) + to_dict() (every zoom level included), median of --runs;
  * page: a standalone offline HTML page (vega inlined), its size in MB;
  * render: headless chromium opens the page until the chart's marks exist (skipped, with the
    reason, when /usr/bin/chromium or playwright is missing).
Goals: build <= 2 s, render <= 3 s, page <= 5 MB.

    .venv/bin/python benchmarks/charts.py [--trace PATH] [--events 1000000] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHARED_TRACE = Path("/work/shared/traces/tracelens_h100_owlv2/google_owlv2-large-patch14-ensemble__1016001.json.gz")
# the shared copy where it exists, else the real V100 trace the tests carry (75k events)
DEFAULT_TRACE = str(
    SHARED_TRACE
    if SHARED_TRACE.is_file()
    else Path(__file__).resolve().parents[1] / "tests" / "data" / "gpu" / "v100_resnet50_2021.json.gz"
)
GOALS = {"build_s": 2.0, "render_s": 3.0, "page_mb": 5.0}


def repeated_events(trace_path: str, n_events: int):
    import pandas as pd

    import workbench as wb
    from workbench.charts import timeline_events

    events = timeline_events(wb.load_trace(trace_path))
    span_us = float((events["ts_us"] + events["dur_us"]).max() - events["ts_us"].min())
    copies = -(-n_events // len(events))
    frames = [events.assign(ts_us=events["ts_us"] + i * span_us) for i in range(copies)]
    return pd.concat(frames, ignore_index=True), len(events), copies


def render_seconds(page: Path) -> float | str:
    if not os.access("/usr/bin/chromium", os.X_OK):
        return "not measured: /usr/bin/chromium is missing"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return "not measured: playwright is not installed"
    args = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
    ]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=args)
        tab = browser.new_page()
        t0 = time.perf_counter()
        tab.goto(page.as_uri(), wait_until="load", timeout=120000)
        tab.wait_for_function(
            "() => document.querySelectorAll('.workbench-chart svg g[class*=mark] path').length > 100",
            timeout=120000,
            polling=50,
        )
        seconds = time.perf_counter() - t0
        browser.close()
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", default=DEFAULT_TRACE)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    opts = ap.parse_args()
    import altair  # noqa: F401  (imported before timing: its import alone takes seconds)

    from workbench.charts import page_html, timeline_chart
    from workbench.charts.timeline_data import chart_rows

    events, base, copies = repeated_events(opts.trace, opts.events)
    print(f"trace: {Path(opts.trace).name}: {base:,} drawable events x {copies} = {len(events):,}")
    builds, chart = [], None
    for _ in range(opts.runs):
        t0 = time.perf_counter()
        chart = timeline_chart(events)
        spec = chart.to_dict()
        builds.append(time.perf_counter() - t0)
    rows = len(chart_rows(spec))
    levels = spec["usermeta"]["workbench_lod"]["levels"]
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "timeline.html"
        page.write_text(page_html([chart], title="timeline benchmark"), encoding="utf-8")
        page_mb = page.stat().st_size / 1e6
        render = render_seconds(page)
    build = statistics.median(builds)
    print(
        f"rows in the page: {rows:,} over {len(levels)} zoom levels ({len(events) / max(rows, 1):,.0f} events per row)"
    )
    for lv in levels:
        print(
            f"  level {lv['level']}: {lv['bin_us']:,.1f} us bins, {lv['marks']:,} rows, "
            f"{lv['tiles_stored']}/{lv['tiles_total']} tiles of the span"
        )
    print(
        f"build (timeline_chart + to_dict), median of {opts.runs}: {build:.3f} s "
        f"(goal <= {GOALS['build_s']} s, ratio {build / GOALS['build_s']:.2f})"
    )
    if isinstance(render, float):
        print(
            f"render (chromium, load to marks drawn): {render:.3f} s "
            f"(goal <= {GOALS['render_s']} s, ratio {render / GOALS['render_s']:.2f})"
        )
    else:
        print(f"render: {render}")
    print(f"page size: {page_mb:.2f} MB (goal <= {GOALS['page_mb']} MB, ratio {page_mb / GOALS['page_mb']:.2f})")


if __name__ == "__main__":
    main()
