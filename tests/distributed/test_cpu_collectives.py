"""Collectives on CPU: gloo's ops and annotations are communication, so stragglers, overlap and the
load_imbalance rule work on CPU-only traces. Built traces (no processes): exact and fast."""

from __future__ import annotations

import json
import re
import warnings

import pandas as pd
import pytest

import workbench as wb
import workbench.trace.classify as classify
from workbench.analysis.stragglers import collective_activity
from workbench.errors import TraceWarning


@pytest.mark.parametrize(
    "name",
    [
        "c10d::allreduce_",
        "c10d::broadcast_",
        "gloo:all_reduce",
        "gloo:broadcast",
        "nccl:all_reduce",
        "record_param_comms",
        "ProcessGroupGloo::allreduce",
        "_c10d_functional::all_reduce",
    ],
)
def test_collective_names(name):
    assert classify.is_collective(name)
    assert list(classify.host_activity_types(pd.Categorical([name]))) == ["communication"]


@pytest.mark.parametrize("name", ["aten::add", "aten::mm", "ProfilerStep#3", "gloo_like_but_not", "my::allreduce"])
def test_other_ops_are_computation(name):
    assert not classify.is_collective(name)
    assert list(classify.host_activity_types(pd.Categorical([name]))) == ["computation"]


def _rank_file(folder, rank, steps, late_us, world_size=2):
    """One rank of a 2-rank gloo job, as torch.profiler writes it on CPU: per step an aten op on the main
    thread, then c10d::allreduce_ (a short enqueue) and gloo:all_reduce on a worker thread whose span lasts
    until the slowest rank arrives. ``late_us``: per rank, Python time before its all-reduce."""
    events, t = [], 0.0
    slowest = max(late_us.values())
    for _ in range(steps):
        start = t + late_us[rank]
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::add_", "pid": 1, "tid": 1, "ts": start, "dur": 50})
        events.append(
            {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 1, "tid": 1, "ts": start + 60, "dur": 20}
        )
        end = t + slowest + 60 + 200  # every rank leaves the collective when the slowest one has arrived
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": "gloo:all_reduce",
                "pid": 1,
                "tid": 2,
                "ts": start + 70,
                "dur": end - (start + 70),
            }
        )
        t = end + 10
    data = {
        "schemaVersion": 1,
        "traceEvents": events,
        "deviceProperties": [],
        "distributedInfo": {"rank": rank, "world_size": world_size, "backend": "gloo"},
    }
    path = folder / f"rank-{rank}.pt.trace.json"
    path.write_text(json.dumps(data))
    return path


def _job(tmp_path, late_us):
    for rank in late_us:
        _rank_file(tmp_path, rank, steps=5, late_us=late_us)
    return wb.load_trace(str(tmp_path), cache=False)


def test_a_cpu_straggler_is_found_and_the_rule_fires(tmp_path):
    trace = _job(tmp_path, {0: 100.0, 1: 30_000.0})
    result = trace.stragglers()
    assert result.stragglers == (1,) and set(result.table["device"]) == {"cpu"}
    # rank 0 waits ~30 ms in each of 5 all-reduces for rank 1
    assert result.wait_caused_us == pytest.approx(5 * 29_900 / 2, rel=0.05)
    imbalance = [h for h in trace.hypotheses() if h.category == "load_imbalance"]
    assert len(imbalance) == 1
    h = imbalance[0]
    assert h.title.startswith("Rank 1 is a straggler") and h.scope == "ranks 1"
    assert "CPU idle" in h.observed and "GPU" not in h.observed  # said for a CPU job
    overlap = trace.comm_overlap().table.set_index("rank")
    assert overlap.loc[0, "comm_us"] > overlap.loc[1, "comm_us"] > 0


def test_balanced_ranks_are_not_flagged(tmp_path):
    trace = _job(tmp_path, {0: 5_000.0, 1: 5_010.0})
    assert trace.stragglers().stragglers == ()
    assert not [h for h in trace.hypotheses() if h.category == "load_imbalance"]


def test_a_small_lateness_is_not_a_hypothesis(tmp_path):
    # rank 1 is 0.2 ms late per step: the analysis sees it (its threshold is relative to the tiny comm time),
    # the rule does not propose it (the others' wait is under 5 % of the span)
    trace = _job(tmp_path, {0: 5_000.0, 1: 5_200.0})
    assert trace.stragglers().stragglers == (1,)
    assert not [h for h in trace.hypotheses() if h.category == "load_imbalance"]


def test_one_rank_is_not_judged(tmp_path):
    _rank_file(tmp_path, 0, steps=3, late_us={0: 100.0}, world_size=1)
    trace = wb.load_trace(str(tmp_path), cache=False)
    assert trace.stragglers().stragglers == () and "two or more ranks" in trace.stragglers().reason
    assert not [h for h in trace.hypotheses() if h.category == "load_imbalance"]


def test_gpu_traces_keep_reading_kernels():
    kernels = pd.DataFrame(
        {
            "rank": [0],
            "name": ["k"],
            "kind": ["kernel"],
            "kernel_type": ["computation"],
            "ts_us": [0.0],
            "end_us": [1.0],
        }
    )
    ops = pd.DataFrame({"rank": [0], "name": ["c10d::allreduce_"], "depth": [0], "ts_us": [0.0], "end_us": [5.0]})
    activity, device = collective_activity(kernels, ops, None)
    assert device == "gpu" and activity is kernels


def test_summary_json_is_not_a_rank_file_and_an_incomplete_run_warns(tmp_path):
    _job(tmp_path, {0: 100.0, 1: 30_000.0})
    (tmp_path / "summary.json").write_text(json.dumps({"complete": True, "ranks": []}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert wb.load_trace(str(tmp_path), cache=False).ranks == [0, 1]
    (tmp_path / "summary.json").write_text(json.dumps({"complete": False, "reason": "rank 1 failed (exit code 1)"}))
    with pytest.warns(TraceWarning, match=r"incomplete profiled run \(rank 1 failed \(exit code 1\)\)"):
        wb.load_trace(str(tmp_path), cache=False)


def test_collective_waits_name_the_late_rank_and_what_its_host_did(tmp_path):
    # issue 27: on a CPU-only (gloo) job the waiting rank's collectives wait on rank 1, whose host spent the
    # time before each collective outside any op (Python: it issues its work late)
    trace = _job(tmp_path, {0: 100.0, 1: 30_000.0})
    cw = trace.collective_waits(annotation="")
    assert len(cw.table) == 5 and set(cw.table["waits_on"]) == {1}
    later = cw.table.iloc[1:]
    assert (later["wait_us"] > 29_000).all()
    outside = [float(re.search(r"([\d.]+) ms outside any op", w).group(1)) for w in later["waits_for"]]
    assert all(o > 29.0 for o in outside), list(later["waits_for"])
    text = wb.render.text(cw)
    assert "rank 1" in text and "outside any op" in text
