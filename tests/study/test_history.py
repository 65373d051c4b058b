"""Per-cell history: entries appended under a key, read back per key, and change points by a
step fit with a noise model, on seeded synthetic series."""

import json

import numpy as np
import pytest

from tests.study.conftest import ENVIRONMENT, recorded_run
from workbench.errors import StudyError
from workbench.study import StudyWarning, append_run, change_points, history_key, load_history
from workbench.study.history import HistoryEntry


def _series(levels, noise, seed, n=20):
    rng = np.random.default_rng(seed)
    out = []
    for i, level in enumerate(levels):
        m = level * float(np.exp(rng.normal(0, noise)))
        out.append(HistoryEntry(key="k", time=f"t{i}", median_ms=m, spread_ms=m * noise * 1.349, n=n))
    return out


@pytest.mark.parametrize("noise", [0.01, 0.03, 0.05])
def test_four_runs_then_four_runs_40_percent_slower_give_one_change_point_at_index_4(noise):
    for seed in range(10):
        assert change_points(_series([10.0] * 4 + [14.0] * 4, noise, seed)) == [4], seed


def test_identical_runs_give_no_change_point_in_at_least_19_of_20_seeded_series():
    found = [
        change_points(_series([10.0] * n, 0.03, seed), seed=seed) for seed, n in zip(range(20), [8, 12, 16, 24] * 5)
    ]
    assert sum(1 for f in found if f) <= 1, found


def test_two_shifts_are_both_found_and_a_single_outlier_is_not_a_change():
    steps = _series([10.0] * 6 + [14.0] * 6 + [9.0] * 6, 0.02, 3)
    assert change_points(steps) == [6, 12]
    spike = _series([10.0] * 5 + [20.0] + [10.0] * 5, 0.01, 4)
    assert 5 not in change_points(spike)


def test_a_shift_smaller_than_the_runs_own_noise_is_not_a_change():
    # medians that happen to sit still, runs whose samples scatter by 50%: a 3% step is noise
    entries = [
        HistoryEntry("k", f"t{i}", m, spread_ms=m * 0.5 * 1.349, n=5)
        for i, m in enumerate([10.0, 10.01, 9.99, 10.0, 10.3, 10.31, 10.29, 10.3])
    ]
    assert change_points(entries) == []
    assert change_points([e.median_ms for e in entries]) == [4]  # plain medians: no noise model to hold


def test_change_points_are_deterministic_and_validate_their_options():
    s = _series([10.0] * 4 + [14.0] * 4, 0.03, 1)
    assert change_points(s, seed=5) == change_points(s, seed=5)
    assert change_points(s[:3]) == []
    with pytest.raises(StudyError):
        change_points(s, alpha=2)
    with pytest.raises(StudyError, match="positive finite median"):
        change_points([1.0, 2.0, -1.0, 3.0])


def test_append_and_load_under_a_key(tmp_path):
    path = tmp_path / "workbench-history.jsonl"
    key = history_key("x = f(y)", ENVIRONMENT, notebook="a.ipynb")
    for i, median in enumerate([2.0] * 4 + [2.8] * 4):
        append_run(path, recorded_run("cell", median, seed=i), key, notebook="a.ipynb")
    h = load_history(path, key)
    assert len(h.entries) == 8 and h.change_points == (4,)
    assert h.entries[0].median_ms == pytest.approx(2.0, rel=0.05) and h.entries[0].spread_ms > 0
    assert h.entries[0].notebook == "a.ipynb" and h.entries[0].n == 20
    assert "change" in h.to_text()
    assert type(h).from_dict(json.loads(json.dumps(h.to_dict()))) == h
    first = json.loads(path.read_text().splitlines()[0])
    assert first == {"format": "workbench-history", "version": 1}
    assert load_history(tmp_path / "none.jsonl", key).entries == ()


def test_the_key_holds_source_environment_and_notebook():
    k = history_key("a", ENVIRONMENT)
    assert history_key("a", {**ENVIRONMENT, "recorded_at": "later", "argv0": "other"}) == k  # volatile fields out
    assert history_key("b", ENVIRONMENT) != k
    assert history_key("a", {**ENVIRONMENT, "host": {**ENVIRONMENT["host"], "cpu_model": "other"}}) != k
    assert history_key("a", ENVIRONMENT, notebook="x.ipynb") != k


def test_a_history_file_shared_by_two_notebooks_keeps_them_apart(tmp_path):
    path = tmp_path / "shared.jsonl"
    ka = history_key("same cell", ENVIRONMENT, notebook="a.ipynb")
    kb = history_key("same cell", ENVIRONMENT, notebook="b.ipynb")
    assert ka != kb
    append_run(path, recorded_run("cell", 2.0), ka, notebook="a.ipynb")
    append_run(path, recorded_run("cell", 5.0), kb, notebook="b.ipynb")
    assert [e.notebook for e in load_history(path, ka).entries] == ["a.ipynb"]
    assert [e.notebook for e in load_history(path, kb).entries] == ["b.ipynb"]
    # a key built without the notebook, written by both: the second is refused, nothing written
    bare = history_key("same cell", ENVIRONMENT)
    append_run(path, recorded_run("cell", 2.0), bare, notebook="a.ipynb")
    before = path.read_bytes()
    with pytest.raises(StudyError, match=r"already used by \['a.ipynb'\].*notebook=\.\.\."):
        append_run(path, recorded_run("cell", 5.0), bare, notebook="b.ipynb")
    assert path.read_bytes() == before


def test_a_corrupt_line_a_newer_format_and_a_file_that_is_not_a_history(tmp_path):
    path = tmp_path / "h.jsonl"
    key = history_key("c", ENVIRONMENT)
    for i in range(3):
        append_run(path, recorded_run("cell", 2.0, seed=i), key)
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:2] + ['{"entry": {"key": "' + key + '", "median'] + lines[2:]) + "\n")
    with pytest.warns(StudyWarning, match=r"line 3: not valid JSON"):
        h = load_history(path, key)
    assert len(h.entries) == 3  # every whole entry, before and after the damaged line
    newer = tmp_path / "newer.jsonl"
    newer.write_text(json.dumps({"format": "workbench-history", "version": 7}) + "\n")
    with pytest.raises(StudyError, match="newer workbench"):
        load_history(newer, key)
    with pytest.raises(StudyError, match="newer workbench"):
        append_run(newer, recorded_run("cell", 2.0), key)
    assert newer.read_text().count("\n") == 1
    other = tmp_path / "other.jsonl"
    other.write_text('{"hello": 1}\n')
    with pytest.raises(StudyError, match="not a history file"):
        load_history(other, key)
    with pytest.raises(StudyError, match="non-empty string key"):
        append_run(path, recorded_run("cell", 2.0), "")
