"""Stragglers across ranks. In a collective every rank waits for the slowest one, so the straggler is
the rank that spends the *least* time in communication kernels while its computation takes longer: the
others' extra collective time is time spent waiting for it.

On a trace with no GPU activity (a CPU job on gloo) the same reasoning runs on the CPU's work: top-level CPU
ops are computation, collective ops and annotations (``c10d::allreduce_``, ``gloo:all_reduce`` on gloo's
worker threads, whose span includes the wait for the peers) are communication."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

import workbench.trace.classify as classify
from workbench.analysis.intervals import union_length_by
from workbench.analysis.result import AnalysisResult
from workbench.analysis.view import prepare

STRAGGLER_MIN_WAIT_FRACTION = 0.10  # the others' median extra comm time, as a fraction of the median comm time


@dataclass(frozen=True, eq=False)
class Stragglers(AnalysisResult):
    """``table``: per rank: busy_us, compute_us, comm_us, kernel_time_us, comm_deficit_us (median comm
    of the ranks - this rank's comm: time the others waited in collectives for it), is_straggler, and
    device ("gpu": from GPU kernels; "cpu": a trace with no GPU activity, from its CPU ops and collectives).
    ``stragglers``: the straggling ranks; ``reason`` says why the list is empty when it is. Ranks with no
    communication kernels are left out of the median and never flagged (comm_deficit_us 0)."""

    stragglers: tuple
    wait_caused_us: float
    reason: str
    semantics: str
    kind: ClassVar[str] = "stragglers"


def stragglers(trace, semantics="workbench", min_wait_fraction: float = STRAGGLER_MIN_WAIT_FRACTION) -> Stragglers:
    view = prepare(trace, semantics)
    hta_times = view.semantics.round_sub_us or view.semantics.hta_float_times
    k, device = collective_activity(
        view.kernels, None if hta_times else view.cpu_ops, None if hta_times else trace.annotations
    )  # prepare() checked it is there
    ranks = np.unique(k["rank"].to_numpy())
    table = pd.DataFrame({"rank": ranks})
    table["busy_us"] = table["rank"].map(union_length_by(k["rank"].to_numpy(), k["ts_us"], k["end_us"]))
    for col, ktype in (("compute_us", "computation"), ("comm_us", "communication")):
        sel = k[k["kernel_type"] == ktype]
        table[col] = table["rank"].map(union_length_by(sel["rank"].to_numpy(), sel["ts_us"], sel["end_us"]))
    table = table.fillna({"busy_us": 0.0, "compute_us": 0.0, "comm_us": 0.0})
    table["device"] = device
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
    return Stragglers(table=table, stragglers=found, wait_caused_us=wait, reason=reason, semantics=view.semantics.name)


def collective_activity(
    kernels: pd.DataFrame, cpu_ops: "pd.DataFrame | None" = None, annotations: "pd.DataFrame | None" = None
) -> tuple[pd.DataFrame, str]:
    """(activity, device): the work that ranks' collectives wait for, with a kernel_type per row.

    With GPU activity, the GPU kernels as they are (device "gpu"). With none but collectives on the CPU (a
    CPU-only job, gloo), the CPU work (device "cpu"): top-level CPU ops that are not collectives as
    computation; collective CPU ops and annotations (``c10d::allreduce_``, ``gloo:all_reduce``) as
    communication. Columns: rank, name, kind, kernel_type, ts_us, end_us. A CPU trace without any collective
    gets the (empty) kernels: there is no communication to analyse."""
    if len(kernels) or cpu_ops is None or not len(cpu_ops):
        return kernels, "gpu"
    parts = []
    ops_coll = classify.host_activity_types(pd.Categorical(cpu_ops["name"].astype(str)))
    top = cpu_ops["depth"].to_numpy() == 0 if "depth" in cpu_ops.columns else np.ones(len(cpu_ops), bool)
    keep = top | (ops_coll == "communication")
    parts.append(
        pd.DataFrame(
            {
                "rank": cpu_ops["rank"].to_numpy()[keep],
                "name": cpu_ops["name"].astype(str).to_numpy()[keep],
                "kind": "cpu_op",
                "kernel_type": ops_coll[keep],
                "ts_us": cpu_ops["ts_us"].to_numpy(np.float64)[keep],
                "end_us": cpu_ops["end_us"].to_numpy(np.float64)[keep],
            }
        )
    )
    if annotations is not None and len(annotations):
        names = annotations["name"].astype(str)
        cpu_side = (
            (annotations["kind"].astype(str) != "gpu_user").to_numpy()
            if "kind" in annotations.columns
            else np.ones(len(annotations), bool)
        )
        coll = names.map(classify.is_collective).to_numpy(bool) & cpu_side
        a = annotations[coll]
        if len(a):
            parts.append(
                pd.DataFrame(
                    {
                        "rank": a["rank"].to_numpy(),
                        "name": a["name"].astype(str).to_numpy(),
                        "kind": "annotation",
                        "kernel_type": "communication",
                        "ts_us": a["ts_us"].to_numpy(np.float64),
                        "end_us": (a["ts_us"] + a["dur_us"]).to_numpy(np.float64),
                    }
                )
            )
    out = pd.concat(parts, ignore_index=True)
    out = out[np.isfinite(out["ts_us"].to_numpy()) & np.isfinite(out["end_us"].to_numpy())]
    if not (out["kernel_type"] == "communication").any():
        return kernels, "gpu"  # one process on the CPU, no collective: nothing waits for anyone
    return out.sort_values(["rank", "ts_us"], kind="stable").reset_index(drop=True), "cpu"


def before_collectives(k: pd.DataFrame) -> pd.DataFrame:
    """Per rank, what it did before it reached its collectives: compute_before_us (computation kernel
    time between the rank's first GPU event and the start of its last collective, outside collectives)
    and idle_before_us (the GPU idle in that window: the host had not issued the work yet). An
    all-reduce makes every rank's wall time the same, so a rank's lateness shows only here. On a CPU-only
    trace ``k`` is the CPU activity (``collective_activity``): idle is then time in no op at all (Python,
    waits outside PyTorch)."""
    from workbench.analysis.intervals import union_length

    out = []
    for rank, g in k[k["kind"].isin(["kernel", "memcpy", "memset", "cpu_op", "annotation"])].groupby("rank"):
        comm = g[g["kernel_type"] == "communication"]
        if comm.empty:
            out.append({"rank": int(rank), "n_collectives": 0, "compute_before_us": np.nan, "idle_before_us": np.nan})
            continue
        lo, hi = float(g["ts_us"].min()), float(comm["ts_us"].max())
        clip = lambda d: (d["ts_us"].clip(lo, hi).to_numpy(), d["end_us"].clip(lo, hi).to_numpy())
        comp = g[g["kernel_type"] == "computation"]
        busy = union_length(*clip(g))
        out.append(
            {
                "rank": int(rank),
                "n_collectives": int(len(comm)),
                "compute_before_us": union_length(*clip(comp)) if not comp.empty else 0.0,
                "idle_before_us": max(0.0, (hi - lo) - busy),
            }
        )
    return pd.DataFrame(out, columns=["rank", "n_collectives", "compute_before_us", "idle_before_us"])


def _no_analysis_reason(table: pd.DataFrame, median_comm: float) -> str:
    if len(table) == 0:
        return (
            "no GPU kernels in this trace, nor collectives on its CPU ops: stragglers are found from each "
            "rank's kernel (or, on a CPU job, CPU op) time around its collectives"
        )
    if len(table) < 2:
        return f"stragglers need two or more ranks; this trace has {len(table)}"
    if median_comm <= 0:
        return "no communication kernels or collective ops: ranks do not wait for each other in collectives"
    return ""
