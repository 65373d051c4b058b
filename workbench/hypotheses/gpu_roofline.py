"""GPU kernels placed against the roofline: memory- or compute-bound from analytic work where the
shapes are known, by kernel name where they are not.

A kernel's launching CPU op comes from the reader's link columns (``kernels.op_index``: the
innermost op around the launch call); the work is that of the nearest op on its parent chain that
has a work formula (``workbench.analysis.op_work``: FLOPs and bytes from the recorded input shapes
and dtypes). The op's FLOPs against the GPU's peak for its dtype and its bytes against the peak
bandwidth (``workbench.devices`` spec, matched from ``trace.device_properties``) say which roof
is higher, and so whether the op, and every kernel it launched, is compute- or memory-bound.
Kernels with no such op (shapes not recorded, no formula, no link, unknown GPU) fall back to
kernel-name families (GEMM/convolution/attention vs elementwise/reduction/normalisation), and
``placed_by`` says which way each kernel was placed. The placement itself is
``workbench.analysis.roofline.bound_of`` against the ``workbench.devices.ceilings`` ceiling: memory or
compute only clearly away from the ridge; kernels in the band between are ``uncertain`` and count
for neither.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

PLACED_BY_WORK = "analytic work"
PLACED_BY_NAME = "kernel name"
MAX_PARENT_LEVELS = 8
MATRIX = re.compile(
    r"gemm|gemv|cutlass|xmma|cublas|hgemm|sgemm|conv|cudnn|wgrad|dgrad|fprop|flash|fmha|attention|nvjet|Cijk", re.I
)
# names the MATRIX words catch that are not matrix work: FBGEMM's sparse/permute kernels, cuDNN batch norm,
# layout conversions and the helper kernels around a GEMM (split-K reductions, offset tables)
NOT_MATRIX = re.compile(
    r"fbgemm_gpu|bn_fw|bn_bw|batch_?norm|nchwToNhwc|nhwcToNchw|splitKreduce|reduce_wgrad|"
    r"compute\w*Offsets|scalePackedTensor|permute",
    re.I,
)
MEMORY = re.compile(
    r"elementwise|vectorized|reduce|softmax|norm|index|gather|scatter|copy|cat|fill|"
    r"unrolled|embedding|pool|transpose|where|clamp|mul|add|relu|gelu|silu|dropout",
    re.I,
)
# the GPU peak a dtype's matrix work runs at (tensor cores for half types; fp32 without TF32)
DTYPE_PEAK = {
    "float": "fp32",
    "double": "fp64",
    "c10::Half": "fp16_tensor",
    "half": "fp16_tensor",
    "c10::BFloat16": "bf16_tensor",
    "bfloat16": "bf16_tensor",
}


def family_by_name(names: pd.Series) -> np.ndarray:
    codes, uniques = pd.factorize(names.astype(str))
    fam = np.array(
        [
            "matrix" if MATRIX.search(n) and not NOT_MATRIX.search(n) else "memory" if MEMORY.search(n) else "other"
            for n in uniques
        ],
        dtype=object,
    )
    return fam[codes] if len(codes) else np.array([], dtype=object)


def place_kernels(kernels: pd.DataFrame, cpu_ops: pd.DataFrame, device_properties: object) -> pd.DataFrame:
    """``kernels`` with family (matrix / memory / other), placed_by, work_op, flops, bytes, roof_us
    (the op's roof time at the GPU's peaks; NaN when placed by name)."""
    out = kernels.assign(
        family=family_by_name(kernels["name"]),
        placed_by=PLACED_BY_NAME,
        work_op="",
        flops=np.nan,
        bytes=np.nan,
        roof_us=np.nan,
    )
    from workbench.analysis.roofline import bound_of
    from workbench.devices.ceilings import gpu_ceilings

    ceiling = gpu_ceilings(device_properties) if device_properties else None
    if ceiling is None or cpu_ops.empty or "op_index" not in kernels or "parent" not in cpu_ops or out.empty:
        return out
    op_of_kernel = _work_op(kernels["op_index"].to_numpy(np.int64), cpu_ops)
    hit = op_of_kernel >= 0
    if not hit.any():
        return out
    flops, nbytes, dtype = _op_work(cpu_ops, np.unique(op_of_kernel[hit]))
    idx = op_of_kernel[hit]
    f, b, d = flops[idx], nbytes[idx], dtype[idx]
    peak = np.array([ceiling.peak(x) for x in d], dtype=float)
    roof_us = np.maximum(f / peak, b / (ceiling.memory_gbps * 1e9)) * 1e6
    # memory / compute only clearly away from the ridge; in the band between the work cannot say
    bound = bound_of(f, b, ceiling, d)
    rows = np.flatnonzero(hit)
    out.iloc[rows, out.columns.get_loc("family")] = np.where(
        bound == "compute", "matrix", np.where(bound == "memory", "memory", "uncertain")
    )
    out.iloc[rows, out.columns.get_loc("placed_by")] = PLACED_BY_WORK
    out.iloc[rows, out.columns.get_loc("work_op")] = cpu_ops["name"].astype(str).to_numpy()[idx]
    out.iloc[rows, out.columns.get_loc("flops")] = f
    out.iloc[rows, out.columns.get_loc("bytes")] = b
    out.iloc[rows, out.columns.get_loc("roof_us")] = roof_us
    return out


def _known_work(cpu_ops: pd.DataFrame) -> np.ndarray:
    """Per op row: True when its name has a formula and its shapes give finite work."""
    from workbench.analysis.work_formulas import FORMULAS

    names = cpu_ops["name"].astype(str).to_numpy()
    has_formula = np.array([n in FORMULAS for n in names]) if len(names) else np.zeros(0, bool)
    dims = cpu_ops["input_dims"].astype(str).to_numpy()
    has_formula &= (dims != "") & (dims != "[]")
    return has_formula


def _work_op(op_index: np.ndarray, cpu_ops: pd.DataFrame) -> np.ndarray:
    """For each kernel, the row of the nearest op up its launching op's parent chain that has a work
    formula and recorded shapes; -1 when there is none."""
    known = _known_work(cpu_ops)
    parent = cpu_ops["parent"].to_numpy(np.int64)
    n = len(cpu_ops)
    cur = np.where((op_index >= 0) & (op_index < n), op_index, -1)
    found = np.full(len(op_index), -1, dtype=np.int64)
    for _ in range(MAX_PARENT_LEVELS):
        live = (cur >= 0) & (found < 0)
        if not live.any():
            break
        ok = live & known[np.maximum(cur, 0)]
        found[ok] = cur[ok]
        nxt = parent[np.maximum(cur, 0)]
        cur = np.where(live & ~ok & (nxt >= 0) & (nxt < n), nxt, -1)
    if found.size and (found >= 0).any():  # a formula whose shapes give no finite work does not place
        flops_ok = _finite_work(cpu_ops, np.unique(found[found >= 0]))
        found[(found >= 0) & ~flops_ok[np.maximum(found, 0)]] = -1
    return found


def _finite_work(cpu_ops: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    ok = np.zeros(len(cpu_ops), dtype=bool)
    flops, nbytes = _work_arrays(cpu_ops, rows)
    ok[rows] = np.isfinite(flops[rows]) & np.isfinite(nbytes[rows]) & (nbytes[rows] > 0)
    return ok


def _work_arrays(cpu_ops: pd.DataFrame, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from workbench.analysis import op_work

    flops = np.full(len(cpu_ops), np.nan)
    nbytes = np.full(len(cpu_ops), np.nan)
    names = cpu_ops["name"].astype(str).to_numpy()
    dims = cpu_ops["input_dims"].astype(str).to_numpy()
    types = cpu_ops["input_types"].astype(str).to_numpy()
    cache: dict = {}
    for r in rows:
        sig = (names[r], dims[r], types[r])
        if sig not in cache:
            cache[sig] = op_work(*sig)[:2]
        flops[r], nbytes[r] = cache[sig]
    return flops, nbytes


def _op_work(cpu_ops: pd.DataFrame, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """FLOPs, bytes and the ceiling's dtype key (fp32, bf16_tensor, ...) for each op row (NaN / fp32
    outside ``rows``): its matrix work runs at that dtype's peak."""
    flops, nbytes = _work_arrays(cpu_ops, rows)
    types = cpu_ops["input_types"].astype(str).to_numpy()
    dtype = np.full(len(cpu_ops), "fp32", dtype=object)
    for r in rows:
        first = re.search(r'"([^"]+)"', types[r])
        dtype[r] = DTYPE_PEAK.get(first.group(1) if first else "", "fp32")
    return flops, nbytes, dtype
