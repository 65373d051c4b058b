"""Real traces (tests/data/gpu, tests/data/cpu) load into the declared tables with the right content."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from tests.trace.conftest import CPU, GPU
from workbench.trace import schema


def _events(path):
    with gzip.open(path) as fh:
        return json.load(fh)["traceEvents"]


def _count(events, cats, ph="X"):
    return sum(1 for e in events if e.get("ph") == ph and e.get("cat") in cats)


@pytest.mark.parametrize(
    "name", ["a100_alexnet", "h100_bert_small", "mi300x_sglang", "v100_resnet50_2021", "v100_ns_resolution"]
)
def test_counts_match_the_file(load, name):
    path = GPU / f"{name}.json.gz"
    events = _events(path)
    trace = load(path)
    assert len(trace.kernels) == _count(events, {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"})
    assert len(trace.runtime) == _count(events, {"cuda_runtime", "cuda_driver", "Runtime"})
    steps = sum(
        1
        for e in events
        if e.get("ph") == "X"
        and str(e.get("name", "")).startswith("ProfilerStep#")
        and e.get("cat") in ("cpu_op", "Operator", "user_annotation")
    )
    assert (trace.annotations["kind"] == "step").sum() == steps
    assert trace.has_gpu


def test_every_table_has_the_declared_columns_and_dtypes(load):
    trace = load(GPU / "h100_bert_small.json.gz")
    for table, cols in schema.TABLES.items():
        frame = trace.table(table)
        assert list(frame.columns) == [c for c, _ in cols], table
        for col, dtype in cols:
            if dtype == schema.CAT:
                assert frame[col].dtype == "category", (table, col)
            else:
                assert frame[col].dtype == np.dtype(dtype), (table, col)


def test_times_are_relative_to_rank_origin_and_consistent(load):
    trace = load(GPU / "a100_alexnet.json.gz")
    starts = [trace.table(t)["ts_us"].min() for t in ("cpu_ops", "runtime", "kernels", "annotations")]
    assert min(starts) == 0.0
    for t in ("cpu_ops", "runtime", "kernels"):
        frame = trace.table(t)
        assert np.allclose(frame["end_us"], frame["ts_us"] + frame["dur_us"])
        assert (frame["dur_us"] >= 0).all()
    assert trace.meta.origins_ns[0] % 1000 == 0 and 1.6e18 < trace.meta.origins_ns[0] < 1.8e18  # integer-µs epoch


def test_kernel_links_to_runtime_call_and_cpu_op(load):
    trace = load(GPU / "h100_bert_small.json.gz")
    k = trace.kernels
    linked = k[k["runtime_index"] >= 0]
    assert len(linked) == len(k)  # every GPU event of this trace has its launch
    calls = trace.runtime.iloc[linked["runtime_index"].to_numpy()]
    assert (calls["correlation"].to_numpy() == linked["correlation"].to_numpy()).all()
    assert (linked["launch_ts_us"].to_numpy() <= linked["ts_us"].to_numpy()).all()
    assert set(linked["launch_name"].astype(str)) <= {
        "cudaLaunchKernel",
        "cuLaunchKernel",
        "cudaMemcpyAsync",
        "cudaLaunchKernelExC",
        "cudaMemsetAsync",
    }
    # the launching op contains its runtime call
    ops = trace.cpu_ops.iloc[calls["op_index"].to_numpy()[calls["op_index"].to_numpy() >= 0]]
    inner = calls[calls["op_index"].to_numpy() >= 0]
    assert (ops["ts_us"].to_numpy() <= inner["ts_us"].to_numpy()).all()
    assert (ops["end_us"].to_numpy() >= inner["end_us"].to_numpy()).all()
    assert (k["op_name"].astype(str) != "").mean() > 0.9


def test_amd_hip_runtime_links(load):
    trace = load(GPU / "mi300x_sglang.json.gz")
    calls = trace.runtime
    assert set(calls["api"].astype(str)) == {"hip"}
    launches = calls[calls["name"].isin(["hipLaunchKernel", "hipExtModuleLaunchKernel"])]
    assert launches["is_launch"].all() and len(launches) > 500
    assert (trace.kernels["runtime_index"] >= 0).mean() > 0.95
    assert trace.kernels["launch_name"].astype(str).str.startswith("hip").mean() > 0.95


def test_2021_format_with_string_thread_ids(load):
    trace = load(GPU / "v100_resnet50_2021.json.gz")
    assert set(trace.cpu_ops["cat"].astype(str)) == {"Operator"}
    assert (trace.kernels["runtime_index"] >= 0).all()
    assert trace.kernels["stream"].eq(7).all()
    assert (trace.cpu_ops["depth"] > 0).any()
    assert (trace.annotations["kind"] == "step").sum() == 6
    copies = trace.copies
    pageable = copies[copies["copy_kind"] == "HtoD"]
    assert len(pageable) and (pageable["copy_src"] == "Pageable").all()


def test_self_time_and_depth(load):
    trace = load(CPU / "cpu_mlp_steps_memory.json.gz")
    ops = trace.cpu_ops
    assert (ops["self_us"] <= ops["dur_us"] + 1e-9).all()
    children = ops[ops["parent"] >= 0]
    parents = ops.iloc[children["parent"].to_numpy()]
    assert (parents["ts_us"].to_numpy() <= children["ts_us"].to_numpy()).all()
    assert (parents["end_us"].to_numpy() >= children["end_us"].to_numpy()).all()
    assert (children["depth"].to_numpy() == parents["depth"].to_numpy() + 1).all()
    # self + children's durations == duration for a parent with children
    pid = children["parent"].value_counts().index[0]
    kids = ops[ops["parent"] == pid]
    assert ops.loc[pid, "self_us"] == pytest.approx(ops.loc[pid, "dur_us"] - kids["dur_us"].sum(), abs=1e-6)


def test_cpu_trace_with_memory_and_shapes(load):
    trace = load(CPU / "cpu_mlp_steps_memory.json.gz")
    assert not trace.has_gpu and len(trace.kernels) == 0
    assert len(trace.memory) > 10
    assert (trace.memory["bytes"] < 0).any() and (trace.memory["bytes"] > 0).any()
    assert (trace.memory["total_allocated"] >= 0).all()
    addmm = trace.cpu_ops[trace.cpu_ops["name"] == "aten::addmm"]
    assert "[[32,64],[128,64],[128]]" in set(
        addmm["input_dims"].astype(str)
    ) or "[[128],[32,64],[64,128],[],[]]" in set(addmm["input_dims"].astype(str))
    assert sorted(trace.annotations.loc[trace.annotations["kind"] == "step", "step"]) == [1, 2, 3]
    assert "user" in set(trace.annotations["kind"].astype(str))
    assert "CPU only" in trace.summary()


def test_summary_says_ranks_events_span_gpu(load):
    text = repr(load(GPU / "a100_alexnet.json.gz"))
    assert "1 rank(s) [0]" in text and "GPU on NVIDIA A100" in text and "ms" in text


def test_syncs_from_runtime_and_cuda_sync_events(load):
    trace = load(GPU / "a100_alexnet.json.gz")
    sources = trace.syncs["source"].value_counts()
    assert sources["cuda_sync"] > 0 and sources["runtime"] > 0
    runtime_syncs = trace.syncs[trace.syncs["source"] == "runtime"]
    assert set(runtime_syncs["name"].astype(str)) <= {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "cudaStreamWaitEvent",
        "cudaMemcpy",
    }


def test_device_properties_and_distributed_info(load):
    trace = load(GPU / "dlrm_8rank")
    assert trace.ranks == list(range(8))
    assert trace.distributed_info[3]["world_size"] == 8
    assert trace.device_properties[0][0]["name"] == "Tesla V100-SXM2-32GB"
    assert set(trace.kernels["rank"]) == set(range(8))
    # every rank starts at 0 on its own clock; the absolute origins are kept
    for rank in range(8):
        assert trace.rank(rank).cpu_ops["ts_us"].min() >= 0
    assert len(set(trace.meta.origins_ns.values())) > 1


def test_nccl_kernels_are_communication(load):
    trace = load(GPU / "dlrm_8rank")
    k = trace.kernels
    nccl = k[k["name"].astype(str).str.startswith("ncclKernel")]
    assert len(nccl) == 64
    assert (nccl["kernel_type"] == "communication").all()
    assert (nccl["kernel_type_hta"] == "communication").all()
    assert (k.loc[k["kind"] != "kernel", "kernel_type"] == "memory").all()


def test_one_rank_view_keeps_links_inside_itself(load):
    trace = load(GPU / "dlrm_8rank").rank(5)
    assert trace.ranks == [5] and set(trace.kernels["rank"]) == {5}
    k = trace.kernels[trace.kernels["runtime_index"] >= 0]
    calls = trace.runtime.iloc[k["runtime_index"].to_numpy()]
    assert (calls["correlation"].to_numpy() == k["correlation"].to_numpy()).all()
    ops = trace.cpu_ops
    child = ops[ops["parent"] >= 0]
    assert (ops.iloc[child["parent"].to_numpy()]["ts_us"].to_numpy() <= child["ts_us"].to_numpy()).all()
