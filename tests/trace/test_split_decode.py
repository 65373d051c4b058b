"""A large plain file decoded in worker processes (split_decode.py) gives exactly the tables, warnings
and metadata of the single-process path, on real traces cut into many pieces; a file with anything
odd in a piece (NaN tokens, begin/end pairs, unreadable events, a cut inside a string) is read the
single-process way, with the same result."""

from __future__ import annotations

import gzip
import json
import threading
import warnings
from pathlib import Path

import pandas as pd
import pytest

import workbench.trace.rank_map as rank_map
import workbench.trace.split_decode as split_decode
from tests.trace.conftest import BAD, CPU, GPU
from workbench.trace import decode, read_trace

SHARED = Path("/work/shared/traces")


def _real_traces() -> list[Path]:
    found = [
        GPU / "h100_bert_small.json.gz",
        GPU / "a100_alexnet.json.gz",
        GPU / "mi300x_sglang.json.gz",
        GPU / "v100_ns_resolution.json.gz",
        CPU / "cpu_mlp_steps_memory.json.gz",
    ]
    if SHARED.is_dir():
        found += sorted(SHARED.glob("hta_v100_ddp_resnet_1rank/*.json.gz"))[:1]
        found += sorted(SHARED.glob("kineto_v100_resnet50_2021/*.json.gz"))[:1]
    return [p for p in found if p.is_file()]


def _plain_copy(source: Path, tmp_path: Path) -> Path:
    target = tmp_path / source.name.removesuffix(".gz")
    opener = gzip.open if source.suffix == ".gz" else open
    with opener(source, "rb") as fh:
        target.write_bytes(fh.read())
    return target


@pytest.fixture
def small_pieces(monkeypatch):
    """Split any file of over 64 kB, in 16 kB pieces; records whether the workers' result was used."""
    monkeypatch.setattr(split_decode, "PARALLEL_MIN_BYTES", 64 << 10)
    monkeypatch.setattr(decode, "CHUNK_BYTES", 16 << 10)
    used: list[bool] = []
    run = split_decode._run

    def spy(*args):
        result = run(*args)
        used.append(result is not None)
        return result

    monkeypatch.setattr(split_decode, "_run", spy)
    monkeypatch.setattr(split_decode, "worker_count", lambda size, requested=None: 2)  # also where pytest runs threads
    return used


