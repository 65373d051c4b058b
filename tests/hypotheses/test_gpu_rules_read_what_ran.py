"""GPU rules judge what ran (kernel type names, op dtypes, kernel alignment, kernel families), stake by the
kernels' own time, and fold per-rank copies of one finding into one hypothesis naming the ranks."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.hypotheses.builders import A100, facts, fires, gpu, half_gpu
from workbench.hypotheses import diagnose
from workbench.hypotheses.catalog import get_rule
from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.fold_ranks import fold, fold_ranks, scope_ranks
from workbench.hypotheses.hypothesis import Evidence, Hypothesis
from workbench.hypotheses.registry import NotJudged
from workbench.trace.schema import frame

BF16_GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
FLASH = "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::bfloat16_t> >"
ALIGN8 = "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>"
ALIGN2 = "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_64x3_tn_align2>"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16> >"
H100 = [{"name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "totalGlobalMem": 85899345920}]


def _kernels(names, durs, device=A100, gap=2.0, rank=0):
    ts = np.concatenate([[0.0], np.cumsum(np.asarray(durs[:-1], float) + gap)])
    k, rt = gpu(ts, durs, ts - 5, [3] * len(durs), names=names, rank=rank)
    return TraceFacts(None, kernels=k, runtime=rt, device_properties=device)


# -- precision ------------------------------------------------------------------------------
def test_bf16_kernels_with_an_f32_accumulator_are_not_fp32_gemms():
    f = _kernels([BF16_GEMM, FLASH] * 5, [50.0] * 10, device=H100)
    assert fires("fp32_matmul_without_tf32", f) == []
    f = _kernels(["ampere_sgemm_128x64_nn", FLASH] * 5, [50.0] * 10)
    h = fires("fp32_matmul_without_tf32", f)[0]
    assert [r["name"] for r in h.evidence[0].rows] == ["ampere_sgemm_128x64_nn"]
    assert h.time_at_stake_ms == pytest.approx(5 * 50.0 / 2 / 1e3)  # half the fp32 kernels' own time


def test_fp32_rule_does_not_guess_when_no_kernel_states_its_precision():
    f = _kernels(["nvjet_tst_128x64_64x4_1x2_h_bz_NNT"] * 4, [50.0] * 4)
    with pytest.raises(NotJudged, match="precision of 4 matrix kernels is unknown"):
        get_rule("fp32_matmul_without_tf32").fn(f, get_rule("fp32_matmul_without_tf32").limits)
    with pytest.raises(NotJudged, match="precision of 4 matrix kernels is unknown"):
        get_rule("half_matmul_unaligned").fn(f, get_rule("half_matmul_unaligned").limits)


def test_fp32_rule_without_device_properties_is_not_judged():
    f = _kernels(["ampere_sgemm_128x64_nn"] * 4, [50.0] * 4, device=[])
    with pytest.raises(NotJudged, match="no device properties"):
        get_rule("fp32_matmul_without_tf32").fn(f, get_rule("fp32_matmul_without_tf32").limits)


def test_alignment_is_what_the_kernel_did_and_stakes_its_own_time():
    # the op's M (141) is not a multiple of 8, but the kernel that ran is align8: aligned
    f = half_gpu("[[141,512],[512,512]]", kernel=ALIGN8, types='["c10::BFloat16","c10::BFloat16"]')
    assert fires("half_matmul_unaligned", f) == []
    # an align2 kernel is unaligned whatever the shapes say; the stake is half its own 40 µs
    f = half_gpu(
        "[[141,512],[512,30522]]",
        kernel=[ALIGN2] + [ALIGN8] * 3,
        unaligned_us=40.0,
        types='["c10::BFloat16","c10::BFloat16"]',
    )
    h = fires("half_matmul_unaligned", f)[0]
    assert h.time_at_stake_ms == pytest.approx(0.020)
    assert h.evidence[0].rows[0]["kernel_align"] == 2 and "1 half-precision matrix kernel ran" in h.title


def test_alignment_without_a_tag_reads_k_and_n_and_without_shapes_is_not_judged():
    assert fires("half_matmul_unaligned", half_gpu("[[1000,1001],[1001,512]]"))  # K = 1001
    assert fires("half_matmul_unaligned", half_gpu("[[1001,1024],[1024,512]]")) == []  # only M odd
    f = half_gpu("[[1000,1001],[1001,512]]")
    f.kernels["op_index"] = -1  # no link to an op with shapes; the name states no alignment
    f.kernels["name"] = "sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x32"
    with pytest.raises(NotJudged, match="state no alignment"):
        get_rule("half_matmul_unaligned").fn(f, get_rule("half_matmul_unaligned").limits)


# -- fusion chains ----------------------------------------------------------------------------
def test_gemm_and_attention_kernels_never_join_a_fusion_chain():
    f = _kernels([ADD, BF16_GEMM, FLASH, ADD, ALIGN8, ADD] * 4, [10.0] * 24, device=H100)
    hs = fires("memory_bound_kernels", f)
    assert hs == [] or all("gemm" not in str(r) and "flash" not in str(r) for e in hs[0].evidence for r in e.rows)
    chain = _kernels([ADD] * 6 + [BF16_GEMM] + [ADD] * 6, [10.0] * 6 + [5.0] + [10.0] * 6, device=H100)
    h = fires("memory_bound_kernels", chain)[0]
    chains = [e for e in h.evidence if e.metric == "fusable_chain_us"][0]
    assert [r["length"] for r in chains.rows] == [6, 6]  # the GEMM splits the run in two
    assert h.time_at_stake_ms == pytest.approx(2 * 50.0 / 1e3)


# -- many ranks -------------------------------------------------------------------------------
def _hyp(rank, stake, value):
    return Hypothesis(
        category="host_bound",
        title=f"GPU idle {value:.0f}% of the time",
        observed=f"rank {rank}: idle",
        mechanism="m",
        evidence=(Evidence("idle_pct", value, "%", 20.0, source="temporal"),),
        time_at_stake_ms=stake,
        predicted_effect="p",
        falsifier="f",
        rule="device_idle_host_wait",
        scope=f"rank {rank}",
    )


def test_fold_names_the_ranks_worst_first_with_the_spread():
    other = Hypothesis(
        category="communication",
        title="c",
        observed="o",
        mechanism="m",
        evidence=(Evidence("comm_pct", 20.0, "%"),),
        time_at_stake_ms=1.0,
        predicted_effect="p",
        falsifier="f",
        rule="exposed_communication",
        scope="rank 0",
    )
    out = fold_ranks([_hyp(0, 2.0, 40.0), other, _hyp(1, 5.0, 70.0), _hyp(2, 3.0, 50.0)], all_ranks=[0, 1, 2, 3])
    assert len(out) == 2 and out[1] is other  # a single copy stays as it is
    h = out[0]
    assert scope_ranks(h.scope) == (1, 2, 0) and h.scope == "ranks 1, 2, 0 (of 4)"
    assert h.time_at_stake_ms == 5.0  # the worst rank's, not the sum (10)
    spread = [e for e in h.evidence if e.metric.endswith("_spread_across_ranks")][0]
    assert spread.value == pytest.approx(30.0) and [r["rank"] for r in spread.rows] == [1, 2, 0]
    assert "idle_pct 40-70 %" in h.observed and h.evidence[0].value == 70.0


def _host_wait_rank(rank, gap):
    starts = np.arange(20) * (10.0 + gap)
    return gpu(starts, [10] * 20, starts - 5, [4] * 20, rank=rank)


def test_a_finding_on_every_rank_is_one_hypothesis():
    parts = [_host_wait_rank(r, gap) for r, gap in ((0, 200.0), (1, 300.0), (2, 250.0))]
    f = facts(
        kernels=pd.concat([p[0] for p in parts], ignore_index=True),
        runtime=pd.concat([p[1] for p in parts], ignore_index=True),
    )
    diag = diagnose(f)
    idle = [h for h in diag.hypotheses if h.rule == "device_idle_host_wait"]
    assert len(idle) == 1 and scope_ranks(idle[0].scope)[0] == 1 and set(scope_ranks(idle[0].scope)) == {0, 1, 2}


def test_host_sync_is_per_rank_not_summed_over_ranks():
    parts = []
    for rank in (0, 1):
        starts = np.arange(10) * 100.0
        parts.append(
            gpu(
                starts,
                [90] * 10,
                starts,
                [5] * 10,
                rank=rank,
                runtime_extra={
                    "rank": [rank],
                    "tid": ["1"],
                    "name": ["cudaStreamSynchronize"],
                    "ts_us": [200.0],
                    "dur_us": [400.0],
                    "end_us": [600.0],
                    "correlation": [999],
                },
            )
        )
    f = facts(
        kernels=pd.concat([p[0] for p in parts], ignore_index=True),
        runtime=pd.concat([p[1] for p in parts], ignore_index=True),
    )
    hs = fires("host_sync_calls", f)
    assert [h.scope for h in hs] == ["rank 0", "rank 1"]
    assert all(h.evidence[0].value == pytest.approx(400.0 / 990.0 * 100) for h in hs)  # of that rank's window
    h = fold(hs, [0, 1])
    assert h.evidence[0].value <= 100 and "1 sync calls" in h.title


def _rank_with_collective(rank, compute_us, idle_us, comm_us):
    """``idle_us`` of GPU idle, then ``compute_us`` of compute, then an all-reduce of ``comm_us``."""
    k, rt = gpu(
        [idle_us, idle_us + compute_us],
        [compute_us, comm_us],
        [idle_us - 5, idle_us + compute_us - 5],
        [3, 3],
        names=["volta_sgemm_128x64_nn", "ncclKernel_AllReduce_RING_LL_Sum_float"],
        rank=rank,
        ktype=["computation", "communication"],
    )
    pre = gpu([0.0], [1.0], [-5.0], [3], rank=rank)  # every rank's first GPU event at t = 0
    return pd.concat([pre[0], k], ignore_index=True), pd.concat([pre[1], rt], ignore_index=True)


def _ranks(*specs):
    parts = [_rank_with_collective(r, *s) for r, s in enumerate(specs)]
    return facts(
        kernels=pd.concat([p[0] for p in parts], ignore_index=True),
        runtime=pd.concat([p[1] for p in parts], ignore_index=True),
    )


def test_straggler_judged_on_compute_before_the_collective():
    # rank 2 computes 900 µs before the all-reduce, the others 500: the others wait ~400 µs in it
    h = fires("straggler_rank", _ranks((500, 0, 450), (500, 0, 450), (900, 0, 50)))[0]
    assert h.category == "load_imbalance" and scope_ranks(h.scope) == (2,)
    excess = [e for e in h.evidence if e.metric == "straggler_excess_compute_pct"][0]
    assert excess.value == pytest.approx(80.0, abs=1.0) and "more work" in h.observed


def test_straggler_with_median_compute_is_named_late_host_not_more_work():
    h = fires("straggler_rank", _ranks((500, 0, 450), (500, 0, 450), (500, 400, 50)))[0]
    assert scope_ranks(h.scope) == (2,) and "hosts issue the work late" in h.observed


def test_straggler_lateness_the_trace_does_not_show_is_said_so_with_low_confidence():
    h = fires("straggler_rank", _ranks((500, 0, 450), (500, 0, 450), (500, 0, 50)))[0]
    assert scope_ranks(h.scope) == (2,) and "neither explains" in h.observed and h.confidence == "low"


def test_ranks_without_collectives_or_kernels_are_not_judged():
    f = _ranks((500, 0, 450), (900, 0, 50))
    k = f.kernels
    no_comm = gpu([0.0, 10.0], [5.0, 5.0], [-5.0, 5.0], [3, 3], rank=2)
    ops = frame(
        "cpu_ops", {"rank": [3], "tid": ["1"], "name": ["aten::add"], "ts_us": [0.0], "dur_us": [5.0], "end_us": [5.0]}
    )
    f = facts(
        kernels=pd.concat([k, no_comm[0]], ignore_index=True),
        runtime=pd.concat([f.runtime, no_comm[1]], ignore_index=True),
        cpu_ops=ops,
    )
    h = fires("straggler_rank", f)[0]
    assert scope_ranks(h.scope) == (1,)
    assert any("ranks 2 run no collectives" in c for c in h.confounders)
    assert any("ranks 3 have no kernels" in c for c in h.confounders)
    only_one = facts(kernels=pd.concat([_rank_with_collective(0, 500, 0, 450)[0], no_comm[0]], ignore_index=True))
    with pytest.raises(NotJudged):
        get_rule("straggler_rank").fn(only_one, get_rule("straggler_rank").limits)
