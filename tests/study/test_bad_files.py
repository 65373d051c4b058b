"""Bad files a study or a history reads again (issue 30, items 2, 4 and 7): one test per kind of bad
input. A wrong-typed, truncated or binary line is skipped with a StudyWarning naming the file and
the line, and the study (open, ledger, a round, the report's sections) or the history (load,
keys, the next profile) goes on; a path that is not a regular file, or too big, is refused
before it is opened; a folder that cannot be written is said before any profile runs; accept
takes only the code its round tested. Nothing is rewritten."""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import warnings
from pathlib import Path

import pytest

from tests.study.conftest import ENVIRONMENT, FAKE, _timer, recorded_run
from workbench.cli import main
from workbench.errors import StudyError
from workbench.study import (
    Study,
    StudyWarning,
    append_run,
    history_key,
    history_keys,
    load_history,
    record_run,
    records,
)
from workbench.study.history import record_profile


# -- helpers ------------------------------------------------------------------------------------
def _read(study_folder):
    """Everything that reads the study: open, the ledger, the text, the report's sections."""
    from workbench.report.study_report import (
        baselines_html,
        bottlenecks_html,
        decisions_html,
        ledger_html,
        open_study,
        overview_html,
        rounds_html,
        study_summary,
    )

    study, read_warnings = open_study(study_folder)
    for message in read_warnings:  # said again, for pytest.warns
        warnings.warn(message, StudyWarning)
    study.ledger, study.rounds, study.hypotheses, study.to_text()
    json.dumps(study_summary(study), default=str)
    for section in (baselines_html, bottlenecks_html, decisions_html, ledger_html, rounds_html):
        section(study)
    overview_html(study, read_warnings)
    return study, read_warnings


def _with_line(path: Path, line: bytes, at: int | None = None) -> bytes:
    lines = path.read_bytes().splitlines()
    lines.insert(len(lines) if at is None else at, line)
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path.read_bytes()


def _ledger_line(study, **change):
    first = json.loads((study.folder / "ledger.jsonl").read_text().splitlines()[0])
    change = {k: v(first) if callable(v) else v for k, v in change.items()}
    return json.dumps({**first, **change}).encode()


# -- item 2: a study's ledger and rounds --------------------------------------------------------
BAD_LEDGER = {
    "a list as key (unhashable)": {"key": ["memory_bound"]},
    "a list as baseline_id": {"baseline_id": ["b-1"]},
    "a string round": {"round": "two"},
    "an overflowing round": {"round": 1e999},
    "a hypothesis that is a string": {"hypothesis": "fused"},
    "a hypothesis with a list title": {"hypothesis": lambda first: {**first["hypothesis"], "title": ["x"]}},
    "a hypothesis with a string stake": {"hypothesis": lambda first: {**first["hypothesis"], "time_at_stake_ms": "1"}},
    "evidence variants that are strings": {"event": "tested", "evidence_scope": {"variants": ["fused"]}},
}


@pytest.mark.parametrize("kind", list(BAD_LEDGER))
def test_a_wrong_typed_ledger_line_is_skipped_with_a_warning_and_the_study_goes_on(after_round, kind):
    study, base, mod, _ = after_round
    path = study.folder / "ledger.jsonl"
    before = _with_line(path, _ledger_line(study, **BAD_LEDGER[kind]), at=1)
    with pytest.warns(StudyWarning, match=r"ledger\.jsonl', line 2: not a readable record"):
        again, read_warnings = _read(study.folder)
    assert any("line 2" in w for w in read_warnings)
    assert {e.category: e.status for e in again.ledger} == {"memory_bound": "supported", "launch_overhead": "rejected"}
    with pytest.warns(StudyWarning):
        rnd = Study.open(study.folder).run_round({"fused": mod.fused}, timer=_timer(fused=1.0), **FAKE)
    assert rnd.index == 2
    assert path.read_bytes().startswith(before)  # appended to, never rewritten


