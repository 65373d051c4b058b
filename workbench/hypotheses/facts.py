"""Facts a rule reads: a trace's tables and the analysis results computed from them.

``TraceFacts`` wraps anything with the shared table contract (``cpu_ops``, ``kernels``,
``runtime``, ``annotations``, ``memory``, ``device_properties``). Device idle, idle gaps,
launches, communication overlap, copies, syncs, steps and stragglers come from
``workbench.analysis`` (the reference, matched to Holistic Trace Analysis), each computed once,
lazily. A rule that needs a table the trace lacks gets ``NotJudged`` with the reason.
"""

from __future__ import annotations

from functools import cached_property
from types import SimpleNamespace
from typing import Any

import pandas as pd

import workbench.trace.schema as schema
from workbench import analysis
from workbench.devices.ceilings import Ceiling, device_property_dicts
from workbench.hypotheses.registry import NotJudged

TABLES = ("cpu_ops", "kernels", "runtime", "annotations", "memory")


def _table(trace: Any, name: str) -> pd.DataFrame:
    value = getattr(trace, name, None) if trace is not None else None
    if isinstance(value, pd.DataFrame) and (len(value.columns) or name not in schema.TABLES):
        return value
    return schema.empty(name)


class TraceFacts:
    """Read-only view of one trace for the rules (one or many ranks)."""

    # One frame per name in TABLES, set in __init__ (given, else read from the trace).
    cpu_ops: pd.DataFrame
    kernels: pd.DataFrame
    runtime: pd.DataFrame
    annotations: pd.DataFrame
    memory: pd.DataFrame

    def __init__(
        self, trace: Any = None, *, source: str = "trace", ceiling: Ceiling | None = None, **tables: pd.DataFrame
    ):
        self.trace = trace
        self.source = source
        self._ceiling = ceiling
        self._overrides = bool(tables)
        for name in TABLES:
            given = tables.get(name)
            setattr(
                self, name, given if isinstance(given, pd.DataFrame) and len(given.columns) else _table(trace, name)
            )
        props = getattr(trace, "device_properties", None) if trace is not None else None
        self.device_properties = tables.get("device_properties", props) or []

    @property
    def device_list(self) -> list[dict]:
        """Every device's properties as one flat list of dicts (the trace holds {rank: [devices]})."""
        return list(device_property_dicts(self.device_properties))

    # -- presence -------------------------------------------------------------------------
    @property
    def has_gpu(self) -> bool:
        return not self.kernels.empty

    def require_gpu(self) -> pd.DataFrame:
        if self.kernels.empty:
            raise NotJudged("no GPU activity in the trace (no kernels, copies or memsets)")
        return self.kernels

    def require_cpu_ops(self) -> pd.DataFrame:
        if self.cpu_ops.empty:
            raise NotJudged("no CPU operator events in the trace")
        return self.cpu_ops

    def require_runtime(self) -> pd.DataFrame:
        if self.runtime.empty:
            raise NotJudged("no CUDA/HIP runtime calls in the trace")
        return self.runtime

    @property
    def ranks(self) -> list[int]:
        frames = [t for t in (self.kernels, self.cpu_ops) if "rank" in t]
        vals = set().union(*(set(t["rank"].unique()) for t in frames)) if frames else set()
        return sorted(int(v) for v in vals) or [0]

    # -- the object the analyses read -------------------------------------------------------
    @cached_property
    def subject(self) -> Any:
        """The trace itself, or (tables given directly) a stand-in with the same attributes."""
        if self.trace is not None and not self._overrides:
            return self.trace
        return SimpleNamespace(
            **{n: getattr(self, n) for n in TABLES},
            syncs=getattr(self.trace, "syncs", None),
            ranks=tuple(self.ranks),
            meta=getattr(self.trace, "meta", None),
            device_properties=self.device_properties,
        )

    # -- steps and the measured window ----------------------------------------------------
    @cached_property
    def steps(self) -> pd.DataFrame:
        a = self.annotations
        if a.empty or "kind" not in a:
            return pd.DataFrame(columns=["rank", "name", "ts_us", "dur_us"])
        return a[a["kind"] == "step"].sort_values("ts_us").reset_index(drop=True)

    @property
    def n_steps(self) -> int:
        if self.steps.empty:
            return 0
        return int(self.steps.groupby("rank").size().max())

    @cached_property
    def rank_windows_us(self) -> dict[int, float]:
        """Per rank, the wall time the trace covers on it (CPU ops and GPU activity)."""
        spans = {}
        for rank in self.ranks:
            parts = [t[t["rank"] == rank] for t in (self.cpu_ops, self.kernels) if "rank" in t]
            parts = [p for p in parts if not p.empty]
            if parts:
                lo = min(float(p["ts_us"].min()) for p in parts)
                hi = max(float(p["end_us"].max()) for p in parts)
                spans[int(rank)] = hi - lo
        return spans

    @cached_property
    def window_us(self) -> float:
        """Wall time the trace covers on its busiest rank (CPU ops and GPU activity)."""
        return max(self.rank_windows_us.values(), default=0.0)

    def steps_on(self, rank: int) -> int:
        """ProfilerStep annotations on one rank (0 when the trace has none)."""
        if self.steps.empty or "rank" not in self.steps:
            return 0
        return int((self.steps["rank"] == rank).sum())

    # -- analysis results (workbench.analysis), computed once ------------------------------
    @cached_property
    def temporal(self) -> analysis.TemporalBreakdown:
        self.require_gpu()
        return analysis.temporal_breakdown(self.subject)

    @cached_property
    def comm(self) -> analysis.CommOverlap:
        self.require_gpu()
        return analysis.comm_overlap(self.subject)

    @cached_property
    def idle(self) -> analysis.IdleBreakdown:
        self.require_gpu()
        return analysis.idle_breakdown(self.subject)

    @cached_property
    def launch_stats(self) -> analysis.LaunchStats:
        self.require_gpu()
        self.require_runtime()
        return analysis.launch_stats(self.subject)

    @cached_property
    def copies(self) -> analysis.CopyStats:
        self.require_gpu()
        return analysis.copy_stats(self.subject)

    @cached_property
    def sync_audit(self) -> analysis.SyncAudit:
        self.require_runtime()
        return analysis.sync_audit(self.subject)

    @cached_property
    def step_breakdown(self) -> analysis.StepBreakdown:
        return analysis.step_breakdown(self.subject)

    @cached_property
    def stragglers(self) -> analysis.Stragglers:
        self.require_gpu()
        return analysis.stragglers(self.subject)

    @cached_property
    def gpu_ranks(self) -> pd.DataFrame:
        """Per rank, the temporal breakdown beside the communication overlap: span_us (first GPU
        start to last GPU end), busy_us, idle_us, compute_us, comm_us, comm_overlap_us."""
        t = self.temporal.table
        c = self.comm.table.set_index("rank")
        return pd.DataFrame(
            {
                "rank": t["rank"].astype(int).to_numpy(),
                "span_us": t["kernel_time_us"].to_numpy(),
                "busy_us": (t["kernel_time_us"] - t["idle_us"]).to_numpy(),
                "idle_us": t["idle_us"].to_numpy(),
                "compute_us": t["compute_us"].to_numpy(),
                "comm_us": t["rank"].map(c["comm_us"]).fillna(0.0).to_numpy(),
                "comm_overlap_us": t["rank"].map(c["overlap_us"]).fillna(0.0).to_numpy(),
            }
        )

    @cached_property
    def launches(self) -> pd.DataFrame:
        """``launch_stats`` rows (one per launch call) with the name, stream and start (gpu_ts_us) of the
        first GPU event each launched."""
        table = self.launch_stats.table
        k = self.kernels[self.kernels["correlation"] >= 0].sort_values("ts_us")
        first = k.drop_duplicates(["rank", "correlation"])[["rank", "correlation", "name", "stream", "ts_us"]]
        first = first.astype({"name": str}).rename(columns={"ts_us": "gpu_ts_us"})
        named = table.merge(first, on=["rank", "correlation"], how="left")
        return named.assign(name=named["name"].fillna(""))

    @cached_property
    def idle_gaps(self) -> pd.DataFrame:
        """``idle_breakdown`` gaps (rank, stream, ts_us, gap_us, idle_category) with gap_start_us."""
        g = self.idle.gaps
        return g.assign(gap_start_us=g["ts_us"] - g["gap_us"])

    # -- roofline ---------------------------------------------------------------------------
    @cached_property
    def ceiling(self) -> Ceiling:
        """The roof ops are placed against: given (a run passes its own, ``RunFacts``), the GPU's vendor
        peak, or the CPU ceiling the roofline chart resolves for the same trace
        (``devices.ceilings.resolve_cpu_ceiling``: measured, else the default, labelled). Tables built
        by hand (no trace) are judged against the documented default, independent of this machine."""
        import workbench.hypotheses.roofline as roofline

        if self._ceiling is not None:
            return self._ceiling
        if self.has_gpu:
            found = roofline.gpu_ceiling(self.device_properties)
            if found is None:
                raise NotJudged("the trace's GPU has no known spec (peak bandwidth and FLOP/s unknown)")
            return found
        if self.trace is None:
            return roofline.DEFAULT_CPU_CEILING
        from workbench.devices.ceilings import resolve_cpu_ceiling

        return resolve_cpu_ceiling(None)

    # -- the Python stack (torch.profiler's with_stack=True) --------------------------------
    @cached_property
    def python_calls(self) -> pd.DataFrame:
        """Python function events (rank, tid, name, ts_us, dur_us, end_us) where the trace recorded the
        Python stack; an empty frame otherwise (then nothing is read from it)."""
        value = getattr(self.trace, "python_calls", None) if self.trace is not None else None
        if isinstance(value, pd.DataFrame) and {"name", "ts_us", "end_us"} <= set(value.columns):
            return value
        return pd.DataFrame(columns=["rank", "tid", "name", "ts_us", "dur_us", "end_us"])

    # -- CPU side ---------------------------------------------------------------------------
