"""Temporal breakdown (idle / compute / non-compute per rank) and communication/compute overlap."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from workbench.analysis.intervals import hta_merged, intersection_length, union_length
from workbench.analysis.result import AnalysisResult
from workbench.analysis.view import prepare


@dataclass(frozen=True, eq=False)
class TemporalBreakdown(AnalysisResult):
    """Per rank: ``kernel_time_us`` (first GPU start to last GPU end, all streams), ``idle_us`` (no GPU
    activity at all), ``compute_us`` (a computation kernel runs), ``non_compute_us`` (only communication
    or memory work runs), and each as a percentage of kernel time."""

    semantics: str
    kind: ClassVar[str] = "temporal_breakdown"

    @property
    def idle_pct(self) -> float:
        """Idle share over all ranks together."""
        total = float(self.table["kernel_time_us"].sum())
        return 100.0 * float(self.table["idle_us"].sum()) / total if total > 0 else float("nan")


def temporal_breakdown(trace, semantics="workbench") -> TemporalBreakdown:
    view = prepare(trace, semantics)
    rows = [_rank_row(rank, kr, view.semantics.hta_merge) for rank, kr in view.kernels.groupby("rank", sort=True)]
    cols = [
        "rank",
        "idle_us",
        "compute_us",
        "non_compute_us",
        "kernel_time_us",
        "idle_pct",
        "compute_pct",
        "non_compute_pct",
    ]
    return TemporalBreakdown(table=pd.DataFrame(rows, columns=cols), semantics=view.semantics.name)


def _rank_row(rank, kr: pd.DataFrame, hta_merge: bool) -> dict:
    start, end = kr["ts_us"].to_numpy(np.float64), kr["end_us"].to_numpy(np.float64)
    comp = kr["kernel_type"].to_numpy() == "computation"
    if hta_merge:  # HTA: span from the first group's start to the last group's end
        gs, ge = hta_merged(start, end)
        span, busy = float(ge[-1] - gs[0]), float(np.sum(ge - gs))
        cs, ce = hta_merged(start[comp], end[comp])
        compute = float(np.sum(ce - cs))
    else:
        span = float(np.nanmax(end) - np.nanmin(start))
        busy = union_length(start, end)
        compute = union_length(start[comp], end[comp])
    idle = span - busy
    non_compute = span - compute - idle
    pct = (lambda x: 100.0 * x / span) if span > 0 else (lambda x: float("nan"))
    return {
        "rank": rank,
        "idle_us": idle,
        "compute_us": compute,
        "non_compute_us": non_compute,
        "kernel_time_us": span,
        "idle_pct": pct(idle),
        "compute_pct": pct(compute),
        "non_compute_pct": pct(non_compute),
    }


@dataclass(frozen=True, eq=False)
class CommOverlap(AnalysisResult):
    """Per rank: ``comm_us`` (union of communication kernels), ``compute_us``, ``overlap_us`` (both run),
    ``overlap_pct`` = overlap / comm x 100, and ``exposed_comm_us`` = comm - overlap (communication the
    compute does not hide). ``overlap_pct`` is NaN on a rank without communication kernels (see ``reason``)."""

    semantics: str
    kind: ClassVar[str] = "comm_overlap"

    @property
    def exposed_comm_us(self) -> float:
        return float(self.table["exposed_comm_us"].sum())


def comm_overlap(trace, semantics="workbench") -> CommOverlap:
    from workbench.analysis.stragglers import collective_activity

    view = prepare(trace, semantics)
    hta_times = view.semantics.round_sub_us or view.semantics.hta_float_times
    # a CPU-only job (gloo): its CPU ops are the compute, its collective ops and annotations the communication
    activity, _ = collective_activity(
        view.kernels, None if hta_times else view.cpu_ops, None if hta_times else trace.annotations
    )  # prepare() checked it is there
    rows = []
    for rank, kr in activity.groupby("rank", sort=True):
        start, end = kr["ts_us"].to_numpy(np.float64), kr["end_us"].to_numpy(np.float64)
        types = kr["kernel_type"].to_numpy()
        comm_i = (start[types == "communication"], end[types == "communication"])
        comp_i = (start[types == "computation"], end[types == "computation"])
        comm = union_length(*comm_i)
        overlap = intersection_length(comm_i, comp_i)
        rows.append(
            {
                "rank": rank,
                "comm_us": comm,
                "compute_us": union_length(*comp_i),
                "overlap_us": overlap,
                "overlap_pct": 100.0 * overlap / comm if comm > 0 else float("nan"),
                "exposed_comm_us": comm - overlap,
                "reason": "" if comm > 0 else "no communication kernels on this rank",
            }
        )
    cols = ["rank", "comm_us", "compute_us", "overlap_us", "overlap_pct", "exposed_comm_us", "reason"]
    return CommOverlap(table=pd.DataFrame(rows, columns=cols), semantics=view.semantics.name)