BAD_ROUNDS = {
    "a string round number": lambda r: {**r, "round": "abc"},
    "an overflowing round number": lambda r: {**r, "round": 1e999},
    "a boolean round number": lambda r: {**r, "round": True},
    "results that are strings": lambda r: {
        **r,
        "outcome": {**r["outcome"], "summary": {**r["outcome"]["summary"], "results": ["fused"]}},
    },
    "a speedup that is a string": lambda r: {
        **r,
        "outcome": {
            **r["outcome"],
            "summary": {
                **r["outcome"]["summary"],
                "results": [{**x, "speedup": "fast"} for x in r["outcome"]["summary"]["results"]],
            },
        },
    },
    "a decision that is a list": lambda r: {
        **r,
        "outcome": {
            **r["outcome"],
            "decisions": {k: {**v, "decision": ["keep"]} for k, v in r["outcome"]["decisions"].items()},
        },
    },
    "an outcome of another round": lambda r: {**r, "outcome": {**r["outcome"], "index": 7}},
}


@pytest.mark.parametrize("kind", list(BAD_ROUNDS))
def test_a_wrong_typed_rounds_line_is_skipped_with_a_warning_and_the_study_goes_on(after_round, kind):
    study, base, mod, _ = after_round
    path = study.folder / "rounds.jsonl"
    planned, closed = [json.loads(x) for x in path.read_text().splitlines()]
    path.write_text(json.dumps(planned) + "\n" + json.dumps(BAD_ROUNDS[kind](closed)) + "\n")
    before = path.read_bytes()
    with pytest.warns(StudyWarning, match=r"rounds\.jsonl', line 2: not a readable record"):
        again, _ = _read(study.folder)
    assert again.rounds == ()
    with pytest.warns(StudyWarning):
        rnd = Study.open(study.folder).run_round({"fused": mod.fused}, timer=_timer(fused=1.0), **FAKE)
    assert rnd.index == 2  # round 1 was planned: its number is not reused
    assert path.read_bytes().startswith(before)


def test_a_wrong_typed_baselines_line_is_skipped_with_a_warning(after_round):
    study, base, mod, _ = after_round
    path = study.folder / "baselines.jsonl"
    good = json.loads(path.read_text().splitlines()[0])
    for bad in (
        {"index": 1e999},
        {"index": "one"},
        {"median_ms": float("nan")},
        {"median_ms": -1},
        {"hypotheses": [{"category": "memory_bound"}]},
        {"accepted_from": {"round": "x"}},
    ):
        _with_line(path, json.dumps({**good, "baseline_id": "b-bad", **bad}).encode())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again, _ = _read(study.folder)
    said = [str(w.message) for w in caught if issubclass(w.category, StudyWarning)]
    assert [int(m.split("line ")[1].split(":")[0]) for m in said] == [2, 3, 4, 5, 6, 7], said
    assert [b.baseline_id for b in again.baselines] == [base.baseline_id]


