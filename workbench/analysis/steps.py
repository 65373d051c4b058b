"""Per-step breakdown: for each ``ProfilerStep#N`` on each rank, its CPU duration and the GPU work it
launched (attributed through the launching runtime call, so work that runs after the step's CPU side
ends still counts for it): GPU busy, idle within the GPU span, computation and communication time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from workbench.analysis.idle import _launch_ts
from workbench.analysis.intervals import union_length_by
from workbench.analysis.result import AnalysisResult
from workbench.analysis.view import prepare


@dataclass(frozen=True, eq=False)
class StepBreakdown(AnalysisResult):
    """``table``: one row per (rank, step): step name, ts_us, dur_us (CPU side), gpu_start_us, gpu_end_us,
    gpu_busy_us (union of its GPU work), gpu_idle_us (its GPU span minus busy), compute_us, comm_us,
    memory_us, n_kernels. ``median_step_us``: median CPU step duration over all rows."""

    median_step_us: float
    semantics: str
    kind: ClassVar[str] = "step_breakdown"


def step_breakdown(trace, semantics="workbench") -> StepBreakdown:
    view = prepare(trace, semantics)
    steps = view.steps.copy()
    cols = [
        "rank",
        "step",
        "ts_us",
        "dur_us",
        "gpu_start_us",
        "gpu_end_us",
        "gpu_busy_us",
        "gpu_idle_us",
        "compute_us",
        "comm_us",
        "memory_us",
        "n_kernels",
    ]
    if steps.empty:
        return StepBreakdown(
            table=pd.DataFrame({c: pd.Series(dtype="float64") for c in cols}),
            median_step_us=float("nan"),
            semantics=view.semantics.name,
        )
    steps["step_id"] = np.arange(len(steps))
    k = view.kernels.assign(launch_ts=_launch_ts(view.kernels, view.runtime))
    k = _assign(k[k["launch_ts"].notna()], steps)
    table = steps.rename(columns={"name": "step"}).astype({"step": str}).set_index("step_id")
    g = k.groupby("step_id")
    table["gpu_start_us"] = g["ts_us"].min()
    table["gpu_end_us"] = g["end_us"].max()
    table["n_kernels"] = g.size()
    table["gpu_busy_us"] = pd.Series(union_length_by(k["step_id"].to_numpy(), k["ts_us"], k["end_us"]))
    for col, ktype in (("compute_us", "computation"), ("comm_us", "communication"), ("memory_us", "memory")):
        sel = k[k["kernel_type"] == ktype]
        table[col] = pd.Series(union_length_by(sel["step_id"].to_numpy(), sel["ts_us"], sel["end_us"]))
    fill = ["gpu_busy_us", "compute_us", "comm_us", "memory_us", "n_kernels"]
    table[fill] = table[fill].fillna(0.0)
    table["n_kernels"] = table["n_kernels"].astype("int64")
    table["gpu_idle_us"] = (table["gpu_end_us"] - table["gpu_start_us"]) - table["gpu_busy_us"]
    table = table.reset_index(drop=True)[cols]
    return StepBreakdown(table=table, median_step_us=float(table["dur_us"].median()), semantics=view.semantics.name)


def _assign(k: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """step_id of the step whose CPU span holds each kernel's launch call (kernels outside any step go)."""
    k = k.sort_values("launch_ts")
    s = steps[["rank", "ts_us", "end_us", "step_id"]].rename(columns={"ts_us": "step_ts", "end_us": "step_end"})
    s = s.sort_values("step_ts")
    m = pd.merge_asof(k, s, left_on="launch_ts", right_on="step_ts", by="rank", direction="backward")
    return m[m["step_id"].notna() & (m["launch_ts"] <= m["step_end"])].astype({"step_id": "int64"})
