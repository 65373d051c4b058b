"""Run bundles under workbench's reader/writer discipline (``workbench.records``), one test per
kind of bad input: a bundle path or a file of it that is a FIFO, a device, a folder, a symlink
loop or over its bound is refused with a BundleError before it is opened; JSON that is not an
object or has fields of the wrong type names the file and the field; a bundle of another format
version says which workbench wrote it; saving is atomic and an unwritable folder is said before
anything is written. Special files are made in tmp_path by the tests themselves."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path

import pytest

import workbench as wb
import workbench.capture.bundle as bundle
import workbench.records as records
from workbench.errors import BundleError


@contextlib.contextmanager
def _read_only(folder: Path):
    """The folder made unwritable: chmod, and as root (which chmod does not stop) the immutable flag."""
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


@pytest.fixture
def saved(matmul_run, tmp_path):
    return matmul_run.save(tmp_path / "good")


def _refused(call, *words) -> str:
    with pytest.raises(BundleError) as info:
        call()
    message = str(info.value)
    for word in words:
        assert word in message, message
    return message


def _edit(folder: Path, change) -> None:
    doc = json.loads((folder / "run.json").read_text())
    change(doc)
    (folder / "run.json").write_text(json.dumps(doc))


def _replace(path: Path, make) -> None:
    path.unlink()
    make(path)


# -- the bundle path itself -------------------------------------------------------------------------
@pytest.mark.timeout(30)
def test_a_bundle_path_that_is_a_fifo_a_device_a_file_or_a_loop_is_refused(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    _refused(lambda: wb.load_run(fifo), str(fifo), "not a folder (a FIFO (named pipe))")
    _refused(lambda: wb.load_run("/dev/null"), "/dev/null", "not a folder (a character device)")
    (tmp_path / "file").write_text("x")
    _refused(lambda: wb.load_run(tmp_path / "file"), "not a folder (a file)")
    loop = tmp_path / "loop"
    loop.symlink_to(tmp_path / "loop")
    _refused(lambda: wb.load_run(loop), str(loop), "symlink loop")
    for bad in (None, 3, b"bundle"):
        _refused(lambda: wb.load_run(bad), "path must be a str or a path")


# -- a file of the bundle that is not a regular file ------------------------------------------------
@pytest.mark.timeout(30)
@pytest.mark.parametrize("name", ["run.json", "environment.json", "trace.json.gz"])
def test_a_bundle_file_that_is_a_fifo_is_refused_before_opening(saved, name):
    path = saved / name
    _replace(path, os.mkfifo)
    _refused(lambda: wb.load_run(saved), str(path), "a FIFO (named pipe)", "refused before opening")


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "name, said",
    [
        ("run.json", "a character device (through a symlink)"),
        ("environment.json", "a character device (through a symlink)"),
        ("trace.json.gz", "outside the bundle"),  # a bundle may only name its own files: refused first
    ],
)
def test_a_bundle_file_that_is_a_device_is_refused_and_never_read(saved, name, said):
    path = saved / name
    _replace(path, lambda p: p.symlink_to("/dev/zero"))
    _refused(lambda: wb.load_run(saved), name, said)


@pytest.mark.parametrize("name", ["run.json", "environment.json", "trace.json.gz"])
def test_a_bundle_file_that_is_a_folder_is_refused(saved, name):
    path = saved / name
    _replace(path, lambda p: p.mkdir())
    _refused(lambda: wb.load_run(saved), str(path), "is a folder")


@pytest.mark.parametrize("name", ["run.json", "environment.json", "trace.json.gz"])
def test_a_bundle_file_that_is_a_symlink_loop_is_refused(saved, name):
    path = saved / name
    _replace(path, lambda p: p.symlink_to(p))
    _refused(lambda: wb.load_run(saved), name, "symlink loop")


def test_a_bundle_file_that_is_a_link_to_nothing_is_refused(saved):
    path = saved / "run.json"
    _replace(path, lambda p: p.symlink_to(saved / "gone.json"))
    _refused(lambda: wb.load_run(saved), str(path), "symlink to nothing")


def test_a_run_record_over_its_bound_is_refused_before_it_is_read(saved, monkeypatch):
    with open(saved / "run.json", "r+b") as fh:  # sparse: nothing is really written
        fh.truncate(bundle.RUN_MAX_BYTES + 1)
    _refused(lambda: wb.load_run(saved), str(saved / "run.json"), f"over the {bundle.RUN_MAX_BYTES} bytes")


def test_an_environment_over_its_bound_is_refused(saved, monkeypatch):
    monkeypatch.setattr(bundle, "ENVIRONMENT_MAX_BYTES", 10)
    _refused(lambda: wb.load_run(saved), str(saved / "environment.json"), "over the 10 bytes")


# -- JSON that is not what a bundle holds -----------------------------------------------------------
@pytest.mark.parametrize("text, said", [("[1, 2]", "a JSON array"), ('"run"', "a JSON string"), ("3", "a JSON number")])
def test_a_run_record_that_is_not_an_object_names_the_file(saved, text, said):
    (saved / "run.json").write_text(text)
    _refused(lambda: wb.load_run(saved), str(saved / "run.json"), said, "not an object", "save the run again")


def test_a_run_field_that_is_not_an_object_names_the_field(saved):
    _edit(saved, lambda d: d.update(run=[1, 2]))
    _refused(lambda: wb.load_run(saved), str(saved / "run.json"), "'run' field", "not an object")


def test_an_environment_that_is_not_an_object_names_the_file(saved):
    (saved / "environment.json").write_text("[]")
    _refused(lambda: wb.load_run(saved), str(saved / "environment.json"), "a JSON array, not an object")


def test_a_run_record_that_is_not_utf8_is_not_readable_json(saved):
    (saved / "run.json").write_bytes(b"\xff\xfe{garbage")
    _refused(lambda: wb.load_run(saved), str(saved / "run.json"), "not readable JSON")


@pytest.mark.parametrize(
    "field, value, kind",
    [
        ("cold_ms", "fast", "a number"),
        ("cold_ms", True, "a number"),
        ("warmup", 2.5, "an integer"),
        ("repeat", "6", "an integer"),
        ("timing", [1.0, 2.0], "an object"),
        ("settings", "threads=1", "an object"),
        ("memory", None, "an object"),
        ("profiler_warmup", 0, "a string"),
        ("traced_timing", 3, "an object or null"),
        ("trace_repeat", False, "an integer or null"),
        ("health", "ok", "an object or null"),
        ("expected_calls", "10", "an integer or null"),
        ("history", [], "an object or null"),
    ],
)
def test_a_field_of_the_wrong_type_names_the_file_the_field_and_what_to_do(saved, field, value, kind):
    _edit(saved, lambda d: d["run"].update({field: value}))
    message = _refused(lambda: wb.load_run(saved), str(saved / "run.json"), f"has a {field} of type", kind)
    assert "fix that field or save the run again" in message


def test_a_snapshot_path_of_the_wrong_type_names_the_field(saved):
    _edit(saved, lambda d: d["run"]["memory"].update(snapshot_path=5))
    _refused(lambda: wb.load_run(saved), str(saved / "run.json"), "memory.snapshot_path")


def test_a_missing_field_names_the_run_record(saved):
    _edit(saved, lambda d: d["run"].pop("cold_ms"))
    _refused(lambda: wb.load_run(saved), str(saved / "run.json"), "incomplete", "cold_ms", "save the run again")


# -- format versions --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "history",
    [{"entries": []}, {"key": "k", "entries": [{"time": "t"}]}, {"key": "k", "entries": [5]}],
    ids=["no key", "an entry without its median", "an entry that is not an object"],
)
def test_a_damaged_history_names_the_run_record(saved, history):
    _edit(saved, lambda d: d["run"].update(history=history))
    _refused(lambda: wb.load_run(saved), str(saved / "run.json"), "incomplete", "save the run again")


def test_a_saved_bundle_records_the_workbench_that_wrote_it(saved):
    doc = json.loads((saved / "run.json").read_text())
    assert doc["workbench_version"] == wb.__version__
    assert doc["format_version"] == bundle.BUNDLE_FORMAT_VERSION


def test_a_bundle_of_a_newer_format_says_which_workbench_wrote_it(saved):
    _edit(saved, lambda d: d.update(format_version=2, workbench_version="9.9.9"))
    message = _refused(lambda: wb.load_run(saved), "format version 2", "written by workbench 9.9.9", "a newer format")
    assert f"this workbench ({wb.__version__}) reads version 1" in message


def test_a_bundle_of_an_older_format_says_so(saved):
    _edit(saved, lambda d: d.update(format_version=0, workbench_version="0.0.1"))
    _refused(lambda: wb.load_run(saved), "format version 0", "written by workbench 0.0.1", "an older format")


def test_a_bundle_that_did_not_record_its_writer_says_so(saved):
    _edit(saved, lambda d: (d.pop("workbench_version"), d.update(format_version=7)))
    _refused(lambda: wb.load_run(saved), "did not record its version", "a newer format")


@pytest.mark.parametrize("version", ["1", 1.5, True, None])
def test_a_format_version_that_is_not_a_version_number_says_so(saved, version):
    _edit(saved, lambda d: d.update(format_version=version))
    _refused(lambda: wb.load_run(saved), f"format version {version!r}", "not a version number")


# -- writing ----------------------------------------------------------------------------------------
def test_a_save_leaves_no_temporary_file_and_saving_again_replaces_the_bundle(matmul_run, tmp_path):
    folder = matmul_run.save(tmp_path / "b")
    again = wb.load_run(folder)
    assert again.save(folder) == folder  # into its own folder: the trace is not copied onto itself
    assert sorted(p.name for p in folder.iterdir()) == ["environment.json", "run.json", "trace.json.gz"]
    assert wb.load_run(folder).timing == matmul_run.timing


def test_a_save_that_fails_midway_leaves_the_old_bundle_as_it_was(matmul_run, saved, monkeypatch):
    before = {p.name: p.read_bytes() for p in saved.iterdir()}
    real = records.write_atomic

    def fail_on_run_json(path, *args, **kwargs):
        if path.name == "run.json":
            raise BundleError(f"run bundle file run.json {str(path)!r} could not be written (disk full)")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(records, "write_atomic", fail_on_run_json)
    changed = wb.profile(lambda: None, warmup=0, repeat=3, trace=False, name="other")
    with pytest.raises(BundleError, match="disk full"):
        changed.save(saved)
    assert {p.name: p.read_bytes() for p in saved.iterdir()} == before  # no temporary left, nothing changed


def test_save_into_an_unwritable_folder_fails_before_writing_anything(matmul_run, tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    with _read_only(folder):
        _refused(lambda: matmul_run.save(folder), str(folder), "cannot be written", "nothing was saved")
    assert list(folder.iterdir()) == []
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    _refused(lambda: matmul_run.save(blocker / "bundle"), "cannot be written", "nothing was saved")


@pytest.mark.timeout(30)
def test_save_onto_a_fifo_or_with_a_fifo_for_a_trace_is_refused_and_writes_nothing(matmul_run, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    _refused(lambda: matmul_run.save(fifo), str(fifo), "a FIFO (named pipe), not a folder")
    target = tmp_path / "bundle"
    _refused(lambda: bundle.save_bundle(matmul_run.to_dict(), str(fifo), target), str(fifo), "FIFO")
    assert not target.exists()
    record = dict(matmul_run.to_dict(), environment=None)
    _refused(lambda: bundle.save_bundle(record, None, target), "environment", "nothing was saved")
    assert not target.exists()
