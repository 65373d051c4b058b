"""``workbench report --trace``: the trace template executed with papermill (once, on the small
8-rank trace in tests/data), the folded per-rank sections, and bad input refused before anything runs."""

import json
from pathlib import Path

import pandas as pd
import pytest

import workbench as wb
from workbench.cli import main
from workbench.report import external_sources
from workbench.report import trace_report as tr

DATA = Path(__file__).resolve().parents[1] / "data"
EIGHT_RANKS = DATA / "gpu" / "dlrm_8rank"
H100 = DATA / "gpu" / "h100_bert_small.json.gz"


@pytest.fixture(scope="module")
def eight_rank_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("trace_report") / "dlrm"
    assert main(["report", "--trace", str(EIGHT_RANKS), "--out", str(out)]) == 0
    return out


@pytest.mark.timeout(120)
def test_the_template_runs_and_the_page_holds_every_section_offline(eight_rank_report):
    nb = json.loads((eight_rank_report / "report.ipynb").read_text(encoding="utf-8"))
    assert not [o for c in nb["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
    html = (eight_rank_report / "report.html").read_text(encoding="utf-8")
    for heading in (
        "Trace summary",
        "Hypotheses",
        "Time by module and source line",
        "Kernels",
        "CPU ops",
        "Time per rank",
        "Timeline",
        "Roofline",
        "Communication and compute overlap",
        "Stragglers",
        "Launches",
        "Copies",
        "Synchronisation",
        "Environment",
        "distributedInfo",
        "Device properties",
    ):
        assert f">{heading}<" in html or f">{heading}</" in html, heading
    assert html.count('class="workbench-chart"') >= 6
    assert html.count("if (!window.vegaEmbed) { (function") == 1  # vega inlined once per page
    assert external_sources(html) == []
    assert "Tesla V100-SXM2-32GB" in html and "nccl" in html
    # no Python events in these rank files: the attribution section says why, in one sentence
    assert (
        "No time by module or source line: the trace has no Python events" in html or "report on its file alone" in html
    )


@pytest.mark.timeout(120)
def test_summary_json_says_what_was_loaded_and_the_categories(eight_rank_report):
    s = json.loads((eight_rank_report / "summary.json").read_text(encoding="utf-8"))
    assert s["kind"] == "trace" and s["ranks"] == list(range(8)) and len(s["files"]) == 8
    assert s["devices"] == ["Tesla V100-SXM2-32GB"] and s["has_gpu"]
    assert s["paths"] == [str(EIGHT_RANKS.resolve())]
    assert s["categories"] == sorted({h["category"] for h in s["hypotheses"]}) and "communication" in s["categories"]
    assert "timing" not in s and "samples" not in s  # nothing for a gate


@pytest.fixture(scope="module")
def eight():
    return wb.load_trace(EIGHT_RANKS)


def test_per_rank_tables_are_one_table_worst_rank_first(eight):
    idle = tr.idle_table(eight)
    totals = idle.groupby("rank", sort=False)["idle_us"].sum()
    assert list(totals.index) == list(totals.sort_values(ascending=False).index)  # worst rank first
    assert idle["rank"].nunique() == 8
    html = tr.temporal_html(eight)
    assert html.count("<table") == 1
    t = eight.temporal_breakdown().table.sort_values("idle_pct", ascending=False)
    first_row = html.split("<tbody><tr>")[1]
    assert first_row.startswith(f"<td class='wb-num'>{int(t['rank'].iloc[0])}</td>")


def test_kernels_are_folded_over_ranks_with_the_worst_rank():
    trace = wb.load_trace(EIGHT_RANKS)
    k = tr.kernel_table(trace)
    per_rank = trace.kernel_breakdown().table
    assert len(k) == per_rank.groupby(["kernel_type", "name"]).ngroups
    assert k["sum_us"].is_monotonic_decreasing
    assert k["sum_us"].sum() == pytest.approx(per_rank["sum_us"].sum())
    top = k.iloc[0]
    rows = per_rank[(per_rank["name"] == top["name"]) & (per_rank["kernel_type"] == top["kernel_type"])]
    assert top["worst_rank"] == rows.loc[rows["sum_us"].idxmax(), "rank"] and top["ranks"] == 8


def test_long_tables_are_capped_and_say_how_many_rows_are_hidden():
    table = pd.DataFrame({"rank": range(100), "idle_us": range(100)})
    html = tr.table_html(tr.worst_ranks_first(table, "idle_us"), max_rows=10, hidden_what="ranks")
    assert html.count("<tr>") == 11 and "90 more ranks not shown (of 100)" in html
    assert html.index(">99<") < html.index(">98<")


def test_environment_folds_identical_devices_and_distributed_info(eight):
    dev = tr.devices_table(eight)
    assert list(dev.columns) == ["property", "ranks 0-7 · devices 0-7"]
    dist = tr.distributed_table(eight)
    assert len(dist) == 1 and dist.iloc[0]["ranks"] == "0-7" and dist.iloc[0]["world_size"] == 8
    assert tr._ranks_text([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8"


def test_a_single_h100_trace_gets_every_section_without_error():
    trace = wb.load_trace(H100)
    for build in (
        tr.summary_html,
        tr.kernels_html,
        tr.ops_html,
        tr.temporal_html,
        tr.idle_html,
        tr.overlap_html,
        tr.stragglers_html,
        tr.launch_html,
        tr.copies_html,
        tr.syncs_html,
        tr.steps_html,
        tr.hypotheses_html,
        tr.attribution_html,
        tr.environment_html,
        tr.kernel_roofline_html,
    ):
        assert isinstance(build(trace), str)
    assert "NVIDIA H100 80GB HBM3" in tr.environment_html(trace)
    assert "One rank" in tr.stragglers_html(trace)
    assert "single-process" in tr.environment_html(trace) or "distributedInfo" in tr.environment_html(trace)


def test_text_from_the_trace_is_escaped():
    hostile = "<script>alert(1)</script>"
    html = tr.table_html(pd.DataFrame({"name": [hostile], "sum_us": [1.0]}))
    assert "<script>" not in html and "&lt;script&gt;" in html


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--trace", "/no/such/trace.json"], "does not exist"),
        (["--trace", str(DATA / "bad" / "empty_file.json")], ""),
        (["--trace", str(H100), "--compare-to", "/tmp"], "nothing to gate"),
    ],
)
def test_bad_input_exits_2_before_any_notebook_runs(tmp_path, capsys, argv, message):
    out = tmp_path / "out"
    assert main(["report", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "error" in err.lower() and message in err
    assert not out.exists()


def test_a_folder_without_traces_is_bad_input(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("not a trace")
    assert main(["report", "--trace", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    assert "no .json" in capsys.readouterr().err


def test_the_idle_chart_draws_the_most_idle_ranks_and_says_so(eight, monkeypatch):
    monkeypatch.setattr(tr, "MAX_CHART_RANKS", 3)
    assert "draws the 3 most idle of the 8 ranks" in tr.idle_html(eight)
    idle = eight.idle_breakdown().table
    chart = tr.rank_charts(eight)[-1]
    drawn = {int(v.split()[1]) for v in chart.data["lane"]} if hasattr(chart, "data") else set()
    worst = set(idle.groupby("rank")["idle_us"].sum().sort_values(ascending=False).index[:3])
    assert drawn == worst
