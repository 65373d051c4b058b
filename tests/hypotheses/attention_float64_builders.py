"""Builders of the facts the ``materialised_attention`` and ``float64_compute`` rules read: small CPU-op (and
kernel) tables in the trace schema. Shared by tests/hypotheses/test_attention_rule.py,
tests/hypotheses/test_float64_rule.py (and test_every_rule's cases)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from tests.hypotheses.builders import A100
from workbench.hypotheses.facts import TraceFacts
from workbench.trace.schema import frame

# (name, dur_us, input_dims, input_types, parent): parent is a row of the same list, -1 at the top level
Op = tuple[str, float, str, str, int]

F2 = '["float","float"]'
B, L, D = 4, 128, 32
# softmax(q @ kᵀ / sqrt(d)) [dropout] @ v, as torch records it (the scale is a 0-dim double: a Python float)
ATTENTION: list[Op] = [
    ("aten::bmm", 100.0, f"[[{B},{L},{D}],[{B},{D},{L}]]", F2, -1),
    ("aten::div", 20.0, f"[[{B},{L},{L}],[]]", '["float","double"]', -1),
    ("aten::softmax", 60.0, f"[[{B},{L},{L}],[],[]]", '["float","Scalar",""]', -1),
    ("aten::_softmax", 58.0, f"[[{B},{L},{L}],[],[]]", '["float","Scalar","Scalar"]', 2),
    ("aten::dropout", 5.0, f"[[{B},{L},{L}],[],[]]", '["float","Scalar","Scalar"]', -1),
    ("aten::bmm", 100.0, f"[[{B},{L},{L}],[{B},{L},{D}]]", F2, -1),
]
ATTENTION_US = 285.0  # what a fused kernel replaces: both bmm, div, softmax, dropout (the top-level ops)
LINEAR: Op = ("aten::linear", 1000.0, f"[[{B},{L},{D}],[{3 * D},{D}],[{3 * D}]]", '["float","float","float"]', -1)


def op_table(entries: Sequence[Op], start_us: float = 0.0, tid: str = "1") -> "object":
    """CPU ops in order: a top-level op starts where the previous top-level op ended; a child starts 1 µs
    into its parent (after its earlier children)."""
    n = len(entries)
    ts = np.zeros(n)
    t = start_us
    child_t: dict[int, float] = {}
    for i, (_, dur, _, _, parent) in enumerate(entries):
        if parent < 0:
            ts[i] = t
            t += dur
        else:
            ts[i] = child_t.get(parent, ts[parent] + 1.0)
            child_t[parent] = ts[i] + dur
    dur = np.array([e[1] for e in entries], float)
    parent = np.array([e[4] for e in entries], np.int64)
    depth = np.zeros(n, np.int64)
    for i in range(n):
        depth[i] = 0 if parent[i] < 0 else depth[parent[i]] + 1
    return frame(
        "cpu_ops",
        {
            "rank": [0] * n,
            "tid": [tid] * n,
            "name": [e[0] for e in entries],
            "ts_us": ts,
            "dur_us": dur,
            "end_us": ts + dur,
            "depth": depth,
            "parent": parent,
            "input_dims": [e[2] for e in entries],
            "input_types": [e[3] for e in entries],
        },
    )


def shifted(entries: Sequence[Op], by: int) -> list[Op]:
    """``entries`` placed after ``by`` other rows (their parents moved with them)."""
    return [(n, d, dims, types, p + by if p >= 0 else -1) for n, d, dims, types, p in entries]


def attention_facts(share_pct: float = 20.0, entries: Sequence[Op] | None = None) -> TraceFacts:
    """A linear, then hand-written attention (``ATTENTION``) taking ``share_pct`` of the ops' span."""
    body = list(entries if entries is not None else ATTENTION)
    other = ATTENTION_US * (100.0 / share_pct - 1.0)
    ops = op_table([(LINEAR[0], other, *LINEAR[2:])] + shifted(body, 1))
    return TraceFacts(None, cpu_ops=ops)


def module_scope(name: str, ts_us: float, end_us: float, tid: str = "1"):
    """An ``nn.Module: <name>`` annotation (the module scopes workbench records without the Python tracer)."""
    return frame(
        "annotations",
        {
            "rank": [0],
            "tid": [tid],
            "name": [f"nn.Module: {name}"],
            "kind": ["user"],
            "ts_us": [ts_us],
            "dur_us": [end_us - ts_us],
            "end_us": [end_us],
        },
    )


def linked_gpu(ops, launches: Sequence[tuple[int, str, float]], start_us: float = 0.0) -> TraceFacts:
    """GPU kernels back to back on one stream, each launched by the op of its row (``op_index``)."""
    n = len(launches)
    dur = np.array([d for _, _, d in launches], float)
    ts = start_us + np.r_[0.0, np.cumsum(dur)[:-1]]
    k = frame(
        "kernels",
        {
            "rank": [0] * n,
            "stream": [7] * n,
            "name": [name for _, name, _ in launches],
            "kind": ["kernel"] * n,
            "kernel_type": ["computation"] * n,
            "ts_us": ts,
            "dur_us": dur,
            "end_us": ts + dur,
            "correlation": list(range(n)),
            "op_index": [row for row, _, _ in launches],
            "op_name": [str(ops["name"].iloc[row]) if row >= 0 else "" for row, _, _ in launches],
        },
    )
    return TraceFacts(None, cpu_ops=ops, kernels=k, device_properties=A100)


GEMM_NT = "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nt_align4>"
GEMM_NN = "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>"
SOFTMAX_KERNEL = "void (anonymous namespace)::softmax_warp_forward<float, float, float, 7, false, false>"
DIV_KERNEL = "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::DivFunctor<float> > >"
FLASH_KERNEL = "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::bfloat16_t> >"
LINEAR_KERNEL = "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3"
ELEMENTWISE = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >"
)


def kernels_only(names: Sequence[str], durs: Sequence[float]) -> TraceFacts:
    """Kernels back to back on one stream, no CPU ops and no op links."""
    n = len(names)
    dur = np.asarray(durs, float)
    ts = np.r_[0.0, np.cumsum(dur)[:-1]]
    k = frame(
        "kernels",
        {
            "rank": [0] * n,
            "stream": [7] * n,
            "name": list(names),
            "kind": ["kernel"] * n,
            "kernel_type": ["computation"] * n,
            "ts_us": ts,
            "dur_us": dur,
            "end_us": ts + dur,
            "correlation": list(range(n)),
        },
    )
    return TraceFacts(None, kernels=k, device_properties=A100)


# -- float64 ------------------------------------------------------------------------------------------
D2 = '["double","double"]'
MM_DIMS = "[[256,256],[256,256]]"


def float64_facts(share_pct: float = 30.0, total_us: float = 1000.0) -> TraceFacts:
    """An aten::mm in float64 taking ``share_pct`` of the top-level op time, the rest an aten::mm in float32."""
    wide = total_us * share_pct / 100.0
    ops = op_table([("aten::mm", wide, MM_DIMS, D2, -1), ("aten::mm", total_us - wide, MM_DIMS, F2, -1)])
    return TraceFacts(None, cpu_ops=ops)
