"""``materialised_attention``: a softmax between two batched matmuls (q·kᵀ, then ·v) found in the CPU ops (and
the kernels they launched) or, without op links, in kernel names; never inside a fused attention op.

Hand-built tables where it fires and where it must not, then two tiny live CPU workloads: attention written by
hand (it fires and names sdpa_attention) and the same through F.scaled_dot_product_attention (it does not).
The shared owlv2 trace (materialised bmm/softmax attention, 523 MB unpacked) is not loaded here."""

from __future__ import annotations

import pytest

from tests.hypotheses.attention_float64_builders import (
    ATTENTION,
    ATTENTION_US,
    DIV_KERNEL,
    ELEMENTWISE,
    F2,
    FLASH_KERNEL,
    GEMM_NN,
    GEMM_NT,
    LINEAR,
    LINEAR_KERNEL,
    SOFTMAX_KERNEL,
    B,
    D,
    L,
    attention_facts,
    kernels_only,
    linked_gpu,
    module_scope,
    op_table,
    shifted,
)
from tests.hypotheses.builders import fires
from workbench.errors import NotJudged
from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.rules.attention import op_matches

RULE = "materialised_attention"


def _evidence(h, metric="materialised_attention_pct"):
    return {e.metric: e for e in h.evidence}[metric]


# -- CPU ops ------------------------------------------------------------------------------------------
def test_hand_written_attention_fires_with_its_stake_and_the_sdpa_fix():
    (h,) = fires(RULE, attention_facts(20.0))
    assert h.rule == RULE and h.category == "memory_bound"
    assert h.suggested_variants == ("sdpa_attention", "fused_softmax", "compiled")
    assert h.time_at_stake_ms == pytest.approx(ATTENTION_US / 1e3)  # bmm + div + softmax + dropout + bmm
    e = _evidence(h)
    assert e.value == pytest.approx(20.0) and e.threshold == 5.0
    assert e.rows[0]["scores"] == f"[{B}, {L}, {L}]" and e.rows[0]["n"] == 1
    assert _evidence(h, "score_matrix_bytes").value == B * L * L * 4  # float32 scores
    assert h.confidence == "medium"  # the shapes were checked


def test_a_near_miss_below_the_share_stays_quiet_and_fires_with_the_threshold_lowered():
    assert fires(RULE, attention_facts(4.0)) == []
    assert fires(RULE, attention_facts(4.0), min_share_pct=3.0)


def test_no_finding_where_attention_already_runs_through_sdpa():
    # aten::scaled_dot_product_attention's math fallback runs matmul / _safe_softmax / matmul inside it
    sdpa = [
        ("aten::scaled_dot_product_attention", 300.0, f"[[{B},{L},{D}],[{B},{L},{D}],[{B},{L},{D}]]", F2, -1),
        ("aten::_scaled_dot_product_attention_math", 298.0, "", F2, 0),
        ("aten::matmul", 100.0, f"[[{B},{L},{D}],[{B},{D},{L}]]", F2, 1),
        ("aten::_safe_softmax", 60.0, f"[[{B},{L},{L}],[],[]]", F2, 1),
        ("aten::matmul", 100.0, f"[[{B},{L},{L}],[{B},{L},{D}]]", F2, 1),
    ]
    assert fires(RULE, attention_facts(50.0, sdpa)) == []


def test_a_lone_softmax_and_matmuls_without_softmax_stay_quiet():
    lone = [e for e in ATTENTION if e[0] != "aten::bmm"]
    lone = [(n, d, dims, t, (p - 1 if p >= 0 else -1)) for n, d, dims, t, p in lone]  # _softmax's parent moved
    assert fires(RULE, attention_facts(50.0, lone)) == []
    no_softmax = [e for e in ATTENTION if "softmax" not in e[0]]
    assert fires(RULE, attention_facts(50.0, no_softmax)) == []


def test_a_softmax_between_a_matmul_and_a_weight_is_not_attention():
    # softmax(x @ W1) @ W2: the matmuls' operands differ in rank (an activation and a weight)
    against_weights = [
        ("aten::matmul", 100.0, f"[[{B},{L},{D}],[{D},{L}]]", F2, -1),
        ("aten::softmax", 60.0, f"[[{B},{L},{L}],[],[]]", F2, -1),
        ("aten::matmul", 100.0, f"[[{B},{L},{L}],[{L},{D}]]", F2, -1),
    ]
    assert fires(RULE, attention_facts(50.0, against_weights)) == []


def test_shapes_that_do_not_chain_are_not_attention():
    other_scores = list(ATTENTION)
    other_scores[2] = ("aten::softmax", 60.0, f"[[{B},{L},{D}],[],[]]", F2, -1)  # not the matmul's output
    assert fires(RULE, attention_facts(50.0, other_scores)) == []


def test_too_many_ops_between_break_the_pattern():
    padding = [("aten::add", 5.0, f"[[{B},{L},{L}],[{B},{L},{L}],[]]", F2, -1)] * 9
    far = [*ATTENTION[:1], *padding, *shifted(ATTENTION[1:], len(padding))]
    assert fires(RULE, attention_facts(50.0, far)) == []
    assert fires(RULE, attention_facts(50.0, far), max_ops_between=10)


