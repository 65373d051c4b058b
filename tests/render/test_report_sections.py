"""The report's sections are drawn by render (issue 23): the trace report's, the run report's and the
study report's HTML is written by ``workbench.render.trace_report`` / ``run_report`` /
``study_report`` from computed values, through the one escaper and the one table writer; the report
modules hold no markup and no escaping."""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

import workbench.render.run_report as run_report
import workbench.render.study_report as study_report
import workbench.render.trace_report as trace_report
from workbench.render.escape import html_text
from workbench.render.tables import Cell, html_table

HOSTILE = '<script>alert("x")</script> & it\'s'
REPORT = Path(__file__).resolve().parents[2] / "workbench" / "report"


def _no_markup(page: str) -> None:
    """The hostile text is on the page as text, never as a tag."""
    assert "<script" not in page and "&lt;script&gt;" in page, page


# --- the one table writer -------------------------------------------------------------------------


def test_the_table_writer_quotes_attributes_either_way_and_escapes_both():
    rows = [[Cell("1.5 ms", title="1,500.0 µs", numeric=True), Cell(HOSTILE, title=HOSTILE)]]
    double = html_table(["t", "name"], rows, "c")
    single = html_table(["t", "name"], rows, "c", quote="'")
    assert double.startswith('<table class="c">') and '<td class="wb-num" title="1,500.0 µs">1.5 ms</td>' in double
    assert single.startswith("<table class='c'>") and "<td class='wb-num' title='1,500.0 µs'>1.5 ms</td>" in single
    for page in (double, single):
        _no_markup(page)
        assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; it&#x27;s" in page
    with pytest.raises(ValueError):
        html_table(["a"], [], "c", quote="`")


# --- the trace report -----------------------------------------------------------------------------


def test_a_trace_table_shows_each_column_in_its_unit_with_the_exact_figure_as_tooltip():
    table = pd.DataFrame(
        {
            "name": ["k" * 100],
            "sum_us": [1500.0],
            "pct": [12.345],
            "bytes": [2.5e6],
            "gbps": [123.456],
            "ratio": [0.5],
            "count": [1234],
            "flag": [True],
            "mean_us": [math.nan],
        }
    )
    page = trace_report.table_html(table)
    assert "<th>sum</th>" in page and "<th>pct</th>" in page and "<th>mean</th>" in page
    assert "<td class='wb-num' title='1,500.0 µs'>1.5 ms</td>" in page
    assert "<td class='wb-num'>12.3 %</td>" in page and "<td class='wb-num'>50.0 %</td>" in page
    assert "<td class='wb-num' title='2,500,000 B'>2.5 MB</td>" in page and "123 GB/s" in page
    assert "<td class='wb-num'>1,234</td>" in page and "<td>yes</td>" in page and "<td class='wb-num'>n/a</td>" in page
    assert f"title='{'k' * 100}'" in page  # a long name is cut, the whole name its tooltip
    assert "wb-hidden" not in page


def test_a_trace_table_escapes_names_and_counts_the_rows_it_hides():
    table = pd.DataFrame({"name": [HOSTILE] * 5, "sum_us": range(5)})
    page = trace_report.table_html(table, max_rows=2, hidden_what="<kernels>")
    _no_markup(page)
    assert page.count("<tr>") == 3 and "3 more &lt;kernels&gt; not shown (of 5)." in page


