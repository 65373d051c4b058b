"""Facts a rule reads: a trace's tables and the measurements derived from them.

``TraceFacts`` wraps anything with the shared table contract (``cpu_ops``, ``kernels``,
``runtime``, ``annotations``, ``memory``, ``device_properties``); derived measurements
(device idle per rank, idle attributed to host or kernel wait, launches joined to their
kernels) are computed once, lazily, and follow Holistic Trace Analysis's definitions.
A rule that needs a table the trace lacks gets ``NotJudged`` with the reason.
"""
from __future__ import annotations

from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from workbench.hypotheses import intervals
from workbench.hypotheses.registry import NotJudged

# HTA: a gap shorter than this, with the launch already issued, is "kernel wait".
KERNEL_WAIT_MAX_GAP_US = 30.0
LAUNCH_API_NAMES = frozenset({
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
    "cudaMemcpyAsync", "cudaMemsetAsync", "hipLaunchKernel", "hipExtModuleLaunchKernel",
    "hipModuleLaunchKernel", "hipMemcpyAsync", "hipMemsetAsync", "cudaGraphLaunch", "hipGraphLaunch",
})
TABLES = ("cpu_ops", "kernels", "runtime", "annotations", "memory")


def _table(trace: Any, name: str) -> pd.DataFrame:
    value = getattr(trace, name, None)
    return value if isinstance(value, pd.DataFrame) else pd.DataFrame()


class TraceFacts:
    """Read-only view of one trace for the rules (one or many ranks)."""

    def __init__(self, trace: Any = None, *, source: str = "trace", ceiling: Any = None,
                 **tables: pd.DataFrame):
        self.trace = trace
        self.source = source
        self._ceiling = ceiling
        for name in TABLES:
            setattr(self, name, tables.get(name, _table(trace, name)))
        props = getattr(trace, "device_properties", None) if trace is not None else None
        self.device_properties = tables.get("device_properties", props) or []

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
    def window_us(self) -> float:
        """Wall time the trace covers on its busiest rank (CPU ops and GPU activity)."""
        spans = []
        for rank in self.ranks:
            parts = [t[t["rank"] == rank] for t in (self.cpu_ops, self.kernels) if "rank" in t]
            parts = [p for p in parts if not p.empty]
            if parts:
                lo = min(float(p["ts_us"].min()) for p in parts)
                hi = max(float(p["end_us"].max()) for p in parts)
                spans.append(hi - lo)
        return max(spans, default=0.0)

    # -- GPU time per rank (HTA temporal breakdown) ---------------------------------------
    @cached_property
    def gpu_ranks(self) -> pd.DataFrame:
        k = self.require_gpu()
        rows = []
        for rank, g in k.groupby("rank"):
            comp = g[g["kernel_type"] == "computation"]
            comm = g[g["kernel_type"] == "communication"]
            span = float(g["end_us"].max() - g["ts_us"].min())
            busy = intervals.union_us(g["ts_us"], g["end_us"])
            rows.append({
                "rank": int(rank), "span_us": span, "busy_us": busy, "idle_us": span - busy,
                "compute_us": intervals.union_us(comp["ts_us"], comp["end_us"]),
                "comm_us": intervals.union_us(comm["ts_us"], comm["end_us"]),
                "comm_overlap_us": intervals.overlap_us(comm["ts_us"], comm["end_us"],
                                                        comp["ts_us"], comp["end_us"]),
                "kernel_sum_us": float(g["dur_us"].sum()), "n_kernels": int(len(g)),
            })
        return pd.DataFrame(rows)

    # -- launches joined to their GPU activity --------------------------------------------
    @cached_property
    def launches(self) -> pd.DataFrame:
        k = self.require_gpu()
        rt = self.require_runtime()
        rt = rt[rt["name"].isin(LAUNCH_API_NAMES)]
        cols = ["rank", "correlation", "ts_us", "dur_us", "name"]
        joined = k[["rank", "correlation", "ts_us", "dur_us", "end_us", "name", "stream", "kind"]].merge(
            rt[cols].rename(columns={"ts_us": "launch_ts_us", "dur_us": "launch_dur_us",
                                     "name": "launch_name"}),
            on=["rank", "correlation"], how="inner")
        delay = joined["ts_us"] - (joined["launch_ts_us"] + joined["launch_dur_us"])
        return joined.assign(launch_delay_us=delay.clip(lower=0.0))

    # -- idle gaps per stream, attributed (HTA idle breakdown) ----------------------------
    @cached_property
    def idle_gaps(self) -> pd.DataFrame:
        k = self.require_gpu().sort_values(["rank", "stream", "ts_us"])
        k = k.drop(columns=[c for c in ("launch_ts_us", "launch_dur_us", "launch_name") if c in k])
        prev_end = k.groupby(["rank", "stream"])["end_us"].shift(1)
        gap = k["ts_us"] - prev_end
        g = k.assign(prev_end_us=prev_end, gap_us=gap)
        g = g[g["gap_us"] > 0]
        try:
            launch = self.launches[["rank", "correlation", "launch_ts_us"]]
            g = g.merge(launch, on=["rank", "correlation"], how="left")
        except NotJudged:
            g = g.assign(launch_ts_us=np.nan)
        host = g["launch_ts_us"] > g["prev_end_us"]
        cause = np.where(host, "host_wait",
                         np.where(g["gap_us"] < KERNEL_WAIT_MAX_GAP_US, "kernel_wait", "other"))
        return g.assign(cause=cause)[["rank", "stream", "name", "prev_end_us", "ts_us", "gap_us",
                                      "launch_ts_us", "cause"]].reset_index(drop=True)

    # -- roofline ---------------------------------------------------------------------------
    @cached_property
    def ceiling(self):
        """The roof ops are placed against: given, the GPU's vendor peak, or the CPU ceiling."""
        from workbench.hypotheses import roofline

        if self._ceiling is not None:
            return self._ceiling
        if self.has_gpu:
            found = roofline.gpu_ceiling(self.device_properties)
            if found is None:
                raise NotJudged("the trace's GPU has no known spec (peak bandwidth and FLOP/s unknown)")
            return found
        return roofline.DEFAULT_CPU_CEILING

    # -- CPU side ---------------------------------------------------------------------------
    @cached_property
    def top_level_ops(self) -> pd.DataFrame:
        ops = self.require_cpu_ops()
        if "depth" in ops:
            return ops[ops["depth"] == 0]
        return ops
