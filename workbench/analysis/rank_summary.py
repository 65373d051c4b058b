"""One rank's analyses as a small frozen summary, and the cross-rank results computed from many.

A rank folder is read rank by rank where each rank is analysed (``workbench.trace.rank_map``): the worker
reads one rank file, runs the per-rank analyses on its tables (``summarize``) and sends back only the
``RankSummary``: the breakdowns (kernel, temporal, idle), launches, copies, syncs, communication overlap,
per-step rows, the per-name op totals and the stragglers' per-rank inputs. The tables stay in the worker.

The ``combine_*`` functions give the results the same analysis gives on all ranks' tables at once: every
per-rank analysis groups by rank, so the combined table is the per-rank tables in rank order (categorical
columns joined by the union of their categories); what is computed over all ranks (launch statistics per
API, sync causes, the median step, op totals per name, stragglers) is recomputed from the per-rank rows.
Scalars summed over ranks (``total_kernel_us``, ``total_copy_us``, an op's ``self_us``) can differ from a
one-pass sum in the last bits of a float; tables of per-rank rows are exactly equal.
"""

from __future__ import annotations

import dataclasses
import pickle
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from workbench.analysis.copies import CopyStats, copy_stats
from workbench.analysis.idle import KERNEL_WAIT_THRESHOLD_US, IdleBreakdown, idle_breakdown
from workbench.analysis.kernels import KernelBreakdown, kernel_breakdown
from workbench.analysis.labels import column_codes
from workbench.analysis.launches import LaunchStats, _by_api, launch_stats
from workbench.analysis.ops import OpBreakdown
from workbench.analysis.result import AnalysisResult
from workbench.analysis.semantics import Semantics
from workbench.analysis.steps import StepBreakdown, step_breakdown
from workbench.analysis.stragglers import (
    STRAGGLER_MIN_WAIT_FRACTION,
    Stragglers,
    _no_analysis_reason,
    before_collectives,
    collective_activity,
    stragglers,
)
from workbench.analysis.syncs import SyncAudit, sync_audit
from workbench.analysis.temporal import CommOverlap, TemporalBreakdown, comm_overlap, temporal_breakdown
from workbench.analysis.view import prepare
from workbench.errors import InvalidArgumentError
from workbench.trace import TraceData, TraceMeta, read_trace
from workbench.trace.ranks import declared_rank

OP_COLUMNS = [
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
STRAGGLER_INPUTS = ["rank", "busy_us", "compute_us", "comm_us", "device", "kernel_time_us"]


@dataclass(frozen=True, eq=False)
class RankSummary:
    """What one rank's analyses leave: small next to its tables (no per-event rows but the idle gaps,
    launches and syncs, each a few columns)."""

    path: str
    rank: int
    declared_rank: int | None  # the file's distributedInfo.rank (None: absent or not a rank)
    semantics: str
    kernel_wait_threshold_us: float
    kernel: KernelBreakdown
    temporal: TemporalBreakdown
    idle: IdleBreakdown
    comm: CommOverlap
    copies: CopyStats
    syncs: SyncAudit
    steps: StepBreakdown
    launches: LaunchStats
    op_totals: pd.DataFrame  # name, count, self_us, total_us (first-seen order)
    op_signatures: pd.DataFrame  # name, input_dims, input_types, n
    straggler_inputs: pd.DataFrame  # STRAGGLER_INPUTS, one row (none for a rank without activity)
    # what the rank did before its collectives (stragglers.before_collectives) and whose activity that is
    # ("gpu": kernels; "cpu": a CPU-only job's ops): what the cross-rank straggler rule reads per rank
    collective_before: pd.DataFrame
    collective_device: str
    meta: TraceMeta
    warnings: tuple[str, ...]
    event_count: int
    cpu_op_count: int
    runtime_count: int
    gpu_event_count: int
    span_us: float

    def relabeled(self, rank: int) -> RankSummary:
        """The same summary for the rank number ``rank`` (every table's ``rank`` column and the meta)."""
        if rank == self.rank:
            return self
        changes: dict[str, Any] = {"rank": rank}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, AnalysisResult):
                changes[field.name] = _relabeled_result(value, rank)
            elif isinstance(value, pd.DataFrame) and "rank" in value.columns:
                changes[field.name] = value.assign(rank=np.full(len(value), rank, dtype=np.int64))
        changes["meta"] = relabeled_meta(self.meta, self.rank, rank)
        return dataclasses.replace(self, **changes)


