"""What a GPU kernel computed in, read from what ran: the kernel's own type names and the dtypes of
the op that launched it.

Kernel names from cuBLAS, cuDNN, CUTLASS, xmma and templated ATen kernels state their types:

- xmma (cuBLAS/cuDNN, sm80+): ``sm90_xmma_gemm_bf16bf16_bf16f32_f32_...``: the first group is the
  input types (A, B), the second the output and the compute/accumulator type (``bf16f32``: bf16
  out, f32 accumulate); ``tf32f32_tf32f32`` is TF32.
- CUTLASS: ``cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_..._align8``: ``tensorop`` is tensor
  cores, the element type is named (``bf16``, ``f16``, ``tf32``; none with ``tensorop_s1688`` is
  TF32), ``s16816`` is an fp32 accumulator (``s``) and the MMA shape; ``simt_sgemm`` is fp32 on
  the CUDA cores; ``_alignN`` is the operands' alignment in elements.
- cuBLAS legacy: ``ampere_sgemm_…`` / ``volta_sgemm_…`` (fp32, CUDA cores), ``…_h1688gemm_…``
  / ``hgemm`` (fp16 tensor cores), ``scudnn`` (cuDNN fp32); templates ``<float, …>``,
  ``<c10::BFloat16, …>``, ``cutlass::bfloat16_t``, ``__half``.

A ``float`` in a template is the *input* type only when it comes before any lower-precision type;
an ``f32`` after a lower-precision input is the accumulator, not the precision of the work. A name
that states no type gives ``None``: the precision is then the launching op's input dtype, or
unknown (never guessed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

FP8, BF16, FP16, TF32, FP32, FP64, INT8 = "fp8", "bf16", "fp16", "tf32", "fp32", "fp64", "int8"
HALF_TYPES = (BF16, FP16)
ELEMENT_BYTES = {FP8: 1, INT8: 1, BF16: 2, FP16: 2, TF32: 4, FP32: 4, FP64: 8}
ALIGNED_BYTES = 16  # tensor-core kernels load 16-byte vectors: align8 for 16-bit types

_XMMA = re.compile(
    r"xmma_\w*?_((?:bf16|f16|tf32|f32|f64|e4m3|e5m2|i8|s8)+)_((?:bf16|f16|tf32|f32|f64|e4m3|e5m2|i8|s8|s32)+)_", re.I
)
_TYPE_TOKEN = [  # (pattern, type) in the order a name is read: the first hit in the name is the input type
    (re.compile(r"e4m3|e5m2|fp8|float8", re.I), FP8),
    (re.compile(r"bf16|bfloat16", re.I), BF16),
    (
        re.compile(
            r"(?<![a-z])(?:f16|fp16|half|__half)(?![a-z0-9])|c10::Half|_h\d{3,5}(?:gemm|fprop|dgrad|wgrad)|hgemm|hcudnn",
            re.I,
        ),
        FP16,
    ),
    (re.compile(r"tf32", re.I), TF32),
    (re.compile(r"imma|int8|_i8i8", re.I), INT8),
    (re.compile(r"dgemm|<double|(?<![a-z])f64(?![a-z0-9])", re.I), FP64),
    (re.compile(r"sgemm|scudnn|gcgemm|_simt_s|<float\b|(?<![a-z])(?:f32|fp32)(?![a-z0-9])", re.I), FP32),
]
_TENSOR_OP_S = re.compile(r"tensorop_s\d{3,6}(?:gemm|fprop|dgrad|wgrad)", re.I)  # CUTLASS fp32 in, tensor cores: TF32
_TENSOR = re.compile(
    r"tensorop|xmma|wmma|tensor\d+x\d+x\d+|_[hs]\d{3,6}(?:gemm|fprop|dgrad|wgrad)|hmma|imma|mma_", re.I
)
_SIMT = re.compile(r"simt|sgemm|scudnn|dgemm|gemv|gemmk1|gcgemm", re.I)
_ACC = re.compile(r"_s\d{3,6}(?:gemm|fprop|dgrad|wgrad)", re.I)
_ALIGN = re.compile(r"align(\d+)(?![0-9])", re.I)
_OP_TYPE = {
    "float": FP32,
    "double": FP64,
    "c10::Half": FP16,
    "half": FP16,
    "c10::BFloat16": BF16,
    "bfloat16": BF16,
    "c10::Float8_e4m3fn": FP8,
    "c10::Float8_e5m2": FP8,
    "signed char": INT8,
}


@dataclass(frozen=True)
class KernelPrecision:
    """``inputs``: the type the work was done in (fp8 / bf16 / fp16 / tf32 / fp32 / fp64 / int8, or
    None when the name states none); ``accumulator`` where the name states it; ``tensor_cores``
    True / False / None (not stated); ``token``: the part of the name that said so."""

    inputs: str | None
    accumulator: str | None
    tensor_cores: bool | None
    token: str = ""


def kernel_precision(name: str) -> KernelPrecision:
    """The precision a kernel's own name states (see the module docstring); ``inputs`` None when it
    states none."""
    name = str(name)
    tensor = True if _TENSOR.search(name) else (False if _SIMT.search(name) else None)
    m = _XMMA.search(name)
    if m:
        ins, out = _types(m.group(1)), _types(m.group(2))
        acc = out[-1] if out else None
        if TF32 in ins + out:
            return KernelPrecision(TF32, acc, True, m.group(0))
        kind = ins[0] if ins else None
        return KernelPrecision(kind, acc, None if kind == FP32 else True, m.group(0))
    acc = FP32 if _ACC.search(name) else None
    lower = [(h.start(), k, h.group(0)) for h, k in ((p.search(name), k) for p, k in _TYPE_TOKEN[:-1]) if h]
    if lower:  # the first lower-precision type named is the inputs' type
        _, kind, token = min(lower)
        return KernelPrecision(kind, acc, tensor if kind != FP64 else False, token)
    tf32 = _TENSOR_OP_S.search(name)
    if tf32:  # CUTLASS tensor-core op on fp32 elements: TF32
        return KernelPrecision(TF32, FP32, True, tf32.group(0))
    fp32 = _TYPE_TOKEN[-1][0].search(name)
    if fp32:
        return KernelPrecision(FP32, acc or FP32, False if _SIMT.search(name) else None, fp32.group(0))
    return KernelPrecision(None, acc, tensor)


def _types(group: str) -> list[str]:
    out = []
    for tok in re.findall(r"bf16|tf32|f16|f32|f64|e4m3|e5m2|i8|s8|s32", group.lower()):
        out.append(
            {
                "bf16": BF16,
                "tf32": TF32,
                "f16": FP16,
                "f32": FP32,
                "f64": FP64,
                "e4m3": FP8,
                "e5m2": FP8,
                "i8": INT8,
                "s8": INT8,
                "s32": "int32",
            }[tok]
        )
    return out


def kernel_alignment(name: str) -> int | None:
    """The operand alignment in elements a CUTLASS-style name states (``_align8`` -> 8); None if none."""
    m = _ALIGN.search(str(name))
    return int(m.group(1)) if m else None


def op_dtype(input_types: str) -> str | None:
    """The first floating/int8 input dtype an op records (``["c10::BFloat16", ...]`` -> bf16); None if none."""
    for t in re.findall(r'"([^"]*)"', str(input_types)):
        if t in _OP_TYPE:
            return _OP_TYPE[t]
    return None


def launching_op_rows(kernels: pd.DataFrame, cpu_ops: pd.DataFrame, want, max_levels: int = 8) -> np.ndarray:
    """For each kernel, the cpu_ops row of the nearest op on its launching op's parent chain for which
    ``want(row) `` is True (a boolean array over cpu_ops rows); -1 where none (no link, no such op)."""
    n = len(cpu_ops)
    if "op_index" not in kernels or n == 0 or len(kernels) == 0:
        return np.full(len(kernels), -1, dtype=np.int64)
    ok_rows = np.asarray(want, dtype=bool)
    parent = cpu_ops["parent"].to_numpy(np.int64) if "parent" in cpu_ops else np.full(n, -1, dtype=np.int64)
    idx = kernels["op_index"].to_numpy(np.int64)
    cur = np.where((idx >= 0) & (idx < n), idx, -1)
    found = np.full(len(idx), -1, dtype=np.int64)
    for _ in range(max_levels):
        live = (cur >= 0) & (found < 0)
        if not live.any():
            break
        hit = live & ok_rows[np.maximum(cur, 0)]
        found[hit] = cur[hit]
        nxt = parent[np.maximum(cur, 0)]
        cur = np.where(live & ~hit & (nxt >= 0) & (nxt < n), nxt, -1)
    return found


def kernel_precisions(kernels: pd.DataFrame, cpu_ops: pd.DataFrame) -> pd.DataFrame:
    """``kernels`` with precision (what the work ran in), precision_from ("kernel name", "op dtype" or
    "" when unknown), accumulator, tensor_cores, alignment (elements, from the name) and op_row (the
    launching op with a dtype, -1 if none)."""
    names = kernels["name"].astype(str)
    codes, uniques = pd.factorize(names)
    parsed = [kernel_precision(n) for n in uniques]
    by_name = np.array([p.inputs or "" for p in parsed], dtype=object)
    acc = np.array([p.accumulator or "" for p in parsed], dtype=object)
    tensor = np.array([p.tensor_cores for p in parsed], dtype=object)
    align = np.array([kernel_alignment(n) or 0 for n in uniques], dtype=np.int64)
    take = (lambda a: a[codes]) if len(codes) else (lambda a: a[:0])
    precision = take(by_name).copy()
    source = np.where(precision != "", "kernel name", "").astype(object)
    types = cpu_ops["input_types"].astype(str).to_numpy() if "input_types" in cpu_ops else np.array([], dtype=object)
    dtypes = np.array([op_dtype(t) or "" for t in types], dtype=object)
    op_row = launching_op_rows(kernels, cpu_ops, dtypes != "") if len(dtypes) else np.full(len(kernels), -1)
    from_op = (precision == "") & (op_row >= 0)
    precision[from_op] = dtypes[op_row[from_op]]
    source[from_op] = "op dtype"
    return kernels.assign(
        precision=precision,
        precision_from=source,
        accumulator=take(acc),
        tensor_cores=take(tensor),
        alignment=take(align),
        op_row=op_row,
    )


_CEILING_KEY = {
    FP32: "fp32",
    TF32: "tf32_tensor",
    FP16: "fp16_tensor",
    BF16: "bf16_tensor",
    FP8: "fp8_tensor",
    FP64: "fp64",
    INT8: "int8_tensor",
}


def ceiling_dtype(precision: str | None) -> str:
    """The ceiling's dtype key (``workbench.devices`` peaks: fp32, bf16_tensor, ...) for a precision; "" if none."""
    return _CEILING_KEY.get(precision or "", "")
