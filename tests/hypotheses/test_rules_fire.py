"""Each rule: a case where it fires and one where it must not (small synthetic tables in the
trace schema; real traces are held in test_expected_diagnosis.py)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.hypotheses.builders import A100, cpu_ops, facts, fires, gpu, memory_events, run
from workbench.hypotheses.facts import TraceFacts
from workbench.trace.schema import frame


def test_device_idle_host_wait():
    # kernels of 10 µs with 200 µs host gaps: launch issued after the previous kernel ended
    starts = np.arange(20) * 210.0
    k, rt = gpu(starts, [10] * 20, starts - 5, [4] * 20)
    hs = fires("device_idle_host_wait", facts(kernels=k, runtime=rt))
    assert hs and hs[0].category == "host_bound" and hs[0].evidence[0].value > 90
    busy = np.arange(20) * 10.5
    k, rt = gpu(busy, [10] * 20, busy - 50, [4] * 20)
    assert fires("device_idle_host_wait", facts(kernels=k, runtime=rt)) == []


def test_kernels_shorter_than_launch():
    starts = np.arange(100) * 12.0
    k, rt = gpu(starts, [2] * 100, starts - 9, [8] * 100)
    hs = fires("kernels_shorter_than_launch", facts(kernels=k, runtime=rt))
    assert hs and hs[0].category == "launch_overhead"
    long_k, rt2 = gpu(np.arange(100) * 101.0, [100] * 100, np.arange(100) * 101.0 - 50, [8] * 100)
    assert fires("kernels_shorter_than_launch", facts(kernels=long_k, runtime=rt2)) == []


def test_host_sync_calls():
    starts = np.arange(10) * 100.0
    k, rt = gpu(
        starts,
        [90] * 10,
        starts,
        [5] * 10,
        runtime_extra={
            "rank": [0],
            "tid": ["1"],
            "name": ["cudaStreamSynchronize"],
            "ts_us": [200.0],
            "dur_us": [400.0],
            "end_us": [600.0],
            "correlation": [999],
        },
    )
    # aten::item > aten::_local_scalar_dense encloses the sync (the reader links it through op_index)
    ops = frame(
        "cpu_ops",
        {
            "rank": [0, 0],
            "tid": ["1", "1"],
            "name": ["aten::item", "aten::_local_scalar_dense"],
            "ts_us": [190.0, 195.0],
            "dur_us": [420.0, 410.0],
            "end_us": [610.0, 605.0],
            "depth": [0, 1],
            "parent": [-1, 0],
        },
    )
    rt["op_index"] = np.where(rt["name"] == "cudaStreamSynchronize", 1, -1)
    hs = fires("host_sync_calls", facts(kernels=k, runtime=rt, cpu_ops=ops))
    top = hs[0].evidence[0].rows[0]
    assert (top["cause_op"], top["op"], top["blocked_us"]) == ("aten::item", "aten::_local_scalar_dense", 400.0)
    k, rt = gpu(starts, [90] * 10, starts, [5] * 10)
    assert fires("host_sync_calls", facts(kernels=k, runtime=rt)) == []


def test_pageable_memcpy_and_transfer_share():
    starts = np.arange(10) * 100.0
    k, rt = gpu(
        starts, [80] * 10, starts, [5] * 10, names="Memcpy HtoD (Pageable -> Device)", kind="memcpy", ktype="memory"
    )
    f = facts(kernels=k, runtime=rt)
    assert fires("pageable_memcpy", f)[0].category == "transfer"
    assert fires("transfer_share", f)[0].evidence[0].value > 50
    k, rt = gpu(starts, [80] * 10, starts, [5] * 10)
    assert fires("pageable_memcpy", facts(kernels=k, runtime=rt)) == []
    assert fires("transfer_share", facts(kernels=k, runtime=rt)) == []


def test_memory_vs_matrix_kernels():
    starts = np.arange(10) * 10.0
    k, rt = gpu(starts, [10] * 10, starts - 20, [5] * 10, names="void vectorized_elementwise_kernel<4>")
    f = facts(kernels=k, runtime=rt)
    assert fires("memory_bound_kernels", f)[0].time_at_stake_ms > 0
    assert fires("matrix_kernels_dominate", f) == []
    k, rt = gpu(starts, [10] * 10, starts - 20, [5] * 10, names="volta_sgemm_128x64_nn")
    f = facts(kernels=k, runtime=rt)
    assert fires("matrix_kernels_dominate", f)[0].category == "compute_bound"
    assert fires("memory_bound_kernels", f) == []


def test_exposed_communication_and_stragglers():
    comp_k, rt = gpu(
        [0.0, 100.0],
        [100, 100],
        [-10, 90],
        [5, 5],
        names=["sgemm", "ncclKernel_AllReduce"],
        ktype=["computation", "communication"],
    )
    assert fires("exposed_communication", facts(kernels=comp_k, runtime=rt))[0].category == "communication"
    overlapped = comp_k.copy()
    overlapped.loc[1, ["ts_us", "end_us"]] = [0.0, 100.0]
    assert fires("exposed_communication", facts(kernels=overlapped, runtime=rt)) == []
    import pandas as pd

    # rank 1 computes 190 µs before the all-reduce; rank 0 then waits in it: rank 1 communicates 10 µs, rank 0 100
    slow = gpu(
        [0.0, 190.0],
        [190, 10],
        [-10, 180],
        [5, 5],
        names=["sgemm", "ncclKernel_AllReduce"],
        ktype=["computation", "communication"],
        rank=1,
    )[0]
    two = pd.concat([comp_k, slow], ignore_index=True)
    h = fires("straggler_rank", facts(kernels=two, runtime=rt))[0]
    assert h.category == "load_imbalance" and "Rank 1" in h.title
    assert h.evidence[1].value == pytest.approx(45.0)  # median comm 55 µs - rank 1's 10 µs
    same = pd.concat([comp_k, comp_k.assign(rank=1)], ignore_index=True)
    assert fires("straggler_rank", facts(kernels=same, runtime=rt)) == []


def test_cpu_dispatch_overhead_and_host_gaps():
    tiny = cpu_ops(["aten::add"] * 200, [3.0] * 200, 2.0)
    assert fires("cpu_dispatch_overhead", facts(cpu_ops=tiny))[0].category == "launch_overhead"
    assert fires("cpu_host_gaps", facts(cpu_ops=tiny)) == []
    gappy = cpu_ops(["aten::mm"] * 10, [100.0] * 10, 500.0)
    assert fires("cpu_host_gaps", facts(cpu_ops=gappy))[0].category == "host_bound"
    assert fires("cpu_dispatch_overhead", facts(cpu_ops=gappy)) == []


def test_cpu_memory_vs_compute_bound_ops():
    big_mm = cpu_ops(["aten::mm"] * 5, [1000.0] * 5, 1.0, dims=["[[512,512],[512,512]]"] * 5)
    assert fires("cpu_compute_bound_ops", facts(cpu_ops=big_mm))[0].category == "compute_bound"
    assert fires("cpu_memory_bound_ops", facts(cpu_ops=big_mm)) == []
    adds = cpu_ops(["aten::add", "aten::mul", "aten::relu"] * 5, [500.0] * 15, 1.0)
    assert fires("cpu_memory_bound_ops", facts(cpu_ops=adds))[0].category == "memory_bound"
    assert fires("cpu_compute_bound_ops", facts(cpu_ops=adds)) == []
    skinny = cpu_ops(["aten::mm"] * 5, [1000.0] * 5, 1.0, dims=["[[4096,4],[4,1]]"] * 5)
    assert fires("cpu_compute_bound_ops", facts(cpu_ops=skinny)) == []
    # the same ops on tiny tensors take far longer than their roof: dispatch, not memory
    tiny = cpu_ops(["aten::add", "aten::mul"] * 30, [8.0] * 60, 1.0, dims=["[[16],[16]]"] * 60)
    assert fires("cpu_memory_bound_ops", facts(cpu_ops=tiny)) == []
    assert fires("cpu_dispatch_overhead", facts(cpu_ops=tiny))[0].category == "launch_overhead"


def test_roofline_ceiling_is_named_and_measured_one_replaces_the_default():
    from workbench.hypotheses.roofline import DEFAULT_CPU_CEILING, cpu_ceiling_from

    assert cpu_ceiling_from({}) is DEFAULT_CPU_CEILING and not DEFAULT_CPU_CEILING.upper_bound
    measured = cpu_ceiling_from({"cpu_ceiling": {"copy_gbps": 6.5, "matmul_fp32_gflops": 157.0, "threads": 1}})
    assert measured.upper_bound and measured.ridge_flops_per_byte == pytest.approx(157.0 / 6.5)
    adds = cpu_ops(["aten::add"] * 4, [500.0] * 4, 1.0, dims=["[[1000000],[1000000]]"] * 4)
    h = fires("cpu_memory_bound_ops", TraceFacts(None, ceiling=measured, cpu_ops=adds))[0]
    assert h.evidence[2].rows[0]["memory_gbps"] == 6.5


def test_cold_start():
    # a one-time cost, spread over a stated default number of calls to rank against per-call costs
    from workbench.hypotheses.run_facts import ONE_TIME_COST_CALLS

    h = fires("cold_start", run([1.0] * 20, cold=500.0))[0]
    assert h.time_at_stake_ms == pytest.approx(499.0 / ONE_TIME_COST_CALLS)
    assert h.evidence[1].rows[0]["cold_excess_ms"] == pytest.approx(499.0)
    assert h.evidence[1].value == pytest.approx(100 * 499.0 / (ONE_TIME_COST_CALLS * 1.0 + 499.0))
    assert fires("cold_start", run([1.0] * 20, cold=1.5)) == []


def test_cold_start_is_judged_against_the_steady_state_not_an_absolute_floor():
    # 17 ms once before 100 calls of 0.2 ms is about half the time those calls take: a real finding,
    # though far under any absolute floor of tens of ms
    h = fires("cold_start", run([0.2] * 20, cold=17.2))[0]
    assert h.evidence[1].value == pytest.approx(100 * 17.0 / (100 * 0.2 + 17.0))
    assert h.time_at_stake_ms == pytest.approx(17.0 / 100)
    # the same 17 ms once before 100 calls of 50 ms is 0.3 % of their time: nothing to report
    assert fires("cold_start", run([50.0] * 20, cold=400.0)) == []  # 8x a call, 350 ms once, 7 % of 5 s


def test_cold_start_uses_the_calls_the_user_states():
    from types import SimpleNamespace

    from workbench.hypotheses.run_facts import RunFacts
    from workbench.measurement import Measurement

    def stated(calls):
        return RunFacts(
            SimpleNamespace(
                timing=Measurement((10.0,) * 20),
                cold_ms=100.0,
                compile=None,
                environment={},
                trace=None,
                expected_calls=calls,
            )
        )

    # 90 ms once: 8 % of 100 calls of 10 ms (not reported), 47 % of 10 calls (reported, 9 ms a call)
    assert fires("cold_start", stated(None)) == []
    h = fires("cold_start", stated(10))[0]
    assert h.time_at_stake_ms == pytest.approx(9.0)
    assert "expected_calls=10" in h.observed


def test_graph_break_compile_time_goes_to_graph_breaks_not_cold_start():
    from workbench.capture.compile_diag import CompileDiagnostics, GraphBreak

    diag = CompileDiagnostics(
        dynamo_loaded=True,
        graph_count=4,
        frames_compiled=4,
        compile_time_ms=400.0,
        graph_breaks=(GraphBreak("Tensor.item()", "f.py:3", 3, ""),),
    )
    cold = fires("cold_start", run([1.0] * 20, cold=500.0, compile=diag))[0]
    gb = fires("graph_breaks", run([1.0] * 20, compile=diag))[0]
    from workbench.hypotheses.run_facts import ONE_TIME_COST_CALLS

    assert cold.time_at_stake_ms == pytest.approx((499.0 - 300.0) / ONE_TIME_COST_CALLS)
    # the extra graphs' compile is one-time: on the same basis as cold start (stated in the text)
    assert gb.time_at_stake_ms == pytest.approx(0.75 + 300.0 / ONE_TIME_COST_CALLS)
    assert (
        f"spread over {ONE_TIME_COST_CALLS} calls" in gb.observed
        and f"spread over {ONE_TIME_COST_CALLS} calls" in cold.observed
    )


def test_noise_confidence_follows_the_median_interval_not_outliers():
    rng = np.random.default_rng(0)
    outliers = [1.0 + 0.01 * rng.standard_normal() for _ in range(22)] + [5.0] * 8  # preempted samples
    h = fires("noisy_timing", run(outliers))
    assert h == [] or h[0].confidence != "high"
    wide = fires("noisy_timing", run(rng.uniform(0.2, 4.0, 30)))[0]
    # a caveat about the measurement is never a high-confidence finding about the workload
    assert wide.confidence == "medium" and wide.time_at_stake_ms < 4.0


def test_measurement_rules():
    rng = np.random.default_rng(0)
    assert fires("noisy_timing", run(rng.uniform(1, 3, 30)))[0].category == "measurement"
    assert fires("noisy_timing", run([1.0, 1.01, 0.99] * 10)) == []
    assert fires("too_few_samples", run([1.0] * 3))[0].confidence == "medium"  # no interval at all
    assert fires("too_few_samples", run([1.0, 1.1] * 4))[0].confidence == "low"  # an interval, findings qualified
    assert fires("too_few_samples", run([1.0] * 30)) == []
    assert fires("timer_resolution", run([0.001] * 30))
    assert fires("timer_resolution", run([1.0] * 30)) == []


def test_compile_rules_read_capture_diagnostics():
    from workbench.capture.compile_diag import CompileDiagnostics, GraphBreak, Recompile

    diag = CompileDiagnostics(
        dynamo_loaded=True,
        graph_count=3,
        frames_compiled=3,
        graph_breaks=(GraphBreak("print() call", "f.py:3", 2, ""),),
        recompiles=(Recompile("f", "f.py:1", ("tensor 'x' size mismatch at index 0",)),),
    )
    hb = fires("graph_breaks", run([1.0] * 20, compile=diag))
    assert hb[0].category == "graph_break" and "print() call at f.py:3" in hb[0].evidence[0].rows[0]["reason"]
    hr = fires("recompiles", run([1.0] * 20, compile=diag))
    assert hr[0].category == "recompilation" and "size mismatch" in hr[0].observed
    clean = CompileDiagnostics(dynamo_loaded=True, graph_count=1, frames_compiled=1)
    assert fires("graph_breaks", run([1.0] * 20, compile=clean)) == []
    assert fires("recompiles", run([1.0] * 20, compile=clean)) == []


def test_large_allocations_repeat_claims_only_time_above_the_roof():
    big = 32 << 20
    # two clones of 32 MiB taking 25 ms each: writing 32 MiB at 10 GB/s needs ~3.4 ms
    slow = cpu_ops(["aten::clone", "aten::clone"], [25_000.0, 25_000.0], 10.0)
    h = fires("large_allocations_repeat", facts(cpu_ops=slow, memory=memory_events([5.0, 25_015.0], [big, big])))[0]
    assert h.category == "allocation_churn"
    assert h.time_at_stake_ms == pytest.approx(2 * (25.0 - big / 10e9 * 1e3), rel=1e-3)
    # the same allocations in ops running at the roof leave nothing at stake
    fast = cpu_ops(["aten::clone", "aten::clone"], [3_400.0, 3_400.0], 10.0)
    assert (
        fires("large_allocations_repeat", facts(cpu_ops=fast, memory=memory_events([5.0, 3_415.0], [big, big]))) == []
    )
    small = memory_events([5.0, 25_015.0], [1024, 1024])
    assert fires("large_allocations_repeat", facts(cpu_ops=slow, memory=small)) == []


def _launched_by(op_names, dims, kernel_names, dtype="float"):
    """One top-level op per kernel, each launching its kernel (kernels.op_index -> cpu_ops row)."""
    n = len(op_names)
    starts = np.arange(n) * 1000.0
    k, rt = gpu(starts, [900] * n, starts - 20, [5] * n, names=kernel_names)
    k["op_index"] = np.arange(n)
    ops = frame(
        "cpu_ops",
        {
            "rank": [0] * n,
            "tid": ["1"] * n,
            "name": op_names,
            "ts_us": starts - 30,
            "dur_us": [20.0] * n,
            "end_us": starts - 10,
            "depth": [0] * n,
            "parent": [-1] * n,
            "input_dims": dims,
            "input_types": [f'["{dtype}","{dtype}"]'] * n,
        },
    )
    return k, rt, ops


def test_gpu_kernels_placed_by_analytic_work_where_shapes_are_known():
    # a big fp32 matmul whose kernel name says nothing, and an add whose kernel name looks like a GEMM
    k, rt, ops = _launched_by(["aten::mm"] * 10, ["[[4096,4096],[4096,4096]]"] * 10, "void kernel_0x1f")
    f = TraceFacts(None, kernels=k, runtime=rt, cpu_ops=ops, device_properties=A100)
    h = fires("matrix_kernels_dominate", f)[0]
    placed = [e for e in h.evidence if e.metric == "placed_by_analytic_work_pct"][0]
    assert placed.value == pytest.approx(100.0) and h.evidence[0].rows[0]["work_op"] == "aten::mm"
    assert fires("memory_bound_kernels", f) == []
    k, rt, ops = _launched_by(["aten::add"] * 10, ["[[4194304],[4194304]]"] * 10, "void kernel_0x2f")
    f = TraceFacts(None, kernels=k, runtime=rt, cpu_ops=ops, device_properties=A100)
    assert fires("memory_bound_kernels", f)[0].evidence[0].rows[0]["placed_by"] == "analytic work"
    assert fires("matrix_kernels_dominate", f) == []
    # a kernel whose own name says GEMM is never a fusion candidate, whatever its launching op's work says
    k, rt, ops = _launched_by(["aten::add"] * 10, ["[[4194304],[4194304]]"] * 10, "ampere_sgemm_128x64_nn")
    f = TraceFacts(None, kernels=k, runtime=rt, cpu_ops=ops, device_properties=A100)
    assert fires("memory_bound_kernels", f) == []
    # without a known GPU the kernel name decides, and the evidence says so
    f = TraceFacts(None, kernels=k, runtime=rt, cpu_ops=ops)
    h = fires("matrix_kernels_dominate", f)[0]
    assert h.evidence[0].rows[0]["placed_by"] == "kernel name"


def test_compile_use_is_read_from_what_dynamo_recorded_not_from_compiled_graphs_only():
    from workbench.capture.compile_diag import CompileDiagnostics, GraphBreak

    # a graph break inside a loop: dynamo skipped the whole frame, so no graph was compiled,
    # but it recorded the break (and its compile time): torch.compile was used
    skipped = CompileDiagnostics(
        dynamo_loaded=True,
        graph_count=0,
        frames_compiled=0,
        compile_time_ms=12.0,
        graph_breaks=(GraphBreak("Tensor.item()", "f.py:3", 2, ""),),
    )
    assert not skipped.compiled_anything
    gb = fires("graph_breaks", run([1.0] * 20, compile=skipped))
    assert gb and gb[0].category == "graph_break"
    # nothing recorded at all: the rule says it could not judge, and why
    from workbench.hypotheses.registry import NotJudged

    with pytest.raises(NotJudged, match="did not use torch.compile"):
        fires("graph_breaks", run([1.0] * 20, compile=CompileDiagnostics(dynamo_loaded=True)))
