"""Kernel breakdown: time per kernel name, and per kernel type with the overlaps between types as extra
rows (HTA's ``get_gpu_kernel_breakdown``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from workbench.analysis.intervals import coverage_by_mask
from workbench.analysis.result import AnalysisResult
from workbench.analysis.view import TraceView, prepare

KERNEL_TYPES = ("computation", "communication", "memory")


@dataclass(frozen=True, eq=False)
class KernelBreakdown(AnalysisResult):
    """``table``: one row per (rank, kernel_type, name): count, sum/mean/min/max/std (µs), pct of the
    rank's summed kernel time. ``types``: per rank, time when exactly one type runs, plus
    "<a> overlapping <b>" rows for time when several run; ``pct`` of the rank's GPU busy time."""

    types: pd.DataFrame
    total_kernel_us: float
    busy_us: float
    semantics: str
    kind: ClassVar[str] = "kernel_breakdown"

    def type_totals(self) -> pd.DataFrame:
        """Summed over ranks, like HTA's kernel-type table (pct rounded to 0.1 as HTA does)."""
        t = self.types.groupby("kernel_type", as_index=False)["dur_us"].sum()
        t = t.sort_values("dur_us", ascending=False, ignore_index=True)
        total = t["dur_us"].sum()
        t["pct"] = (100.0 * t["dur_us"] / total).round(1) if total > 0 else 0.0
        return t

    def top(self, n: int = 10) -> pd.DataFrame:
        return self.table.nlargest(n, "sum_us")


def kernel_breakdown(trace, semantics="workbench") -> KernelBreakdown:
    view = prepare(trace, semantics)
    k = view.kernels
    table = _per_name(k)
    types = _per_type(view)
    return KernelBreakdown(
        table=table,
        types=types,
        total_kernel_us=float(k["dur_us"].sum()),
        busy_us=float(types["dur_us"].sum()),
        semantics=view.semantics.name,
    )


def _per_name(k: pd.DataFrame) -> pd.DataFrame:
    cols = ["rank", "kernel_type", "name", "count", "sum_us", "mean_us", "min_us", "max_us", "std_us", "pct"]
    if len(k) == 0:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in cols})
    g = k.groupby(["rank", "kernel_type", "name"], sort=False)["dur_us"]
    t = g.agg(count="size", sum_us="sum", mean_us="mean", min_us="min", max_us="max", std_us="std").reset_index()
    t["std_us"] = t["std_us"].fillna(0.0)  # one call: no spread (HTA fills 0 too)
    rank_total = t.groupby("rank")["sum_us"].transform("sum")
    t["pct"] = np.where(rank_total > 0, 100.0 * t["sum_us"] / rank_total, 0.0)
    t["count"] = t["count"].astype("int64")
    return t.sort_values(["rank", "sum_us"], ascending=[True, False], ignore_index=True)[cols]


def _per_type(view: TraceView) -> pd.DataFrame:
    rows = []
    k = view.kernels
    for rank, kr in k.groupby("rank", sort=True):
        sets = [_intervals(kr[kr["kernel_type"] == t]) for t in KERNEL_TYPES]
        cover = coverage_by_mask(sets) if not view.semantics.hta_int_segments else _int_coverage(sets)
        busy = sum(cover.values())
        for mask, dur in cover.items():
            rows.append(
                {
                    "rank": rank,
                    "kernel_type": _label(mask),
                    "dur_us": dur,
                    "pct": 100.0 * dur / busy if busy > 0 else 0.0,
                }
            )
    t = pd.DataFrame(rows, columns=["rank", "kernel_type", "dur_us", "pct"])
    return t.sort_values(["rank", "dur_us"], ascending=[True, False], ignore_index=True)


def _intervals(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    return df["ts_us"].to_numpy(np.float64), df["end_us"].to_numpy(np.float64)


def _label(mask: int) -> str:
    names = [t.upper() for i, t in enumerate(KERNEL_TYPES) if mask & (1 << i)]
    return " overlapping ".join(names)


def _int_coverage(sets) -> dict[int, float]:
    """HTA truncates each segment between two boundaries to whole µs before summing."""
    from workbench.analysis.intervals import segments_by_mask

    masks, seg = segments_by_mask(sets)
    seg = np.trunc(seg)
    out = {}
    sums = np.bincount(masks, weights=seg) if masks.size else np.zeros(0)
    for m in np.flatnonzero(sums):
        if m > 0:
            out[int(m)] = float(sums[m])
    present = {int(m) for m in np.unique(masks) if m > 0}
    for mask in present - set(out):
        out[mask] = 0.0
    return out