def test_the_trace_sections_are_drawn_from_values_and_escape_them():
    per_rank = pd.DataFrame({"rank": [1, 0], "comm_deficit_us": [900.0, 0.0], "is_straggler": [True, False]})
    page = trace_report.stragglers_html(per_rank, stragglers=[1, 2, 3], wait_caused_us=2500.0, reason=None)
    assert page.startswith("<p><b>Straggler rank(s): 1-3</b>: the others wait for them in collectives (2.5 ms")
    assert "<td>yes</td>" in page and page.count("<table") == 1
    quiet = trace_report.stragglers_html(per_rank.iloc[:0], reason=HOSTILE)
    _no_markup(quiet)
    assert quiet.startswith("<p>No straggler analysis: &lt;script&gt;")
    assert trace_report.stragglers_html(None) == "<p>One rank: no rank to wait for.</p>"
    assert trace_report.not_available_html(HOSTILE) == f"<p class='wb-note'>{html_text(HOSTILE)}.</p>"
    summary = trace_report.summary_html(
        [("ranks", "2 (0-1)"), ("loaded from", HOSTILE)], [HOSTILE] * 3, source="nsys", fidelity={"memory": HOSTILE}
    )
    _no_markup(summary)
    assert "Loader warnings (3)" in summary and "<b>Read from nsys.</b>" in summary and "<code>memory</code>" in summary
    many = trace_report.summary_html([], ["w"] * 5, max_warnings=2)
    assert many.count("<li>") == 2 and "3 more warnings not shown." in many
    assert "No loader warning" in trace_report.summary_html([], [])
    assert trace_report.fidelity_html("kineto", {}) == ""
    assert "draws the 3 most idle of the 8 ranks" in trace_report.idle_html(
        pd.DataFrame({"rank": [0], "idle_us": [1.0]}), n_ranks=8, charted_ranks=3
    )
    assert trace_report.attribution_reasons_html([HOSTILE, HOSTILE]).count("<p>") == 1  # one sentence per reason
    assert trace_report.ranks_text([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8"


def test_the_kernel_section_shows_the_rank_columns_for_several_ranks_only():
    kernels = pd.DataFrame({"name": ["k"], "ranks": [8], "sum_us": [1.0], "worst_rank": [3]})
    assert "<th>worst rank</th>" in trace_report.kernels_html(kernels, n_ranks=8)
    one = trace_report.kernels_html(kernels, n_ranks=1)
    assert "<th>worst rank</th>" not in one and "<th>ranks</th>" not in one and "<th>name</th>" in one
    assert "CPU-only trace" in trace_report.kernels_html(None)


# --- the run report -------------------------------------------------------------------------------


def test_the_run_report_sentences_and_experiments_are_escaped():
    run = SimpleNamespace(trace_note=HOSTILE, trace=None, history=None)
    assert run_report.memory_html(run).startswith("<p>No memory")
    assert run_report.history_html(run).startswith("<p>No history in this run bundle")
    assert "saved run bundle" in run_report.experiments_html({}, None, tolerance=0.1)
    error = run_report.experiments_html({"error": HOSTILE}, None, tolerance=0.1)
    none = run_report.experiments_html({"none": HOSTILE}, None, tolerance=0.1)
    apart = run_report.agreement_html({"agree": False, "note": HOSTILE}, 0.1)
    for page in (error, none, apart):
        _no_markup(page)
    assert error.startswith("<p class='wb-experiments-error'>") and "wb-caution" in apart
    agree = run_report.agreement_html({"agree": True, "eager_ms": 2.0, "headline_ms": 2.1}, 0.1)
    assert "within 10%" in agree and run_report.agreement_html(None, 0.1) == ""


# --- the study report -----------------------------------------------------------------------------


def _study() -> SimpleNamespace:
    hyp = SimpleNamespace(category="launch_bound", time_at_stake_ms=0.5, title=HOSTILE)
    base = SimpleNamespace(
        index=1,
        baseline_id="b-1",
        label=HOSTILE,
        mode="inference",
        median_ms=2.0,
        p95_ms=2.5,
        n=20,
        device="cpu",
        git={"commit": "0123456789abcdef", "dirty": True},
        accepted_from={"round": 1, "variant": HOSTILE, "decision": "keep"},
        hypotheses=[hyp],
        held_back=[{"key": "k"}],
    )
    entry = SimpleNamespace(
        category="launch_bound",
        title=HOSTILE,
        status="open",
        confidence="low",
        round=None,
        baseline_id="b-1",
        evidence_scope={"variants": [{"name": "v", "residual": "none"}]},
        reopen_when="never",
    )
    return SimpleNamespace(baselines=[base], ledger=[entry], rounds=[])


def test_the_study_report_tables_are_written_by_the_table_writer_and_escaped():
    study = _study()
    baselines = study_report.baselines_html(study)
    bottlenecks = study_report.bottlenecks_html(study)
    ledger = study_report.ledger_html(study)
    for page in (baselines, bottlenecks, ledger):
        _no_markup(page)
        assert page.startswith("<div class='wb-study-report'><table class=\"wb-study-table\">")
    assert "<td>0123456789 (dirty)</td>" in baselines and "round 1: &lt;script&gt;" in baselines
    assert "after accepting &lt;script&gt;" in bottlenecks and "(k held back)" in bottlenecks
    assert "<td>v (none)</td>" in ledger and "<td>—</td>" in ledger
    empty = SimpleNamespace(baselines=[], ledger=[], rounds=[])
    assert "No baseline yet." in study_report.baselines_html(empty)
    assert "The ledger is empty." in study_report.ledger_html(empty)
    assert "No round has been run." in study_report.rounds_html(empty)
    assert "No decision yet." in study_report.decisions_html(empty)


# --- nothing drawn in the report modules ----------------------------------------------------------


TAG = re.compile(r"</?[a-z][a-z0-9]*\b[^<>]*>")


def _drawn(source: str) -> list[str]:
    """String literals (docstrings aside) holding an HTML tag, and imports of ``html``/escaping."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            found += [f"{node.lineno}: {m.group(0)}" for m in TAG.finditer(node.value)]
        elif isinstance(node, ast.Import) and any(a.name.split(".")[0] == "html" for a in node.names):
            found.append(f"{node.lineno}: import html")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "html":
            found.append(f"{node.lineno}: from html import")
        elif isinstance(node, ast.Name) and node.id == "html_text":
            found.append(f"{node.lineno}: html_text")
        elif isinstance(node, ast.alias) and node.name == "html_text":
            found.append("import html_text")
    return found


@pytest.mark.parametrize("module", ["trace_report.py", "sections.py", "study_report.py"])
def test_the_report_modules_draw_nothing_and_escape_nothing(module):
    assert _drawn((REPORT / module).read_text(encoding="utf-8")) == []


def test_the_check_sees_markup_and_escaping():
    source = (
        '"""A <table>."""\nimport html\nfrom workbench.render.escape import html_text\nx = f"<td>{html_text(v)}</td>"\n'
    )
    assert _drawn(source) == ["2: import html", "import html_text", "4: <td>", "4: </td>", "4: html_text"]
