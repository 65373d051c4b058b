"""Stragglers across ranks. In a collective every rank waits for the slowest one, so the straggler is
the rank that spends the *least* time in communication kernels while its computation takes longer: the
others' extra collective time is time spent waiting for it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from workbench.analysis.intervals import union_length_by
from workbench.analysis.result import AnalysisResult
from workbench.analysis.view import prepare

STRAGGLER_MIN_WAIT_FRACTION = 0.10  # the others' median extra comm time, as a fraction of the median comm time


@dataclass(frozen=True, eq=False)
class Stragglers(AnalysisResult):
    """``table``: per rank: busy_us, compute_us, comm_us, kernel_time_us, comm_deficit_us (median comm
    of the ranks - this rank's comm: time the others waited in collectives for it), is_straggler.
    ``stragglers``: the straggling ranks; ``reason`` says why the list is empty when it is. Ranks with no
    communication kernels are left out of the median and never flagged (comm_deficit_us 0)."""

    stragglers: tuple
    wait_caused_us: float
    reason: str
    semantics: str
    kind: ClassVar[str] = "stragglers"


def stragglers(trace, semantics="workbench", min_wait_fraction: float = STRAGGLER_MIN_WAIT_FRACTION) -> Stragglers:
    view = prepare(trace, semantics)
    k = view.kernels
    ranks = np.unique(k["rank"].to_numpy())
    table = pd.DataFrame({"rank": ranks})
    table["busy_us"] = table["rank"].map(union_length_by(k["rank"].to_numpy(), k["ts_us"], k["end_us"]))
    for col, ktype in (("compute_us", "computation"), ("comm_us", "communication")):
        sel = k[k["kernel_type"] == ktype]
        table[col] = table["rank"].map(union_length_by(sel["rank"].to_numpy(), sel["ts_us"], sel["end_us"]))
    table = table.fillna({"busy_us": 0.0, "compute_us": 0.0, "comm_us": 0.0})
    span = k.groupby("rank").agg(first=("ts_us", "min"), last=("end_us", "max"))
    table["kernel_time_us"] = table["rank"].map(span["last"] - span["first"])
    # a rank that runs no collective waits for no one and is waited for in none: it is left out of the
    # median and never flagged
    has_comm = table["comm_us"] > 0
    median_comm = float(table.loc[has_comm, "comm_us"].median()) if has_comm.any() else 0.0
    table["comm_deficit_us"] = np.where(has_comm, median_comm - table["comm_us"], 0.0)
    reason = _no_analysis_reason(table[has_comm] if has_comm.any() else table, median_comm)
    threshold = min_wait_fraction * median_comm
    flag = (table["comm_deficit_us"] > threshold) & has_comm
    table["is_straggler"] = flag if not reason else False
    found = tuple(int(r) for r in table.loc[table["is_straggler"], "rank"])
    if not reason and not found:
        reason = f"no rank's communication time is more than {min_wait_fraction:.0%} below the median"
    wait = float(table.loc[table["is_straggler"], "comm_deficit_us"].sum())
    return Stragglers(table=table, stragglers=found, wait_caused_us=wait, reason=reason,
                      semantics=view.semantics.name)


def _no_analysis_reason(table: pd.DataFrame, median_comm: float) -> str:
    if len(table) == 0:
        return "no GPU kernels in this trace: stragglers are found from each rank's kernel time"
    if len(table) < 2:
        return f"stragglers need two or more ranks; this trace has {len(table)}"
    if median_comm <= 0:
        return "no communication kernels: ranks do not wait for each other in collectives"
    return ""
