"""Writing a result's charts to files: the same charts the notebook shows, one file per format."""

import json
from pathlib import Path

import pytest

from workbench import charts
from workbench.api.trace import load_trace
from workbench.cli import main
from workbench.errors import InvalidArgumentError

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu"


@pytest.fixture(scope="module")
def trace():
    return load_trace(DATA / "a100_alexnet.json.gz")


def test_trace_charts_become_svg_and_png_files_in_display_order(trace, tmp_path):
    paths = trace.save_charts(tmp_path / "out", formats=("svg", "png"))
    shown = charts.result_charts(trace)
    assert len(paths) == 2 * len(shown)
    names = [p.name for p in paths]
    assert (
        names[0].startswith("01-top-") and "ops" in names[0] and names[0].endswith(".svg") and names[1].endswith(".png")
    )
    assert any("timeline" in n for n in names) and any("roofline" in n for n in names)
    for p in paths:
        data = p.read_bytes()
        assert data.startswith(b"\x89PNG") if p.suffix == ".png" else b"<svg" in data[:200]
    timeline_svg = next(p for p in paths if "timeline" in p.name and p.suffix == ".svg").read_text()
    assert timeline_svg.count("<path") > 20  # bars drawn, not an empty frame


def test_a_comparison_writes_its_samples_and_speedup_chart(tmp_path):
    import torch

    import workbench as wb

    x = torch.randn(20_000)
    cmp = wb.compare(
        {
            "eager": lambda t: t * 2 + 1,
            "rewrite": lambda t: torch.addcmul(torch.ones_like(t), t, torch.full_like(t, 2.0)),
        },
        inputs=(x,),
        budget_s=0.3,
        min_rounds=10,
        max_rounds=20,
        profile=False,
    )
    paths = charts.save_charts(cmp, tmp_path, formats=("svg",))
    assert len(paths) == len(charts.result_charts(cmp)) >= 1
    svg = paths[0].read_text()
    assert "eager" in svg and "rewrite" in svg and svg.count("<path") > 5


def test_a_list_of_charts_is_accepted_and_anything_else_is_a_clear_error(tmp_path):
    class Fake:  # neither a run, a trace nor a comparison
        pass

    chart = charts.message_chart("hello <b>", title="Note: ∑ & co")
    [path] = charts.save_charts([chart], tmp_path, formats="json")
    assert path.name == "01-note-co.json" and json.loads(path.read_text())["title"] == "Note: ∑ & co"
    with pytest.raises(InvalidArgumentError, match="ProfileRun, a Trace, a Comparison"):
        charts.save_charts(Fake(), tmp_path)


@pytest.mark.parametrize("formats", [("gif",), ()])
def test_unknown_or_no_format_is_a_clear_error(tmp_path, formats):
    with pytest.raises(InvalidArgumentError, match="chart formats must be among"):
        charts.save_charts([charts.message_chart("x")], tmp_path, formats=formats)


def test_a_file_where_the_folder_should_be_is_a_clear_error(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(InvalidArgumentError, match="it is a file"):
        charts.save_charts([charts.message_chart("x")], tmp_path / "f")


def test_cli_analyze_writes_the_charts(tmp_path, capsys):
    assert (
        main(
            [
                "analyze",
                str(DATA / "a100_alexnet.json.gz"),
                "--charts",
                str(tmp_path / "c"),
                "--chart-format",
                "svg,html",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    written = sorted((tmp_path / "c").iterdir())
    assert f"wrote {len(written)} chart file(s)" in out and len(written) >= 8
    assert {p.suffix for p in written} == {".svg", ".html"}
