"""Rank folders mapped over worker processes (workbench.trace.rank_map, workbench.api.rank_folder): the same
breakdowns as one process, and every failure at scale named (a worker that dies, a rank file that cannot be
read, a corrupt cache entry)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import workbench as wb
import workbench.trace.rank_map as rank_map
from workbench.api.rank_folder import RankFolder
from workbench.errors import InvalidArgumentError, TraceWarning
from workbench.trace.rank_map import RankMapError, map_ranks, worker_count
from workbench.trace.ranks import trace_paths

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
DLRM = DATA / "gpu" / "dlrm_8rank"
BAD = DATA / "bad"
THIS = "tests.distributed.test_rank_map_local"


# --- functions the workers run (importable by name) ----------------------------------------
def file_size(path: str) -> int:
    return os.path.getsize(path)


def die_on(path: str, *, victim: str) -> int:
    """Kill the worker process (as the out-of-memory killer would) on the victim's rank file."""
    if os.path.basename(path) == victim:
        os.kill(os.getpid(), signal.SIGKILL)
    return os.path.getsize(path)


def raise_on(path: str, *, victim: str) -> int:
    if os.path.basename(path) == victim:
        raise KeyError("planted failure")
    return os.path.getsize(path)


def summarize_or_die(path: str, **kw):
    """The folder's per-rank summary, but the worker reading worker3 is killed."""
    from workbench.analysis.rank_summary import packed_rank_file

    if os.path.basename(path) == "worker3.json.gz":
        os.kill(os.getpid(), signal.SIGKILL)
    return packed_rank_file(path, **kw)