def _load(path: Path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trace = read_trace(path)
    return trace, [str(w.message) for w in caught]


def _serial(path: Path, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setattr(split_decode, "worker_count", lambda size, requested=None: 1)
        return _load(path)


def _assert_same(one, other) -> None:
    (a, a_warnings), (b, b_warnings) = one, other
    assert a_warnings == b_warnings
    assert a.meta == b.meta
    assert sorted(a._tables) == sorted(b._tables)
    for name in a._tables:
        pd.testing.assert_frame_equal(a.table(name), b.table(name))  # categories and their order too


@pytest.mark.parametrize("source", _real_traces(), ids=lambda p: p.name)
def test_split_decode_equals_the_single_process_path(source, tmp_path, monkeypatch, small_pieces):
    path = _plain_copy(source, tmp_path)
    parallel = _load(path)
    assert small_pieces == [True]  # the workers' pieces were used
    _assert_same(_serial(path, monkeypatch), parallel)


def test_a_gzip_file_is_read_in_one_process(small_pieces):
    read_trace(GPU / "h100_bert_small.json.gz")
    assert small_pieces == []


def _events(count: int, **extra) -> list[dict]:
    return [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": f"op{i % 5}",
            "pid": 1,
            "tid": 1,
            "ts": 10 * i,
            "dur": 5,
            "args": {"External id": i, **extra},
        }
        for i in range(count)
    ]


def _write(tmp_path: Path, events: list[dict], text_edit=None) -> Path:
    text = json.dumps({"traceEvents": events, "baseTimeNanoseconds": 123})
    path = tmp_path / "t.json"
    path.write_text(text_edit(text) if text_edit else text)
    return path


@pytest.mark.parametrize("case", ["nan", "begin_end", "bad_event", "cut_in_string", "plain"])
def test_odd_pieces_fall_back_with_the_same_result(case, tmp_path, monkeypatch, small_pieces):
    events = _events(3000)
    edit = None
    if case == "nan":
        events[1500]["dur"] = "__NAN__"
        edit = lambda text: text.replace('"__NAN__"', "NaN")  # noqa: E731
    elif case == "begin_end":
        events[1200:1202] = [
            {"ph": "B", "cat": "user_annotation", "name": "span", "pid": 1, "tid": 2, "ts": 1},
            {"ph": "E", "pid": 1, "tid": 2, "ts": 9},
        ]
    elif case == "bad_event":
        events[2000]["pid"] = [1, 2]
    elif case == "cut_in_string":
        for event in events:
            event["name"] = event["name"] + "},{" * 2000  # a "},{" at every nominal cut
    path = _write(tmp_path, events, edit)
    parallel = _load(path)
    assert small_pieces == ([True] if case == "plain" else [False]) or (case == "cut_in_string" and not small_pieces)
    _assert_same(_serial(path, monkeypatch), parallel)
    if case == "plain":
        assert parallel[0].meta.base_time_ns == {0: 123}  # a header key after the array, from the last piece
        assert parallel[0].cpu_ops["event_index"].tolist() == list(range(3000))


def test_bad_input_fixtures_are_unchanged(tmp_path, monkeypatch, small_pieces):
    for source in sorted(BAD.glob("*.json")):
        if source.stat().st_size < 64 << 10:
            continue
        try:
            parallel = _load(source)
        except Exception as exc:  # noqa: BLE001 - the same error either way
            with pytest.raises(type(exc)) as serial_error:
                _serial(source, monkeypatch)
            assert str(serial_error.value) == str(exc)
            continue
        _assert_same(_serial(source, monkeypatch), parallel)


# --- the caller's switch: decode_workers / load_trace(workers=) --------------------------------
@pytest.fixture
def counted_runs(monkeypatch):
    """Small pieces, a caller seen as single-threaded (pytest may run a timeout thread), and the worker
    counts the pool was started with."""
    monkeypatch.setattr(decode, "CHUNK_BYTES", 16 << 10)
    _forkable(monkeypatch)
    started: list[int] = []
    run = split_decode._run

    def spy(path, ranges, workers):
        started.append(workers)
        return run(path, ranges, workers)

    monkeypatch.setattr(split_decode, "_run", spy)
    return started


def _forkable(monkeypatch) -> None:
    """This process seen as one that may fork: one thread (pytest may run a timeout thread), and torch
    (which other tests import) not counted."""
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(rank_map, "FORK_UNSAFE_MODULES", ())


def test_worker_count_follows_the_request(monkeypatch):
    _forkable(monkeypatch)
    piece = decode.CHUNK_BYTES
    assert split_decode.worker_count(10 * piece, 1) == 1
    assert split_decode.worker_count(10 * piece, 3) == 3  # asked for: even below PARALLEL_MIN_BYTES
    assert split_decode.worker_count(2 * piece, 5) == 2  # no more processes than pieces
    assert split_decode.worker_count(10 * piece) == 1  # by default only from PARALLEL_MIN_BYTES on
    monkeypatch.setattr(threading, "active_count", lambda: 2)
    assert split_decode.worker_count(10 * piece, 3) == 1  # a caller with other threads is never forked
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(rank_map, "FORK_UNSAFE_MODULES", ("workbench",))  # stands for torch, imported
    assert split_decode.worker_count(10 * piece, 3) == 1


def test_decode_workers_1_keeps_one_process_and_n_asks_for_n(tmp_path, counted_runs):
    path = _write(tmp_path, _events(3000))
    one = _load_with(path, decode_workers=1)
    assert counted_runs == []
    three = _load_with(path, decode_workers=3)
    assert counted_runs == [3]
    _assert_same(one, three)


def test_load_trace_workers_is_the_decode_switch_for_one_file(tmp_path, counted_runs, monkeypatch):
    import workbench as wb

    monkeypatch.setattr(split_decode, "PARALLEL_MIN_BYTES", 64 << 10)
    path = _write(tmp_path, _events(3000))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wb.load_trace(path, workers=1, cache=False)
        assert counted_runs == []
        wb.load_trace(path, workers=2, cache=False)
        assert counted_runs == [2]


@pytest.mark.parametrize("bad", [0, -1, 2.0, "2", True])
def test_decode_workers_must_be_a_count(bad, tmp_path):
    from workbench.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="decode_workers must be a whole number"):
        read_trace(_write(tmp_path, _events(10)), decode_workers=bad)


def _load_with(path: Path, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trace = read_trace(path, **kwargs)
    return trace, [str(w.message) for w in caught]
