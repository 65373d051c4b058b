"""The report pipeline end to end: profile the demo, papermill, nbconvert, offline HTML, CI compare."""
import json
import re

import pytest

from workbench.cli import main
from workbench.report import external_sources, load_summary

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "demo"
    assert main(["report", "--out", str(out), "--repeat", "5", "--warmup", "1"]) == 0
    return out


def test_report_shows_timing_top_ops_and_charts_offline(demo_report):
    html = (demo_report / "report.html").read_text(encoding="utf-8")
    summary = load_summary(demo_report)
    assert f"{summary['timing']['median_ms']:.3f} ms" in html
    assert f"{summary['timing']['p95_ms']:.3f} ms" in html
    top_ops = html[html.index('class="dataframe wb-top-ops"'):]
    assert "aten::mm" in top_ops[:20000] and "aten::clamp" in top_ops[:20000]  # matmul and the elementwise chain
    assert html.count('class="workbench-chart"') >= 2
    assert html.count("if (!window.vegaEmbed) { (function") == 1  # vega inlined once
    assert external_sources(html) == []
    assert not re.search(r"""<(script|link)[^>]+(src|href)=["']https?://""", html)


def test_report_folder_holds_bundle_notebook_and_summary(demo_report):
    assert (demo_report / "run" / "run.json").is_file()
    nb = json.loads((demo_report / "report.ipynb").read_text())
    assert not [o for c in nb["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert load_summary(demo_report)["workload"] == "workbench.demo:workload"


def test_bundle_report_and_regression_gate(demo_report, tmp_path, capsys):
    fast = tmp_path / "fast"
    fast.mkdir()
    (fast / "summary.json").write_text(json.dumps({"timing": {"median_ms": 1e-6}}))
    code = main(["report", "--bundle", str(demo_report / "run"), "--out", str(tmp_path / "again"),
                 "--compare-to", str(fast), "--fail-on-regression", "5"])
    assert code == 1 and "REGRESSION" in capsys.readouterr().out
    same = main(["report", "--bundle", str(demo_report / "run"), "--out", str(tmp_path / "again2"),
                 "--compare-to", str(demo_report), "--fail-on-regression", "5"])
    assert same == 0  # the same run against itself: +0.0 %
    assert "+0.0 %" in capsys.readouterr().out
    again = (tmp_path / "again" / "report.html").read_text(encoding="utf-8")
    assert "No experiments: this report was made from a saved run bundle" in again
    assert not (tmp_path / "again" / "experiments.json").exists()


def test_report_shows_a_roofline_of_the_demo_ops_against_measured_ceilings(demo_report):
    html = (demo_report / "report.html").read_text(encoding="utf-8")
    assert '"text": "Roofline"' in html
    assert "ceiling: measured" in html and "NOT MEASURED" not in html
    assert '"aten::mm [[1024,1024],[1024,256]]"' in html  # the demo's matmul placed by its shapes


def test_report_runs_the_suggested_variants_and_shows_the_decision(demo_report):
    import torch

    doc = json.loads((demo_report / "experiments.json").read_text())
    rows = {r["name"]: r for r in doc["comparison"]["results"]}
    assert list(rows)[0] == "eager" and "compiled" in rows      # the memory-bound chain suggests compile
    assert rows["compiled"]["status"] == "ok" and rows["compiled"]["correctness"]["passed"]
    summary = load_summary(demo_report)["experiments"]
    assert summary["variant"] in rows and summary["decision"] in (
        "keep", "keep_guarded", "micro_only", "reject", "need_more_evidence")
    html = (demo_report / "report.html").read_text(encoding="utf-8")
    section = html[html.index('id="Experiments"'):html.index('id="Environment"')]
    assert "Decision record" in section and "Hypothesis held against the measurement" in section
    assert f"<code>{summary['decision']}</code>" in section
    if "cuda_graph" in rows and not torch.cuda.is_available():
        assert rows["cuda_graph"]["status"] == "not_applicable" and "not applicable" in section
    assert html.count("if (!window.vegaEmbed) { (function") == 1      # the comparison chart shares it
