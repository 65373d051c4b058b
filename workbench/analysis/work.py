"""Analytic work: FLOPs, bytes and arithmetic intensity per CPU op call, from the input shapes and dtypes
the profiler recorded (``record_shapes=True``). Computed once per distinct (op, shapes, dtypes) signature.
Ops without a formula, or whose shapes do not determine the work, get NaN and a plain ``reason``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from workbench.analysis.labels import column_codes
from workbench.analysis.result import AnalysisResult
from workbench.analysis.view import prepare
from workbench.analysis.work_formulas import DTYPE_BYTES, FORMULAS, NAN, TAKES_CONCRETE


@dataclass(frozen=True, eq=False)
class AnalyticWork(AnalysisResult):
    """``table``: one row per (name, input_dims, input_types): count, flops and bytes per call,
    total_flops, total_bytes, intensity (FLOP/byte), self_us, reason (empty when computed)."""

    total_flops: float
    total_bytes: float
    covered_self_pct: float  # share of all op self time whose work is known
    semantics: str
    kind: ClassVar[str] = "analytic_work"


def op_work(name: str, input_dims, input_types, concrete_inputs=None) -> tuple[float, float, str]:
    """(flops, bytes, reason) of one call; dims/types as recorded (lists, or their JSON text).
    ``concrete_inputs``: the profiler's "Concrete Inputs" (the scalar arguments as text, list or JSON
    text) where the trace kept them; convolutions read stride, padding, dilation and groups there."""
    formula = FORMULAS.get(name)
    if formula is None:
        return NAN, NAN, f"no work formula for {name}"
    try:
        dims = json.loads(input_dims) if isinstance(input_dims, str) else input_dims
        types = json.loads(input_types) if isinstance(input_types, str) else input_types
    except ValueError:
        return NAN, NAN, "input shapes were not recorded (profile with record_shapes=True)"
    if not dims or not isinstance(dims, list):
        return NAN, NAN, "input shapes were not recorded (profile with record_shapes=True)"
    tensor_types = [t for t, d in zip(types or [], dims) if isinstance(d, list) and d]
    esize = DTYPE_BYTES.get(tensor_types[0]) if tensor_types else None
    if esize is None:
        return NAN, NAN, f"unknown element size for dtype {tensor_types[:1] or types}"
    shapes = [d if isinstance(d, list) and all(isinstance(x, int) for x in d) else [] for d in dims]
    try:
        if name in TAKES_CONCRETE:
            return formula(shapes, esize, _concrete_list(concrete_inputs))
        return formula(shapes, esize)
    except (IndexError, TypeError):
        return NAN, NAN, f"{name}: fewer tensor inputs recorded than the formula needs"


def _concrete_list(concrete_inputs) -> list | None:
    if isinstance(concrete_inputs, str):
        try:
            concrete_inputs = json.loads(concrete_inputs) if concrete_inputs else None
        except ValueError:
            return None
    return concrete_inputs if isinstance(concrete_inputs, list) else None


def analytic_work(trace, semantics="workbench") -> AnalyticWork:
    view = prepare(trace, semantics)
    ops = view.cpu_ops
    name, name_labels = column_codes(ops, "name")
    dims, dims_labels = column_codes(ops, "input_dims")
    types, types_labels = column_codes(ops, "input_types")
    self_us = (ops["self_us"] if "self_us" in ops.columns else ops["dur_us"]).to_numpy(np.float64)
    sig = pd.DataFrame({"name": name, "input_dims": dims, "input_types": types, "self_us": self_us})
    t = (
        sig.groupby(["name", "input_dims", "input_types"], sort=False)
        .agg(count=("self_us", "size"), self_us=("self_us", "sum"))
        .reset_index()
    )
    for col, labels in (("name", name_labels), ("input_dims", dims_labels), ("input_types", types_labels)):
        t[col] = labels[t[col].to_numpy()]
    work = [op_work(n, d, ty) for n, d, ty in zip(t["name"], t["input_dims"], t["input_types"])]
    t["flops"] = np.array([w[0] for w in work], dtype=np.float64)
    t["bytes"] = np.array([w[1] for w in work], dtype=np.float64)
    t["reason"] = np.array([w[2] for w in work], dtype=object)
    t["count"] = t["count"].astype("int64")
    t["total_flops"] = t["flops"] * t["count"]
    t["total_bytes"] = t["bytes"] * t["count"]
    t["intensity"] = t["flops"] / t["bytes"].where(t["bytes"] > 0)
    known = t["flops"].notna()
    total_self = float(t["self_us"].sum())
    covered = 100.0 * float(t.loc[known, "self_us"].sum()) / total_self if total_self > 0 else float("nan")
    t = t.sort_values("self_us", ascending=False, ignore_index=True)
    return AnalyticWork(
        table=t,
        total_flops=float(t["total_flops"].sum()),
        total_bytes=float(t["total_bytes"].sum()),
        covered_self_pct=covered,
        semantics=view.semantics.name,
    )
