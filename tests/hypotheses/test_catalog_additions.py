"""Catalog entries added in the second follow-up: each fires on a case made for it and stays silent
on a near miss (small tables in the trace schema; run-level rules over a SimpleNamespace run)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from tests.hypotheses.test_rules_fire import A100, cpu_ops, fires, gpu
from workbench.capture.measurement import Measurement
from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.run_facts import RunFacts
from workbench.trace.schema import frame


def test_frequent_sequences_on_kernels_and_on_cpu_ops():
    names = ["gemm_a", "bias_add", "relu_k", "softmax_k"] * 12
    starts = np.arange(48) * 20.0           # 10 µs kernels, 10 µs idle between them
    k, rt = gpu(starts, [10] * 48, starts - 5, [3] * 48, names=names)
    h = fires("frequent_sequences", TraceFacts(None, kernels=k, runtime=rt))[0]
    assert h.category == "launch_overhead"
    assert {e.metric: e.value for e in h.evidence}["repeats"] >= 5
    assert h.time_at_stake_ms > 0.1
    rng = np.random.default_rng(1)
    shuffled = [f"kernel_{i}" for i in rng.permutation(48)]
    k, rt = gpu(starts, [10] * 48, starts - 5, [3] * 48, names=shuffled)
    assert fires("frequent_sequences", TraceFacts(None, kernels=k, runtime=rt)) == []
    ops = cpu_ops(["aten::mul", "aten::add", "aten::relu"] * 10, [5.0] * 30, 20.0)
    assert fires("frequent_sequences", TraceFacts(None, cpu_ops=ops))[0].scope.endswith("host thread")
    same = cpu_ops(["aten::add"] * 30, [5.0] * 30, 20.0)      # one op repeated is no sequence
    assert fires("frequent_sequences", TraceFacts(None, cpu_ops=same)) == []


def _fill_and_copy(fill_dims: str, copy_bytes: int, fill_launches: bool = False):
    ops = frame("cpu_ops", {
        "rank": [0, 0, 0], "tid": ["1"] * 3, "name": ["aten::normal_", "aten::to", "aten::copy_"],
        "ts_us": [0.0, 2000.0, 2010.0], "dur_us": [1500.0, 900.0, 880.0], "end_us": [1500.0, 2900.0, 2890.0],
        "depth": [0, 0, 1], "parent": [-1, -1, 1], "input_dims": [fill_dims, "", "[[1024,1024],[1024,1024]]"],
        "input_types": ['["float","Scalar","Scalar",""]', "", '["float","float"]']})
    k = frame("kernels", {"rank": [0], "stream": [7], "name": ["Memcpy HtoD (Pageable -> Device)"], "kind": ["memcpy"],
                          "kernel_type": ["memory"], "ts_us": [2100.0], "dur_us": [700.0], "end_us": [2800.0],
                          "correlation": [1], "bytes": [copy_bytes], "op_index": [2]})
    rt = frame("runtime", {"rank": [0] * 2, "tid": ["1"] * 2, "name": ["cudaMemcpyAsync", "cudaLaunchKernel"],
                           "ts_us": [2020.0, 100.0], "dur_us": [850.0, 5.0], "end_us": [2870.0, 105.0],
                           "correlation": [1, 2], "op_index": [2, 0 if fill_launches else -1]})
    return TraceFacts(None, cpu_ops=ops, kernels=k, runtime=rt)


def test_cpu_fill_then_copy():
    mib4 = 1024 * 1024 * 4
    h = fires("cpu_fill_then_copy", _fill_and_copy("[[1024,1024],[],[],[]]", mib4))[0]
    assert h.category == "transfer" and h.evidence[0].rows[0]["fill_op"] == "aten::normal_"
    assert h.time_at_stake_ms == pytest.approx((700.0 + 1500.0) / 1e3)
    assert fires("cpu_fill_then_copy", _fill_and_copy("[[512,1024],[],[],[]]", mib4)) == []          # other size
    assert fires("cpu_fill_then_copy", _fill_and_copy("[[1024,1024],[],[],[]]", mib4, True)) == []   # GPU fill


def _conv_bn(bias: bool, bn_channels: int = 64):
    conv_dims = f"[[8,3,32,32],[64,3,3,3],{'[64]' if bias else '[]'},[],[],[],[]]"
    return frame("cpu_ops", {
        "rank": [0] * 3, "tid": ["1"] * 3, "name": ["aten::conv2d", "aten::convolution", "aten::batch_norm"],
        "ts_us": [0.0, 1.0, 4100.0], "dur_us": [4000.0, 3990.0, 100.0], "end_us": [4000.0, 3991.0, 4200.0],
        "depth": [0, 1, 0], "parent": [-1, 0, -1],
        "input_dims": [conv_dims, conv_dims, f"[[8,{bn_channels},32,32],[64],[64],[64],[64],[],[],[],[]]"],
        "input_types": ['["float","float","float"]'] * 3})


def test_conv_bias_before_batch_norm():
    h = fires("conv_bias_before_batch_norm", TraceFacts(None, cpu_ops=_conv_bn(True)))[0]
    assert h.evidence[0].value == 1 and h.evidence[0].rows[0]["out_channels"] == 64
    # one read + one write of 8x64x32x32 fp32 at the default 10 GB/s ceiling
    assert h.time_at_stake_ms == pytest.approx(8 * 64 * 32 * 32 * 4 * 2 / 10e9 * 1e3)
    assert fires("conv_bias_before_batch_norm", TraceFacts(None, cpu_ops=_conv_bn(False))) == []
    assert fires("conv_bias_before_batch_norm", TraceFacts(None, cpu_ops=_conv_bn(True, bn_channels=32))) == []


def test_data_parallel_not_ddp():
    names = ["torch/nn/parallel/replicate.py(95): replicate", "aten::mm", "BroadcastBackward", "aten::relu"]
    ops = cpu_ops(names, [300.0, 100.0, 200.0, 50.0], 10.0)
    h = fires("data_parallel_not_ddp", TraceFacts(None, cpu_ops=ops))[0]
    assert h.category == "communication" and h.evidence[0].value > 50
    plain = cpu_ops(["aten::mm", "GatherBackward0", "aten::scatter_"], [300.0, 100.0, 50.0], 10.0)   # aten's own backward
    assert fires("data_parallel_not_ddp", TraceFacts(None, cpu_ops=plain)) == []


def _steps(durs):
    ts = np.cumsum([0.0] + list(durs[:-1]))
    n = len(durs)
    ann = frame("annotations", {"rank": [0] * n, "tid": ["1"] * n, "name": [f"ProfilerStep#{i}" for i in range(n)],
                                "kind": ["step"] * n, "ts_us": ts, "dur_us": durs, "end_us": ts + np.asarray(durs)})
    ops = cpu_ops(["aten::add"] * n, [d * 0.9 for d in durs], 0.1 * min(durs))
    return ann, ops


def test_first_step_outlier():
    ann, ops = _steps([5000.0, 1000.0, 1010.0, 990.0, 1000.0])
    h = fires("first_step_outlier", TraceFacts(None, annotations=ann, cpu_ops=ops))[0]
    assert h.category == "measurement" and h.evidence[1].value == pytest.approx(4000.0)
    ann, ops = _steps([1100.0, 1000.0, 1010.0, 990.0, 1000.0])
    assert fires("first_step_outlier", TraceFacts(None, annotations=ann, cpu_ops=ops)) == []


def _gpu_run(warmup_record, first_step_us=5000.0):
    durs = [first_step_us, 1000.0, 1000.0, 1000.0]
    ts = np.array([0.0, first_step_us, first_step_us + 1000, first_step_us + 2000])
    k, rt = gpu(ts + 10, [900] * 4, ts + 2, [5] * 4)
    ann = frame("annotations", {"rank": [0] * 4, "tid": ["1"] * 4, "name": [f"ProfilerStep#{i}" for i in range(4)],
                                "kind": ["step"] * 4, "ts_us": ts, "dur_us": durs, "end_us": ts + np.asarray(durs)})
    trace = SimpleNamespace(kernels=k, runtime=rt, annotations=ann, cpu_ops=frame("cpu_ops", {}),
                            memory=frame("memory", {}), device_properties=A100, n_calls=4)
    return RunFacts(SimpleNamespace(timing=Measurement(tuple([1.0] * 20)), cold_ms=2.0, compile=None, environment={},
                                    trace=trace, profiler_warmup=warmup_record))


def test_first_profiler_session():
    h = fires("first_profiler_session", _gpu_run(""))[0]
    assert h.category == "measurement" and h.confidence == "high"
    assert h.time_at_stake_ms == pytest.approx(4.0 / 4)
    assert fires("first_profiler_session", _gpu_run("", first_step_us=1000.0))[0].confidence == "medium"
    assert fires("first_profiler_session", _gpu_run("ran: one short session on a cuda op before the measured one")) == []


def _mm_run(median_ms, ceiling):
    ops = cpu_ops(["aten::mm"], [1000.0], 0.0, dims=["[[2048,2048],[2048,2048]]"])   # 17.2 GFLOP
    trace = SimpleNamespace(kernels=frame("kernels", {}), runtime=frame("runtime", {}), cpu_ops=ops,
                            annotations=frame("annotations", {}), memory=frame("memory", {}), n_calls=1)
    return RunFacts(SimpleNamespace(timing=Measurement(tuple([median_ms] * 20)), cold_ms=median_ms, compile=None,
                                    environment={"cpu_ceiling": ceiling} if ceiling else {}, trace=trace))


def test_faster_than_roofline():
    from workbench.hypotheses import diagnose_run
    from workbench.hypotheses.registry import NotJudged

    measured = {"copy_gbps": 6.5, "matmul_fp32_gflops": 157.0, "threads": 1}
    h = fires("faster_than_roofline", _mm_run(10.0, measured))[0]      # 17.2 GFLOP needs >= 109 ms at 157 GFLOP/s
    assert h.category == "measurement" and h.confidence == "high"
    assert h.evidence[0].rows[0]["roof_ms"] == pytest.approx(2 * 2048 ** 3 / 157e6, rel=1e-6)
    assert fires("faster_than_roofline", _mm_run(150.0, measured)) == []
    with pytest.raises(NotJudged, match="documented default"):
        fires("faster_than_roofline", _mm_run(10.0, None))
    assert diagnose_run(_mm_run(10.0, measured).run)[0].rule == "faster_than_roofline"   # it gates the ranking


def test_launch_delay_outliers():
    # 20 kernels back to back, launched just in time; then 5 launched early that start after 300 µs idle each
    normal = np.arange(20) * 110.0
    late = normal[-1] + 110.0 + np.arange(1, 6) * 400.0
    ts = np.concatenate([normal, late])
    launch = np.concatenate([normal - 20, np.full(5, normal[-1])])
    k, rt = gpu(ts, [100] * 25, launch, [5] * 25)
    h = fires("launch_delay_outliers", TraceFacts(None, kernels=k, runtime=rt))[0]
    assert h.category == "launch_overhead" and h.evidence[0].value == 5
    late_host = launch.copy()
    late_host[20:] = ts[20:] - 20        # launched after the stream went idle: host wait, not a delay
    k, rt = gpu(ts, [100] * 25, late_host, [5] * 25)
    assert fires("launch_delay_outliers", TraceFacts(None, kernels=k, runtime=rt)) == []


def test_precision_rules():
    starts = np.arange(10) * 100.0
    k, rt = gpu(starts, [90] * 10, starts - 5, [3] * 10, names="ampere_sgemm_128x64_nn")
    assert fires("fp32_matmul_without_tf32", TraceFacts(None, kernels=k, runtime=rt, device_properties=A100))[0] \
        .category == "precision"
    v100 = [{"name": "Tesla V100-SXM2-32GB", "computeMajor": 7}]
    assert fires("fp32_matmul_without_tf32", TraceFacts(None, kernels=k, runtime=rt, device_properties=v100)) == []
    tf32, rt2 = gpu(starts, [90] * 10, starts - 5, [3] * 10, names="sm80_xmma_gemm_f32f32_tf32f32_f32_nn")
    assert fires("fp32_matmul_without_tf32", TraceFacts(None, kernels=tf32, runtime=rt2, device_properties=A100)) == []
    # the device properties as a trace holds them: {rank: (devices...)}
    by_rank = {0: tuple(A100)}
    assert fires("fp32_matmul_without_tf32", TraceFacts(None, kernels=k, runtime=rt, device_properties=by_rank))
    half = lambda dims: frame("cpu_ops", {"rank": [0] * 4, "tid": ["1"] * 4, "name": ["aten::mm"] * 4,
                                          "ts_us": np.arange(4) * 100.0, "dur_us": [90.0] * 4,
                                          "end_us": np.arange(4) * 100.0 + 90, "depth": [0] * 4,
                                          "input_dims": [dims] * 4, "input_types": ['["c10::Half","c10::Half"]'] * 4})
    h = fires("half_matmul_unaligned", TraceFacts(None, cpu_ops=half("[[1000,1001],[1001,512]]")))[0]
    assert h.category == "precision"
    assert fires("half_matmul_unaligned", TraceFacts(None, cpu_ops=half("[[1024,1024],[1024,512]]"))) == []
