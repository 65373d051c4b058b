"""Rules over kernel and op sequences, model structure (conv bias, DataParallel), steps, the
measurement (first step, first profiler session, faster than the roofline), launch delays and
precision: each fires on a case made for it and stays silent on a near miss (builders in
tests/hypotheses/builders.py)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.hypotheses.builders import (
    A100,
    conv_bn,
    cpu_ops,
    fill_and_copy,
    fires,
    gpu,
    gpu_run,
    half_gpu,
    mm_run,
    steps,
)
from workbench.hypotheses.facts import TraceFacts


def test_frequent_sequences_on_kernels_and_on_cpu_ops():
    names = ["gemm_a", "bias_add", "relu_k", "softmax_k"] * 12
    starts = np.arange(48) * 20.0  # 10 µs kernels, 10 µs idle between them
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
    same = cpu_ops(["aten::add"] * 30, [5.0] * 30, 20.0)  # one op repeated is no sequence
    assert fires("frequent_sequences", TraceFacts(None, cpu_ops=same)) == []


def test_cpu_fill_then_copy():
    mib4 = 1024 * 1024 * 4
    h = fires("cpu_fill_then_copy", fill_and_copy("[[1024,1024],[],[],[]]", mib4))[0]
    assert h.category == "transfer" and h.evidence[0].rows[0]["fill_op"] == "aten::normal_"
    assert h.time_at_stake_ms == pytest.approx((700.0 + 1500.0) / 1e3)
    assert fires("cpu_fill_then_copy", fill_and_copy("[[512,1024],[],[],[]]", mib4)) == []  # other size
    assert fires("cpu_fill_then_copy", fill_and_copy("[[1024,1024],[],[],[]]", mib4, True)) == []  # GPU fill


def test_conv_bias_before_batch_norm():
    h = fires("conv_bias_before_batch_norm", TraceFacts(None, cpu_ops=conv_bn(True)))[0]
    assert h.evidence[0].value == 1 and h.evidence[0].rows[0]["out_channels"] == 64
    # one read + one write of 8x64x32x32 fp32 at the default 10 GB/s ceiling
    assert h.time_at_stake_ms == pytest.approx(8 * 64 * 32 * 32 * 4 * 2 / 10e9 * 1e3)
    assert fires("conv_bias_before_batch_norm", TraceFacts(None, cpu_ops=conv_bn(False))) == []
    assert fires("conv_bias_before_batch_norm", TraceFacts(None, cpu_ops=conv_bn(True, bn_channels=32))) == []


def test_data_parallel_not_ddp():
    names = ["torch/nn/parallel/replicate.py(95): replicate", "aten::mm", "BroadcastBackward", "aten::relu"]
    ops = cpu_ops(names, [300.0, 100.0, 200.0, 50.0], 10.0)
    h = fires("data_parallel_not_ddp", TraceFacts(None, cpu_ops=ops))[0]
    assert h.category == "communication" and h.evidence[0].value > 50
    plain = cpu_ops(
        ["aten::mm", "GatherBackward0", "aten::scatter_"], [300.0, 100.0, 50.0], 10.0
    )  # aten's own backward
    assert fires("data_parallel_not_ddp", TraceFacts(None, cpu_ops=plain)) == []


def test_first_step_outlier():
    ann, ops = steps([5000.0, 1000.0, 1010.0, 990.0, 1000.0])
    h = fires("first_step_outlier", TraceFacts(None, annotations=ann, cpu_ops=ops))[0]
    assert h.category == "measurement" and h.evidence[1].value == pytest.approx(4000.0)
    ann, ops = steps([1100.0, 1000.0, 1010.0, 990.0, 1000.0])
    assert fires("first_step_outlier", TraceFacts(None, annotations=ann, cpu_ops=ops)) == []


def test_first_profiler_session():
    h = fires("first_profiler_session", gpu_run(""))[0]
    assert h.category == "measurement" and h.confidence == "high"
    assert h.time_at_stake_ms == pytest.approx(4.0 / 4)
    assert fires("first_profiler_session", gpu_run("", first_step_us=1000.0))[0].confidence == "medium"
    assert fires("first_profiler_session", gpu_run("ran: one short session on a cuda op before the measured one")) == []


def test_faster_than_roofline():
    from workbench.hypotheses import diagnose
    from workbench.hypotheses.registry import NotJudged

    measured = {"copy_gbps": 6.5, "matmul_fp32_gflops": 157.0, "threads": 1}
    h = fires("faster_than_roofline", mm_run(10.0, measured))[0]  # 17.2 GFLOP needs >= 109 ms at 157 GFLOP/s
    assert h.category == "measurement" and h.confidence == "high"
    assert h.evidence[0].rows[0]["roof_ms"] == pytest.approx(2 * 2048**3 / 157e6, rel=1e-6)
    assert fires("faster_than_roofline", mm_run(150.0, measured)) == []
    # a measured ceiling is the best this machine reached once: a call 15 % faster than it is the
    # machine's fluctuation, not an impossible time (against a datasheet peak it would be)
    assert fires("faster_than_roofline", mm_run(0.85 * 2 * 2048**3 / 157e6, measured)) == []
    with pytest.raises(NotJudged, match="documented default"):
        fires("faster_than_roofline", mm_run(10.0, None))
    assert diagnose(mm_run(10.0, measured).run).hypotheses[0].rule == "faster_than_roofline"  # it gates the ranking


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
    late_host[20:] = ts[20:] - 20  # launched after the stream went idle: host wait, not a delay
    k, rt = gpu(ts, [100] * 25, late_host, [5] * 25)
    assert fires("launch_delay_outliers", TraceFacts(None, kernels=k, runtime=rt)) == []


def test_precision_rules():
    starts = np.arange(10) * 100.0
    k, rt = gpu(starts, [90] * 10, starts - 5, [3] * 10, names="ampere_sgemm_128x64_nn")
    assert (
        fires("fp32_matmul_without_tf32", TraceFacts(None, kernels=k, runtime=rt, device_properties=A100))[0].category
        == "precision"
    )
    v100 = [{"name": "Tesla V100-SXM2-32GB", "computeMajor": 7}]
    assert fires("fp32_matmul_without_tf32", TraceFacts(None, kernels=k, runtime=rt, device_properties=v100)) == []
    tf32, rt2 = gpu(starts, [90] * 10, starts - 5, [3] * 10, names="sm80_xmma_gemm_f32f32_tf32f32_f32_nn")
    assert fires("fp32_matmul_without_tf32", TraceFacts(None, kernels=tf32, runtime=rt2, device_properties=A100)) == []
    # the device properties as a trace holds them: {rank: (devices...)}
    by_rank = {0: tuple(A100)}
    assert fires("fp32_matmul_without_tf32", TraceFacts(None, kernels=k, runtime=rt, device_properties=by_rank))
    h = fires("half_matmul_unaligned", half_gpu("[[1000,1001],[1001,512]]"))[0]
    assert h.category == "precision"
    assert fires("half_matmul_unaligned", half_gpu("[[1024,1024],[1024,512]]")) == []
    # M (the rows) does not constrain tensor-core loads: K and N are multiples of 8
    assert fires("half_matmul_unaligned", half_gpu("[[1001,1024],[1024,512]]")) == []
