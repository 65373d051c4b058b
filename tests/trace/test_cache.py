"""The columnar cache: tables round-trip exactly (every table, every dtype, the meta), a changed file
is never served from an old entry, a corrupt entry or one from another version is survived (a
warning, then rewritten), the size limit evicts the least recently used, and ``cache=False`` /
``--no-cache`` skip it. WORKBENCH_CACHE_DIR points at a per-test folder (tests/conftest.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest

import workbench.trace.cache as trace_cache
import workbench.trace.load as trace_load
from tests.trace.conftest import BAD, CPU, GPU
from workbench.api.trace import load_trace
from workbench.errors import TraceWarning

ROOT = Path(__file__).resolve().parents[2]


def _fresh(source, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWarning)
        return load_trace(source, cache=False, **options)


def _cached_only(monkeypatch, source, **options):
    """Load with decoding made impossible: only a cache hit can succeed."""

    def no_decode(path):
        raise AssertionError(f"decoded {path}: the cache was not used")

    with monkeypatch.context() as m:
        m.setattr(trace_load, "decode_file", no_decode)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TraceWarning)
            return load_trace(source, **options)


def _entries() -> list[Path]:
    root = trace_cache.cache_dir()
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")) if root.exists() else []


def _same(a, b) -> None:
    assert sorted(a._tables) == sorted(b._tables)
    for name in a._tables:
        pd.testing.assert_frame_equal(a._tables[name], b._tables[name], check_exact=True, check_categorical=True)
        assert list(a._tables[name].dtypes.astype(str)) == list(b._tables[name].dtypes.astype(str)), name
    assert a.meta == b.meta


@pytest.mark.parametrize(
    "source, options",
    [
        (GPU / "mi300x_sglang.json.gz", {}),
        (GPU / "v100_resnet50_2021.json.gz", {"hta_compat": True}),
        (GPU / "dlrm_8rank", {}),
        (CPU / "cpu_mlp_steps_memory.json.gz", {}),
        (BAD / "rank_2_70.json", {}),  # a distributedInfo int beyond 64 bits in the meta
    ],
)
def test_every_table_round_trips_exactly(monkeypatch, source, options):
    first = _fresh(source, **options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWarning)
        written = load_trace(source, **options)  # a miss: decodes, then writes the entry
    _same(first, written)
    assert len(_entries()) == 1
    again = _cached_only(monkeypatch, source, **options)
    _same(first, again)
    assert type(again).__name__ == "Trace" and again.kernel_breakdown().table.equals(first.kernel_breakdown().table)


def test_the_options_are_part_of_the_key(monkeypatch):
    path = GPU / "a100_alexnet.json.gz"
    load_trace(path)
    with pytest.raises(AssertionError, match="the cache was not used"):
        _cached_only(monkeypatch, path, hta_compat=True)


def test_a_cached_load_repeats_the_warnings_of_the_first():
    path = BAD / "missing_fields.json"
    with pytest.warns(TraceWarning) as first:
        load_trace(path)
    with pytest.warns(TraceWarning) as second:
        load_trace(path)
    assert [str(w.message) for w in first] == [str(w.message) for w in second]


def test_a_changed_file_is_never_served_from_the_old_entry(tmp_path, monkeypatch):
    path = tmp_path / "t.json.gz"
    shutil.copy(GPU / "a100_alexnet.json.gz", path)
    before = load_trace(path)
    # same size, same mtime, other content: only the content hash can tell
    stat = os.stat(path)
    shutil.copy(GPU / "h100_bert_small.json.gz", path)
    with open(path, "r+b") as fh:
        fh.truncate(stat.st_size)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with pytest.raises(AssertionError, match="the cache was not used"):
        _cached_only(monkeypatch, path)
    # a real change (another trace, a new mtime) loads the new tables and rewrites the one entry
    shutil.copy(GPU / "h100_bert_small.json.gz", path)
    after = load_trace(path)
    assert len(after.kernels) != len(before.kernels)
    _same(after, _fresh(path))
    assert len(_entries()) == 1
    _same(after, _cached_only(monkeypatch, path))


def test_a_touched_file_misses(tmp_path, monkeypatch):
    path = tmp_path / "t.json.gz"
    shutil.copy(GPU / "a100_alexnet.json.gz", path)
    load_trace(path)
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    with pytest.raises(AssertionError, match="the cache was not used"):
        _cached_only(monkeypatch, path)


@pytest.mark.parametrize("damage", ["truncate_table", "delete_table", "garbage_meta", "empty_meta"])
def test_a_corrupt_entry_is_ignored_with_a_warning_and_rewritten(monkeypatch, damage):
    path = GPU / "a100_alexnet.json.gz"
    good = load_trace(path)
    (entry,) = _entries()
    if damage == "truncate_table":
        table = entry / "kernels.arrow"
        table.write_bytes(table.read_bytes()[:100])
    elif damage == "delete_table":
        (entry / "cpu_ops.arrow").unlink()
    elif damage == "garbage_meta":
        (entry / "meta.msgpack").write_bytes(b"\x93not msgpack at all")
    else:
        (entry / "meta.msgpack").write_bytes(b"")
    with pytest.warns(TraceWarning, match="trace cache entry .* is ignored: it cannot be read"):
        survived = load_trace(path)
    _same(good, survived)
    _same(good, _cached_only(monkeypatch, path))  # rewritten


def test_an_entry_from_another_version_is_ignored_with_a_warning_and_rewritten(monkeypatch):
    path = GPU / "a100_alexnet.json.gz"
    good = load_trace(path)
    (entry,) = _entries()
    stored = trace_cache._unpack((entry / "meta.msgpack").read_bytes())
    stored["format"] = trace_cache.FORMAT_VERSION + 100
    (entry / "meta.msgpack").write_bytes(trace_cache._pack(stored))
    with pytest.warns(TraceWarning, match="is ignored: it is from another version of the cache"):
        _same(good, load_trace(path))
    _same(good, _cached_only(monkeypatch, path))


def test_the_size_limit_evicts_the_least_recently_used(monkeypatch):
    load_trace(GPU / "a100_alexnet.json.gz")
    (first,) = _entries()
    size = sum(f.stat().st_size for f in first.iterdir())
    monkeypatch.setenv(trace_cache.ENV_MAX_BYTES, str(size + 1000))
    os.utime(first, (1, 1))  # long unused
    load_trace(GPU / "h100_bert_small.json.gz")
    assert first not in _entries() and len(_entries()) == 1


def test_cache_false_writes_nothing():
    load_trace(GPU / "a100_alexnet.json.gz", cache=False)
    assert _entries() == []


def test_the_cache_folder_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(trace_cache.ENV_DIR, str(tmp_path / "mine"))
    assert trace_cache.cache_dir() == tmp_path / "mine" / "traces"
    monkeypatch.delenv(trace_cache.ENV_DIR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert trace_cache.cache_dir() == tmp_path / "xdg" / "workbench" / "traces"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert trace_cache.cache_dir() == tmp_path / "home" / ".cache" / "workbench" / "traces"


def test_an_unwritable_cache_folder_warns_and_the_load_goes_on(monkeypatch, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(trace_cache.ENV_DIR, str(blocker / "cache"))
    with pytest.warns(TraceWarning, match="the trace cache could not be written"):
        trace = load_trace(GPU / "a100_alexnet.json.gz")
    assert len(trace.kernels) > 0


def test_the_next_process_reads_the_entry(tmp_path):
    """First load in one process, second in a fresh one, with decoding disabled there."""
    path = str(GPU / "mi300x_sglang.json.gz")
    env = {**os.environ, trace_cache.ENV_DIR: str(tmp_path / "shared")}
    first = (
        "import warnings; warnings.simplefilter('ignore'); import workbench as wb; "
        f"print(len(wb.load_trace({path!r}).python_calls))"
    )
    second = (
        "import warnings; warnings.simplefilter('ignore'); import workbench as wb; "
        "import workbench.trace.load as trace_load; trace_load.decode_file = None; "
        f"print(len(wb.load_trace({path!r}).python_calls))"
    )
    a = subprocess.run([sys.executable, "-c", first], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    b = subprocess.run([sys.executable, "-c", second], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert a.stdout == b.stdout and int(a.stdout) > 0


def _analyze(*args):
    import argparse

    from workbench.cli import analyze

    parser = argparse.ArgumentParser()
    analyze.register(parser.add_subparsers(dest="command"))
    ns = parser.parse_args(["analyze", *args])
    return ns.handler(ns)


def test_analyze_no_cache_skips_the_cache(capsys):
    assert _analyze(str(GPU / "a100_alexnet.json.gz"), "--top", "2", "--no-cache") == 0
    assert _entries() == []
    assert _analyze(str(GPU / "a100_alexnet.json.gz"), "--top", "2") == 0
    assert len(_entries()) == 1
    capsys.readouterr()