def _relabeled_result(result: AnalysisResult, rank: int) -> AnalysisResult:
    changes = {}
    for field in dataclasses.fields(result):
        value = getattr(result, field.name)
        if isinstance(value, pd.DataFrame) and "rank" in value.columns:
            changes[field.name] = value.assign(
                rank=np.full(
                    len(value), rank, dtype=value["rank"].dtype if value["rank"].dtype.kind in "iu" else np.int64
                )
            )
    return dataclasses.replace(result, **changes)


def relabeled_meta(meta: TraceMeta, old: int, new: int) -> TraceMeta:
    def moved(mapping: dict) -> dict:
        return {(new if key == old else key): value for key, value in mapping.items()}

    return dataclasses.replace(
        meta,
        ranks=tuple(new if r == old else r for r in meta.ranks),
        file_ranks={path: (new if r == old else r) for path, r in meta.file_ranks.items()},
        origins_ns=moved(meta.origins_ns),
        device_properties=moved(meta.device_properties),
        distributed_info=moved(meta.distributed_info),
        process_names=moved(meta.process_names),
        thread_names=moved(meta.thread_names),
        base_time_ns=moved(meta.base_time_ns),
    )


# --- in the worker: one rank file -> its summary ----------------------------------------------
def summarize(
    trace: TraceData,
    path: str,
    semantics: Semantics | str = "workbench",
    kernel_wait_threshold_us: float = KERNEL_WAIT_THRESHOLD_US,
) -> RankSummary:
    """The summary of a one-rank trace (``trace.ranks`` holds one rank)."""
    if len(trace.ranks) != 1:
        raise InvalidArgumentError(
            f"a rank summary is of one rank; this trace has ranks {trace.ranks}: pass trace.rank(r)"
        )
    view = prepare(trace, semantics)
    totals, signatures = _op_parts(view.cpu_ops)
    straggler = stragglers(trace, semantics).table
    activity, device = collective_activity(trace.kernels, trace.cpu_ops, trace.annotations)
    declared = declared_rank(trace.meta.distributed_info.get(trace.ranks[0]))
    return RankSummary(
        path=path,
        rank=trace.ranks[0],
        declared_rank=declared,
        semantics=view.semantics.name,
        kernel_wait_threshold_us=float(kernel_wait_threshold_us),
        kernel=kernel_breakdown(trace, semantics),
        temporal=temporal_breakdown(trace, semantics),
        idle=idle_breakdown(trace, semantics, kernel_wait_threshold_us=kernel_wait_threshold_us),
        comm=comm_overlap(trace, semantics),
        copies=copy_stats(trace, semantics),
        syncs=sync_audit(trace, semantics),
        steps=step_breakdown(trace, semantics),
        launches=launch_stats(trace, semantics),
        op_totals=totals,
        op_signatures=signatures,
        straggler_inputs=straggler[[c for c in STRAGGLER_INPUTS if c in straggler.columns]].reset_index(drop=True),
        collective_before=before_collectives(activity),
        collective_device=device,
        meta=trace.meta,
        warnings=tuple(trace.meta.warnings),
        event_count=trace.event_count(),
        cpu_op_count=len(trace.cpu_ops),
        runtime_count=len(trace.runtime),
        gpu_event_count=len(trace.kernels),
        span_us=trace.span_us(),
    )


