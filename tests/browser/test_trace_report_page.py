"""The page of ``workbench report --trace`` in headless chromium: charts draw, no console error, nothing
requested from outside the machine; on the 8-rank trace and on a single H100 trace (tests/data)."""

from pathlib import Path

import pytest

from workbench.cli import main

pytestmark = [pytest.mark.browser, pytest.mark.slow]

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu"


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    "trace, name",
    [(DATA / "dlrm_8rank", "trace_report_8rank.png"), (DATA / "h100_bert_small.json.gz", "trace_report_h100.png")],
)
def test_trace_report_renders_offline_with_marks(visit, tmp_path, trace, name):
    out = tmp_path / "report"
    assert main(["report", "--trace", str(trace), "--out", str(out)]) == 0
    visit.open(out / "report.html")
    marks = visit.marks_per_chart()
    assert len(marks) >= 5 and all(m > 0 for m in marks), marks
    assert visit.external == []
    assert visit.errors == []
    headings = visit.page.evaluate("() => [...document.querySelectorAll('h2')].map(h => h.textContent.trim())")
    for section in ("Trace summary", "Hypotheses", "Kernels", "Timeline", "Roofline", "Stragglers", "Environment"):
        assert any(h.startswith(section) for h in headings), (section, headings)
    assert visit.screenshot(name).stat().st_size > 10_000
