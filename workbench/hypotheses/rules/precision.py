"""Precision: fp32 matrix kernels on tensor-core GPUs without TF32; half-precision matmul dims
that are not multiples of 8 (tensor cores unused or padded)."""
from __future__ import annotations

import re

from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.model import Evidence, Hypothesis
from workbench.hypotheses.registry import NotJudged, rule
from workbench.hypotheses.rules._common import bounded_ms, pct, rows

FP32_GEMM = re.compile(r"sgemm|gemm.*_f32|f32.*gemm|gemmSN|gemv2T_kernel_val<int, int, float|cutlass.*float", re.I)
TF32 = re.compile(r"tf32|xmma.*f32f32_tf32|s1688|s16816", re.I)
MATMUL_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear")


def _compute_major(f: TraceFacts) -> int:
    majors = [int(p.get("computeMajor", 0) or 0) for p in f.device_list]
    if not majors:
        raise NotJudged("the trace has no device properties (compute capability unknown)")
    return max(majors)


@rule("fp32_matmul_without_tf32", category="precision", scope="trace", min_compute_major=8, min_share_pct=10.0)
def fp32_matmul_without_tf32(f: TraceFacts, t):
    """fp32 GEMMs run on a GPU with TF32 tensor cores, without using them."""
    k = f.require_gpu()
    if _compute_major(f) < t["min_compute_major"]:
        return None
    names = k["name"].astype(str)
    fp32 = k[names.str.contains(FP32_GEMM) & ~names.str.contains(TF32)]
    total = float(k[k["kind"] == "kernel"]["dur_us"].sum())
    share = pct(fp32["dur_us"].sum(), total)
    if fp32.empty or share < t["min_share_pct"]:
        return None
    by_name = fp32.groupby("name", as_index=False).agg(n=("dur_us", "size"), dur_us=("dur_us", "sum"))
    return Hypothesis(
        category="precision", title=f"fp32 GEMMs without TF32 take {share:.0f}% of kernel time",
        observed=f"{len(fp32)} fp32 matrix kernels, {fp32['dur_us'].sum() / 1e3:.2f} ms, on compute capability >= {int(t['min_compute_major'])}",
        mechanism="Full-fp32 GEMMs use the CUDA cores; TF32 tensor cores run them several times faster at ~10-bit mantissa.",
        evidence=(Evidence("fp32_gemm_share_pct", share, "%", t["min_share_pct"], source="kernels (by name)",
                           rows=rows(by_name, ["name", "n", "dur_us"], by="dur_us")),),
        time_at_stake_ms=bounded_ms(fp32["dur_us"].sum() / 2, f.window_us),
        predicted_effect="torch.backends.cuda.matmul.allow_tf32 = True (or bf16 autocast) cuts these kernels' time by about half or more",
        falsifier="set torch.set_float32_matmul_precision('high'): if GEMM time does not fall, the GEMMs were not compute-limited",
        confounders=("kernel precision is read from kernel names", "TF32 changes numerics; check tolerance"),
        confidence="medium", suggested_variants=("compiled",), scope="all ranks")


def _dims(text: str) -> list[list[int]]:
    return [[int(x) for x in re.findall(r"-?\d+", grp)] for grp in re.findall(r"\[([^\[\]]*)\]", str(text))]


@rule("half_matmul_unaligned", category="precision", scope="trace", alignment=8, min_share_pct=5.0)
def half_matmul_unaligned(f: TraceFacts, t):
    """fp16/bf16 matmuls whose dimensions are not multiples of 8 (tensor cores unused or padded)."""
    ops = f.require_cpu_ops()
    mm = ops[ops["name"].astype(str).isin(MATMUL_OPS) & ops["input_types"].astype(str).str.contains("Half|BFloat16")]
    if mm.empty:
        return None
    align = int(t["alignment"])
    bad = mm[[any(d % align for shape in _dims(s)[:2] for d in shape[-2:]) for s in mm["input_dims"].astype(str)]]
    share = pct(bad["dur_us"].sum(), mm["dur_us"].sum())
    if bad.empty or share < t["min_share_pct"]:
        return None
    return Hypothesis(
        category="precision", title=f"{len(bad)} half-precision matmuls with dims not multiples of {align}",
        observed=f"{share:.0f}% of half-precision matmul time is in unaligned shapes",
        mechanism="Tensor-core GEMM kernels need dimensions in multiples of 8; otherwise slower kernels or padding run.",
        evidence=(Evidence("unaligned_matmul_share_pct", share, "%", t["min_share_pct"], source="cpu_ops (input dims)",
                           rows=rows(bad, ["name", "input_dims", "dur_us"], by="dur_us")),),
        time_at_stake_ms=bounded_ms(bad["dur_us"].sum() / 2, f.window_us),
        predicted_effect="padding the named dimension to a multiple of 8 lets tensor-core kernels run",
        falsifier="pad the dims to a multiple of 8 and re-time the op: if it is not faster, alignment was not the issue",
        confounders=("small matmuls are launch-bound anyway",), confidence="medium",
        suggested_variants=("eager",), scope="all ranks")
