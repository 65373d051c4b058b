"""The run's attribution section (time by module and by source line, ``run.attribution``) and its
history section (the trend chart with the change points, ``run.history``) in the card, the
report's sections, the text and the Markdown; and the attribution and history results displayed
on their own (``render.html(run.attribution)``)."""

from __future__ import annotations

import html
import re

import pytest

from workbench import render
from workbench.analysis.attribution import NO_PYTHON_EVENTS, Attribution, ModuleBreakdown, SourceBreakdown
from workbench.report import sections
from workbench.study.history import History, HistoryEntry
from workbench.units import format_ms

from .conftest import HOSTILE_MODULE, make_run


def _history(medians: tuple[float, ...], change_points: tuple[int, ...]) -> History:
    entries = tuple(
        HistoryEntry(key="k", time=f"2026-01-{i + 1:02d}", median_ms=m, spread_ms=0.02, n=20)
        for i, m in enumerate(medians)
    )
    return History(key="k", entries=entries, change_points=change_points)


def _per_call(run, us: float) -> str:
    return format_ms(us / 1e3 / run.traced_calls * run.trace_scale)


# --- attribution -------------------------------------------------------------------------------


def test_the_card_shows_time_by_module_and_by_source_line_with_names_escaped(attributed_run):
    page = render.html(attributed_run, charts=False)
    section = page[page.index("<h4>Time by module and source line</h4>") :]
    assert "<h5>Time by nn.Module</h5>" in section and "<h5>Time by source line</h5>" in section
    assert "Model_0" in section and "Block_0" in section and "model.py:40 in forward" in section
    assert HOSTILE_MODULE not in page and html.escape(HOSTILE_MODULE) in section  # a module named like markup
    # CPU op self time per clean call: Model_0 holds 220 of the 240 µs, over 3 traced calls, scaled
    assert _per_call(attributed_run, 220.0) in section and "91.7 %" in section
    assert sections.attribution_html(attributed_run) in page  # the report's section is the card's


def test_the_text_and_markdown_hold_the_same_sections_compact(attributed_run):
    out = render.text(attributed_run)
    assert "time by module (CPU op self time per call over 3 traced call(s), scaled to the clean time" in out
    assert "time by source line (" in out
    lines = out.splitlines()
    model = next(line for line in lines if line.strip().startswith("Model_0"))
    chain = next(line for line in lines if HOSTILE_MODULE + "_0" in line)  # text shows the name as it is
    assert len(chain) - len(chain.lstrip(" \u00a0")) > len(model) - len(model.lstrip(" \u00a0"))  # nested deeper
    assert _per_call(attributed_run, 220.0) in model and "91.7 %" in model
    assert "top ops / kernels" not in out  # compact: no top-kernel column
    md = render.markdown(attributed_run)
    assert "#### Time by module and source line" in md and "| module | per call | self per call | share |" in md
    assert "| source line | self per call | with callees | share |" in md and "model.py:40 in forward" in md
    assert not re.search(r"(?<!\\)<script", md) and 'Chain\\<script "x"\\>\\_0' in md  # escaped, never a tag


def test_the_compact_tables_keep_the_largest_rows_in_tree_order(attributed_run, monkeypatch):
    import workbench.render.run_attribution as run_attribution

    monkeypatch.setattr(run_attribution, "COMPACT_ROWS", 2)
    rows, caption = run_attribution.module_rows(attributed_run.attribution.modules, 2)
    assert [row[0].text.strip("\u00a0 ") for row in rows] == ["Model_0", "Block_0"]  # the chain (90 µs) left out
    assert "1 more module(s) in run.attribution" in caption


def test_a_trace_without_python_events_says_why_once(hostile_run):
    page = render.html(hostile_run, charts=False)
    assert page.count(NO_PYTHON_EVENTS) == 1
    assert "time by module and time by source line: not recorded" in page
    out = render.text(hostile_run)
    assert out.count(NO_PYTHON_EVENTS) == 1 and "time by module (" not in out


def test_a_run_without_a_trace_has_no_attribution_section_and_the_report_says_why():
    run = make_run(None)
    assert "Time by module" not in render.html(run, charts=False)
    assert "time by module" not in render.text(run) and "Time by module" not in render.markdown(run)
    assert sections.attribution_html(run) == "<p>No attribution: trace off.</p>"


