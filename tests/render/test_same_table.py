"""The report and the notebook card render a run with the same code: the same tables, columns and
escaping for the same run (``workbench.render.run``, used by ``ProfileRun._repr_html_`` and by the
report's sections, which the template displays)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from workbench import render
from workbench.report import sections

TEMPLATE = Path(__file__).resolve().parents[2] / "workbench" / "templates" / "report.ipynb"


def _table(page: str, css_class: str) -> str:
    match = re.search(rf'<table class="{css_class}">.*?</table>', page, re.S)
    assert match, f"no table {css_class!r} in the page"
    return match.group(0)


def test_the_report_and_the_card_show_the_same_timing_and_op_and_hypothesis_tables(hostile_run):
    card = render.html(hostile_run, charts=False)
    for css_class in ("wb-timing", "wb-top-ops"):
        assert _table(card, css_class) == _table(
            sections.timing_html(hostile_run) + sections.top_ops_html(hostile_run, 10), css_class
        )
    report_hypotheses = sections.hypotheses_html(hostile_run)
    card_items = re.findall(r"<li><b>.*?</li>", card, re.S)
    assert card_items and all(item in report_hypotheses for item in card_items)


def test_the_report_table_has_the_same_columns_with_more_rows(hostile_run):
    card_head = re.search(r"<thead>.*?</thead>", _table(render.html(hostile_run, charts=False), "wb-top-ops")).group(0)
    assert card_head in _table(sections.top_ops_html(hostile_run, 15), "wb-top-ops")
    assert "self / call" in card_head and "% of self time" in card_head


def test_the_template_displays_the_shared_sections():
    cells = "".join("".join(c["source"]) for c in json.loads(TEMPLATE.read_text(encoding="utf-8"))["cells"])
    for name in (
        "sections.timing_html(run)",
        "sections.top_ops_html(run",
        "sections.hypotheses_html(run)",
        "sections.attribution_html(run)",
        "sections.history_html(run)",
        "sections.environment_html(run)",
        "wb.load_run(bundle)",
    ):
        assert name in cells, name
    assert "## Time by module and source line" in cells and "## History" in cells


def test_the_report_and_the_card_show_the_same_attribution_and_history(attributed_run):
    from workbench.study.history import History, HistoryEntry

    attributed_run.history = History(
        "k",
        tuple(HistoryEntry("k", f"2026-01-0{i + 1}", m, 0.01, n=20) for i, m in enumerate((2.0, 2.0, 2.8, 2.8))),
        (2,),
    )
    card = render.html(attributed_run, charts=False)
    assert sections.attribution_html(attributed_run) in card
    assert _table(sections.history_html(attributed_run), "wb-history-summary") == _table(card, "wb-history-summary")
    assert _table(sections.history_html(attributed_run), "wb-history-runs") == _table(card, "wb-history-runs")
