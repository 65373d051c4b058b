"""Per-cell history through ``%%gpuprofile`` in a real IPython shell: every run appended under
the cell's key, ``run.history`` with its change points, ``--no-history``, two notebooks sharing
one file, and a history that cannot be written (a warning, never a failed profile).

The cell sleeps for ``DELAY_S``: the same source every time (so the same key), its time set from
outside the cell. 10 ms then 14 ms (40 % slower) is far beyond a loaded machine's sleep jitter
(a few hundred microseconds), so the change is deterministic."""

from __future__ import annotations

import json
import warnings

import pytest

from workbench.study.history import HISTORY_ENV, load_history

CELL = "%%gpuprofile -T -w 1 -r 9 -q\nimport time\ntime.sleep(DELAY_S)\n"


@pytest.fixture
def history_file(tmp_path, monkeypatch):
    path = tmp_path / "history.jsonl"
    monkeypatch.setenv(HISTORY_ENV, str(path))
    return path


def _profile(ip, run_cell, cell=CELL):
    result = run_cell(cell)
    assert result.success, result.error_in_exec
    return ip.user_ns["_gpuprofile"]


def test_four_runs_then_four_40_percent_slower_give_one_change_point_at_the_fifth(ip, run_cell, history_file):
    ip.user_ns.pop("__session__", None)
    ip.user_ns["DELAY_S"] = 0.010
    runs = [_profile(ip, run_cell) for _ in range(4)]
    ip.user_ns["DELAY_S"] = 0.014
    runs += [_profile(ip, run_cell) for _ in range(4)]
    history = runs[-1].history
    assert len(history.entries) == 8
    assert history.change_points == (4,), history.to_text()
    medians = [e.median_ms for e in history.entries]
    assert all(9.5 < m < 13.0 for m in medians[:4]) and all(13.5 < m < 18.0 for m in medians[4:]), medians
    assert [len(r.history.entries) for r in runs] == list(range(1, 9))
    # the file holds the same, readable by key from a fresh reader
    again = load_history(history_file, history.key)
    assert [e.median_ms for e in again.entries] == medians and again.change_points == (4,)
    assert json.loads(history_file.read_text().splitlines()[0])["format"] == "workbench-history"


def test_no_history_leaves_the_file_alone(ip, run_cell, history_file):
    ip.user_ns["DELAY_S"] = 0.001
    _profile(ip, run_cell)
    before = history_file.read_bytes()
    run = _profile(ip, run_cell, CELL.replace("-q", "-q --no-history"))
    assert history_file.read_bytes() == before
    assert run.history is None


def test_two_notebooks_sharing_one_file_keep_their_own_histories(ip, run_cell, history_file):
    ip.user_ns["DELAY_S"] = 0.001
    try:
        ip.user_ns["__session__"] = "/work/a/first.ipynb"
        a = _profile(ip, run_cell)
        ip.user_ns["__session__"] = "/work/b/second.ipynb"
        b = _profile(ip, run_cell)
        b2 = _profile(ip, run_cell)
    finally:
        ip.user_ns.pop("__session__", None)
    assert a.history.key != b.history.key
    assert [e.notebook for e in a.history.entries] == ["first.ipynb"]
    assert [e.notebook for e in b2.history.entries] == ["second.ipynb", "second.ipynb"]
    assert len(load_history(history_file, a.history.key).entries) == 1


def test_a_history_that_cannot_be_written_is_a_warning_not_a_failed_profile(ip, run_cell, history_file):
    history_file.write_text(json.dumps({"format": "workbench-history", "version": 99}) + "\n")
    ip.user_ns["DELAY_S"] = 0.001
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = _profile(ip, run_cell)
    assert run.timing.n == 9
    assert any("not added to its history" in str(w.message) and "newer workbench" in str(w.message) for w in caught), [
        str(w.message) for w in caught
    ]
    assert history_file.read_text().count("\n") == 1  # nothing rewritten


def work():
    return sum(range(2000))


def test_wb_profile_records_the_callables_history_and_history_false_does_not(history_file):
    import workbench as wb

    first = wb.profile(work, warmup=1, repeat=5, trace=False)
    second = wb.profile(work, warmup=1, repeat=5, trace=False)
    assert len(first.history.entries) == 1 and len(second.history.entries) == 2
    assert second.history.key == first.history.key
    before = history_file.read_bytes()
    off = wb.profile(work, warmup=1, repeat=5, trace=False, history=False)
    assert off.history is None and history_file.read_bytes() == before
    history_file.write_text(json.dumps({"format": "workbench-history", "version": 99}) + "\n")
    with pytest.warns(UserWarning, match="not added to its history"):
        unwritten = wb.profile(work, warmup=1, repeat=5, trace=False)
    assert unwritten.history is None and unwritten.timing.n == 5
