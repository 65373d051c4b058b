"""The trace report and ``workbench analyze`` show the time by module and by source line where the
trace recorded Python events (the real H100 trace does), say why not where it did not, and draw
results through ``workbench.render`` (the hypotheses as well)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import workbench as wb
from workbench import render
from workbench.analysis.attribution import NO_PYTHON_EVENTS, Attribution
from workbench.cli import main
from workbench.report import trace_report as tr

DATA = Path(__file__).resolve().parents[1] / "data"
H100 = DATA / "gpu" / "h100_bert_small.json.gz"  # recorded with the Python stack
CPU_PLAIN = DATA / "cpu" / "cpu_mlp_plain.json.gz"  # recorded without it
EIGHT_RANKS = DATA / "gpu" / "dlrm_8rank"
TEMPLATE = Path(__file__).resolve().parents[2] / "templates" / "trace_report.ipynb"


@pytest.fixture(scope="module")
def h100():
    return wb.load_trace(H100)


def test_the_report_section_shows_the_module_tree_and_source_lines(h100):
    page = tr.attribution_html(h100)
    assert "<h5>Time by nn.Module</h5>" in page and "<h5>Time by source line</h5>" in page
    assert "BertModel_0" in page and "BertSdpaSelfAttention_0" in page and "text_base_model.py:28" in page
    assert page == render.html(Attribution(h100.module_breakdown(), h100.source_breakdown()))


def test_a_trace_without_python_events_gets_one_sentence_saying_why():
    page = tr.attribution_html(wb.load_trace(CPU_PLAIN))
    assert page == f"<p>No time by module or source line: {NO_PYTHON_EVENTS}.</p>"


def test_rank_files_read_by_workers_say_where_the_attribution_is():
    folder = wb.load_trace(EIGHT_RANKS, workers=2)
    assert type(folder).__name__ == "Trace" and type(folder.rank_folder).__name__ == "RankFolder"
    assert "report on its file alone" in tr.attribution_html(folder)


def test_the_hypotheses_section_is_the_diagnosis_rendering(h100):
    assert tr.hypotheses_html(h100) == render.html(h100.diagnosis())
    assert "wb-diagnosis" in tr.hypotheses_html(h100)


def test_the_template_shows_the_section_and_calls_no_repr_directly():
    cells = json.loads(TEMPLATE.read_text(encoding="utf-8"))["cells"]
    code = "".join("".join(c["source"]) for c in cells)
    assert "tr.attribution_html(trace)" in code and "_repr_html_" not in code
    assert any("".join(c["source"]).startswith("## Time by module and source line") for c in cells)
    assert "_repr_html_()" not in Path(tr.__file__).read_text(encoding="utf-8")


def test_analyze_prints_the_attribution_of_a_trace_with_python_events(capsys):
    assert main(["analyze", str(H100), "--top", "3"]) == 0
    out = capsys.readouterr().out
    section = out[out.index("== time by module and source line ==") : out.index("== hypotheses (ranked) ==")]
    assert section.splitlines()[1] == "Time by nn.Module" and "BertModel_0" in section
    assert "Time by source line" in section and "text_base_model.py:28 in run_on_input" in section


def test_analyze_prints_no_attribution_section_without_python_events(capsys):
    assert main(["analyze", str(CPU_PLAIN)]) == 0
    out = capsys.readouterr().out
    assert "time by module" not in out and "== hypotheses (ranked) ==" in out