def test_truncated_and_binary_lines_are_skipped_with_a_warning_naming_them(after_round):
    study, base, mod, _ = after_round
    path = study.folder / "ledger.jsonl"
    _with_line(path, b"\x00\xff\xfe binary \x80", at=1)
    _with_line(path, b'{"event": "tested", "key": "memory_bound:cpu', at=2)
    _with_line(path, b"[1, 2, 3]", at=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again, _ = _read(study.folder)
    said = [str(w.message) for w in caught if issubclass(w.category, StudyWarning)]
    assert any("line 2: not valid JSON (binary" in m for m in said), said
    assert any("line 3: not valid JSON" in m for m in said), said
    assert any("line 4: a JSON list, not an object" in m for m in said), said
    assert len(again.ledger) == 2


def test_many_bad_lines_are_all_said_in_a_bounded_number_of_warnings(after_round):
    study, base, mod, _ = after_round
    path = study.folder / "ledger.jsonl"
    path.write_bytes(path.read_bytes() + b"not json\n" * 500)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Study.open(study.folder)
    said = [str(w.message) for w in caught if issubclass(w.category, StudyWarning)]
    assert len(said) == records.WARN_LINES + 1 and "480 more unreadable lines" in said[-1]


@pytest.mark.parametrize("name", ["ledger.jsonl", "rounds.jsonl", "baselines.jsonl"])
def test_a_study_file_that_is_a_folder_is_a_clear_error(started, name):
    study, base, mod = started
    path = study.folder / name
    if path.exists():
        path.unlink()
    path.mkdir()
    with pytest.raises(StudyError, match=rf"{name}' is a folder, not a regular file"):
        Study.open(study.folder)


def test_a_study_header_that_is_a_fifo_or_dev_zero_is_refused_before_opening(started, tmp_path):
    study, base, mod = started
    header = study.folder / "study.json"
    header.unlink()
    os.mkfifo(header)
    with pytest.raises(StudyError, match=r"is a FIFO \(named pipe\), not a regular file"):
        Study.open(study.folder)
    header.unlink()
    header.symlink_to("/dev/zero")
    with pytest.raises(StudyError, match=r"a character device \(through a symlink\)"):
        Study.open(study.folder)


def test_a_file_over_the_size_cap_is_refused_before_it_is_read(after_round, monkeypatch):
    study, base, mod, _ = after_round
    monkeypatch.setattr(records, "MAX_BYTES", 1000)
    with pytest.raises(StudyError, match=r"over the 1000 bytes"):
        Study.open(study.folder)


def test_a_round_number_recorded_twice_by_an_older_workbench_keeps_both_rounds(after_round):
    study, base, mod, _ = after_round
    path = study.folder / "rounds.jsonl"
    again = Study.open(study.folder)
    again.run_round({"fused": mod.fused}, timer=_timer(fused=1.0), **FAKE)
    # as two processes did before rounds were numbered under a lock: the second round 2 as well
    lines = path.read_text().splitlines()
    duplicate = [ln for ln in lines if json.loads(ln)["round"] == 2]
    path.write_text("\n".join(lines + duplicate) + "\n")
    with pytest.warns(StudyWarning, match=r"lines 4 and 6: round 2 is recorded twice.*both are kept"):
        reopened = Study.open(study.folder)
    assert [r.index for r in reopened.rounds] == [1, 2, 2]
    assert reopened.run_round({"fused": mod.fused}, timer=_timer(fused=1.0), **FAKE).index == 3


# -- item 4: accept(fn=...) takes only the code its round tested ----------------------------------
def test_accept_with_code_the_round_did_not_test_is_refused_or_recorded_as_untested(after_round, lab):
    study, base, mod, rnd = after_round
    reopened = Study.open(study.folder)  # the round's callables are not in this process
    before = {p.name: p.read_bytes() for p in study.folder.glob("*.jsonl")}
    with pytest.raises(StudyError, match=r"not the code round 1 tested as 'fused'.*run a round with it first"):
        reopened.accept("fused", fn=mod.slower)
    with pytest.raises(StudyError, match="untested=True"):
        reopened.accept("fused", fn=lambda x: x)
    assert {p.name: p.read_bytes() for p in study.folder.glob("*.jsonl")} == before
    assert lab.profiled == ["base"]  # nothing was profiled
    untested = reopened.accept("fused", fn=mod.slower, untested=True)
    assert untested.accepted_from["untested"] is True and untested.accepted_from["speedup"] is None
    assert "not the one round 1 tested" in untested.accepted_from["reason"]


def test_accept_with_the_tested_code_carries_the_rounds_speedup(after_round):
    study, base, mod, rnd = after_round
    new = Study.open(study.folder).accept("fused", fn=mod.fused)
    assert new.accepted_from["speedup"] == pytest.approx(rnd.summary.results[0]["speedup"])
    assert "untested" not in new.accepted_from


def test_accept_on_a_round_recorded_without_source_hashes_asks_for_untested(after_round):
    study, base, mod, _ = after_round
    path = study.folder / "rounds.jsonl"
    old = []
    for line in path.read_text().splitlines():  # as an older workbench wrote it
        rec = json.loads(line)
        for v in rec.get("variants", []) + (rec.get("outcome") or {}).get("summary", {}).get("variants", []):
            v.pop("source_hash", None), v.pop("qualname", None)
        old.append(json.dumps(rec))
    path.write_text("\n".join(old) + "\n")
    reopened = Study.open(study.folder)  # an old folder still opens
    assert [r.index for r in reopened.rounds] == [1]
    with pytest.raises(StudyError, match="did not record the code"):
        reopened.accept("fused", fn=mod.fused)
    assert reopened.accept("fused", fn=mod.fused, untested=True).accepted_from["untested"] is True


# -- item 7: a read-only study folder, and the history ---------------------------------------------
@contextlib.contextmanager
def _read_only(folder: Path):
    """The folder made unwritable: chmod, and where this runs as root (which chmod does not stop)
    the immutable flag; skipped where neither holds."""
    os.chmod(folder, 0o555)
    immutable = False
    try:
        probe = folder / ".probe"
        try:
            probe.touch()
            probe.unlink()
            writable = True
        except OSError:
            writable = False
        if writable:
            immutable = subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode == 0
            if not immutable:
                pytest.skip("cannot make a folder read-only here (root without chattr)")
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(folder)], capture_output=True)
        os.chmod(folder, 0o755)


