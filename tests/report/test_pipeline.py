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
    assert main(["report", "--out", str(out), "--repeat", "5", "--warmup", "1", "--processes", "2"]) == 0
    return out


def test_report_shows_timing_top_ops_and_charts_offline(demo_report):
    html = (demo_report / "report.html").read_text(encoding="utf-8")
    summary = load_summary(demo_report)
    assert f"{summary['timing']['median_ms']:.3f} ms" in html
    assert f"{summary['timing']['p95_ms']:.3f} ms" in html
    top_ops = html[html.index('class="wb-top-ops"') :]
    assert "aten::mm" in top_ops[:20000] and "aten::clamp" in top_ops[:20000]  # matmul and the elementwise chain
    assert html.count('class="workbench-chart"') >= 2
    assert html.count("if (!window.vegaEmbed) { (function") == 1  # vega inlined once
    assert external_sources(html) == []
    assert not re.search(r"""<(script|link)[^>]+(src|href)=["']https?://""", html)


def test_report_folder_holds_bundle_notebook_and_summary(demo_report):
    assert (demo_report / "run" / "run.json").is_file()
    nb = json.loads((demo_report / "report.ipynb").read_text())
    assert not [o for c in nb["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert load_summary(demo_report)["workload"] == "workbench.workloads.demo:workload"


def test_the_report_records_samples_of_fresh_processes_for_the_gate(demo_report):
    samples = load_summary(demo_report)["samples"]
    assert len(samples["processes"]) == 2 and all(len(p["samples_ms"]) == 5 for p in samples["processes"])
    env = samples["environment"]
    assert env["device"] == "cpu" or env["device"].startswith("cuda")
    assert env["torch"] and env["threads"] >= 1 and env["cpu_model"]
    assert len(samples["cpu_wait_pct"]) == 2


def test_a_bundle_report_and_the_gate_against_an_earlier_report(demo_report, tmp_path, capsys):
    assert main(["report", "--bundle", str(demo_report / "run"), "--out", str(tmp_path / "again")]) == 0
    again = (tmp_path / "again" / "report.html").read_text(encoding="utf-8")
    assert "No experiments: this report was made from a saved run bundle" in again
    assert not (tmp_path / "again" / "experiments.json").exists()
    assert load_summary(tmp_path / "again")["samples"] is None  # a bundle is no baseline
    capsys.readouterr()
    code = main(
        [
            "report",
            "--out",
            str(tmp_path / "gated"),
            "--repeat",
            "5",
            "--warmup",
            "1",
            "--processes",
            "2",
            "--no-experiments",
            "--compare-to",
            str(demo_report),
            "--fail-on-regression",
            "5",
        ]
    )
    captured = capsys.readouterr()
    verdict = load_summary(tmp_path / "gated")["regression"]
    # real timing on a shared machine: any verdict but a refusal; what matters is that it is stated
    assert verdict["status"] in ("ok", "inconclusive", "regression") and code == verdict["exit_code"]
    assert "smallest change this pair of reports could detect" in captured.out
    assert verdict["ratio_low"] <= verdict["ratio"] <= verdict["ratio_high"]
    for phase in (
        "timing the workload in a fresh process (2/2)...",
        "profiling the workload with the trace...",
        "executing the report notebook...",
        "rendering the HTML page...",
    ):
        assert f"workbench report: {phase}" in captured.err


def test_report_shows_a_roofline_of_the_demo_ops_against_measured_ceilings(demo_report):
    html = (demo_report / "report.html").read_text(encoding="utf-8")
    assert '"text": "Roofline"' in html
    assert "ceiling: measured" in html and "NOT MEASURED" not in html
    assert '"aten::mm [[1024,1024],[1024,256]]"' in html  # the demo's matmul placed by its shapes


def test_report_runs_the_suggested_variants_and_shows_the_decision(demo_report):
    import torch

    doc = json.loads((demo_report / "experiments.json").read_text())
    rows = {r["name"]: r for r in doc["comparison"]["results"]}
    assert list(rows)[0] == "eager" and "compiled" in rows  # the memory-bound chain suggests compile
    assert rows["compiled"]["status"] == "ok" and rows["compiled"]["correctness"]["passed"]
    summary = load_summary(demo_report)["experiments"]
    assert summary["variant"] in rows and summary["decision"] in (
        "keep",
        "keep_guarded",
        "micro_only",
        "reject",
        "need_more_evidence",
    )
    html = (demo_report / "report.html").read_text(encoding="utf-8")
    section = html[html.index('id="Experiments"') : html.index('id="Environment"')]
    assert "Decision record" in section and "Hypothesis held against the measurement" in section
    assert f"<code>{summary['decision']}</code>" in section
    if "cuda_graph" in rows and not torch.cuda.is_available():
        assert rows["cuda_graph"]["status"] == "not_applicable" and "not applicable" in section
    assert html.count("if (!window.vegaEmbed) { (function") == 1  # the comparison chart shares it
