"""Precision, read from what ran: fp32 matrix kernels on tensor-core GPUs without TF32; half-precision
matrix kernels that ran unaligned (tensor cores fed by narrow loads, or padding).

A kernel's precision is what its own name states (``analysis.kernel_precision``: ``bf16``, ``f16``,
``tf32``, ``sgemm``, xmma type groups where ``f32`` after a lower input type is the accumulator), else the
input dtype of the op that launched it; a kernel with neither is not judged. Alignment is what the kernel
states (``_align8``: 8-element, 16-byte loads) or, without a tag, the K and N dimensions of the matmul op
that launched it (M does not constrain tensor-core loads). Stakes are the kernels' own time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from workbench.analysis.kernel_precision import FP32, HALF_TYPES, kernel_precisions, launching_op_rows
from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.gpu_roofline import family_by_name
from workbench.hypotheses.hypothesis import Evidence
from workbench.hypotheses.registry import Limits, NotJudged, rule
from workbench.hypotheses.rules._common import bounded_ms, pct, per_rank_max_us, rows, summed_over
from workbench.hypotheses.words import Finding, Words

MATMUL_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear")


def _compute_major(f: TraceFacts) -> int:
    majors = [int(p.get("computeMajor", 0) or 0) for p in f.device_list]
    if not majors or max(majors) <= 0:
        raise NotJudged("the trace has no device properties (compute capability unknown)")
    return max(majors)


def matrix_kernels(f: TraceFacts) -> pd.DataFrame:
    """Computation kernels whose own name says GEMM / convolution / attention, with their precision
    (``analysis.kernel_precisions``)."""
    cache = f.__dict__.setdefault("_derived", {})
    if "matrix_kernels" not in cache:
        k = f.require_gpu()
        k = k[(k["kind"] == "kernel") & (k["kernel_type"] == "computation")]
        k = k[family_by_name(k["name"]) == "matrix"]
        cache["matrix_kernels"] = kernel_precisions(k, f.cpu_ops)
    return cache["matrix_kernels"]


@dataclass(frozen=True)
class Fp32MatmulWithoutTf32Limits(Limits):
    """The thresholds of ``fp32_matmul_without_tf32``."""

    min_compute_major: int = 8
    min_share_pct: float = 10.0


@dataclass(frozen=True, kw_only=True)
class Fp32MatmulWithoutTf32Finding(Finding):
    share_pct: float  # of computation-kernel time
    n_kernels: int  # fp32 matrix kernels (by their names)
    fp32_ms: float  # their summed time
    total_ms: float  # computation-kernel time
    summed_over: str  # how the ranks' times were summed (empty for one rank)
    min_compute_major: int  # the compute capability from which TF32 tensor cores exist
    n_unknown: int = 0  # matrix kernels whose precision does not tell TF32 from fp32
    unknown_ms: float = 0.0  # their summed time


FP32_WORDS = Words(
    title="fp32 GEMMs without TF32 take {share_pct:.0f}% of kernel time",
    observed="{n_kernels} fp32 matrix kernels on the CUDA cores (by their names: sgemm / scudnn / simt), "
    "{fp32_ms:.2f} ms of {total_ms:.2f} ms computation-kernel time{summed_over}, "
    "on compute capability >= {min_compute_major}",
    mechanism="Full-fp32 GEMMs use the CUDA cores; TF32 tensor cores run them several times faster at ~10-bit mantissa.",
    predicted_effect="torch.backends.cuda.matmul.allow_tf32 = True (or bf16 autocast) cuts these kernels' time by about half or more",
    falsifier="set torch.set_float32_matmul_precision('high'): if GEMM time does not fall, the GEMMs were not compute-limited",
    confounders=("TF32 changes numerics (~10-bit mantissa); check tolerance",),
    notes={
        "unknown": "{n_unknown} matrix kernels ({unknown_ms:.2f} ms) state no precision that tells TF32 from fp32 "
        "and were not counted"
    },
    suggested_variants=("tf32", "autocast_bf16"),
)


@rule(
    "fp32_matmul_without_tf32",
    category="precision",
    scope="trace",
    limits=Fp32MatmulWithoutTf32Limits,
    finding=Fp32MatmulWithoutTf32Finding,
    words=FP32_WORDS,
)
def fp32_matmul_without_tf32(f: TraceFacts, limits: Fp32MatmulWithoutTf32Limits) -> Fp32MatmulWithoutTf32Finding | None:
    """fp32 matrix kernels (the kernel's name says fp32 on the CUDA cores) on a GPU with TF32 tensor cores."""
    k = f.require_gpu()
    if _compute_major(f) < limits.min_compute_major:
        return None
    mat = matrix_kernels(f)
    if mat.empty:
        return None
    # fp32 without TF32 only where the kernel's own name says so; an fp32 op's kernel whose name states
    # no type may have run TF32: unknown, not counted
    fp32 = mat[(mat["precision"] == FP32) & (mat["precision_from"] == "kernel name")]
    unknown = mat[(mat["precision"] == "") | ((mat["precision"] == FP32) & (mat["precision_from"] != "kernel name"))]
    if fp32.empty and len(unknown) == len(mat):
        raise NotJudged(
            f"the precision of {len(mat)} matrix kernels is unknown: their names state no type "
            "(or no TF32 / fp32 kernel) and their launching ops record no lower-precision dtype"
        )
    total = float(k.loc[(k["kind"] == "kernel") & (k["kernel_type"] == "computation"), "dur_us"].sum())
    share = pct(fp32["dur_us"].sum(), total)
    if fp32.empty or share < limits.min_share_pct:
        return None
    by_name = fp32.groupby("name", as_index=False).agg(n=("dur_us", "size"), dur_us=("dur_us", "sum"))
    stake_us = per_rank_max_us(fp32) / 2
    return Fp32MatmulWithoutTf32Finding(
        share_pct=share,
        n_kernels=len(fp32),
        fp32_ms=fp32["dur_us"].sum() / 1e3,
        total_ms=total / 1e3,
        summed_over=summed_over(k),
        min_compute_major=int(limits.min_compute_major),
        n_unknown=len(unknown),
        unknown_ms=unknown["dur_us"].sum() / 1e3,
        evidence=(
            Evidence(
                "fp32_gemm_share_pct",
                share,
                "%",
                limits.min_share_pct,
                source="kernels (type named in the kernel name)",
                rows=rows(by_name, ["name", "n", "dur_us"], by="dur_us"),
            ),
        ),
        time_at_stake_ms=bounded_ms(stake_us, f.window_us),
        notes=("unknown",) if not unknown.empty else (),
        confidence="medium",
        scope="all ranks",
    )


def _dims(text: str) -> list[list[int]]:
    import re

    return [[int(x) for x in re.findall(r"-?\d+", grp)] for grp in re.findall(r"\[([^\[\]]*)\]", str(text))]


def matmul_kn(name: str, input_dims: str) -> tuple[int, int] | None:
    """(K, N) of a matmul op from its recorded input shapes; None when they do not say."""
    d = _dims(input_dims)
    try:
        if name == "aten::linear":  # input [..., K], weight [N, K]
            return d[0][-1], d[1][0]
        if name in ("aten::addmm", "aten::baddbmm"):  # bias, mat1 [.., M, K], mat2 [.., K, N]
            return d[1][-1], d[2][-1]
        if name in ("aten::mm", "aten::bmm", "aten::matmul"):
            return d[0][-1], d[1][-1]
    except IndexError:
        return None
    return None


@dataclass(frozen=True)
class HalfMatmulUnalignedLimits(Limits):
    """The thresholds of ``half_matmul_unaligned``."""

    alignment: int = 8
    min_share_pct: float = 5.0


@dataclass(frozen=True, kw_only=True)
class HalfMatmulUnalignedFinding(Finding):
    n_kernels: int  # half-precision matrix kernels that ran unaligned
    alignment: int  # the multiple (elements) K and N should be
    unaligned_ms: float  # their summed time
    whole_ms: float  # the time of the half-precision matrix kernels whose alignment could be judged
    share_pct: float  # unaligned_ms of whole_ms
    summed_over: str  # how the ranks' times were summed (empty for one rank)


HALF_WORDS = Words(
    title="{n_kernels} half-precision matrix kernel{plural} ran unaligned (not multiples of {alignment})",
    observed="{unaligned_ms:.3f} ms of {whole_ms:.3f} ms half-precision matrix-kernel time "
    "({share_pct:.0f}%){summed_over} is in kernels that ran unaligned",
    mechanism="Tensor-core GEMM kernels load 16-byte vectors (8 half elements); a K or N that is not a multiple of 8 "
    "forces narrower loads (an _align2/_align4 kernel) or padding.",
    predicted_effect="padding the named dimension to a multiple of 8 lets an align8 tensor-core kernel run; "
    "at most these kernels' own time is saved",
    falsifier="pad the dims to a multiple of 8 and re-time the op: if it is not faster, alignment was not the issue",
    confounders=("small matmuls are launch-bound anyway",),
    suggested_variants=("pad_to_multiple_of_8",),
    parts={"plural": "s"},  # more than one kernel
)


@rule(
    "half_matmul_unaligned",
    category="precision",
    scope="trace",
    limits=HalfMatmulUnalignedLimits,
    finding=HalfMatmulUnalignedFinding,
    words=HALF_WORDS,
)
def half_matmul_unaligned(f: TraceFacts, limits: HalfMatmulUnalignedLimits) -> HalfMatmulUnalignedFinding | None:
    """fp16/bf16 matrix kernels that ran unaligned: the kernel says ``_alignN`` below 16 bytes, or (no tag)
    the launching matmul's K or N is not a multiple of 8."""
    mat = matrix_kernels(f)
    half = mat[mat["precision"].isin(HALF_TYPES)]
    if half.empty:
        if not mat.empty and (mat["precision"] == "").all():
            raise NotJudged(
                f"the precision of {len(mat)} matrix kernels is unknown: their names state no type and "
                "their launching ops record no dtype (profile with record_shapes=True)"
            )
        return None
    align = int(limits.alignment)
    tag = half["alignment"].to_numpy(np.int64)
    ops = f.cpu_ops
    is_mm = ops["name"].astype(str).isin(MATMUL_OPS).to_numpy() if not ops.empty else np.zeros(0, bool)
    mm_row = launching_op_rows(half, ops, is_mm) if len(is_mm) else np.full(len(half), -1)
    names = ops["name"].astype(str).to_numpy() if not ops.empty else np.array([], dtype=object)
    dims = ops["input_dims"].astype(str).to_numpy() if not ops.empty else np.array([], dtype=object)
    kn = [matmul_kn(names[r], dims[r]) if r >= 0 else None for r in mm_row]
    by_tag = tag > 0
    unaligned = np.where(by_tag, tag < align, [x is not None and (x[0] % align != 0 or x[1] % align != 0) for x in kn])
    judged = by_tag | np.array([x is not None for x in kn], dtype=bool)
    if not judged.any():
        raise NotJudged(
            f"{len(half)} half-precision matrix kernels: their names state no alignment and no "
            "launching matmul op recorded its shapes"
        )
    bad = half[unaligned & judged].assign(
        kernel_align=np.where(by_tag, tag, 0)[unaligned & judged],
        op=[names[r] if r >= 0 else "" for r in mm_row[unaligned & judged]],
        input_dims=[dims[r] if r >= 0 else "" for r in mm_row[unaligned & judged]],
        judged_by=np.where(by_tag, "kernel name (_alignN)", "op shapes (K, N)")[unaligned & judged],
    )
    whole = float(half.loc[judged, "dur_us"].sum())
    share = pct(bad["dur_us"].sum(), whole)
    if bad.empty or share < limits.min_share_pct:
        return None
    by_kernel = bad.groupby(["name", "kernel_align", "op", "input_dims", "judged_by"], as_index=False).agg(
        n=("dur_us", "size"), dur_us=("dur_us", "sum")
    )
    stake_us = per_rank_max_us(bad) / 2
    return HalfMatmulUnalignedFinding(
        n_kernels=len(bad),
        parts=() if len(bad) == 1 else ("plural",),
        alignment=align,
        unaligned_ms=bad["dur_us"].sum() / 1e3,
        whole_ms=whole / 1e3,
        share_pct=share,
        summed_over=summed_over(half),
        evidence=(
            Evidence(
                "unaligned_matmul_share_pct",
                share,
                "%",
                limits.min_share_pct,
                source="matrix kernels (alignment in the kernel name; else the launching op's K, N)",
                rows=rows(
                    by_kernel, ["name", "kernel_align", "op", "input_dims", "judged_by", "n", "dur_us"], by="dur_us"
                ),
            ),
        ),
        time_at_stake_ms=bounded_ms(stake_us, f.window_us),
        confidence="medium",
        scope="all ranks",
    )
