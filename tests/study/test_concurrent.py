"""Concurrent writers (issue 30, item 3): appends under the file's lock lose nothing, and two
processes running a round on one study at once get two round numbers, both visible on reopen.

The children are forked (they inherit the recorded profiles and the workload module) and wait on
a barrier so that they really run at once; every join is bounded, so a deadlock fails, never hangs."""

from __future__ import annotations

import json
import multiprocessing
import warnings

import pytest

from tests.study.conftest import FAKE, _timer
from workbench.study import Study, StudyWarning, records
from workbench.study.files import dumps

WRITERS, APPENDS = 4, 100
JOIN_S = 120

fork = pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork (POSIX)")


def _join(procs):
    for p in procs:
        p.join(JOIN_S)
    alive = [p for p in procs if p.is_alive()]
    for p in alive:
        p.terminate()
    assert not alive, "a writer hung"
    assert [p.exitcode for p in procs] == [0] * len(procs)


def _appender(path, writer, barrier):
    barrier.wait(30)
    for i in range(APPENDS):
        # records of different sizes, so that a torn or interleaved write would show
        records.append_jsonl(path, {"writer": writer, "i": i, "pad": "x" * (i * 37 % 500)}, "test log", dumps)


@fork
def test_400_concurrent_appends_from_4_processes_are_all_kept(tmp_path):
    path = tmp_path / "log.jsonl"
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(WRITERS)
    procs = [ctx.Process(target=_appender, args=(path, w, barrier)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    _join(procs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not one line unreadable
        lines, skipped = records.read_jsonl(path, "test log")
    assert skipped == [] and len(lines) == WRITERS * APPENDS
    got = sorted((ln.record["writer"], ln.record["i"]) for ln in lines)
    assert got == [(w, i) for w in range(WRITERS) for i in range(APPENDS)]
    for w in range(WRITERS):  # each writer's records in its own order
        assert [ln.record["i"] for ln in lines if ln.record["writer"] == w] == list(range(APPENDS))
    assert all(json.loads(x) for x in path.read_text().splitlines())


def _round_in_child(folder, fused, barrier, queue):
    from workbench.study import measure

    real = measure.compare_variants

    def together(*a, **kw):  # both rounds planned (numbered) before either is compared
        barrier.wait(30)
        return real(*a, **kw)

    measure.compare_variants = together
    study = Study.open(folder)
    rnd = study.run_round({"fused": fused}, timer=_timer(fused=1.0), **FAKE)
    queue.put(rnd.index)


@fork
def test_two_concurrent_rounds_in_two_processes_are_both_kept_with_distinct_numbers(after_round):
    study, base, mod, _ = after_round
    ctx = multiprocessing.get_context("fork")
    barrier, queue = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_round_in_child, args=(study.folder, mod.fused, barrier, queue)) for _ in range(2)]
    for p in procs:
        p.start()
    _join(procs)
    numbers = sorted(queue.get(timeout=5) for _ in procs)
    assert numbers == [2, 3]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = Study.open(study.folder)
    assert not [w for w in caught if issubclass(w.category, StudyWarning)]
    assert [r.index for r in again.rounds] == [1, 2, 3]
    assert all(r.decisions["fused"].decision == "keep" for r in again.rounds)
    # the ledger holds both rounds' tests of the hypothesis; the next round in this process is round 4
    tested = [e for e in again.ledger if e.category == "memory_bound"][0].events
    assert sorted(e["round"] for e in tested if e["event"] == "tested") == [1, 2, 3]
    assert study.run_round({"fused": mod.fused}, timer=_timer(fused=1.0), **FAKE).index == 4


def test_a_lock_held_too_long_is_an_error_not_a_hang(tmp_path, monkeypatch):
    from workbench.errors import StudyError

    path = tmp_path / "log.jsonl"
    monkeypatch.setattr(records, "LOCK_TIMEOUT_S", 0.2)
    with records.locked(path, "test log"):
        ctx = multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None
        if ctx is None:
            pytest.skip("needs fork")
        queue = ctx.Queue()

        def try_append():
            try:
                records.append_jsonl(path, {"a": 1}, "test log", dumps)
                queue.put("appended")
            except StudyError as exc:
                queue.put(str(exc))

        p = ctx.Process(target=try_append)
        p.start()
        _join([p])
    assert "held its lock for over" in queue.get(timeout=5)
    assert path.read_text() == ""
