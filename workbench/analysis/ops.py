"""CPU op breakdown: per op name, calls, self and total time, share of all self time, and the most common
input shapes and dtypes (the first table a user sees on a CPU profile)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from workbench.analysis.labels import column_codes
from workbench.analysis.result import AnalysisResult
from workbench.analysis.view import prepare


@dataclass(frozen=True, eq=False)
class OpBreakdown(AnalysisResult):
    """``table``: one row per op name (all ranks), sorted by self time: count, self_us, total_us,
    mean_us (total per call), mean_self_us, pct (of all self time), top_input_dims, top_input_types,
    top_shape_count (calls with that signature)."""

    total_self_us: float
    semantics: str
    kind: ClassVar[str] = "op_breakdown"

    def top(self, n: int = 10) -> pd.DataFrame:
        return self.table.head(n)


def op_breakdown(trace, semantics="workbench") -> OpBreakdown:
    view = prepare(trace, semantics)
    ops = view.cpu_ops
    cols = [
        "name",
        "count",
        "self_us",
        "total_us",
        "mean_us",
        "mean_self_us",
        "pct",
        "top_input_dims",
        "top_input_types",
        "top_shape_count",
    ]
    if len(ops) == 0:
        return OpBreakdown(
            table=pd.DataFrame({c: pd.Series(dtype="float64") for c in cols}),
            total_self_us=0.0,
            semantics=view.semantics.name,
        )
    name, labels = column_codes(ops, "name")
    self_us = ops["self_us"] if "self_us" in ops.columns else ops["dur_us"]
    frame = pd.DataFrame(
        {"name": name, "self_us": self_us.to_numpy(np.float64), "total_us": ops["dur_us"].to_numpy(np.float64)}
    )
    g = frame.groupby("name", sort=False)
    t = g.agg(count=("total_us", "size"), self_us=("self_us", "sum"), total_us=("total_us", "sum")).reset_index()
    t["mean_us"] = t["total_us"] / t["count"]
    t["mean_self_us"] = t["self_us"] / t["count"]
    total_self = float(t["self_us"].sum())
    t["pct"] = 100.0 * t["self_us"] / total_self if total_self > 0 else 0.0
    t = t.merge(_top_signature(ops, name), on="name", how="left")
    t["name"] = labels[t["name"].to_numpy()]
    t["count"] = t["count"].astype("int64")
    t["top_shape_count"] = t["top_shape_count"].fillna(0).astype("int64")
    t = t.sort_values("self_us", ascending=False, ignore_index=True)
    return OpBreakdown(table=t[cols], total_self_us=total_self, semantics=view.semantics.name)


def _top_signature(ops: pd.DataFrame, name: np.ndarray) -> pd.DataFrame:
    """Most common (input_dims, input_types) per op name code; counted on integer codes."""
    dims, dims_labels = column_codes(ops, "input_dims")
    types, types_labels = column_codes(ops, "input_types")
    sig = pd.DataFrame({"name": name, "dims": dims, "types": types})
    counts = sig.groupby(["name", "dims", "types"], sort=False).size().rename("n").reset_index()
    counts = counts.sort_values("n", ascending=False, kind="stable").drop_duplicates("name")
    return pd.DataFrame(
        {
            "name": counts["name"].to_numpy(),
            "top_input_dims": dims_labels[counts["dims"].to_numpy()],
            "top_input_types": types_labels[counts["types"].to_numpy()],
            "top_shape_count": counts["n"].to_numpy(),
        }
    )