def test_a_read_only_study_folder_is_said_before_any_profile_or_round_runs(after_round, lab):
    study, base, mod, _ = after_round
    lab.medians["fused"] = 1.0
    with _read_only(study.folder):
        for attempt in (
            lambda: study.set_baseline(mod.other, mod.make_inputs),
            lambda: study.accept("fused"),
            lambda: study.run_round({"fused": mod.fused}, timer=_timer(fused=1.0), **FAKE),
        ):
            with pytest.raises(StudyError, match=r"cannot be written.*nothing was (profiled|run)"):
                attempt()
    assert lab.profiled == ["base"]  # not one profile ran
    assert len(Study.open(study.folder).rounds) == 1


def test_a_runs_entry_that_is_a_file_is_said_before_profiling(started, lab):
    study, base, mod = started
    import shutil

    shutil.rmtree(study.folder / "runs")
    (study.folder / "runs").write_text("not a folder")
    with pytest.raises(StudyError, match="is not a folder"):
        study.set_baseline(mod.other, mod.make_inputs)
    assert lab.profiled == ["base"]


def _history(tmp_path, medians=(2.0, 2.0, 2.0)):
    path = tmp_path / "h.jsonl"
    key = history_key("x = f(y)", ENVIRONMENT)
    for i, m in enumerate(medians):
        record_run(recorded_run("cell", m, seed=i), source="x = f(y)", path=path)
    return path, key


@pytest.mark.parametrize("median", [0, -1.5, "NaN", "Infinity", "abc", None, [2.0], True])
def test_a_history_entry_with_a_bad_median_is_skipped_with_a_warning_and_later_runs_are_added(
    tmp_path, monkeypatch, median
):
    path, key = _history(tmp_path)
    lines = path.read_text().splitlines()
    entry = json.loads(lines[1])
    raw = json.dumps({"entry": {**entry["entry"], "median_ms": median}})
    raw = raw.replace('"NaN"', "NaN").replace('"Infinity"', "Infinity")  # what a hand edit or numpy writes
    path.write_text("\n".join(lines[:2] + [raw] + lines[2:]) + "\n")
    with pytest.warns(StudyWarning, match=r"h\.jsonl', line 3: not a readable record.*median_ms"):
        h = load_history(path, key)
    assert len(h.entries) == 3
    with pytest.warns(StudyWarning, match="line 3"):
        assert history_keys(path) == [(key, 3, "x = f(y)")]
    monkeypatch.setenv("WORKBENCH_HISTORY", str(path))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        added = record_profile(recorded_run("cell", 2.0, seed=9), "x = f(y)")
    said = [str(w.message) for w in caught]
    assert not any("not added" in m for m in said), said
    assert any("line 3" in m for m in said), said
    assert added is not None and len(added.entries) == 4


