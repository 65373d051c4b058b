"""Idle breakdown per stream (HTA's ``get_idle_time_breakdown``): each gap before a kernel is
``host_wait`` when its launching runtime call started after the previous kernel on the stream ended (the
host was late), else ``kernel_wait`` when the gap is under a threshold (back-to-back launch latency),
else ``other``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from workbench.analysis.result import AnalysisResult
from workbench.analysis.view import prepare

KERNEL_WAIT_THRESHOLD_US = 30.0  # HTA's consecutive_kernel_delay, in effect µs
CATEGORIES = ("host_wait", "kernel_wait", "other")


@dataclass(frozen=True, eq=False)
class IdleBreakdown(AnalysisResult):
    """``table``: one row per (rank, stream, idle_category): ``idle_us``, ``count`` of gaps,
    ``ratio`` of the stream's idle time. ``gaps``: one row per gap (rank, stream, ts_us, gap_us, category)."""

    gaps: pd.DataFrame
    kernel_wait_threshold_us: float
    semantics: str
    kind: ClassVar[str] = "idle_breakdown"

    def totals(self) -> dict:
        """Idle µs per category over all ranks and streams."""
        s = self.table.groupby("idle_category")["idle_us"].sum()
        return {c: float(s.get(c, 0.0)) for c in CATEGORIES}


def idle_breakdown(
    trace, semantics="workbench", kernel_wait_threshold_us: float = KERNEL_WAIT_THRESHOLD_US
) -> IdleBreakdown:
    view = prepare(trace, semantics)
    kernels = view.kernels
    if "hta_sync_marker" in kernels.columns:  # HTA's idle breakdown does not see cuda_sync markers
        kernels = kernels[~kernels["hta_sync_marker"].to_numpy(bool)]
    gaps = _gaps(kernels, view.runtime, hta=view.semantics.hta_idle_gaps, threshold_us=kernel_wait_threshold_us)
    return IdleBreakdown(
        table=_summarise(gaps),
        gaps=gaps,
        kernel_wait_threshold_us=kernel_wait_threshold_us,
        semantics=view.semantics.name,
    )


def _launch_ts(k: pd.DataFrame, runtime: pd.DataFrame) -> np.ndarray:
    """Start of each GPU event's launching runtime call (NaN when none is recorded)."""
    rt = runtime[runtime["correlation"] >= 0].drop_duplicates(["rank", "correlation"])
    key = pd.MultiIndex.from_arrays([rt["rank"], rt["correlation"]])
    pos = key.get_indexer(pd.MultiIndex.from_arrays([k["rank"], k["correlation"]]))
    ts = rt["ts_us"].to_numpy(np.float64)
    return np.where(pos >= 0, ts[np.maximum(pos, 0)] if len(ts) else np.nan, np.nan)


def _gaps(k: pd.DataFrame, runtime: pd.DataFrame, hta: bool, threshold_us: float) -> pd.DataFrame:
    k = k.assign(launch_ts=_launch_ts(k, runtime)).sort_values(["rank", "stream", "ts_us"], kind="stable")
    rank, stream = k["rank"].to_numpy(), k["stream"].to_numpy()
    ts, end = k["ts_us"].to_numpy(np.float64), k["end_us"].to_numpy(np.float64)
    if not hta:  # the stream is busy until the furthest end so far, not just the previous kernel's
        end = pd.Series(end).groupby([rank, stream]).cummax().to_numpy()
    same = np.zeros(len(k), dtype=bool)  # the row before is on the same (rank, stream)
    same[1:] = (rank[1:] == rank[:-1]) & (stream[1:] == stream[:-1])
    prev_end = np.full(len(k), np.nan)
    prev_end[1:] = end[:-1]
    prev_end[~same] = np.nan
    gap = ts - prev_end
    if not hta:
        gap = np.maximum(gap, 0.0)
    launch = k["launch_ts"].to_numpy()
    if hta:  # HTA links a GPU event whose launch call is not in the trace to itself: launched "at its start"
        launch = np.where(np.isnan(launch), ts, launch)
    host = launch > prev_end
    category = np.where(host, "host_wait", np.where(gap < threshold_us, "kernel_wait", "other"))
    has_gap = same
    return pd.DataFrame(
        {
            "rank": rank[has_gap],
            "stream": stream[has_gap],
            "ts_us": ts[has_gap],
            "gap_us": gap[has_gap],
            "idle_category": category[has_gap],
        }
    )


def _summarise(gaps: pd.DataFrame) -> pd.DataFrame:
    cols = ["rank", "stream", "idle_category", "idle_us", "count", "ratio"]
    if gaps.empty:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in cols})
    full = pd.MultiIndex.from_product(
        [np.unique(gaps["rank"]), np.unique(gaps["stream"]), list(CATEGORIES)],
        names=["rank", "stream", "idle_category"],
    )
    present = gaps.groupby(["rank", "stream"]).size().index
    g = gaps.groupby(["rank", "stream", "idle_category"])["gap_us"].agg(idle_us="sum", count="size")
    t = g.reindex(full, fill_value=0).reset_index()
    t = t[pd.MultiIndex.from_frame(t[["rank", "stream"]]).isin(present)]
    stream_total = t.groupby(["rank", "stream"])["idle_us"].transform("sum")
    t["ratio"] = np.where(stream_total > 0, t["idle_us"] / stream_total, 0.0)
    t["idle_us"] = t["idle_us"].astype("float64")
    t["count"] = t["count"].astype("int64")
    return t.reset_index(drop=True)[cols]
