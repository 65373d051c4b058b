"""workbench.records, the layer-free reader/writer discipline (study, run bundles, the trace cache):
one test per kind of bad input, each error of the type the caller passed and naming the file;
bounded reads; atomic writes; appends under the lock from two processes; the write check."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import subprocess
from pathlib import Path

import pytest

import workbench.records as records
from workbench.errors import WorkbenchError


class Mine(Exception):
    """An error type a caller passes in."""


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


def _refused(call, *words):
    with pytest.raises(Mine) as info:
        call()
    message = str(info.value)
    for word in words:
        assert word in message, message
    return message


# -- paths -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad, kind", [(None, "NoneType"), (3, "int"), (b"x.json", "bytes"), (["x"], "list")])
def test_a_path_that_is_not_a_path_is_the_callers_error(bad, kind):
    _refused(lambda: records.as_path(bad, "run record", error=Mine), "run record path must be a str", kind)


def test_an_empty_path_and_a_nul_are_refused():
    _refused(lambda: records.as_path("  ", "run record", error=Mine), "path is empty")
    _refused(lambda: records.as_path("a\x00b", "run record", error=Mine), "NUL character")


def test_the_neutral_error_is_a_workbench_error(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(records.RecordFileError) as info:
        records.read_bytes(tmp_path / "d", "thing")
    assert isinstance(info.value, WorkbenchError)


# -- refused before opening ------------------------------------------------------------------------
def test_a_missing_file_is_none_not_an_error(tmp_path):
    assert records.check_regular(tmp_path / "nope", "thing", error=Mine) is None
    assert records.read_bytes(tmp_path / "nope", "thing", error=Mine) is None


def test_a_folder_is_refused(tmp_path):
    (tmp_path / "d").mkdir()
    _refused(lambda: records.read_bytes(tmp_path / "d", "thing", error=Mine), str(tmp_path / "d"), "is a folder")


@pytest.mark.timeout(20)
def test_a_fifo_is_refused_without_opening_it(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    _refused(lambda: records.read_bytes(fifo, "thing", error=Mine), str(fifo), "a FIFO (named pipe)", "before opening")
    link = tmp_path / "to-fifo"
    link.symlink_to(fifo)
    _refused(lambda: records.read_bytes(link, "thing", error=Mine), str(link), "(through a symlink)")


@pytest.mark.timeout(20)
def test_a_device_is_refused_and_dev_zero_never_read(tmp_path):
    link = tmp_path / "zero"
    link.symlink_to("/dev/zero")
    _refused(lambda: records.read_bytes(link, "thing", error=Mine), str(link), "a character device")
    _refused(lambda: records.read_bytes(Path("/dev/null"), "thing", error=Mine), "/dev/null", "character device")


def test_a_symlink_to_nothing_and_a_symlink_loop_are_refused(tmp_path):
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nothing")
    _refused(lambda: records.read_bytes(dangling, "thing", error=Mine), str(dangling), "symlink to nothing")
    loop = tmp_path / "loop"
    loop.symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(loop)
    _refused(lambda: records.read_bytes(loop, "thing", error=Mine), str(loop), "symlink loop")
    _refused(lambda: records.check_writable(loop, "folder", error=Mine), "symlink loop")


def test_a_file_over_the_bound_is_refused_before_it_is_read(tmp_path):
    big = tmp_path / "big"
    big.write_bytes(b"x" * 101)
    _refused(lambda: records.read_bytes(big, "thing", max_bytes=100, error=Mine), str(big), "over the 100 bytes")
    assert records.read_bytes(big, "thing", max_bytes=101, error=Mine) == b"x" * 101


def test_a_file_of_a_folder_is_read_through_the_open_folder_even_after_it_is_renamed(tmp_path):
    folder = tmp_path / "entry"
    folder.mkdir()
    (folder / "a").write_bytes(b"first")
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        folder.rename(tmp_path / "aside")
        folder.mkdir()
        (folder / "a").write_bytes(b"second")
        assert records.read_bytes(folder / "a", "thing", error=Mine, at=fd) == b"first"
        (tmp_path / "aside" / "b").mkdir()
        _refused(lambda: records.read_bytes(folder / "b", "thing", error=Mine, at=fd), str(folder / "b"), "a folder")
        assert records.read_bytes(folder / "nope", "thing", error=Mine, at=fd) is None
    finally:
        os.close(fd)


# -- writing ---------------------------------------------------------------------------------------
def test_an_atomic_write_leaves_the_old_file_or_the_new_one_and_no_temporary(tmp_path):
    target = tmp_path / "doc.json"
    records.write_atomic(target, '{"a": 1}', "doc", error=Mine)
    assert target.read_text() == '{"a": 1}'
    tmp = records.write_atomic(target, '{"a": 2}', "doc", error=Mine, commit=False)
    assert target.read_text() == '{"a": 1}' and tmp.read_text() == '{"a": 2}' and tmp.parent == tmp_path
    records.commit([(tmp, target)], "doc", error=Mine)
    assert target.read_text() == '{"a": 2}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["doc.json"]


def test_an_atomic_write_onto_a_folder_fails_naming_it(tmp_path):
    (tmp_path / "doc.json").mkdir()
    _refused(
        lambda: records.write_atomic(tmp_path / "doc.json", "x", "doc", error=Mine), "doc.json", "could not be written"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["doc.json"]


@pytest.mark.timeout(20)
def test_a_copy_refuses_a_fifo_source(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    _refused(lambda: records.copy_atomic(fifo, tmp_path / "out", "trace", error=Mine), str(fifo), "FIFO")
    assert not (tmp_path / "out").exists()


def test_check_writable_says_so_before_any_work(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    _refused(
        lambda: records.check_writable(blocker, "bundle folder", error=Mine, action="nothing was saved"), "is a file"
    )
    _refused(
        lambda: records.check_writable(blocker / "sub", "bundle folder", error=Mine, action="nothing was saved"),
        "cannot be written",
        "nothing was saved",
    )
    ro = tmp_path / "ro"
    ro.mkdir()
    with _read_only(ro):
        _refused(lambda: records.check_writable(ro, "bundle folder", error=Mine), str(ro), "cannot be written")
    assert records.check_writable(tmp_path / "new" / "deep", "bundle folder", error=Mine).is_dir()
    assert list((tmp_path / "new" / "deep").iterdir()) == []  # the probe is gone


def _append_many(path: str, tag: str, n: int) -> None:
    for i in range(n):
        with records.locked(path, "test log", error=Mine) as log:
            log.append_bytes(f'{{"w": "{tag}", "i": {i}, "pad": "{"x" * 200}"}}\n'.encode())


def test_two_processes_appending_lose_and_interleave_nothing(tmp_path):
    path = tmp_path / "log.jsonl"
    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    procs = [ctx.Process(target=_append_many, args=(str(path), tag, 50)) for tag in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    lines = path.read_text().splitlines()
    assert len(lines) == 100
    got = [json.loads(line) for line in lines]
    for tag in ("a", "b"):
        assert [g["i"] for g in got if g["w"] == tag] == list(range(50))


def test_an_append_after_a_line_cut_short_starts_a_line_of_its_own(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"a": 1}\n{"cut')
    with records.locked(path, "test log", error=Mine) as log:
        log.append_bytes(b'{"b": 2}\n')
        assert log.read() == b'{"a": 1}\n{"cut\n{"b": 2}\n'


def test_a_lock_held_too_long_is_the_callers_error(tmp_path):
    path = tmp_path / "log.jsonl"
    ctx = multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None
    if ctx is None:
        pytest.skip("needs fork")
    with records.locked(path, "test log", error=Mine):
        queue = ctx.Queue()

        def try_append():
            try:
                with records.locked(path, "test log", error=Mine, timeout=0.2) as log:
                    log.append_bytes(b"{}\n")
                queue.put("appended")
            except Mine as exc:
                queue.put(str(exc))

        p = ctx.Process(target=try_append)
        p.start()
        p.join(30)
    said = queue.get(timeout=5)
    assert "held its lock for over" in said and str(path) in said
    assert path.read_text() == ""