def test_a_history_path_that_is_a_folder_a_list_dev_zero_or_a_fifo_is_refused_without_reading(tmp_path):
    key = history_key("x", ENVIRONMENT)
    folder = tmp_path / "folder"
    folder.mkdir()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "to-fifo"
    link.symlink_to(fifo)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nothing")
    cases = {
        folder: "is a folder",
        fifo: r"is a FIFO",
        link: r"FIFO \(named pipe\) \(through a symlink\)",
        Path("/dev/zero"): "is a character device",
        dangling: "symlink to nothing",
    }
    for path, said in cases.items():
        for call in (
            lambda: load_history(path, key),
            lambda: history_keys(path),
            lambda: append_run(path, recorded_run("cell", 2.0), key),
            lambda: record_run(recorded_run("cell", 2.0), source="x", path=path),
        ):
            with pytest.raises(StudyError, match=said):
                call()
    for bad in (["h.jsonl"], 3, None, b"h.jsonl"):
        with pytest.raises(StudyError, match="path must be a str or a path"):
            load_history(bad, key)
        with pytest.raises(StudyError, match="path must be a str or a path"):
            append_run(bad, recorded_run("cell", 2.0), key)
    assert not (tmp_path / "nothing").exists() and list(folder.iterdir()) == []  # nothing written through them


def test_workbench_history_on_a_fifo_exits_2_with_the_reason(tmp_path, capsys):
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    assert main(["history", str(fifo)]) == 2
    assert "FIFO" in capsys.readouterr().err


def test_a_profile_whose_history_is_a_fifo_warns_not_added_and_does_not_hang(tmp_path, monkeypatch):
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    monkeypatch.setenv("WORKBENCH_HISTORY", str(fifo))
    with pytest.warns(UserWarning, match=r"not added to its history.*FIFO"):
        assert record_profile(recorded_run("cell", 2.0), "x = 1") is None


def test_a_run_with_a_non_finite_median_is_not_written_to_the_history(tmp_path):
    path, key = _history(tmp_path, medians=(2.0,))
    before = path.read_bytes()
    from types import SimpleNamespace

    run = SimpleNamespace(
        name="cell",
        created_at="now",
        environment=dict(ENVIRONMENT),
        timing=SimpleNamespace(median_ms=math.nan, iqr_ms=0.0, p95_ms=math.nan, n=3),
    )
    with pytest.raises(StudyError, match="cannot be added to its history"):
        append_run(path, run, key)
    assert path.read_bytes() == before


def test_workbench_history_without_a_path_reads_what_the_magic_writes_and_shows_first_lines(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.delenv("WORKBENCH_HISTORY", raising=False)
    monkeypatch.chdir(tmp_path)
    notebook = tmp_path / "analysis.ipynb"  # Jupyter runs the kernel in the notebook's folder
    record_profile(recorded_run("cell[1]", 2.0), "%%gpuprofile -q\ny = torch.relu(x) @ w\n", notebook=str(notebook))
    record_profile(recorded_run("work", 3.0), "def work():\n    return 1\n")  # wb.profile, same folder
    assert main(["history", "--no-chart"]) == 0
    out = capsys.readouterr().out
    assert "workbench-history.jsonl: 2 key(s)" in out
    assert "y = torch.relu(x) @ w" in out and "def work():" in out
    # a history an older workbench wrote to .workbench/history.jsonl is still found
    (tmp_path / "workbench-history.jsonl").rename(tmp_path / "old.jsonl")
    (tmp_path / ".workbench").mkdir()
    (tmp_path / "old.jsonl").rename(tmp_path / ".workbench" / "history.jsonl")
    assert main(["history", "--no-chart"]) == 0
    assert "2 key(s)" in capsys.readouterr().out