def test_attribution_results_render_on_their_own(attributed_run):
    result = attributed_run.attribution
    assert isinstance(result, Attribution)
    for value, headings in (
        (result, ("Time by nn.Module", "Time by source line")),
        (result.modules, ("Time by nn.Module",)),
        (result.sources, ("Time by source line",)),
    ):
        assert isinstance(value, (Attribution, ModuleBreakdown, SourceBreakdown))
        page = render.html(value)
        assert page.startswith("<div class='wb-attribution-section'>") and "<table" in page
        assert all(f"<h5>{h}</h5>" in page for h in headings)
        assert render.text(value).startswith(headings[0]) and "<table" not in render.text(value)
        assert render.markdown(value).startswith(f"##### {headings[0]}")


def test_an_attribution_that_fails_is_said_in_place_and_the_card_still_renders(attributed_run, monkeypatch):
    import workbench.render.run_attribution as run_attribution

    def broken(_run):
        return None, "not available: ValueError: bad stack"

    monkeypatch.setattr(run_attribution, "run_attribution", broken)
    page = render.html(attributed_run, charts=False)
    assert "not available: ValueError: bad stack" in page and "Top 10 CPU ops" in page
    assert "time by module and source line: not available: ValueError: bad stack" in render.text(attributed_run)


# --- history -----------------------------------------------------------------------------------


def test_a_history_of_two_plus_runs_shows_the_change_points_and_the_shift(hostile_run):
    run = make_run(hostile_run.trace_path)
    run.history = _history((2.0, 2.0, 2.8, 2.8), (2,))
    page = render.html(run, charts=False)
    section = page[page.index("<h4>History of this cell</h4>") :]
    assert "runs recorded" in section and "run 2 (2026-01-03): 2 ms → 2.8 ms (+40%)" in section
    assert section.count("← change") == 1
    marked = section[section.index("← change") - 200 : section.index("← change")]
    assert "2026-01-03" in marked  # the mark is on the run where the shift begins
    out = render.text(run)
    assert "change points  run 2 (2026-01-03): 2 ms → 2.8 ms (+40%)" in out
    changed = next(line for line in out.splitlines() if "← change" in line)
    assert changed.split()[:2] == ["2", "2026-01-03"]
    md = render.markdown(run)
    assert "| change points | run 2 (2026-01-03): 2 ms → 2.8 ms (+40%) |" in md
    assert "| 2 | 2026-01-03 | 2.8 ms | 20 µs | ← change |" in md


def test_the_trend_chart_is_in_the_card_offline_and_numbers_runs_as_the_table_does(hostile_run):
    pytest.importorskip("altair")
    from workbench.charts.history import history_table

    run = make_run(hostile_run.trace_path)
    run.history = _history((2.0, 2.0, 2.1, 2.9, 3.0, 2.9), (3,))
    section = render.html(run, charts=True)
    section = section[section.index("<h4>History of this cell</h4>") :]
    assert 'class="workbench-chart"' in section and "cdn.jsdelivr" not in section
    assert "change at run 3" in section  # the chart's title names the change point
    assert list(history_table(run.history).query("change")["run"]) == [3]
    assert "run 3 (2026-01-04)" in section  # ... and the table says the same run
    report = sections.history_html(run)  # the report's section: the same, charts on
    assert report.startswith("<div class='wb-history'>") and 'class="workbench-chart"' in report
    assert "run 3 (2026-01-04): 2 ms → 2.9 ms (+45%)" in report


def test_a_first_run_says_the_trend_starts_with_the_second(hostile_run):
    run = make_run(hostile_run.trace_path)
    run.history = _history((2.0,), ())
    page = render.html(run, charts=True)
    section = page[page.index("<h4>History of this cell</h4>") :]
    assert "1 run recorded so far (2 ms, 2026-01-01)" in section and "from the second run" in section
    assert "wb-history-runs" not in section and "History" in section.split("</h4>")[0]
    assert 'class="workbench-chart"' not in render.html(run.history)  # no one-point trend chart
    assert "change points" not in render.text(run) and "runs recorded  1" in render.text(run)


def test_a_long_history_lists_its_latest_runs():
    history = _history(tuple(2.0 for _ in range(12)), ())
    out = render.text(history)
    assert "change points  none: one level throughout" in out
    assert "(4 earlier run(s) not listed)" in out
    listed = [line.split()[0] for line in out.splitlines() if line.strip()[:1].isdigit() and "2026" in line]
    assert listed == [str(i) for i in range(4, 12)]


def test_the_report_section_says_when_a_bundle_has_no_history(hostile_run):
    run = make_run(hostile_run.trace_path)
    assert run.history is None and "History of this cell" not in render.html(run, charts=False)
    assert sections.history_html(run).startswith("<p>No history in this run bundle")
    run.history = _history((2.0, 2.4, 2.4), ())
    assert sections.history_html(run).startswith("<div class='wb-history'>")
