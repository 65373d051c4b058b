"""The trace cache under workbench's reader/writer discipline (``workbench.records``), one test per
kind of bad entry: a corrupted, truncated, wrong-typed or non-regular entry (or file of one) is a
miss with a TraceWarning naming the entry and the file, never a raw exception nor a wrong result,
and is rewritten; reads are bounded; two processes writing the same entry 50 times each while this
one reads it leave one whole entry and are never read half-way. WORKBENCH_CACHE_DIR points at a
per-test folder (tests/conftest.py); special files are made in it by the tests themselves."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import warnings
from pathlib import Path

import pandas as pd
import pytest

import workbench.trace.cache as trace_cache
import workbench.trace.load as trace_load
from tests.trace.conftest import CPU
from workbench.api.trace import load_trace
from workbench.errors import TraceWarning
from workbench.trace import read_trace

SMALL = CPU / "cpu_mlp_plain.json.gz"
OTHER = CPU / "cpu_mlp_steps_memory.json.gz"
OPTIONS = {"round_ns": False, "drop_last_step": False}


def _fresh(path=SMALL):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWarning)
        return read_trace(str(path), cache=False)


def _same(a, b) -> None:
    assert sorted(a._tables) == sorted(b._tables)
    for name in a._tables:
        pd.testing.assert_frame_equal(a._tables[name], b._tables[name], check_exact=True, check_categorical=True)
    assert a.meta == b.meta


def _entries(root: Path | None = None) -> list[Path]:
    root = root or trace_cache.cache_dir()
    return sorted(p for p in root.iterdir() if not p.name.startswith(".")) if root.exists() else []


@pytest.fixture
def entry() -> Path:
    """A cached entry of the small trace (written by one load)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWarning)
        load_trace(SMALL)
    (found,) = _entries()
    return found


def _cached_only(monkeypatch, path=SMALL):
    def no_decode(p):
        raise AssertionError(f"decoded {p}: the cache was not used")

    with monkeypatch.context() as m:
        m.setattr(trace_load, "decode_file", no_decode)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TraceWarning)
            return load_trace(path)


def _survives(entry: Path, monkeypatch, *said: str) -> None:
    """The load warns naming the entry (and ``said``), gives the fresh tables, and rewrites the entry."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = load_trace(SMALL)
    messages = [str(w.message) for w in caught if issubclass(w.category, TraceWarning) and "cache entry" in str(w)]
    assert len(messages) == 1, [str(w.message) for w in caught]
    assert f"trace cache entry {entry} for" in messages[0] and "is ignored" in messages[0], messages[0]
    for word in said:
        assert word in messages[0], messages[0]
    _same(got, _fresh())
    _same(_cached_only(monkeypatch), _fresh())  # rewritten: the next load is a hit
    assert entry.is_dir() and not entry.is_symlink()


def _replace(path: Path, make) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
    make(path)


# -- non-regular files --------------------------------------------------------------------------------
@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", ["meta.msgpack", "kernels.arrow"])
def test_a_file_of_an_entry_that_is_a_fifo_is_a_miss_not_a_hang(entry, monkeypatch, name):
    _replace(entry / name, os.mkfifo)
    _survives(entry, monkeypatch, str(entry / name), "a FIFO (named pipe)")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", ["meta.msgpack", "cpu_ops.arrow"])
def test_a_file_of_an_entry_that_is_a_device_is_a_miss_and_never_read(entry, monkeypatch, name):
    _replace(entry / name, lambda p: p.symlink_to("/dev/zero"))
    _survives(entry, monkeypatch, str(entry / name), "a character device")


@pytest.mark.parametrize("name", ["meta.msgpack", "kernels.arrow"])
def test_a_file_of_an_entry_that_is_a_folder_is_a_miss(entry, monkeypatch, name):
    _replace(entry / name, lambda p: p.mkdir())
    _survives(entry, monkeypatch, str(entry / name), "a folder")


@pytest.mark.parametrize("name", ["meta.msgpack", "kernels.arrow"])
def test_a_file_of_an_entry_that_is_a_symlink_loop_is_a_miss(entry, monkeypatch, name):
    _replace(entry / name, lambda p: p.symlink_to(p))
    _survives(entry, monkeypatch, str(entry / name), "symlink loop")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["file", "fifo", "loop", "link"])
def test_an_entry_that_is_not_a_folder_is_a_miss_and_replaced(entry, monkeypatch, tmp_path, kind):
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(entry, elsewhere)
    make = {
        "file": lambda p: p.write_bytes(b"not a folder"),
        "fifo": os.mkfifo,
        "loop": lambda p: p.symlink_to(p),
        "link": lambda p: p.symlink_to(elsewhere),  # not a folder the cache wrote: never followed
    }[kind]
    _replace(entry, make)
    said = {"file": "a file", "fifo": "a FIFO", "loop": "a symlink", "link": "a symlink"}[kind]
    _survives(entry, monkeypatch, said)
    assert sorted(p.name for p in elsewhere.iterdir()) == sorted(p.name for p in entry.iterdir())  # left alone


# -- bounds, truncation, corruption -----------------------------------------------------------------
def test_a_meta_over_its_bound_is_a_miss_before_it_is_read(entry, monkeypatch):
    monkeypatch.setattr(trace_cache, "META_MAX_BYTES", 50)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _same(load_trace(SMALL), _fresh())
    said = [str(w.message) for w in caught if "cache entry" in str(w.message)]
    assert said and str(entry / "meta.msgpack") in said[0] and "over the 50 bytes" in said[0]


@pytest.mark.parametrize("keep", [0, 100, -1])
def test_a_truncated_table_is_a_miss_naming_it(entry, monkeypatch, keep):
    table = entry / "cpu_ops.arrow"
    data = table.read_bytes()
    table.write_bytes(data[:keep] if keep >= 0 else data[:-1])
    _survives(entry, monkeypatch, str(table), "were written")


def test_a_truncated_meta_is_a_miss(entry, monkeypatch):
    meta = entry / "meta.msgpack"
    meta.write_bytes(meta.read_bytes()[:-7])
    _survives(entry, monkeypatch, "cannot be read")


def test_a_table_of_the_right_size_but_garbage_is_a_miss(entry, monkeypatch):
    table = entry / "kernels.arrow"
    table.write_bytes(b"\x00" * table.stat().st_size)
    _survives(entry, monkeypatch, "cannot be read")


def test_a_table_of_another_trace_is_never_served(entry, monkeypatch, tmp_path):
    """A table file of another entry swapped in, with the recorded size made to match: the rows,
    columns and dtypes written are checked, so the other trace's rows are never returned."""
    other_root = tmp_path / "other"
    trace_cache.TraceCache([str(OTHER)], OPTIONS, folder=other_root).store(_fresh(OTHER))
    (other,) = _entries(other_root)
    shutil.copy(other / "cpu_ops.arrow", entry / "cpu_ops.arrow")
    stored = trace_cache._unpack((entry / "meta.msgpack").read_bytes())
    stored["bytes"]["cpu_ops"] = (entry / "cpu_ops.arrow").stat().st_size
    (entry / "meta.msgpack").write_bytes(trace_cache._pack(stored))
    _survives(entry, monkeypatch, "cpu_ops", "rows")


