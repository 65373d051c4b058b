"""The critical path (``workbench.analysis.critical_path``) and what-if on it.

Parity: on every shared trace and step HTA's ``critical_path_analysis`` was run on (recorded by
``tests/data/hta/make_critical_path_reference.py`` into ``tests/data/hta/critical_path.json``), our path's
length equals HTA's within 1 % and its CPU and GPU shares within 2 points: under ``"hta"`` semantics against
HTA's default (rounded) run, under ``"hta_noround"`` against its ``HTA_DISABLE_NS_ROUNDING=1`` run. Under the
default ``"workbench"`` semantics the same holds except where a deviation (``DEVIATIONS``) adds dependencies
HTA leaves out; there our path is longer, never shorter, and the test says why.

Then hand-built traces, one per kind of edge, what-if, and the bad inputs: no correlation ids, no GPU-side
sync events, overlapping steps, an empty window.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import workbench as wb
from tests.analysis.conftest import HTA_DIR, load_set
from workbench.analysis.critical_path import CriticalPath, WhatIf, critical_path, critical_paths, what_if
from workbench.errors import InvalidArgumentError

REFERENCE = json.loads((HTA_DIR / "critical_path.json").read_text())
CASES = REFERENCE["cases"]
LENGTH_PCT, SHARE_POINTS = 1.0, 2.0
# cases where the workbench semantics' path is longer than HTA's, and why
DEVIATIONS = {
    "hta_v100_rec_2rank_r1:step0": "CUDA-graph launches: HTA keeps one kernel per graph launch, we keep them all",
    "hta_v100_rec_2rank_r1:step1": "CUDA-graph launches: HTA keeps one kernel per graph launch, we keep them all",
    "tracelens_h100_owlv2:step0": "no GPU-side sync events: we infer the waits from the blocking calls, HTA has none",
}


def _trace(set_name: str):
    return load_set(set_name)


def _ours(case: str, semantics: str) -> CriticalPath:
    c = CASES[case]
    instance = c["instance"] if c["instance"] is not None else 0
    return critical_path(_trace(c["trace_set"]), c["annotation"], instance, rank=c["rank"], semantics=semantics)


def _hta_shares(ref: dict) -> tuple[float, float]:
    b = ref["bound_by_pct"]
    cpu = b.get("cpu_bound", 0.0) + b.get("data_loading", 0.0)
    gpu = (
        b.get("gpu_compute_bound", 0.0)
        + b.get("gpu_communication_bound", 0.0)
        + b.get("gpu_kernel_kernel_overhead", 0.0)
    )
    return cpu, gpu


PARITY = [
    pytest.param(case, sem, mode, id=f"{case}-{sem}")
    for case in sorted(CASES)
    for sem, mode in (("hta", "rounded"), ("hta_noround", "noround"))
    if "length_us" in CASES[case][mode]
]


def test_reference_covers_htas_own_tests_and_the_shared_traces():
    assert {"hta_simple_add", "hta_a100_alexnet", "hta_event_sync", "hta_event_sync_multistream"} <= set(CASES)
    assert len(PARITY) >= 30
    assert "AssertionError" in CASES["kineto_v100_resnet50_2021:step0"]["rounded"]["error"]


@pytest.mark.parametrize("case,semantics,mode", PARITY)
def test_length_and_shares_match_hta(case, semantics, mode):
    ref = CASES[case][mode]
    ours = _ours(case, semantics)
    diff_pct = 100.0 * (ours.length_us - ref["length_us"]) / ref["length_us"]
    assert abs(diff_pct) <= LENGTH_PCT, f"{case}: ours {ours.length_us} vs HTA {ref['length_us']} µs"
    cpu, gpu = _hta_shares(ref)
    assert abs(ours.cpu_pct - cpu) <= SHARE_POINTS, f"cpu share {ours.cpu_pct:.1f} vs HTA {cpu:.1f}"
    assert abs(ours.gpu_pct - gpu) <= SHARE_POINTS, f"gpu share {ours.gpu_pct:.1f} vs HTA {gpu:.1f}"


@pytest.mark.parametrize("case", [c for c in sorted(CASES) if "length_us" in CASES[c]["noround"]])
def test_workbench_semantics_match_hta_or_say_why_longer(case):
    ref = CASES[case]["noround"]["length_us"]
    ours = _ours(case, "workbench")
    diff_pct = 100.0 * (ours.length_us - ref) / ref
    if case in DEVIATIONS:
        assert diff_pct > LENGTH_PCT, f"{case}: the deviation ({DEVIATIONS[case]}) no longer shows; drop it"
        assert ours.notes or "graph" in DEVIATIONS[case]
    else:
        assert abs(diff_pct) <= LENGTH_PCT, f"{case}: ours {ours.length_us} vs HTA {ref} µs"


def test_a_path_where_hta_stops_with_an_assertion():
    # HTA: "AssertionError: Could not find runtime index" on this 2021-format trace
    cp = critical_path(_trace("kineto_v100_resnet50_2021"), "ProfilerStep", 0)
    assert cp.length_us > 0.5 * cp.step_us
    # GPU work launched late in the step runs past its end: the path may too, never past its last event
    assert cp.length_us <= cp.table["end_us"].max() - cp.window_start_us + 1e-6
    assert abs(sum(cp.shares_pct.values()) - 100.0) < 1e-6


def test_result_round_trips_and_its_table_is_the_path():
    cp = _ours("hta_a100_alexnet", "workbench")
    again = CriticalPath.from_dict(json.loads(json.dumps(cp.to_dict())))
    assert again == cp
    t = cp.table
    assert np.isclose(t["dur_us"].sum(), cp.length_us)
    assert (t["end_us"].to_numpy()[:-1] <= t["ts_us"].to_numpy()[1:] + 1e-9).all()  # in time order, chained
    assert set(t["kind"]) <= {"host", "launch", "kernel", "memory", "communication", "gpu_idle", "dependency", "sync"}
    assert (t.loc[t["kind"] == "kernel", "source"] == "kernel").all()
    assert cp.bound_by == "host"


def test_multi_rank_folder_gives_a_path_per_rank():
    paths = critical_paths(_trace("param_v100_dlrm_8rank"))
    assert len(paths) >= 2
    assert all(p.rank == r and p.length_us > 0 for r, p in paths.items())


# --- hand-built traces ------------------------------------------------------------------------------


def _write(tmp_path, events, name="t.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": events, "deviceProperties": [{"id": 0, "name": "GPU"}]}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return wb.load_trace(str(path), cache=False)


def op(name, ts, dur, tid=1):
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": {}}


def call(name, ts, dur, corr, tid=1):
    args = {"correlation": corr} if corr is not None else {}
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def kernel(name, ts, dur, corr, stream=7, cat="kernel"):
    args = {"stream": stream, "device": 0}
    if corr is not None:
        args["correlation"] = corr
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur, "args": args}


def gpu_sync(kind, ts, dur, corr, stream=-1):
    return {
        "ph": "X",
        "cat": "cuda_sync",
        "name": kind,
        "pid": 0,
        "tid": stream,
        "ts": ts,
        "dur": dur,
        "args": {"cuda_sync_kind": kind, "stream": stream, "correlation": corr, "device": 0},
    }


def step(ts, dur, n=1):
    return {
        "ph": "X",
        "cat": "user_annotation",
        "name": f"ProfilerStep#{n}",
        "pid": 1,
        "tid": 1,
        "ts": ts,
        "dur": dur,
        "args": {},
    }


def _launch_and_wait(sync_events=True, correlation=True, gemm_us=100):
    """Op A launches gemm (30 - 130) and a short copy on another stream; op S waits in cudaDeviceSynchronize."""
    c1, c2, c3 = (10, 11, 12) if correlation else (None, None, None)
    events = [
        step(0, 200),
        op("A", 0, 20),
        call("cudaLaunchKernel", 5, 5, c1),
        call("cudaLaunchKernel", 12, 4, c2),
        kernel("gemm", 30, gemm_us, c1),
        kernel("small", 31, 5, c2, stream=8),
        op("S", 22, 40 + gemm_us),
        call("cudaDeviceSynchronize", 25, 30 + gemm_us, c3),
    ]
    if sync_events:
        events.append(gpu_sync("Context Sync", 26, 29 + gemm_us, c3))
    return events


def test_host_only_path_is_the_nesting(tmp_path):
    t = _write(tmp_path, [step(0, 300), op("A", 0, 100), op("B", 10, 40), op("C", 150, 50)])
    cp = critical_path(t)
    # A: 10 before B, B 40, 50 after B; the idle 50 µs before C is not work; C 50
    assert cp.length_us == pytest.approx(150.0)
    assert cp.bound_by == "host" and cp.shares_pct["host"] == pytest.approx(100.0)
    assert not cp.notes
    assert list(cp.table["kind"]) == ["host", "host", "host", "dependency", "host"]


def test_launch_kernel_and_sync_edges(tmp_path):
    cp = critical_path(_write(tmp_path, _launch_and_wait()))
    kinds = cp.table.groupby("kind")["dur_us"].sum()
    # 5 host into the launch call, 25 launch (call start -> kernel start), 100 gemm, sync (the gemm's end ->
    # the synchronize's end), 7 host to S's end
    assert cp.length_us == pytest.approx(137.0)
    assert kinds["launch"] == pytest.approx(25.0) and kinds["kernel"] == pytest.approx(100.0)
    assert "sync" in set(cp.table["kind"])
    assert cp.bound_by == "kernel"
    assert cp.sync_wait_us == pytest.approx(100.0 + 25.0 - 1.0, abs=30.0)  # the gemm the host waited for
    assert "gemm" in set(cp.table["name"]) and "small" not in set(cp.table["name"])


def test_kernel_kernel_gap_memory_and_communication_kinds(tmp_path):
    events = [
        step(0, 300),
        op("A", 0, 30),
        call("cudaLaunchKernel", 2, 3, 1),
        call("cudaMemcpyAsync", 10, 3, 2),
        call("cudaLaunchKernel", 14, 3, 3),
        kernel("k1", 7, 50, 1),
        kernel("Memcpy HtoD (Pinned -> Device)", 59, 20, 2, cat="gpu_memcpy"),
        kernel("ncclDevKernel_AllReduce_Sum_f32", 82, 60, 3),
        op("S", 150, 10),
        call("cudaDeviceSynchronize", 151, 8, 4),
        gpu_sync("Context Sync", 152, 6, 4),
    ]
    cp = critical_path(_write(tmp_path, events))
    by = cp.by_kind_us
    assert by["kernel"] == pytest.approx(50) and by["memory"] == pytest.approx(20)
    assert by["communication"] == pytest.approx(60)
    assert by["gpu_idle"] == pytest.approx(2 + 3)  # 57 -> 59 and 79 -> 82: queued work, gaps on the stream
    assert by["launch"] == pytest.approx(5)  # the first kernel only: the others were queued behind it
    assert cp.length_us == pytest.approx(2 + 5 + 50 + 2 + 20 + 3 + 60 + 1)


def test_a_kernel_with_work_queued_behind_it_gets_no_launch_edge(tmp_path):
    # HTA's queue test: k1's launch edge needs the stream's queue empty at its start; k2 was launched first
    events = [
        step(0, 300),
        op("A", 0, 30),
        call("cudaLaunchKernel", 2, 3, 1),
        call("cudaLaunchKernel", 6, 3, 2),
        kernel("k1", 20, 50, 1),
        kernel("k2", 72, 10, 2),
    ]
    cp = critical_path(_write(tmp_path, events))
    assert cp.by_kind_us["launch"] == 0.0
    assert cp.table["kind"].iloc[0] == "kernel"  # the path starts at k1, not at its launch


def test_stream_sync_waits_only_on_its_stream(tmp_path):
    events = [
        step(0, 400),
        op("A", 0, 20),
        call("cudaLaunchKernel", 2, 3, 1),
        call("cudaLaunchKernel", 6, 3, 2),
        kernel("long_on_8", 20, 300, 1, stream=8),
        kernel("short_on_7", 21, 10, 2, stream=7),
        op("S", 30, 20),
        call("cudaStreamSynchronize", 31, 18, 3),
        gpu_sync("Stream Sync", 32, 16, 3, stream=7),
    ]
    cp = critical_path(_write(tmp_path, events))
    # the path may end on the long kernel (it is the longest chain), but the host never waits on stream 8
    sync_edges = cp.table[cp.table["kind"] == "sync"]
    assert "long_on_8" not in set(sync_edges["name"])


# --- what-if ------------------------------------------------------------------------------------------


def test_halving_a_kernel_on_the_path_shortens_it_by_half_the_kernel(tmp_path):
    t = _write(tmp_path, _launch_and_wait())
    w = what_if(t, {"gemm": 0.5})
    assert isinstance(w, WhatIf)
    assert w.saved_us == pytest.approx(50.0)
    assert w.after.length_us == pytest.approx(87.0)
    assert w.table.loc[0, "on_path_us"] == pytest.approx(100.0)
    assert WhatIf.from_dict(json.loads(json.dumps(w.to_dict()))).saved_us == pytest.approx(50.0)


def test_halving_a_kernel_off_the_path_changes_nothing(tmp_path):
    w = what_if(_write(tmp_path, _launch_and_wait()), {"^small$": 0.5})
    assert w.saved_us == pytest.approx(0.0)
    assert w.table.loc[0, "n_events"] == 1 and w.table.loc[0, "on_path_us"] == 0.0


def test_shrinking_past_the_slack_moves_the_bound(tmp_path):
    w = what_if(_write(tmp_path, _launch_and_wait(gemm_us=100)), {"gemm": 0.0})
    # without the gemm the host's own chain (A 20 + S 40 - its wait) is the path
    assert w.after.length_us < w.before.length_us
    assert w.after.bound_by in ("host", "launch")


def test_remove_gaps(tmp_path):
    w = what_if(_write(tmp_path, _launch_and_wait()), remove_gaps=True)
    assert w.saved_us == pytest.approx(25.0)  # the launch delay
    assert w.after.by_kind_us["launch"] == 0.0


def test_what_if_needs_a_change(tmp_path):
    t = _write(tmp_path, _launch_and_wait())
    with pytest.raises(InvalidArgumentError, match="remove_gaps"):
        what_if(t, {})
    with pytest.raises(InvalidArgumentError, match="factor"):
        what_if(t, {"gemm": -1})


# --- bad input -----------------------------------------------------------------------------------------


def test_without_correlation_ids_launches_are_inferred_and_said(tmp_path):
    cp = critical_path(_write(tmp_path, _launch_and_wait(correlation=False, sync_events=False)))
    assert cp.partial
    assert any("launch edges inferred from time order" in n for n in cp.notes)
    assert "gemm" in set(cp.table["name"])


def test_without_sync_events_waits_are_inferred_and_said(tmp_path):
    t = _write(tmp_path, _launch_and_wait(sync_events=False))
    cp = critical_path(t)
    assert any("no GPU-side sync events" in n for n in cp.notes)
    assert cp.length_us == pytest.approx(137.0)  # the same path as with the sync events
    hta = critical_path(t, semantics="hta")  # HTA has no edge back to the host: said, not hidden
    assert any("no GPU-side sync events" in n for n in hta.notes)


def test_overlapping_steps_are_said(tmp_path):
    t = _write(tmp_path, [step(0, 100, 1), step(50, 100, 2), op("A", 0, 40), op("B", 60, 80)])
    cp = critical_path(t, instance=0)
    assert any("overlap" in n for n in cp.notes)


def test_a_window_without_events_is_an_error(tmp_path):
    t = _write(tmp_path, [step(0, 100), op("A", 0, 40)])
    with pytest.raises(InvalidArgumentError, match="no CPU op or runtime call starts"):
        critical_path(t, window=(500.0, 600.0))
    with pytest.raises(InvalidArgumentError, match="no 'Forward' annotation"):
        critical_path(t, annotation="Forward")
    with pytest.raises(InvalidArgumentError, match="instance 3"):
        critical_path(t, instance=3)


def test_window_and_whole_trace(tmp_path):
    t = _write(tmp_path, [step(0, 100), op("A", 0, 40), op("B", 200, 30)])
    assert critical_path(t, window=(0.0, 100.0)).length_us == pytest.approx(40.0)
    assert critical_path(t, annotation="").length_us == pytest.approx(70.0)


# --- face: facade, CLI, charts -------------------------------------------------------------------------


def test_facade_delegates(tmp_path):
    t = _write(tmp_path, _launch_and_wait())
    assert t.critical_path().length_us == pytest.approx(137.0)
    assert t.what_if({"gemm": 0.5}).new_step_us == pytest.approx(t.critical_path().step_us - 50.0)


def test_analyze_prints_the_critical_path(tmp_path, capsys):
    from workbench.cli import main

    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": _launch_and_wait()}))
    assert main(["analyze", str(path), "--critical-path", "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "== critical path ==" in out and "bound by kernel" in out and "gemm" in out
    assert main(["analyze", str(path), "--critical-path", "--json", "--no-cache"]) == 0
    assert json.loads(capsys.readouterr().out)["critical_path"]["length_us"] == pytest.approx(137.0)


def test_charts_draw_the_path_offline(tmp_path):
    pytest.importorskip("altair")
    from workbench.charts.critical_path import bound_by_chart, critical_path_chart

    t = _write(tmp_path, _launch_and_wait())
    cp = t.critical_path()
    spec = critical_path_chart(cp, t).to_dict()
    assert spec["usermeta"]["workbench_chart"] == "critical_path"
    layers = spec["layer"]
    assert len(layers) == 2  # the window's events in grey, the path on top
    datasets = spec["datasets"]
    kinds = {r["kind"] for rows in datasets.values() for r in rows if "kind" in r}
    assert {"host", "launch", "kernel"} <= kinds
    bar = bound_by_chart(cp).to_dict()
    shares = [r for rows in bar["datasets"].values() for r in rows]
    assert sum(r["pct"] for r in shares) == pytest.approx(100.0)
    assert "http" not in json.dumps(spec["datasets"])


def test_collectives_say_which_rank_they_wait_on():
    from workbench.analysis.critical_path import CollectiveWaits, collective_waits

    cw = collective_waits(_trace("param_v100_dlrm_8rank"))
    assert len(cw.paths) == 8 and len(cw.table) == 8  # 8 ranks, 8 collectives each
    assert (cw.table["n_ranks"] == 8).all()
    assert cw.table["waits_on"].between(0, 7).all() and (cw.table["wait_us"] >= 0).all()
    again = CollectiveWaits.from_dict(json.loads(json.dumps(cw.to_dict())))
    assert again.table.equals(cw.table) and set(again.paths) == set(cw.paths)


def test_path_edges_carry_module_scope_and_source_line():
    cp = critical_path(_trace("tracelens_h100_owlv2"))  # recorded with stacks and modules
    assert (cp.table["module"] != "").mean() > 0.5  # kernels through their launch call, host ops directly
    t = cp.table[cp.table["kind"] == "host"]
    assert (t["location"] != "").mean() > 0.9  # the pre- and post-processing ops run outside any module
    assert t["module"].str.startswith("Owlv2ForObjectDetection_0").any()


def test_a_cuda_graph_keeps_all_its_kernels_hta_keeps_one(tmp_path):
    events = [
        step(0, 300),
        op("A", 0, 10),
        call("cudaGraphLaunch", 2, 5, 5),
        kernel("g1", 20, 50, 5),
        kernel("g2", 71, 50, 5),
        kernel("g3", 122, 50, 5),
    ]
    t = _write(tmp_path, events)
    ours, hta = critical_path(t), critical_path(t, semantics="hta")
    assert ours.by_kind_us["kernel"] == pytest.approx(150.0)
    assert hta.by_kind_us["kernel"] == pytest.approx(50.0)
    assert any("keeps only one of the GPU events" in n for n in hta.notes)
