"""Paths that cannot be a trace file, one test per kind: each a TraceFormatError (a WorkbenchError)
naming the path and saying what to do, decided before the file is opened where opening could hang
(a FIFO) or never end (/dev/zero). Special files are made in tmp_path by the tests themselves."""

from __future__ import annotations

import os
import threading

import pytest

import workbench.trace.paths as trace_paths
from tests.trace.conftest import BAD, CPU
from workbench.api.trace import load_trace
from workbench.errors import TraceFormatError, WorkbenchError
from workbench.trace import read_trace

GOOD = CPU / "cpu_mlp_plain.json.gz"


def _raises(source, *words):
    with pytest.raises(TraceFormatError) as info:
        load_trace(source, cache=False)
    message = str(info.value)
    for word in words:
        assert word in message, message
    return info.value


@pytest.mark.parametrize(
    "source, kind",
    [(None, "NoneType"), (5, "int"), (3.5, "float"), (b"/tmp/trace.json", "bytes"), (object(), "object")],
)
def test_a_source_that_is_not_a_path(source, kind):
    error = _raises(source, f"load_trace got {kind}", "pass a trace file, a folder of rank files")
    assert isinstance(error, WorkbenchError)


def test_a_nul_in_the_path(tmp_path):
    _raises(str(tmp_path / "a\x00b.json"), "NUL character", "check how the path was built", "a\\x00b.json")


def test_an_over_long_path(tmp_path):
    long = str(tmp_path / ("x" * 5000 + ".json"))
    _raises(long, "too long for the file system", "shorter path")


def test_a_symlink_loop(tmp_path):
    loop = tmp_path / "loop.json"
    os.symlink(loop, loop)
    _raises(loop, "loop of symbolic links", "loop.json")


def test_a_dangling_symlink(tmp_path):
    link = tmp_path / "gone.json"
    os.symlink(tmp_path / "nowhere.json", link)
    _raises(link, "symbolic link to a file that does not exist", "gone.json")


def test_a_symlink_to_dev_zero_is_refused_unopened(tmp_path, monkeypatch):
    link = tmp_path / "zero.json"
    os.symlink("/dev/zero", link)
    opened = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda *a, **k: opened.append(a[0]) or real_open(*a, **k))
    _raises(link, "a character device (a link to /dev/zero)", "it was not opened", "zero.json")
    assert str(link) not in map(str, opened)


def test_a_fifo_without_a_writer_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    outcome = []

    def load():
        try:
            read_trace(fifo)
        except BaseException as exc:  # noqa: BLE001 - asserted below
            outcome.append(exc)

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    worker.join(timeout=20)
    if worker.is_alive():  # it opened the FIFO: release it (a writer that closes at once), then fail
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(timeout=5)
        pytest.fail("read_trace blocked on a FIFO with no writer")
    assert isinstance(outcome[0], TraceFormatError)
    assert "a FIFO (named pipe)" in str(outcome[0]) and "pipe.json" in str(outcome[0])


def test_a_folder_holding_a_fifo_named_like_a_trace_skips_it(tmp_path):
    os.mkfifo(tmp_path / "rank1.json")
    (tmp_path / "rank0.json.gz").write_bytes(GOOD.read_bytes())
    trace = read_trace(tmp_path)
    assert trace.meta.files == (str(tmp_path / "rank0.json.gz"),)


def test_a_large_file_that_is_not_json_is_judged_from_its_first_bytes(tmp_path, monkeypatch):
    """A sparse 8 GB file of zeros: refused after one block, never read whole."""
    from workbench.trace import stream

    path = tmp_path / "zeros.json"
    with open(path, "wb") as fh:
        fh.truncate(8 << 30)
    read = []
    real = stream._plain

    def counting(head, fh):
        for block in real(head, fh):
            read.append(len(block))
            yield block

    monkeypatch.setattr(stream, "_plain", counting)
    _raises(path, "not valid JSON", "zeros.json")
    assert sum(read) <= 2 * stream.BLOCK_BYTES


def test_an_array_without_event_boundaries_stops_at_a_bound(tmp_path, monkeypatch):
    from workbench.trace import decode

    monkeypatch.setattr(decode, "PIECE_LIMIT", 4 << 20)
    path = tmp_path / "endless.json"
    with open(path, "wb") as fh:
        fh.write(b'{"traceEvents": [1' + b", 1" * (4 << 20) + b"]}")
    _raises(path, "hold no readable event", "endless.json")


def test_an_unreadable_file(tmp_path, monkeypatch):
    """We run as root (permission bits do not stop root), so access is denied by patching os.access."""
    path = tmp_path / "secret.json.gz"
    path.write_bytes(GOOD.read_bytes())
    monkeypatch.setattr(trace_paths.os, "access", lambda p, mode: False)
    _raises(path, "permission denied", "make it readable", "secret.json.gz")


def test_an_unreadable_folder(tmp_path, monkeypatch):
    (tmp_path / "rank0.json.gz").write_bytes(GOOD.read_bytes())
    monkeypatch.setattr(trace_paths.os, "access", lambda p, mode: False)
    _raises(tmp_path, "permission denied: no permission to list the folder")


def test_permission_denied_at_open_is_a_trace_format_error(tmp_path, monkeypatch):
    path = tmp_path / "t.json.gz"
    path.write_bytes(GOOD.read_bytes())

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr("builtins.open", denied)
    _raises(path, "permission denied", "t.json.gz")


def test_an_empty_list():
    _raises([], "an empty list of trace paths", "pass a trace file, a folder of rank files")


def test_a_list_holding_a_folder():
    error = _raises(
        [GOOD, BAD / "no_ranks"],
        "item #1 of the list of trace paths is a folder",
        "pass the folder itself (not inside a list)",
    )
    assert error.path.endswith("no_ranks")


def test_a_list_holding_something_that_is_not_a_path():
    _raises([GOOD, 7], "item #1 of the list of trace paths is int")


def test_a_file_name_that_is_not_utf8(tmp_path):
    name = os.fsdecode(b"bad-\xff-name.json")
    path = os.path.join(os.fsdecode(bytes(tmp_path)), name)
    with open(path, "wb") as fh:
        fh.write(b"not json")
    error = _raises(path, "not valid JSON", "bad-\\\\xff-name.json")
    str(error).encode("utf-8")  # printable: the message holds no lone surrogates


def test_a_good_non_utf8_file_name_loads(tmp_path):
    path = os.path.join(os.fsdecode(bytes(tmp_path)), os.fsdecode(b"r\xe9sum\xe9.json.gz"))
    with open(path, "wb") as fh:
        fh.write(GOOD.read_bytes())
    assert len(load_trace(path).cpu_ops) > 0  # cached too: the cache key takes any file name
