"""Each result type rendered in HTML, text and Markdown: the content (columns, numbers, sections)
and the escaping of hostile names (markup, quotes, control characters)."""

from __future__ import annotations

import html
import re

import pytest

import workbench as wb
from workbench import render
from workbench.errors import WorkbenchError
from workbench.hypotheses import HypothesisList
from workbench.render.escape import markdown_text, plain
from workbench.render.tables import NOTEBOOK_CSS
from workbench.study.history import History, HistoryEntry

from .conftest import HOSTILE_KERNEL, HOSTILE_OP, HOSTILE_RUN, HOSTILE_VARIANT, decision_record, make_run

OP_HEADERS = ("op", "calls / call", "self / call", "total / call", "% of self time")
KERNEL_HEADERS = ("kernel", "type", "launches / call", "time / call", "% of kernel time")


def _no_tag(md: str) -> bool:
    """No markup a Markdown renderer would pass through as a tag: every ``<`` is backslash-escaped."""
    return re.search(r"(?<!\\)<[A-Za-z/!?]", md) is None


def _no_raw(page: str, *names: str) -> None:
    for name in names:
        assert name not in page, name  # never as markup
        assert html.escape(name, quote=True) in page, name  # always as text


def test_run_html_card_has_timing_tables_hypotheses_and_escapes_names(hostile_run):
    page = render.html(hostile_run, charts=False)
    for header in OP_HEADERS + KERNEL_HEADERS:
        assert f"<th>{html.escape(header)}</th>" in page, header
    assert "clean median (per call)" in page and "cold (first call)" in page and "profiler overhead" in page
    assert "1.25× the clean call" in page  # traced 2.5 ms over clean 2 ms
    assert "Hypotheses (ranked)" in page and "per call at stake" in page
    _no_raw(page, HOSTILE_OP, HOSTILE_KERNEL, HOSTILE_RUN)
    assert "alert(&quot;op&quot;)" in page  # the double quote escaped too
    assert "&lt;script&gt;2.x" not in page  # the environment is the report's section, not the card


def test_run_card_is_the_face_runs_repr_and_carries_the_offline_charts(hostile_run):
    page = hostile_run._repr_html_()
    assert page.startswith(NOTEBOOK_CSS + "<div class='workbench-run'>") and "workbench-chart" in page
    assert HOSTILE_OP not in page and HOSTILE_KERNEL not in page


def test_run_text_has_the_timing_lines_and_the_tables_with_names_as_text(hostile_run):
    out = render.text(hostile_run)
    assert out == hostile_run.to_text()
    assert "clean median  2 ms per call" in out and "overhead 1.25x" in out
    assert HOSTILE_OP in out and HOSTILE_KERNEL in out  # plain text shows the names as they are
    header = next(line for line in out.splitlines() if line.strip().startswith("op "))
    assert all(h in header for h in OP_HEADERS)
    assert "hypotheses (ranked):" in out


def test_run_markdown_tables_escape_markup(hostile_run):
    out = render.markdown(hostile_run)
    assert out == hostile_run.to_markdown()
    assert "| " + " | ".join(OP_HEADERS) in out
    assert "\\<script\\>" in out and "\\<img" in out  # backslash-escaped: shown as text, never a tag
    assert "&lt;" not in out and "&#" not in out and _no_tag(out)  # no HTML entity (it would show literally)
    assert "#### Hypotheses (ranked)" in out


def test_control_characters_never_reach_a_view(hostile_trace_path):
    run = make_run(hostile_trace_path, name="nul\x00name\x1b[31m")
    for out in (render.text(run), render.markdown(run), render.html(run, charts=False)):
        assert "\x00" not in out and "\x1b" not in out and "nul\ufffdname" in out
    assert plain("a\tb\nc") == "a\tb\nc"  # tabs and newlines are kept in text


def test_run_without_trace_says_why_instead_of_tables():
    run = make_run(None)
    page = render.html(run, charts=False)
    assert "No op table: trace off." in page and "GPU kernels" not in page
    assert "top 10 CPU ops" not in render.text(run)