def summarize_rank_file(
    path: str,
    *,
    options: dict[str, bool],
    cache: bool,
    semantics: Semantics | str = "workbench",
    kernel_wait_threshold_us: float = KERNEL_WAIT_THRESHOLD_US,
) -> RankSummary:
    """What a worker runs per rank file (``workbench.trace.rank_map``): read it, summarise it.

    Its warnings cannot reach the caller from another process: they are kept in the summary
    (``warnings``; the reading's own are in ``meta.warnings``) and re-emitted by the caller."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trace = read_trace(
            [path],
            cache=cache,
            round_ns=options.get("round_ns"),
            drop_last_step=options.get("drop_last_step"),
            decode_workers=1,
        )  # the rank map owns the cores: no decode processes nested in it
        summary = summarize(trace, path, semantics, kernel_wait_threshold_us)
    said = set(trace.meta.warnings)
    extra = tuple(str(w.message) for w in caught if str(w.message) not in said)
    return dataclasses.replace(summary, warnings=tuple(trace.meta.warnings) + extra)


@dataclass(frozen=True, eq=False)
class PackedSummary:
    """A ``RankSummary`` kept as its pickled bytes (a few tens of KB where the objects take hundreds), with
    what a folder reads without unpacking it. ``unpack()`` gives the summary, as rank ``rank``."""

    path: str
    rank: int  # the number the folder gave the file; the summary inside is relabeled to it when unpacked
    declared_rank: int | None
    semantics: str
    kernel_wait_threshold_us: float
    meta: TraceMeta
    warnings: tuple[str, ...]
    event_count: int
    cpu_op_count: int
    runtime_count: int
    gpu_event_count: int
    span_us: float
    payload: bytes

    def unpack(self) -> RankSummary:
        summary = pickle.loads(self.payload)
        if not isinstance(summary, RankSummary):
            raise TypeError(f"a packed rank summary of {self.path} holds {type(summary).__name__}")
        return summary.relabeled(self.rank)

    def relabeled(self, rank: int) -> PackedSummary:
        if rank == self.rank:
            return self
        return dataclasses.replace(self, rank=rank, meta=relabeled_meta(self.meta, self.rank, rank))


def pack(summary: RankSummary) -> PackedSummary:
    return PackedSummary(
        path=summary.path,
        rank=summary.rank,
        declared_rank=summary.declared_rank,
        semantics=summary.semantics,
        kernel_wait_threshold_us=summary.kernel_wait_threshold_us,
        meta=summary.meta,
        warnings=summary.warnings,
        event_count=summary.event_count,
        cpu_op_count=summary.cpu_op_count,
        runtime_count=summary.runtime_count,
        gpu_event_count=summary.gpu_event_count,
        span_us=summary.span_us,
        payload=pickle.dumps(summary, protocol=pickle.HIGHEST_PROTOCOL),
    )


def packed_rank_file(path: str, **kwargs: Any) -> PackedSummary:
    """``summarize_rank_file``, packed: what the folder's workers send back."""
    return pack(summarize_rank_file(path, **kwargs))