def test_without_shapes_it_matches_by_order_with_low_confidence():
    bare = [(n, d, "", t, p) for n, d, _, t, p in ATTENTION]
    (h,) = fires(RULE, attention_facts(20.0, bare))
    assert h.confidence == "low" and any("by op order only" in c for c in h.confounders)
    assert "score_matrix_bytes" not in {e.metric for e in h.evidence}


def test_matches_are_on_one_thread_and_one_call_level():
    import pandas as pd

    assert len(op_matches(op_table(ATTENTION), 8)) == 1
    # the value matmul on another thread: not this softmax's
    head = op_table(ATTENTION[:5], tid="1")
    tail = op_table(ATTENTION[5:], start_us=float(head["end_us"].max()), tid="2")
    assert op_matches(pd.concat([head, tail], ignore_index=True), 8).empty
    # nor one a level down, inside another op
    nested = [*ATTENTION[:5], ("aten::linear", 110.0, "", F2, -1), ("aten::bmm", 100.0, ATTENTION[5][2], F2, 5)]
    assert op_matches(op_table(nested), 8).empty


def test_the_module_that_ran_it_names_the_finding():
    f = attention_facts(20.0)
    ops = f.cpu_ops
    start = float(ops["ts_us"].iloc[1])
    ann = module_scope("SelfAttention_0", start - 0.5, float(ops["end_us"].max()) + 0.5)
    (h,) = fires(RULE, TraceFacts(None, cpu_ops=ops, annotations=ann))
    assert h.scope == "nn.Module SelfAttention" and "in SelfAttention (1 calls)" in h.title
    assert _evidence(h).rows[0]["where"] == "SelfAttention_0"


def test_not_judged_without_ops_or_kernels():
    with pytest.raises(NotJudged):
        fires(RULE, TraceFacts(None))


# -- GPU ---------------------------------------------------------------------------------------------
def _gpu_attention(linear_us: float = 100.0):
    ops = op_table([LINEAR] + shifted(ATTENTION, 1))
    # rows: 0 linear, 1 bmm, 2 div, 3 softmax, 4 _softmax, 5 dropout, 6 bmm
    return linked_gpu(
        ops,
        [
            (0, LINEAR_KERNEL, linear_us),
            (1, GEMM_NT, 40.0),
            (2, DIV_KERNEL, 10.0),
            (4, SOFTMAX_KERNEL, 30.0),
            (6, GEMM_NN, 20.0),
        ],
    )


def test_on_a_gpu_the_stake_is_the_kernels_the_matched_ops_launched():
    (h,) = fires(RULE, _gpu_attention())
    assert h.time_at_stake_ms == pytest.approx(0.1)  # 40 + 10 + 30 (launched by _softmax, inside softmax) + 20
    assert _evidence(h).value == pytest.approx(50.0)  # of 200 µs computation-kernel time
    assert "computation-kernel time" in h.title


def test_on_a_gpu_running_flash_attention_nothing_fires():
    ops = op_table(
        [
            LINEAR,
            ("aten::scaled_dot_product_attention", 50.0, "", F2, -1),
            ("aten::_scaled_dot_product_flash_attention", 48.0, "", F2, 1),
            ("aten::_flash_attention_forward", 46.0, "", F2, 2),
        ]
    )
    assert fires(RULE, linked_gpu(ops, [(0, LINEAR_KERNEL, 100.0), (3, FLASH_KERNEL, 40.0)])) == []


def test_kernel_names_alone_find_it_where_the_trace_links_no_op():
    (h,) = fires(
        RULE, kernels_only([LINEAR_KERNEL, GEMM_NT, DIV_KERNEL, SOFTMAX_KERNEL, GEMM_NN], [100, 40, 10, 30, 20])
    )
    assert h.confidence == "low" and h.time_at_stake_ms == pytest.approx(0.1)
    assert h.suggested_variants[0] == "sdpa_attention"
    # a flash kernel, or a softmax without a GEMM after it, is not materialised attention
    assert fires(RULE, kernels_only([LINEAR_KERNEL, FLASH_KERNEL, ELEMENTWISE], [100, 40, 10])) == []
    assert fires(RULE, kernels_only([GEMM_NT, SOFTMAX_KERNEL, ELEMENTWISE], [40, 30, 10])) == []


# -- live, on this CPU -------------------------------------------------------------------------------
@pytest.mark.usefixtures("one_torch_thread")
def test_a_profiled_hand_written_attention_is_found_and_sdpa_is_not():
    torch = pytest.importorskip("torch")
    import math

    import workbench as wb
    from workbench.hypotheses import diagnose

    class HandWritten(torch.nn.Module):
        def __init__(self, d: int = 32):
            super().__init__()
            self.qkv = torch.nn.Linear(d, 3 * d)

        def forward(self, x):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1) @ v

    class Fused(HandWritten):
        def forward(self, x):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            return torch.nn.functional.scaled_dot_product_attention(q, k, v)

    x = torch.randn(4, 128, 32)
    found = {}
    for model in (HandWritten(), Fused()):
        with torch.no_grad():
            run = wb.profile(model.eval(), x, warmup=1, repeat=3, history=False)
        found[type(model).__name__] = {h.rule: h for h in diagnose(run.trace).hypotheses}
    h = found["HandWritten"][RULE]
    assert h.suggested_variants[0] == "sdpa_attention"
    assert _evidence(h).rows[0]["scores"] == "[4, 128, 128]"
    assert RULE not in found["Fused"]