def _quiet_load(source, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trace = wb.load_trace(source, **kw)
    return trace, [str(w.message) for w in caught]


@pytest.fixture(scope="module")
def dlrm_one():
    return _quiet_load(DLRM, workers=1, cache=False)[0]


@pytest.fixture(scope="module")
def dlrm_two():
    return _quiet_load(DLRM, workers=2, cache=False)[0]


# --- same results as one process ------------------------------------------------------------
@pytest.mark.timeout(300)
def test_two_workers_give_the_breakdowns_of_one_process_exactly(dlrm_one, dlrm_two):
    # one type whatever the folder (issue 23): the summaries are the Trace's backend
    assert type(dlrm_two) is type(dlrm_one) is wb.Trace
    assert isinstance(dlrm_two.rank_folder, RankFolder) and dlrm_two.read_in == "processes"
    assert dlrm_one.rank_folder is None and dlrm_one.read_in == "this process"
    assert dlrm_two.ranks == dlrm_one.ranks == list(range(8))
    for method in ("temporal_breakdown", "kernel_breakdown", "idle_breakdown"):
        one, two = getattr(dlrm_one, method)(), getattr(dlrm_two, method)()
        assert one == two, method  # tables compared with .equals and their dtypes, every other field too
        assert len(one.table) > 0
    for method in (
        "comm_overlap",
        "copy_stats",
        "sync_audit",
        "step_breakdown",
        "launch_stats",
        "stragglers",
        "op_breakdown",
    ):
        assert getattr(dlrm_one, method)() == getattr(dlrm_two, method)(), method
    assert dlrm_two.summary().split("; read in")[0] == dlrm_one.summary()


@pytest.mark.timeout(300)
def test_other_semantics_and_thresholds_map_again_with_the_same_results(dlrm_one, dlrm_two):
    assert dlrm_one.kernel_breakdown("hta") == dlrm_two.kernel_breakdown("hta")
    assert dlrm_one.idle_breakdown(kernel_wait_threshold_us=5.0) == dlrm_two.idle_breakdown(
        kernel_wait_threshold_us=5.0
    )


def test_a_rank_comes_back_with_its_full_tables_only_when_asked(dlrm_one, dlrm_two):
    rank = dlrm_two.rank(3)
    assert rank.ranks == [3]
    assert rank.kernel_breakdown() == dlrm_one.rank(3).kernel_breakdown()
    with pytest.raises(InvalidArgumentError, match="rank 9 is not in this trace"):
        dlrm_two.rank(9)


@pytest.mark.timeout(300)
def test_one_process_and_two_workers_give_the_same_hypotheses(dlrm_one, dlrm_two):
    # issue 30 (6): one diagnosis path: each rank diagnosed on its own, folded, then the cross-rank rule
    # (straggler_rank) on every rank; a folder read by workers runs that rule on the summaries
    one, two = dlrm_one.diagnosis(), dlrm_two.diagnosis()

    def key(d):
        return [(h.rule, h.scope, round(h.time_at_stake_ms, 6), h.title) for h in d.hypotheses]

    assert key(one) == key(two) and len(one.hypotheses) > 0
    assert sorted((n.rule, n.reason) for n in one.not_judged) == sorted((n.rule, n.reason) for n in two.not_judged)
    scopes = [h.scope for h in two.hypotheses]
    assert len(scopes) == len({(h.rule, h.scope) for h in two.hypotheses})  # folded, no copies per rank
    assert "straggler_rank" not in {n.rule for n in two.not_judged}  # judged on the summaries


@pytest.mark.timeout(300)
def test_files_claiming_the_same_rank_are_renumbered_as_in_one_process(tmp_path):
    one, said_one = _quiet_load(BAD / "duplicate_ranks", workers=1, cache=False)
    two, said_two = _quiet_load(BAD / "duplicate_ranks", workers=2, cache=False)
    assert isinstance(two.rank_folder, RankFolder)
    assert one.ranks == two.ranks
    assert one.temporal_breakdown() == two.temporal_breakdown()
    assert one.kernel_breakdown() == two.kernel_breakdown()
    assert [m for m in said_one if "kept as rank" in m] == [m for m in said_two if "kept as rank" in m] != []


# --- how many workers -------------------------------------------------------------------------
def test_workers_are_bounded_by_cores_ranks_and_free_memory(monkeypatch):
    paths = trace_paths(DLRM)
    monkeypatch.setattr(rank_map, "cores", lambda: 16)
    monkeypatch.setattr(rank_map, "available_memory_bytes", lambda: 64 << 30)
    assert worker_count(paths) == 8  # at most one per rank
    assert worker_count(paths[:3]) == 3
    monkeypatch.setattr(
        rank_map, "available_memory_bytes", lambda: 3 * max(map(rank_map.estimate_rank_bytes, paths)) + 1
    )
    assert worker_count(paths) == 3  # what the free memory holds
    monkeypatch.setattr(rank_map, "available_memory_bytes", lambda: 1)
    assert worker_count(paths) == 1
    assert worker_count(paths, 4) == 4
    with pytest.raises(InvalidArgumentError, match="workers must be"):
        worker_count(paths, 0)


def parent_is_caller(path: str, *, caller: int) -> bool:
    """Whether this worker was forked straight from the caller (a forkserver worker's parent is the server)."""
    return os.getppid() == caller


@pytest.mark.timeout(300)
def test_workers_fork_from_a_single_threaded_caller_else_start_from_the_forkserver(monkeypatch):
    import threading

    paths = [str(p) for p in trace_paths(DLRM)[:2]]
    kwargs = {"caller": os.getpid()}
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(rank_map, "FORK_UNSAFE_MODULES", ("workbench_no_such_module",))  # torch may be imported here
    assert rank_map.fork_is_safe() == sys.platform.startswith("linux")
    assert rank_map._context(f"{THIS}:parent_is_caller").get_start_method() == "fork"
    forked = map_ranks(f"{THIS}:parent_is_caller", paths, kwargs, workers=2)
    assert list(forked.results.values()) == [True, True]  # no interpreter started: the caller's modules are there
    monkeypatch.setattr(threading, "active_count", lambda: 3)  # a notebook kernel, say: never fork with threads
    assert not rank_map.fork_is_safe()
    assert rank_map._context(f"{THIS}:parent_is_caller").get_start_method() in ("forkserver", "spawn")
    served = map_ranks(f"{THIS}:parent_is_caller", paths, kwargs, workers=2)
    assert list(served.results.values()) == [False, False]
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(rank_map, "FORK_UNSAFE_MODULES", ("workbench",))  # stands for torch: imported, never fork
    assert not rank_map.fork_is_safe()


def test_the_estimate_reads_a_gzip_files_stated_size():
    path = str(DLRM / "worker0.json.gz")
    import gzip

    with gzip.open(path, "rb") as fh:
        assert rank_map.json_bytes(path) == len(fh.read())


def test_workers_none_reads_here_where_workers_would_cost_more(monkeypatch):
    import workbench.api.rank_folder as rank_folder

    trace, _ = _quiet_load(DLRM, cache=False)  # 8 ranks, 8 MB of JSON in all: one process
    assert type(trace) is wb.Trace
    paths = [f"rank{i}.json" for i in range(256)]
    sizes = {"small": 1 << 20, "large": 130 << 20}
    monkeypatch.setattr(rank_folder, "json_bytes", lambda path: sizes["small"])
    assert rank_folder._better_here(paths)  # 256 small ranks, 256 MB: the analyses' fixed cost per rank dominates
    monkeypatch.setattr(rank_folder, "json_bytes", lambda path: sizes["large"])
    assert not rank_folder._better_here(paths[:8])  # 8 x 130 MB: workers
    monkeypatch.setattr(rank_folder, "json_bytes", lambda path: sizes["small"])
    assert not rank_folder._better_here(paths * 8)  # 2,048 small ranks, 2 GB: workers, for the memory


def test_the_folder_keeps_packed_summaries_far_smaller_than_the_tables(dlrm_one, dlrm_two):
    table_bytes = sum(int(t.memory_usage(deep=True).sum()) for t in dlrm_one._tables.values())
    assert 0 < dlrm_two.rank_folder.summary_bytes() < table_bytes
    assert all(isinstance(p.payload, bytes) for p in dlrm_two.rank_folder.packed())


def test_workers_1_is_the_one_process_path_exactly():
    trace, _ = _quiet_load(DLRM, workers=1, cache=False)
    assert type(trace) is wb.Trace
    with pytest.raises(InvalidArgumentError, match="workers must be"):
        wb.load_trace(DLRM, workers=0)


# --- failures at scale ------------------------------------------------------------------------
@pytest.mark.timeout(300)
def test_a_worker_that_dies_is_named_and_partial_keeps_the_others():
    paths = [str(p) for p in trace_paths(DLRM)[:3]]
    victim = os.path.basename(paths[1])
    with pytest.raises(RankMapError) as info:
        map_ranks(f"{THIS}:die_on", paths, {"victim": victim}, workers=2)
    assert [f.path for f in info.value.failures] == [paths[1]]
    assert info.value.failures[0].kind == "worker_died"
    assert victim in str(info.value) and "partial=True" in str(info.value)
    outcome = map_ranks(f"{THIS}:die_on", paths, {"victim": victim}, workers=2, partial=True)
    assert sorted(outcome.results) == sorted([paths[0], paths[2]])
    assert outcome.results[paths[0]] == os.path.getsize(paths[0])
    assert [f.path for f in outcome.failures] == [paths[1]]


@pytest.mark.timeout(300)
def test_load_trace_names_the_rank_whose_worker_died_and_partial_keeps_the_others(monkeypatch, dlrm_one):
    import workbench.api.rank_folder as rank_folder

    monkeypatch.setattr(rank_folder, "SUMMARY_FUNCTION", f"{THIS}:summarize_or_die")
    with pytest.raises(RankMapError, match=r"worker3\.json\.gz: its worker process died") as info:
        _quiet_load(DLRM, workers=2, cache=False)
    assert [os.path.basename(f.path) for f in info.value.failures] == ["worker3.json.gz"]
    kept, said = _quiet_load(DLRM, workers=2, cache=False, partial=True)
    assert kept.ranks == [0, 1, 2, 4, 5, 6, 7]
    assert any("worker3.json.gz" in m and "partial=True" in m for m in said)
    assert kept.temporal_breakdown().table.equals(
        dlrm_one.temporal_breakdown().table.query("rank != 3").reset_index(drop=True)
    )


@pytest.mark.timeout(300)
def test_a_function_that_raises_on_one_rank_is_named():
    paths = [str(p) for p in trace_paths(DLRM)[:3]]
    outcome = map_ranks(f"{THIS}:raise_on", paths, {"victim": os.path.basename(paths[2])}, workers=2, partial=True)
    assert len(outcome.results) == 2
    (failure,) = outcome.failures
    assert failure.kind == "failed" and "planted failure" in failure.message and failure.path == paths[2]


@pytest.mark.timeout(300)
def test_a_rank_file_that_fails_to_parse_is_named_and_the_good_ranks_load():
    one, said_one = _quiet_load(BAD / "one_bad_rank", workers=1, cache=False)
    two, said_two = _quiet_load(BAD / "one_bad_rank", workers=2, cache=False)
    assert isinstance(two.rank_folder, RankFolder)
    assert two.ranks == one.ranks and len(two.ranks) == 2
    left_out = [m for m in said_two if "rank file left out" in m]
    assert len(left_out) == 1 and "rank1.json" in left_out[0]
    assert one.temporal_breakdown() == two.temporal_breakdown()
    assert [f.kind for f in two.failures] == ["unreadable"]
    with pytest.raises(RankMapError, match="rank1.json: cannot be read"):
        map_ranks(
            "workbench.analysis.rank_summary:summarize_rank_file",
            [str(p) for p in trace_paths(BAD / "one_bad_rank")],
            {"options": {}, "cache": False},
            workers=2,
        )


@pytest.mark.timeout(300)
def test_a_corrupt_cache_entry_of_one_rank_is_said_and_rewritten(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "ranks"
    shutil.copytree(DLRM, folder)
    first, _ = _quiet_load(folder, workers=2, cache=True)
    entries = sorted((tmp_path / "cache" / "traces").iterdir())
    assert len(entries) == 8  # one entry per rank file, written by the workers into the caller's cache folder
    (entries[0] / "kernels.arrow").write_bytes(b"not arrow")
    again, said = _quiet_load(folder, workers=2, cache=True)
    assert any("cannot be read" in m and "trace cache entry" in m for m in said)
    assert again.kernel_breakdown() == first.kernel_breakdown()


def test_a_mapped_function_must_be_importable_by_name():
    with pytest.raises(InvalidArgumentError, match="module:qualname"):
        map_ranks("no_colon", ["x"])
    with pytest.raises(InvalidArgumentError, match="importable module"):
        map_ranks("__main__:fn", ["x"])


@pytest.mark.timeout(300)
def test_a_script_without_a_main_guard_maps_without_running_again(tmp_path):
    script = tmp_path / "no_guard.py"
    script.write_text(
        "import warnings\nwarnings.simplefilter('ignore')\nimport workbench as wb\n"
        f"print('ran')\nt = wb.load_trace({str(DLRM)!r}, workers=2, cache=False)\n"
        "print(type(t).__name__, type(t.rank_folder).__name__, t.temporal_breakdown().table.shape[0])\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["ran", "Trace", "RankFolder", "8"]


@pytest.mark.timeout(300)
def test_analyze_takes_workers(capsys):
    from workbench.cli import main

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWarning)
        assert main(["analyze", str(DLRM), "--workers", "2", "--no-cache", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "8 rank(s)" in out and "read in processes" in out and "temporal breakdown" in out
