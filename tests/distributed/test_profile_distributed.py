"""wb.profile_distributed: N local gloo processes with the profiler on each; the multi-rank Trace and the
per-rank timings come back, a planted straggler is named, failures are said plainly."""

from __future__ import annotations

import json
import os
import warnings

import pytest

import workbench as wb
from tests.distributed import workloads
from workbench.errors import InvalidArgumentError, ProfileError, TraceWarning


@pytest.mark.timeout(60)
def test_a_planted_straggler_is_named(tmp_path):
    out = str(tmp_path / "run")
    trace = wb.profile_distributed(
        workloads.straggler_job,
        world_size=2,
        backend="gloo",
        args=(8, 1, 0.030),
        timeout_s=45,
        out=out,
        wait=1,
        warmup=1,
        active=5,
    )
    assert trace.ranks == [0, 1] and trace.complete
    assert list(trace.timings["rank"]) == [0, 1] and set(trace.timings["status"]) == {"ok"}
    assert (trace.timings["wall_ms"] > 0).all() and list(trace.timings["steps"]) == [8, 8]
    assert sorted(f for f in os.listdir(out) if f.endswith(".pt.trace.json")) == [
        "rank-0.pt.trace.json",
        "rank-1.pt.trace.json",
    ]
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as fh:
        assert json.load(fh)["complete"] is True
    assert trace.stragglers().stragglers == (1,)
    imbalance = [h for h in trace.hypotheses() if h.category == "load_imbalance"]
    assert len(imbalance) == 1 and imbalance[0].title.startswith("Rank 1 is a straggler")
    overlap = trace.comm_overlap().table  # gloo collectives are communication on a CPU-only trace
    assert list(overlap["rank"]) == [0, 1] and (overlap["comm_us"] > 0).all()
    # rank 0 waits for rank 1 in every all-reduce: its communication time holds the planted 5 x 30 ms
    assert overlap.set_index("rank").loc[0, "comm_us"] > 100_000


@pytest.mark.timeout(60)
def test_a_crash_on_one_rank_keeps_the_others_trace(tmp_path):
    with pytest.warns(TraceWarning, match="rank 1 failed"):
        trace = wb.profile_distributed(workloads.crash_on_rank_1, world_size=2, timeout_s=40, out=str(tmp_path / "c"))
    assert not trace.complete
    by_rank = trace.timings.set_index("rank")
    assert by_rank.loc[0, "status"] == "ok" and by_rank.loc[1, "status"] == "failed"
    assert by_rank.loc[1, "exit_code"] == 1 and "planted failure" in by_rank.loc[1, "error"]
    assert 0 in trace.ranks


@pytest.mark.timeout(120)
def test_a_hanging_rank_is_stopped_at_the_timeout(tmp_path):
    # rank 0 must start torch, profile and write its trace within the timeout, on a loaded machine too
    with pytest.warns(TraceWarning, match="timed out after 25 s"):
        trace = wb.profile_distributed(workloads.hang_on_rank_1, world_size=2, timeout_s=25, out=str(tmp_path / "h"))
    by_rank = trace.timings.set_index("rank")
    assert by_rank.loc[0, "status"] == "ok"
    assert by_rank.loc[1, "status"] in ("terminated", "missing") and "timeout_s=25" in by_rank.loc[1, "error"]


def test_bad_arguments_are_refused_before_anything_runs(tmp_path):
    with pytest.raises(InvalidArgumentError, match="picklable"):
        wb.profile_distributed(lambda: None, world_size=2, out=str(tmp_path / "a"))
    with pytest.raises(InvalidArgumentError, match="too many"):
        wb.profile_distributed(workloads.pid, world_size=(os.cpu_count() or 1) * 4 + 1, out=str(tmp_path / "b"))
    with pytest.raises(InvalidArgumentError, match="timeout_s"):
        wb.profile_distributed(workloads.pid, world_size=2, timeout_s=0, out=str(tmp_path / "c"))
    used = tmp_path / "used"
    used.mkdir()
    (used / "rank-0.pt.trace.json").write_text("{}")
    with pytest.raises(InvalidArgumentError, match="never mixed"):
        wb.profile_distributed(workloads.pid, world_size=2, out=str(used))
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_no_trace_at_all_is_an_error_not_an_empty_trace(tmp_path):
    from workbench.capture.distributed import raise_if_no_trace

    summary = {"traces": [], "ranks": [{"rank": 0, "status": "failed", "error": "boom"}]}
    with pytest.raises(ProfileError, match="rank 0: failed \\(boom\\)"):
        raise_if_no_trace(summary, str(tmp_path))


def test_step_is_a_no_op_outside_a_profiled_run():
    import workbench.api.distributed as wd

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            wd.step()