def _op_parts(ops: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per op name (first-seen order): count, self and total time; and counts per (name, input signature)."""
    if not len(ops):
        return (
            pd.DataFrame(
                {
                    "name": pd.Series(dtype=object),
                    "count": pd.Series(dtype="int64"),
                    "self_us": pd.Series(dtype="float64"),
                    "total_us": pd.Series(dtype="float64"),
                }
            ),
            pd.DataFrame(
                {
                    "name": pd.Series(dtype=object),
                    "input_dims": pd.Series(dtype=object),
                    "input_types": pd.Series(dtype=object),
                    "n": pd.Series(dtype="int64"),
                }
            ),
        )
    name, labels = column_codes(ops, "name")
    self_us = ops["self_us"] if "self_us" in ops.columns else ops["dur_us"]
    frame = pd.DataFrame(
        {"name": name, "self_us": self_us.to_numpy(np.float64), "total_us": ops["dur_us"].to_numpy(np.float64)}
    )
    totals = (
        frame.groupby("name", sort=False)
        .agg(count=("total_us", "size"), self_us=("self_us", "sum"), total_us=("total_us", "sum"))
        .reset_index()
    )
    totals["name"] = labels[totals["name"].to_numpy()]
    dims, dims_labels = column_codes(ops, "input_dims")
    types, types_labels = column_codes(ops, "input_types")
    sig = pd.DataFrame({"name": name, "dims": dims, "types": types})
    counts = sig.groupby(["name", "dims", "types"], sort=False).size().rename("n").reset_index()
    signatures = pd.DataFrame(
        {
            "name": labels[counts["name"].to_numpy()],
            "input_dims": dims_labels[counts["dims"].to_numpy()],
            "input_types": types_labels[counts["types"].to_numpy()],
            "n": counts["n"].to_numpy(np.int64),
        }
    )
    totals["count"] = totals["count"].astype("int64")
    return totals, signatures


# --- in the caller: summaries -> the results over every rank -----------------------------------
def by_rank(summaries: Sequence[RankSummary]) -> list[RankSummary]:
    return sorted(summaries, key=lambda s: s.rank)


def concat_frames(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Frames of the same columns one after another; categorical columns by the union of their
    categories (in order of first appearance), so dtypes are those of a one-pass analysis."""
    frames = [f for f in frames if len(f)] or list(frames[:1])
    if not frames:
        return pd.DataFrame()
    if len(frames) == 1:
        return frames[0].reset_index(drop=True)
    columns = {}
    for column in frames[0].columns:
        parts = [f[column] for f in frames]
        if all(isinstance(p.dtype, pd.CategoricalDtype) for p in parts):
            columns[column] = pd.Series(union_categoricals([p.array for p in parts]))
        else:
            columns[column] = pd.concat(parts, ignore_index=True)
    return pd.DataFrame(columns, columns=list(frames[0].columns))


def _parts(summaries: Iterable[RankSummary], pick: Callable[[RankSummary], tuple]) -> tuple[list[tuple], str, float]:
    """One pass over the summaries (they may be unpacked one at a time): ``pick``'s parts of each, in rank
    order, the semantics and the idle threshold. Only the parts are kept, not the summaries."""
    collected, semantics, threshold = [], "workbench", KERNEL_WAIT_THRESHOLD_US
    for summary in summaries:
        collected.append((summary.rank, pick(summary)))
        semantics, threshold = summary.semantics, summary.kernel_wait_threshold_us
    collected.sort(key=lambda item: item[0])
    return [parts for _, parts in collected], semantics, threshold


def combine_kernel(summaries: Iterable[RankSummary]) -> KernelBreakdown:
    parts, semantics, _ = _parts(summaries, lambda s: (s.kernel.table, s.kernel.types, s.kernel.total_kernel_us))
    types = concat_frames([p[1] for p in parts])
    return KernelBreakdown(
        table=concat_frames([p[0] for p in parts]),
        types=types,
        total_kernel_us=float(sum(p[2] for p in parts)),
        busy_us=float(types["dur_us"].sum()) if len(types) else 0.0,
        semantics=semantics,
    )


def combine_temporal(summaries: Iterable[RankSummary]) -> TemporalBreakdown:
    parts, semantics, _ = _parts(summaries, lambda s: (s.temporal.table,))
    return TemporalBreakdown(table=concat_frames([p[0] for p in parts]), semantics=semantics)


def combine_idle(summaries: Iterable[RankSummary]) -> IdleBreakdown:
    parts, semantics, threshold = _parts(summaries, lambda s: (s.idle.table, s.idle.gaps))
    return IdleBreakdown(
        table=concat_frames([p[0] for p in parts]),
        gaps=concat_frames([p[1] for p in parts]),
        kernel_wait_threshold_us=threshold,
        semantics=semantics,
    )


def combine_comm(summaries: Iterable[RankSummary]) -> CommOverlap:
    parts, semantics, _ = _parts(summaries, lambda s: (s.comm.table,))
    return CommOverlap(table=concat_frames([p[0] for p in parts]), semantics=semantics)


def combine_copies(summaries: Iterable[RankSummary]) -> CopyStats:
    parts, semantics, _ = _parts(summaries, lambda s: (s.copies.table, s.copies.pageable_bytes, s.copies.total_copy_us))
    return CopyStats(
        table=concat_frames([p[0] for p in parts]),
        pageable_bytes=int(sum(p[1] for p in parts)),
        total_copy_us=float(sum(p[2] for p in parts)),
        semantics=semantics,
    )


def combine_syncs(summaries: Iterable[RankSummary]) -> SyncAudit:
    parts, semantics, _ = _parts(summaries, lambda s: (s.syncs.table, s.syncs.by_cause))
    table = concat_frames([p[0] for p in parts])
    if len(table) and {"kind", "cause_op"} <= set(table.columns):
        by_cause = (
            table.groupby(["kind", "cause_op"])
            .agg(count=("blocked_us", "size"), blocked_us=("blocked_us", "sum"))
            .reset_index()
            .sort_values("blocked_us", ascending=False, ignore_index=True)
        )
        by_cause["count"] = by_cause["count"].astype("int64")
    else:
        by_cause = parts[0][1] if parts else pd.DataFrame()
    return SyncAudit(
        table=table,
        by_cause=by_cause,
        blocked_us=float(table["blocked_us"].sum()) if len(table) else 0.0,
        semantics=semantics,
    )


def combine_steps(summaries: Iterable[RankSummary]) -> StepBreakdown:
    parts, semantics, _ = _parts(summaries, lambda s: (s.steps.table,))
    table = concat_frames([p[0] for p in parts])
    median = float(table["dur_us"].median()) if len(table) else float("nan")
    return StepBreakdown(table=table, median_step_us=median, semantics=semantics)


def combine_launches(summaries: Iterable[RankSummary]) -> LaunchStats:
    parts, semantics, _ = _parts(summaries, lambda s: (s.launches.table,))
    table = concat_frames([p[0] for p in parts])
    return LaunchStats(
        table=table,
        by_api=_by_api(table),
        n_launches=len(table),
        n_shorter_than_launch=int(table["shorter_than_launch"].sum()) if len(table) else 0,
        semantics=semantics,
    )


def combine_ops(summaries: Iterable[RankSummary]) -> OpBreakdown:
    """Op totals per name over every rank; pass the summaries in the order of the files (the order of the
    rows of one-pass tables), not of the ranks."""
    pairs, semantics = [], "workbench"
    for summary in summaries:
        pairs.append((summary.op_totals, summary.op_signatures))
        semantics = summary.semantics
    totals = pd.concat([p[0] for p in pairs], ignore_index=True) if pairs else pd.DataFrame()
    if not len(totals):
        return OpBreakdown(
            table=pd.DataFrame({c: pd.Series(dtype="float64") for c in OP_COLUMNS}),
            total_self_us=0.0,
            semantics=semantics,
        )
    t = (
        totals.groupby("name", sort=False)
        .agg(count=("count", "sum"), self_us=("self_us", "sum"), total_us=("total_us", "sum"))
        .reset_index()
    )
    t["mean_us"] = t["total_us"] / t["count"]
    t["mean_self_us"] = t["self_us"] / t["count"]
    total_self = float(t["self_us"].sum())
    t["pct"] = 100.0 * t["self_us"] / total_self if total_self > 0 else 0.0
    sig = pd.concat([p[1] for p in pairs], ignore_index=True)
    counts = sig.groupby(["name", "input_dims", "input_types"], sort=False)["n"].sum().reset_index()
    counts = counts.sort_values("n", ascending=False, kind="stable").drop_duplicates("name")
    top = pd.DataFrame(
        {
            "name": counts["name"].to_numpy(),
            "top_input_dims": counts["input_dims"].to_numpy(),
            "top_input_types": counts["input_types"].to_numpy(),
            "top_shape_count": counts["n"].to_numpy(),
        }
    )
    t = t.merge(top, on="name", how="left")
    t["count"] = t["count"].astype("int64")
    t["top_shape_count"] = t["top_shape_count"].fillna(0).astype("int64")
    t = t.sort_values("self_us", ascending=False, ignore_index=True)
    return OpBreakdown(table=t[OP_COLUMNS], total_self_us=total_self, semantics=semantics)


def combine_collective_before(summaries: Iterable[RankSummary]) -> tuple[pd.DataFrame, str]:
    """Every rank's activity before its collectives (``before_collectives``'s rows, one per rank) and the
    device they are of ("gpu" where any rank ran kernels)."""
    parts = list(summaries)
    rows = [s.collective_before for s in parts if len(s.collective_before)]
    table = (
        pd.concat(rows, ignore_index=True)
        if rows
        else pd.DataFrame(columns=["rank", "n_collectives", "compute_before_us", "idle_before_us"])
    )
    device = "gpu" if any(s.collective_device == "gpu" and s.gpu_event_count for s in parts) else "cpu"
    return table.sort_values("rank", kind="stable").reset_index(drop=True), device


def combine_stragglers(
    summaries: Iterable[RankSummary], min_wait_fraction: float = STRAGGLER_MIN_WAIT_FRACTION
) -> Stragglers:
    """The stragglers analysis (``workbench.analysis.stragglers``) from each rank's busy, compute and
    communication time: the cross-rank half of it, on the per-rank rows."""
    parts, semantics, _ = _parts(summaries, lambda s: (s.straggler_inputs,))
    rows = [p[0] for p in parts if len(p[0])]
    table = (
        pd.concat(rows, ignore_index=True)
        if rows
        else pd.DataFrame({c: pd.Series(dtype="float64") for c in STRAGGLER_INPUTS})
    )
    table = table[["rank", "busy_us", "compute_us", "comm_us", "device", "kernel_time_us"]]
    has_comm = table["comm_us"] > 0
    median_comm = float(table.loc[has_comm, "comm_us"].median()) if has_comm.any() else 0.0
    table = table.assign(comm_deficit_us=np.where(has_comm, median_comm - table["comm_us"], 0.0))
    reason = _no_analysis_reason(table[has_comm] if has_comm.any() else table, median_comm)
    flag = (table["comm_deficit_us"] > min_wait_fraction * median_comm) & has_comm
    table["is_straggler"] = flag if not reason else False
    found = tuple(int(r) for r in table.loc[table["is_straggler"], "rank"])
    if not reason and not found:
        reason = f"no rank's communication time is more than {min_wait_fraction:.0%} below the median"
    wait = float(table.loc[table["is_straggler"], "comm_deficit_us"].sum())
    return Stragglers(table=table, stragglers=found, wait_caused_us=wait, reason=reason, semantics=semantics)