# -- wrong-typed meta -------------------------------------------------------------------------------
def _edit_meta(entry: Path, change) -> None:
    stored = trace_cache._unpack((entry / "meta.msgpack").read_bytes())
    change(stored)
    (entry / "meta.msgpack").write_bytes(trace_cache._pack(stored))


@pytest.mark.parametrize(
    "change, said",
    [
        (lambda s: s.update(rows={"../../../etc/passwd": 1}), "rows holds"),
        (lambda s: s["rows"].update(cpu_ops="many"), "rows holds"),
        (lambda s: s["rows"].update(cpu_ops=-1), "rows holds"),
        (lambda s: s.update(columns=[]), "columns is a list"),
        (lambda s: s["dtypes"].update(cpu_ops=["int64"]), "dtypes holds"),
        (lambda s: s["bytes"].update(cpu_ops="big"), "bytes holds"),
        (lambda s: s.update(meta="a trace"), "meta is a str"),
        (lambda s: s["meta"].update(files=5), "meta.files"),
        (lambda s: s["meta"].update(ranks=["zero"]), "meta.ranks"),
        (lambda s: s["meta"].update(origins_ns={"r": 1}), "meta.origins_ns"),
        (lambda s: s["meta"].update(options={"round_ns": "yes"}), "meta.options"),
        (lambda s: s["meta"].update(surprise=1), "a TraceMeta does not have"),
        (lambda s: s["meta"].pop("files"), "cannot be read"),
    ],
)
def test_a_meta_field_of_the_wrong_type_is_a_miss_naming_it(entry, monkeypatch, change, said):
    _edit_meta(entry, change)
    _survives(entry, monkeypatch, said)


def test_a_meta_that_is_not_a_map_is_a_miss(entry, monkeypatch):
    (entry / "meta.msgpack").write_bytes(trace_cache._pack([1, 2, 3]))
    _survives(entry, monkeypatch, "meta.msgpack holds a list, not a map")


def test_an_entry_without_sizes_from_an_earlier_writer_is_still_served(entry, monkeypatch):
    _edit_meta(entry, lambda s: s.pop("bytes"))
    _same(_cached_only(monkeypatch), _fresh())


# -- concurrent writers -----------------------------------------------------------------------------
def _store_many(root: str, n: int) -> None:
    data = _fresh()
    for _ in range(n):
        assert trace_cache.TraceCache([str(SMALL)], OPTIONS, folder=Path(root)).store(data) is not None


@pytest.mark.timeout(240)
def test_two_writers_of_one_entry_leave_one_whole_entry_and_a_reader_never_sees_half(tmp_path):
    root = tmp_path / "shared"
    fresh = _fresh()
    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    writers = [ctx.Process(target=_store_many, args=(str(root), 50)) for _ in range(2)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for w in writers:
            w.start()
        hits = 0
        while any(w.is_alive() for w in writers):
            got = trace_cache.TraceCache([str(SMALL)], OPTIONS, folder=root).load()
            if got is not None:  # a hit is always the whole trace
                _same(got, fresh)
                hits += 1
        for w in writers:
            w.join(60)
            assert w.exitcode == 0
    said = [str(w.message) for w in caught if issubclass(w.category, TraceWarning)]
    assert said == [], said  # never a damaged entry, never a failed write
    assert len(_entries(root)) == 1
    assert [p.name for p in root.iterdir() if p.name.startswith(".")] == []  # no temporary or old folder left
    _same(trace_cache.TraceCache([str(SMALL)], OPTIONS, folder=root).load(), fresh)


def test_a_stale_temporary_folder_of_a_writer_that_died_is_removed(tmp_path):
    root = tmp_path / "c"
    stale = root / ".deadbeef.123.abcd.tmp"
    stale.mkdir(parents=True)
    (stale / "cpu_ops.arrow").write_bytes(b"half")
    os.utime(stale, (1, 1))
    fresh_tmp = root / ".cafe.456.ef01.tmp"  # a writer at work now: left alone
    fresh_tmp.mkdir()
    trace_cache.TraceCache([str(SMALL)], OPTIONS, folder=root).store(_fresh())
    assert not stale.exists() and fresh_tmp.exists()