def test_history_is_shown_saved_and_loaded(hostile_run, tmp_path):
    run = make_run(hostile_run.trace_path)
    entries = tuple(
        HistoryEntry(key="k", time=f"2026-01-0{i + 1}", median_ms=m, spread_ms=0.01, n=20)
        for i, m in enumerate((2.0, 2.0, 2.8, 2.8))
    )
    run.history = History(key="k", entries=entries, change_points=(2,))
    page = render.html(run, charts=False)
    assert "History of this cell" in page and "runs recorded" in page and "run 2 (2026-01-03)" in page
    assert "runs recorded  4" in render.text(run)
    assert "| change points | run 2 (2026-01-03): 2 ms → 2.8 ms (+40%) |" in render.markdown(run)
    again = wb.load_run(run.save(tmp_path / "bundle"))
    assert again.history == run.history and isinstance(again, wb.ProfileRun)
    assert make_run(None).history is None and "History" not in render.html(make_run(None), charts=False)


def test_diagnosis_and_run_hypotheses_in_three_formats(diagnosis):
    for value in (diagnosis, HypothesisList.from_diagnosis(diagnosis)):
        page = render.html(value)
        _no_raw(page, diagnosis.hypotheses[0].title)
        assert "Next experiment" in page and "fuse it &amp; time it" in page
        out = render.text(value)
        assert out.startswith("1. [memory_bound] " + diagnosis.hypotheses[0].title)
        assert "refute by: fuse it & time it" in out
        md = render.markdown(value)
        assert (
            md.startswith("### 1.")
            and "<script>" not in md
            and _no_tag(md)
            and "**Next experiment (falsifier):**" in md
        )


def test_comparison_in_three_formats(comparison):
    page = render.html(comparison, charts=False)
    for header in (
        "variant",
        "status",
        "correct",
        "median (ms)",
        "p95 (ms)",
        "speed-up",
        "95 % interval",
        "setup",
        "decision",
    ):
        assert f"<th>{header}</th>" in page
    _no_raw(page, HOSTILE_VARIANT)
    assert "1.54×" in page and "1.5× – 1.58×" in page and "12.5 ms" in page
    assert "Decision record: <code>keep</code>" in page  # the record under the table
    out = render.text(comparison)
    assert HOSTILE_VARIANT in out and "decision: keep for " + HOSTILE_VARIANT in out
    assert out.splitlines()[1].split()[:3] == ["variant", "status", "correct"]
    md = render.markdown(comparison)
    assert "| variant | status | correct |" in md and _no_tag(md)
    assert markdown_text(HOSTILE_VARIANT) in md


def test_comparison_html_carries_its_chart_offline(comparison):
    page = render.html(comparison)
    assert 'class="workbench-chart"' in page and "cdn.jsdelivr" not in page


def test_decision_record_in_three_formats():
    record = decision_record()
    page = render.html(record)
    for title in (
        "Problem",
        "Bottleneck",
        "Numerical class",
        "Why it is safe",
        "Fallback",
        "Result",
        "Evidence",
        "Remaining risk",
    ):
        assert title in page
    _no_raw(page, HOSTILE_VARIANT, "<script>risk</script>", "slow <chain>")
    assert "faster by 1.5× &quot;end to end&quot; &lt;i&gt;" in page
    out = render.text(record)
    assert out.startswith("decision: keep for " + HOSTILE_VARIANT) and "Numerical class  reordered" in out
    md = render.markdown(record)
    assert md.startswith("### Decision: `keep`") and "**Numerical class:** reordered" in md and _no_tag(md)
    assert "**Mode:** inference: outputs checked, forward timed (no gradient checked)" in md
    assert "Gradient checks" not in md and "Gradient checks" not in page  # an inference record checked none


def test_trace_summary_card_in_three_formats(hostile_run):
    trace = hostile_run.trace
    page = render.html(trace, charts=False)
    assert page.startswith("<div class='workbench-trace'>") and "1 rank(s)" in page
    assert "top 5 kernels by total time" in page and "<th>launches</th>" in page
    _no_raw(page, HOSTILE_KERNEL)
    out = render.text(trace)
    assert out.startswith("Trace: 1 rank(s)") and HOSTILE_KERNEL in out and "90 µs" in out  # 3 kernels x 30 µs
    md = render.markdown(trace)
    assert "| kernel | type | launches | total |" in md and _no_tag(md) and "onerror='k'\\>\\&kernel" in md


def test_an_unknown_type_is_a_clear_error():
    with pytest.raises(render.UnknownResultError, match=r"no rendering for a builtins\.dict.*ProfileRun") as info:
        render.html({"not": "a result"})
    assert isinstance(info.value, WorkbenchError)
    with pytest.raises(render.UnknownResultError):
        render.text(object())
