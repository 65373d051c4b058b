"""ProfileRun round trips (to_dict, save/load_run), bad bundles, notebook display; the capture
record under it (``RunRecord``) and the face run over it."""

from __future__ import annotations

import gzip
import json
import shutil

import pytest

import workbench as wb
from workbench.capture.bundle import BUNDLE_FORMAT_VERSION
from workbench.errors import BundleError
from workbench.hypotheses import CATEGORIES, rank


def test_to_dict_from_dict_round_trips(matmul_run):
    again = wb.ProfileRun.from_dict(json.loads(json.dumps(matmul_run.to_dict())))
    assert again == matmul_run


def test_save_and_load_reparses_the_trace(matmul_run, tmp_path):
    folder = matmul_run.save(tmp_path / "bundle")
    assert sorted(p.name for p in folder.iterdir()) == ["environment.json", "run.json", "trace.json.gz"]
    doc = json.loads((folder / "run.json").read_text())
    assert doc["format_version"] == BUNDLE_FORMAT_VERSION
    loaded = wb.load_run(folder)
    original, reloaded = matmul_run.to_dict(), loaded.to_dict()
    assert reloaded.pop("trace_path") == str(folder / "trace.json.gz")
    original.pop("trace_path")
    assert reloaded == original
    assert loaded.trace is not None and loaded.trace is not matmul_run.trace
    assert len(loaded.trace.cpu_ops) == len(matmul_run.trace.cpu_ops)


def test_the_face_run_holds_the_capture_record_and_the_facade_trace(matmul_run, tmp_path):
    from workbench.capture.run import RunRecord
    from workbench.trace import TraceData

    assert not isinstance(matmul_run, RunRecord) and type(matmul_run.record) is RunRecord
    assert type(matmul_run.trace) is wb.Trace and type(matmul_run.record.trace) is TraceData
    assert matmul_run.trace.cpu_ops is matmul_run.record.trace.cpu_ops  # one set of tables, two views
    assert matmul_run.timing is matmul_run.record.timing and matmul_run.trace_scale == matmul_run.record.trace_scale
    assert matmul_run.environment["torch"]  # the face's profile attached the fingerprint
    folder = matmul_run.save(tmp_path / "bundle")
    record = RunRecord.load(folder)  # the record's reader; the face adds the history
    assert type(record) is RunRecord and type(record.trace) is TraceData and not hasattr(record, "hypotheses")
    face = wb.ProfileRun.from_record(record)
    assert type(face.trace) is wb.Trace and face.timing == matmul_run.timing
    assert [h.rule for h in face.hypotheses] == [h.rule for h in wb.load_run(folder).hypotheses]


def test_history_is_assignable_and_saved_with_the_run(matmul_run, tmp_path):
    from workbench.study.history import History, HistoryEntry

    run = wb.load_run(matmul_run.save(tmp_path / "a"))
    run.history = History(
        key="k", entries=(HistoryEntry(key="k", time="t", median_ms=1.0, spread_ms=0.1),), change_points=()
    )
    assert wb.load_run(run.save(tmp_path / "b")).history == run.history
    with pytest.raises(AttributeError):
        run.cold_ms = 1.0  # the measured fields stay frozen


def test_untraced_run_saves_without_trace(tmp_path):
    run = wb.profile(lambda: None, warmup=0, repeat=3, trace=False)
    loaded = wb.load_run(run.save(tmp_path / "b"))
    assert loaded.trace is None and loaded.trace_path is None
    assert loaded.timing.samples_ms == run.timing.samples_ms


@pytest.fixture
def saved(matmul_run, tmp_path):
    return matmul_run.save(tmp_path / "good")


def _edit_run_json(folder, change):
    doc = json.loads((folder / "run.json").read_text())
    change(doc)
    (folder / "run.json").write_text(json.dumps(doc))


def test_missing_folder(tmp_path):
    with pytest.raises(BundleError, match="not a folder"):
        wb.load_run(tmp_path / "nope")


def test_missing_run_json(saved):
    (saved / "run.json").unlink()
    with pytest.raises(BundleError, match="run record missing"):
        wb.load_run(saved)


def test_wrong_format_version(saved):
    _edit_run_json(saved, lambda d: d.update(format_version=99))
    with pytest.raises(BundleError, match=r"format version 99.*reads version 1.*profile again"):
        wb.load_run(saved)


def test_not_a_run_record(saved):
    (saved / "run.json").write_text(json.dumps({"hello": 1}))
    with pytest.raises(BundleError, match="not a workbench run record"):
        wb.load_run(saved)


def test_truncated_run_json(saved):
    (saved / "run.json").write_text('{"format": "workbench.run", "format_')
    with pytest.raises(BundleError, match="not readable JSON"):
        wb.load_run(saved)


def test_incomplete_run_record(saved):
    _edit_run_json(saved, lambda d: d["run"].pop("timing"))
    with pytest.raises(BundleError, match="incomplete"):
        wb.load_run(saved)


def test_missing_trace_file(saved):
    (saved / "trace.json.gz").unlink()
    with pytest.raises(BundleError, match="file is missing"):
        wb.load_run(saved)


def test_damaged_trace_file(saved):
    data = (saved / "trace.json.gz").read_bytes()
    (saved / "trace.json.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(BundleError, match="could not be parsed"):
        wb.load_run(saved)


def test_save_onto_a_file_is_refused(matmul_run, tmp_path):
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(BundleError, match="it is a file"):
        matmul_run.save(target)


def test_html_shows_timing_cold_and_top_ops(matmul_run):
    page = matmul_run._repr_html_()
    assert "clean median (per call)" in page and "cold (first call)" in page
    assert "traced pass" in page and "overhead" in page and "profile health" in page
    table = page[page.index("Top 10 CPU ops") : page.index("</table>", page.index("Top 10 CPU ops"))]
    assert "<th>self / call</th>" in table and "self_us" not in table and "e+0" not in table
    assert " µs" in table or " ms" in table  # per call, adaptive units
    assert "Top 10 CPU ops by self time" in page and "aten::mm" in page
    assert "torch.compile" not in page  # nothing compiled: no empty section


def test_html_without_trace_has_no_op_section():
    run = wb.profile(lambda: None, warmup=0, repeat=3, trace=False)
    page = run._repr_html_()
    assert "clean median (per call)" in page and "CPU ops" not in page


def test_hypotheses_are_ranked_and_categorised(matmul_run):
    hyps = matmul_run.hypotheses
    assert isinstance(hyps, list)
    assert all(h.category in CATEGORIES for h in hyps)
    assert rank(hyps) == hyps  # already in the engine's ranked order
    assert any(h.category == "measurement" for h in hyps)  # 6 samples is too few to trust
