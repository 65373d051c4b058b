"""``record_run`` (where the history goes, the key), ``workbench history`` (listing keys, one
key's runs and change points, the trend chart) and ``history_chart``."""

from __future__ import annotations

import json

import pytest

from tests.study.conftest import recorded_run
from workbench.cli import main
from workbench.study.history import HISTORY_ENV, NOTEBOOK_FILE, default_history_path, load_history, record_run


@pytest.fixture
def no_env(monkeypatch):
    monkeypatch.delenv(HISTORY_ENV, raising=False)


def _eight(path, source="x = f(y)", notebook=None):
    h = None
    for i, median in enumerate([2.0] * 4 + [2.8] * 4):
        h = record_run(recorded_run("cell[3]", median, seed=i), source=source, notebook=notebook, path=path)
    return h


def test_record_run_writes_beside_the_notebook_or_here(tmp_path, monkeypatch, no_env):
    monkeypatch.chdir(tmp_path)
    assert default_history_path() == tmp_path / NOTEBOOK_FILE  # the one default: what %%gpuprofile writes
    nb = tmp_path / "nbs" / "analysis.ipynb"
    assert default_history_path(str(nb)) == (tmp_path / "nbs" / NOTEBOOK_FILE)
    plain = record_run(recorded_run("cell", 2.0), source="a = 1")
    assert (tmp_path / NOTEBOOK_FILE).is_file() and len(plain.entries) == 1
    beside = record_run(recorded_run("cell", 2.0), source="a = 1", notebook=str(nb))
    assert (tmp_path / "nbs" / NOTEBOOK_FILE).is_file() and beside.entries[0].notebook == "analysis.ipynb"
    assert beside.key != plain.key  # the notebook is part of the key
    monkeypatch.setenv(HISTORY_ENV, str(tmp_path / "ci.jsonl"))
    record_run(recorded_run("cell", 2.0), source="a = 1")
    assert (tmp_path / "ci.jsonl").is_file()


def test_workbench_history_lists_the_keys_and_shows_one_with_its_change_point(tmp_path, capsys, no_env):
    path = tmp_path / "h.jsonl"
    h = _eight(path)
    record_run(recorded_run("other", 5.0), source="z = 2", path=path)
    assert main(["history", str(path)]) == 0
    out = capsys.readouterr().out
    assert "2 key(s)" in out and h.key in out and "8 run(s)" in out and "change points: 4" in out
    assert main(["history", str(path), "--key", h.key[:6]]) == 0
    out = capsys.readouterr().out
    assert "8 runs, change points at [4]" in out and "<- change" in out
    chart = tmp_path / f"history-{h.key[:8]}.html"
    assert f"chart: {chart}" in out and chart.is_file()
    page = chart.read_text()
    assert "vega" in page and "http://" not in page.split("<body>")[1] and "https://cdn" not in page
    svg = tmp_path / "trend.svg"
    assert main(["history", str(path), "--key", h.key, "--chart", str(svg)]) == 0
    assert svg.read_text().lstrip().startswith("<svg")


def test_workbench_history_bad_input(tmp_path, capsys, no_env, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["history"]) == 2
    assert "no history file" in capsys.readouterr().err
    path = tmp_path / "h.jsonl"
    a = record_run(recorded_run("a", 2.0), source="a", path=path)
    record_run(recorded_run("b", 2.0), source="b", path=path)
    assert main(["history", str(path), "--key", "nope"]) == 2
    assert "no key 'nope'" in capsys.readouterr().err
    assert main(["history", str(path), "--key", a.key, "--chart", str(tmp_path / "x.txt")]) == 2
    newer = tmp_path / "newer.jsonl"
    newer.write_text(json.dumps({"format": "workbench-history", "version": 5}) + "\n")
    assert main(["history", str(newer)]) == 2
    assert "newer workbench" in capsys.readouterr().err
    assert main(["history", str(tmp_path)]) == 2  # a folder without a history file


def test_history_chart_marks_the_change_points():
    from workbench.charts.history import history_chart, history_table
    from workbench.errors import InvalidArgumentError
    from workbench.study.history import History, HistoryEntry

    entries = tuple(HistoryEntry("k", f"t{i}", m, spread_ms=0.1, n=10) for i, m in enumerate([2.0] * 4 + [2.8] * 4))
    history = History("k", entries, (4,))
    table = history_table(history)
    assert list(table["change"]) == [False] * 4 + [True] + [False] * 3
    assert list(table["segment"]) == [0] * 4 + [1] * 4
    spec = history_chart(history).to_dict()
    marks = [layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"] for layer in spec["layer"]]
    assert "rule" in marks and "errorbar" in marks and "line" in marks
    assert "change at run 4" in json.dumps(spec["title"])
    flat = history_chart(History("k", entries[:4], ())).to_dict()
    assert "rule" not in json.dumps([layer["mark"] for layer in flat["layer"]])
    with pytest.raises(InvalidArgumentError):
        history_chart(History("k", (), ()))
    with pytest.raises(InvalidArgumentError):
        history_chart([1, 2])


def test_load_history_of_the_cli_is_the_same_as_the_library(tmp_path, no_env):
    path = tmp_path / "h.jsonl"
    h = _eight(path)
    assert load_history(path, h.key) == h


def test_a_over_a_through_record_run_gives_no_change_point_in_at_least_19_of_20_seeded_series(tmp_path, no_env):
    import numpy as np

    flagged = []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        path = tmp_path / f"aa-{seed}.jsonl"
        h = None
        for i in range(8):
            median = 2.0 * float(np.exp(rng.normal(0, 0.02)))  # the same cell, run-to-run noise only
            h = record_run(recorded_run("cell", median, seed=100 * seed + i), source="same cell", path=path)
        assert len(h.entries) == 8
        flagged.append(bool(h.change_points))
    assert sum(flagged) <= 1, flagged


def test_workbench_history_of_a_notebook_reads_the_file_beside_it(tmp_path, capsys, no_env):
    nb = tmp_path / "work" / "analysis.ipynb"
    h = record_run(recorded_run("cell[1]", 2.0), source="y = g(x)", notebook=str(nb))
    assert main(["history", str(nb), "--no-chart"]) == 0
    out = capsys.readouterr().out
    assert f"history {h.key}: 1 runs" in out and "chart:" not in out
