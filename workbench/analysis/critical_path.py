"""Critical path of one step (an annotation instance or a time window) on one rank, and what-if on it.

The dependency graph is Holistic Trace Analysis's (``hta.analyzers.critical_path_analysis``, traceinsight
0.6.1), rebuilt from the trace's tables with numpy:

- every CPU op and runtime call starting in the window (duration > 0), and every GPU activity whose launch
  call is among them, has a start and an end node;
- per CPU thread (the backward thread merged into the forward thread, as HTA does), consecutive nodes of the
  nesting walk are linked; the edge carries the time between them (``host``), except an edge into a
  top-level op (``dependency``, weight 0: the host's idle time between top-level ops is not work) and the
  end of a blocking call (a synchronize, ``cudaEventQuery``, ``cudaMemcpy``: weight 0, the wait is the
  GPU's time);
- runtime calls that take the CUDA runtime lock (``cudaLaunchKernel``, ``cudaMemcpyAsync``,
  ``cudaHostAlloc``) are chained across threads in the order they finish;
- a GPU activity gets a ``launch`` edge from its launch call's start when the stream was empty at launch
  and nothing else was queued before it started (HTA's queue-length test); otherwise a ``gpu_idle`` edge
  from the previous activity on its stream when the gap is under 1.5 ms; its own time is a ``kernel``,
  ``memory`` or ``communication`` edge;
- synchronisations: a stream sync links the last activity on its stream, a device (context) sync the
  last activity on every stream, to the end of the blocking call; an event sync the activity launched
  before the event was recorded; a stream-wait-event makes the next activity on the waiting stream wait
  for it (``sync``, weight 0).

The path is the longest path of that DAG (Kahn's order, one pass); its length is the sum of its edges'
weights, as HTA reports it. Where the trace lacks what a dependency needs, the path is built with what can
be inferred and ``notes`` say so (no correlation ids: launches paired to GPU activity in time order; no
GPU-side sync events: sync edges from the blocking calls; no event-record stream: the last launch on the
recording thread).

Under ``semantics="hta"`` / ``"hta_noround"`` the graph is HTA's, its one-kernel-per-launch and
missing-sync gaps included: on every shared trace and step HTA runs on, the length matches its
``critical_path_analysis`` to 0.01 % (``tests/analysis/test_critical_path.py``, against numbers recorded in
``tests/data/hta/critical_path.json``). The default ``"workbench"`` semantics add the dependencies HTA leaves
out, each tested:

- a CUDA-graph launch keeps all its kernels (HTA keeps one GPU event per launch call and drops the graph's
  others: on ``hta_v100_rec_2rank_r1`` step 0 the path is 80.8 ms against HTA's 56.3 ms);
- without GPU-side sync events (older traces) the waits are inferred from the blocking calls (HTA links no
  wait back to the host: on ``tracelens_h100_owlv2`` the path is 586 ms of a 1211 ms step, HTA's 228 ms);
- a blocking copy (``cudaMemcpy``, a device-to-host or pageable ``cudaMemcpyAsync`` that returned after its
  copy ended) waits for its copy.

Under both: the annotation instance is counted among the CPU-side annotations only (HTA also counts their
GPU-side copies); without ``wait_on_stream`` / ``wait_on_correlation`` columns in ``syncs`` an event sync
waits on the GPU activity launched last before the preceding ``cudaEventRecord`` on its thread (said in
``notes``; the trace tables do not carry those args yet).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pandas as pd

from workbench.analysis.result import AnalysisResult
from workbench.analysis.view import STEP_PREFIX, _hta_times, _origins_ns, prepare
from workbench.errors import InvalidArgumentError

KERNEL_KERNEL_DELAY_THRESHOLD_US = 1500.0  # HTA: a longer gap on a stream is an unrecognised dependency
LOCK_CALLS = frozenset({"cudaHostAlloc", "cudaLaunchKernel", "cudaMemcpyAsync"})  # HTA's CUDA runtime lock
BLOCKING_CALLS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventQuery",
        "cudaEventSynchronize",
        "cudaMemcpy",
        "cudaMemcpyAsync",
        "hipDeviceSynchronize",
        "hipStreamSynchronize",
        "hipEventSynchronize",
        "hipEventQuery",
        "hipMemcpy",
        "hipMemcpyAsync",
        "cuCtxSynchronize",
        "cuStreamSynchronize",
        "cuEventSynchronize",
    }
)
# the launch calls HTA's queue length counts
QUEUE_LAUNCH_CALLS = frozenset(
    {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cuLaunchKernel",
        "cuLaunchKernelEx",
        "cudaMemcpyAsync",
        "cudaMemsetAsync",
        "hipLaunchKernel",
        "hipExtModuleLaunchKernel",
        "hipMemsetAsync",
        "hipMemcpyAsync",
        "hipMemcpyWithStream",
    }
)
DEVICE_SYNC_CALLS = frozenset({"cudaDeviceSynchronize", "hipDeviceSynchronize", "cuCtxSynchronize"})
STREAM_SYNC_CALLS = frozenset({"cudaStreamSynchronize", "hipStreamSynchronize", "cuStreamSynchronize"})
EVENT_SYNC_CALLS = frozenset({"cudaEventSynchronize", "hipEventSynchronize", "cuEventSynchronize"})
RECORD_CALLS = frozenset({"cudaEventRecord", "hipEventRecord", "cuEventRecord", "cudaEventRecordWithFlags"})

# edge kinds (the ``kind`` column), and the HTA edge type each comes from
KINDS = ("host", "launch", "kernel", "memory", "communication", "gpu_idle", "dependency", "sync")
HTA_TYPE = {
    "host": "critical_path_operator",
    "kernel": "critical_path_operator",
    "memory": "critical_path_operator",
    "communication": "critical_path_operator",
    "launch": "critical_path_kernel_launch_delay",
    "gpu_idle": "critical_path_kernel_kernel_delay",
    "dependency": "critical_path_dependency",
    "sync": "critical_path_sync_dependency",
}
# HTA's bound_by of each kind ("" for the weightless edges)
HTA_BOUND_BY = {
    "host": "cpu_bound",
    "kernel": "gpu_compute_bound",
    "memory": "gpu_compute_bound",
    "communication": "gpu_communication_bound",
    "launch": "gpu_kernel_launch_overhead",
    "gpu_idle": "gpu_kernel_kernel_overhead",
    "dependency": "",
    "sync": "",
}
SHARE_KINDS = ("host", "launch", "kernel", "memory", "communication", "gpu_idle")
GPU_KINDS = ("kernel", "memory", "communication", "gpu_idle")
_K = {k: i for i, k in enumerate(KINDS)}
_SRC_OP, _SRC_RT, _SRC_GPU = 0, 1, 2
SOURCES = ("cpu_op", "runtime", "kernel")


@dataclass(frozen=True, eq=False)
class CriticalPath(AnalysisResult):
    """``table``: the edges on the path in time order: rank, kind (``KINDS``), hta_type, ts_us, end_us,
    dur_us (the edge's weight: its time on the path), source (``cpu_op`` / ``runtime`` / ``kernel``, ""
    for weightless edges), row (the event's row in that table of the trace, -1 if none), name, tid,
    stream, op_name (a kernel's launching op), module (``nn.Module`` path) and location (the user's source
    line) where the trace recorded Python events.

    ``length_us``: the path's length (HTA's number); ``step_us``: the window's duration; ``by_kind_us`` /
    ``shares_pct``: time and share of the path per kind of work (host, launch, kernel, memory,
    communication, gpu_idle); ``cpu_pct`` (host) and ``gpu_pct`` (kernel, memory, communication, gpu_idle);
    ``bound_by``: the largest share; ``sync_wait_us``: of the path, the time the host sat blocked in a
    synchronisation the path leaves through (GPU work the host waited for; counted in the GPU kinds too);
    ``waited_on_us``: per GPU kind (kernel, memory, communication), the time of that GPU work running while
    a blocking call on the path (a synchronize, a blocking copy) held the host: HTA's model counts such a
    call as host time (a ``cudaMemcpyAsync`` keeps its weight), yet the host was waiting for that work;
    ``notes``: what was inferred or left out, and why (empty for a full path)."""

    rank: int
    step: str
    window_start_us: float
    window_end_us: float
    step_us: float
    length_us: float
    by_kind_us: dict
    shares_pct: dict
    cpu_pct: float
    gpu_pct: float
    bound_by: str
    sync_wait_us: float
    waited_on_us: dict
    n_nodes: int
    n_edges: int
    notes: tuple
    semantics: str
    kind: ClassVar[str] = "critical_path"

    @property
    def partial(self) -> bool:
        """True when a dependency had to be inferred or could not be built (``notes`` say which)."""
        return bool(self.notes)

    def time_on_path_us(self, pattern: str, kinds: tuple = ("host", "kernel", "memory", "communication")) -> float:
        """Time on the path of the events whose name matches ``pattern`` (a regular expression, searched)."""
        if not len(self.table):
            return 0.0
        rx = re.compile(pattern)
        t = self.table[self.table["kind"].isin(kinds)]
        names = t["name"].astype(str)
        hit = np.array([bool(rx.search(n)) for n in names], dtype=bool)
        return float(t["dur_us"].to_numpy()[hit].sum())

    def summary(self) -> str:
        """One line: length, step time and the shares."""
        parts = ", ".join(
            f"{k} {self.shares_pct.get(k, 0.0):.1f} %" for k in SHARE_KINDS if self.shares_pct.get(k, 0.0)
        )
        note = f"; partial: {'; '.join(self.notes)}" if self.notes else ""
        return (
            f"critical path of {self.step} on rank {self.rank}: {self.length_us / 1000:.3f} ms of a "
            f"{self.step_us / 1000:.3f} ms step, bound by {self.bound_by} ({parts}){note}"
        )


@dataclass(frozen=True, eq=False)
class WhatIf(AnalysisResult):
    """``table``: one row per change asked: pattern, factor, n_events matched in the window, work_us
    (their time in the window), on_path_us (their time on the path before). ``before``, ``after``: the
    path before and after the change (``CriticalPath``); ``saved_us``: before - after length."""

    before: CriticalPath
    after: CriticalPath
    saved_us: float
    remove_gaps: bool
    kind: ClassVar[str] = "what_if"

    def to_dict(self) -> dict:
        d = super().to_dict()
        d["before"], d["after"] = self.before.to_dict(), self.after.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "WhatIf":
        d = dict(d)
        d["before"] = d["before"] if isinstance(d["before"], CriticalPath) else CriticalPath.from_dict(d["before"])
        d["after"] = d["after"] if isinstance(d["after"], CriticalPath) else CriticalPath.from_dict(d["after"])
        return super().from_dict.__func__(cls, d)  # type: ignore[attr-defined]

    @property
    def new_step_us(self) -> float:
        """The step time after the change: the old step time less what the path saved."""
        return self.before.step_us - self.saved_us


# --- the graph ----------------------------------------------------------------------------------------


@dataclass
class _Graph:
    """Events (source, row, name, ts, end, ...) and edges between their nodes (2e: start, 2e+1: end)."""

    rank: int
    step: str
    start_us: float
    end_us: float
    ev_source: np.ndarray
    ev_row: np.ndarray
    ev_name: np.ndarray
    ev_ts: np.ndarray
    ev_end: np.ndarray
    ev_tid: np.ndarray
    ev_stream: np.ndarray
    ev_op_name: np.ndarray
    ev_kind: np.ndarray  # the kind of an event's own edge: host / kernel / memory / communication
    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray
    kind: np.ndarray  # index into KINDS
    event: np.ndarray  # the event an edge's time is attributed to (-1: none)
    blocking_sync: np.ndarray  # per event: a blocking call whose end a sync edge reaches
    notes: list = field(default_factory=list)
    semantics: str = "workbench"

    @property
    def n_nodes(self) -> int:
        return 2 * len(self.ev_ts)

    def node_ts(self) -> np.ndarray:
        out = np.empty(self.n_nodes)
        out[0::2], out[1::2] = self.ev_ts, self.ev_end
        return out


def critical_path(
    trace,
    annotation: str = "ProfilerStep",
    instance: int = 0,
    rank: int | None = None,
    window: tuple[float, float] | None = None,
    semantics="workbench",
) -> CriticalPath:
    """The critical path of one instance of ``annotation`` (a ``ProfilerStep``, a ``record_function``
    range, an NVTX range; ``""``: the whole trace) or of ``window=(start_us, end_us)`` on ``rank``."""
    return PathGraph(trace, annotation, instance, rank, window, semantics).path


def what_if(
    trace,
    changes: dict | None = None,
    *,
    remove_gaps: bool = False,
    kinds: dict | None = None,
    annotation: str = "ProfilerStep",
    instance: int = 0,
    rank: int | None = None,
    window: tuple[float, float] | None = None,
    semantics="workbench",
) -> WhatIf:
    """Shrink (or grow) the named work on the path's graph and recompute the path.

    ``changes``: {pattern: factor}: every host op, runtime call or GPU activity whose name matches the
    regular expression ``pattern`` (searched) takes ``factor`` times its time (0.5: twice as fast); for a
    CPU op that is its own (self) time, the ops and calls inside it keep theirs (name them too).
    The graph keeps its shape: the path is the longest chain under the new weights (HTA's simulation).
    ``kinds``: {kind: factor} for every edge of a kind (``KINDS``: "kernel", "memory", "host", ...).
    ``remove_gaps``: launch delays and GPU idle gaps take no time."""
    return PathGraph(trace, annotation, instance, rank, window, semantics).what_if(
        changes, kinds=kinds, remove_gaps=remove_gaps
    )


class PathGraph:
    """One step's dependency graph, built once: ``.path`` (its ``CriticalPath``) and ``.what_if(...)`` on it,
    as often as asked without building the graph again."""

    def __init__(
        self,
        trace,
        annotation: str = "ProfilerStep",
        instance: int = 0,
        rank: int | None = None,
        window: tuple[float, float] | None = None,
        semantics="workbench",
        scopes: bool = True,
    ):
        self._graph, self._ctx = _build(trace, annotation, instance, rank, window, semantics)
        self._scopes = scopes
        self.path = _result(self._graph, self._graph.weight, self._ctx, scopes=scopes)

    def what_if(self, changes: dict | None = None, *, kinds: dict | None = None, remove_gaps: bool = False) -> WhatIf:
        """See ``what_if``."""
        changes, kinds = dict(changes or {}), dict(kinds or {})
        if not changes and not kinds and not remove_gaps:
            raise InvalidArgumentError(
                "what_if needs changes ({'kernel or op pattern': factor}), kinds ({'kernel': 0.5}) or remove_gaps=True"
            )
        for what, factor in (*changes.items(), *kinds.items()):
            if (
                isinstance(factor, bool)
                or not isinstance(factor, (int, float))
                or not np.isfinite(factor)
                or factor < 0
            ):
                raise InvalidArgumentError(
                    f"what_if factor for {what!r} must be a number >= 0 (0.5: twice as fast); got {factor!r}"
                )
        unknown = sorted(set(kinds) - set(KINDS))
        if unknown:
            raise InvalidArgumentError(f"what_if kinds {unknown} unknown; use some of {list(KINDS)}")
        graph, before = self._graph, self.path
        weight = graph.weight.copy()
        rows = []
        names = graph.ev_name.astype(str)
        is_work = np.isin(graph.kind, [_K["host"], _K["kernel"], _K["memory"], _K["communication"]]) & (
            graph.event >= 0
        )
        for pattern, factor in changes.items():
            rx = re.compile(pattern)
            hit_ev = np.array([bool(rx.search(n)) for n in names], dtype=bool)
            edges = is_work & hit_ev[np.clip(graph.event, 0, None)]
            weight[edges] = weight[edges] * float(factor)
            ev = np.flatnonzero(hit_ev)
            rows.append(
                {
                    "pattern": pattern,
                    "factor": float(factor),
                    "n_events": int(len(ev)),
                    "work_us": float((graph.ev_end[ev] - graph.ev_ts[ev]).sum()),
                    "on_path_us": before.time_on_path_us(pattern),
                }
            )
        for kind, factor in kinds.items():
            edges = graph.kind == _K[kind]
            weight[edges] = weight[edges] * float(factor)
            rows.append(
                {
                    "pattern": f"kind:{kind}",
                    "factor": float(factor),
                    "n_events": int(edges.sum()),
                    "work_us": float(graph.weight[edges].sum()),
                    "on_path_us": float(before.by_kind_us.get(kind, 0.0)),
                }
            )
        if remove_gaps:
            weight[np.isin(graph.kind, [_K["launch"], _K["gpu_idle"]])] = 0.0
        after = _result(graph, weight, self._ctx, scopes=self._scopes)
        table = pd.DataFrame(rows, columns=["pattern", "factor", "n_events", "work_us", "on_path_us"])
        return WhatIf(
            table=table,
            before=before,
            after=after,
            saved_us=before.length_us - after.length_us,
            remove_gaps=bool(remove_gaps),
        )


def _build(trace, annotation, instance, rank, window, semantics):
    view = prepare(trace, semantics)
    ranks = sorted(
        set(view.cpu_ops["rank"].tolist()) | set(view.runtime["rank"].tolist()) | set(view.kernels["rank"].tolist())
    )
    if not ranks:
        raise InvalidArgumentError("the trace has no CPU ops, runtime calls or GPU activity: no path to find")
    if rank is None:
        rank = ranks[0]
    if rank not in ranks:
        raise InvalidArgumentError(f"rank {rank} is not in this trace (ranks: {ranks})")
    notes: list[str] = []
    step, start, end = _window(trace, view, annotation, instance, rank, window, notes)
    graph = _graph(trace, view, rank, step, start, end, notes)
    return graph, {"trace": trace}


def _window(trace, view, annotation, instance, rank, window, notes) -> tuple[str, float, float]:
    if window is not None:
        start, end = (float(window[0]), float(window[1]))
        if not end > start:
            raise InvalidArgumentError(f"window must be (start_us, end_us) with end > start; got {window}")
        return f"window {start:.1f}-{end:.1f} µs", start, end
    if not isinstance(instance, (int, np.integer)) or instance < 0:
        raise InvalidArgumentError(f"instance must be an int >= 0 (0: the first); got {instance!r}")
    if annotation == "":
        parts = [df[df["rank"] == rank] for df in (view.cpu_ops, view.runtime)]
        ts = np.concatenate([p["ts_us"].to_numpy(np.float64) for p in parts])
        ends = np.concatenate([p["end_us"].to_numpy(np.float64) for p in parts])
        if not len(ts):
            raise InvalidArgumentError(f"rank {rank} has no CPU ops or runtime calls: no path to find")
        return "the whole trace", float(np.nanmin(ts)), float(np.nanmax(ends))
    ann = trace.annotations
    if annotation.startswith(STEP_PREFIX[:-1]) and annotation in STEP_PREFIX:
        found = view.steps[view.steps["rank"] == rank].sort_values("ts_us")
    else:
        found = ann[(ann["rank"] == rank) & (ann["kind"].astype(str) != "gpu_user")]
        found = found[found["name"].astype(str).str.contains(annotation, regex=False)]
        if view.semantics.round_sub_us or view.semantics.hta_float_times:
            found = _hta_times(found, _origins_ns(trace), view.semantics)
        found = found.sort_values("ts_us", kind="stable")
    if not len(found):
        raise InvalidArgumentError(
            f"no {annotation!r} annotation on rank {rank}: pass another annotation (a record_function or NVTX "
            f"range name), annotation='' for the whole trace, or window=(start_us, end_us)"
        )
    if instance >= len(found):
        raise InvalidArgumentError(
            f"instance {instance} of {annotation!r} asked, but rank {rank} has {len(found)} (0 to {len(found) - 1})"
        )
    row = found.iloc[int(instance)]
    start, end = float(row["ts_us"]), float(row["ts_us"] + row["dur_us"])
    others = found.drop(found.index[int(instance)])
    others = others[(others["ts_us"].to_numpy() != start) | ((others["ts_us"] + others["dur_us"]).to_numpy() != end)]
    overlapping = others[(others["ts_us"].to_numpy() < end) & ((others["ts_us"] + others["dur_us"]).to_numpy() > start)]
    if len(overlapping):
        notes.append(
            f"{len(overlapping)} other instance(s) of {annotation!r} overlap this one "
            f"({', '.join(map(str, overlapping['name'].astype(str).head(3)))}): their events inside "
            "the window are on its graph too"
        )
    return str(row["name"]), start, end


def _names(df: pd.DataFrame) -> np.ndarray:
    return df["name"].astype(str).to_numpy(dtype=object) if len(df) else np.zeros(0, dtype=object)


def _graph(trace, view, rank, step, start, end, notes) -> _Graph:
    ops = view.cpu_ops
    rt = view.runtime
    k = view.kernels
    if "hta_sync_marker" in k.columns:
        k = k[~k["hta_sync_marker"].to_numpy(bool)]
    ops_r = ops[(ops["rank"] == rank).to_numpy()]
    rt_r = rt[(rt["rank"] == rank).to_numpy()]
    k_r = k[(k["rank"] == rank).to_numpy()]

    def in_window(df):
        ts, dur = df["ts_us"].to_numpy(np.float64), df["dur_us"].to_numpy(np.float64)
        return (ts >= start) & (ts <= end) & (dur > 0)

    ops_w = ops_r[in_window(ops_r)]
    rt_all_names = _names(rt_r)
    rt_w_mask = in_window(rt_r)
    rt_w = rt_r[rt_w_mask]
    if not len(ops_w) and not len(rt_w):
        raise InvalidArgumentError(
            f"no CPU op or runtime call starts in {step} ({start:.1f}-{end:.1f} µs) on "
            f"rank {rank}: the window has no events to build a path from"
        )
    # GPU activity whose launch call is in the window: by correlation, else paired in time order
    rt_pos = {int(i): p for p, i in enumerate(rt_r.index)}  # table row label -> position in rt_r
    link = k_r["runtime_index"].to_numpy(np.int64) if "runtime_index" in k_r.columns else np.full(len(k_r), -1)
    k_launch = np.full(len(k_r), -1, dtype=np.int64)  # position in rt_r
    linked = link >= 0
    if linked.any():  # runtime_index: the launch call's row in the trace's runtime table (labels kept by views)
        k_launch[linked] = np.array([rt_pos.get(int(x), -1) for x in link[linked].tolist()], dtype=np.int64)
    is_launch = rt_r["is_launch"].to_numpy(bool) if "is_launch" in rt_r.columns else np.zeros(len(rt_r), bool)
    if len(k_r) and not linked.any() and is_launch.any():
        k_launch = _pair_in_time_order(k_r, rt_r, is_launch)
        notes.append(
            "launch edges inferred from time order: no correlation ids link the runtime calls to the "
            f"GPU activity in this trace ({int((k_launch >= 0).sum())} of {len(k_r)} paired)"
        )
    elif len(k_r) and not linked.any():
        notes.append("no launch calls in this trace: GPU activity is linked only along its streams")
    k_in = np.zeros(len(k_r), dtype=bool)
    has = k_launch >= 0
    k_in[has] = rt_w_mask[k_launch[has]]
    if not len(rt_r) and len(k_r):  # a GPU-only trace: the activity in the window, by its own time
        kts = k_r["ts_us"].to_numpy(np.float64)
        k_in = (kts >= start) & (kts <= end)
    if _has_hta_semantics(view) and k_in.any():
        # HTA links a launch call to one GPU event (its index_correlation): a CUDA-graph launch keeps one
        # kernel, the graph's others drop out of its graph. The workbench semantics keep them all.
        kts = k_r["ts_us"].to_numpy(np.float64)
        cand = np.flatnonzero(k_in)
        order = cand[np.lexsort((kts[cand], k_launch[cand]))]
        later = np.zeros(len(order), dtype=bool)  # not the first (earliest) GPU event of its launch call
        later[1:] = k_launch[order[1:]] == k_launch[order[:-1]]
        dropped = int(later.sum())
        k_in[order[later]] = False
        if dropped:
            notes.append(
                f"{dropped} GPU event(s) left out: under HTA's semantics a launch call (a CUDA-graph "
                "launch) keeps only one of the GPU events it launched"
            )
    k_w = k_r[k_in]
    k_w_launch = k_launch[k_in]

    # events: ops, runtime calls in the window, GPU activity
    n_op, n_rt, n_k = len(ops_w), len(rt_w), len(k_w)
    rt_w_pos = np.flatnonzero(rt_w_mask)  # position in rt_r of each rt_w row
    rt_event = np.full(len(rt_r), -1, dtype=np.int64)
    rt_event[rt_w_pos] = n_op + np.arange(n_rt)
    ev_source = np.concatenate([np.full(n_op, _SRC_OP), np.full(n_rt, _SRC_RT), np.full(n_k, _SRC_GPU)]).astype(np.int8)
    ev_row = np.concatenate([_positions(ops, ops_w), _positions(rt, rt_w), _positions(k, k_w)]).astype(np.int64)
    ev_name = np.concatenate([_names(ops_w), _names(rt_w), _names(k_w)])
    ev_ts = np.concatenate([df["ts_us"].to_numpy(np.float64) for df in (ops_w, rt_w, k_w)])
    ev_end = np.concatenate([(df["ts_us"] + df["dur_us"]).to_numpy(np.float64) for df in (ops_w, rt_w, k_w)])
    ann = trace.annotations
    if len(ann):  # HTA looks for the forward and backward threads among the window's events
        a_ts = ann["ts_us"].to_numpy(np.float64)
        ann = ann[
            (ann["rank"] == rank).to_numpy()
            & (ann["kind"].astype(str) != "gpu_user").to_numpy()
            & (a_ts >= start)
            & (a_ts <= end)
        ]
    tids = _merged_tids(
        ops_w,
        rt_w,
        pd.concat(
            [ops_w[["pid", "tid", "name"]].astype(str), ann[["pid", "tid", "name"]].astype(str)], ignore_index=True
        ),
    )
    ev_tid = np.concatenate([tids, np.full(n_k, "", dtype=object)])
    ev_stream = np.concatenate([np.full(n_op + n_rt, -1), k_w["stream"].to_numpy(np.int64)])
    ktype = k_w["kernel_type"].astype(str).to_numpy(dtype=object) if n_k else np.zeros(0, dtype=object)
    own = np.where(
        ktype == "communication", _K["communication"], np.where(ktype == "memory", _K["memory"], _K["kernel"])
    )
    ev_kind = np.concatenate([np.full(n_op + n_rt, _K["host"]), own]).astype(np.int8)
    op_names = _names(trace.cpu_ops)  # op_index: a row of the trace's table (a view may have dropped rows)
    k_op = k_w["op_index"].to_numpy(np.int64) if "op_index" in k_w.columns and n_k else np.full(n_k, -1)
    ev_op_name = np.concatenate(
        [
            np.full(n_op + n_rt, "", dtype=object),
            np.where(k_op >= 0, op_names[np.clip(k_op, 0, None)] if len(op_names) else "", ""),
        ]
    )
    file_index = np.concatenate(
        [
            df["event_index"].to_numpy(np.int64) if "event_index" in df.columns else np.full(len(df), -1)
            for df in (ops_w, rt_w, k_w)
        ]
    )
    rt_names_w = _names(rt_w)
    is_lock = np.concatenate([np.zeros(n_op, bool), np.isin(rt_names_w, list(LOCK_CALLS)), np.zeros(n_k, bool)])
    blocking = np.concatenate([np.zeros(n_op, bool), np.isin(rt_names_w, list(BLOCKING_CALLS)), np.zeros(n_k, bool)])

    edges: list[tuple[np.ndarray, ...]] = []
    n_cpu = n_op + n_rt
    edges.append(
        _cpu_chains(
            ev_ts[:n_cpu],
            ev_end[:n_cpu],
            ev_tid[:n_cpu],
            ev_source[:n_cpu],
            file_index[:n_cpu],
            is_lock[:n_cpu],
            blocking[:n_cpu],
        )
    )
    edges.append(_lock_edges(ev_ts, ev_end, is_lock, file_index))
    k_event = n_cpu + np.arange(n_k)
    launch_event = np.where(k_w_launch >= 0, rt_event[np.clip(k_w_launch, 0, None)] if len(rt_event) else -1, -1)
    syncs = _sync_rows(
        trace, rank, rt_r, rt_event, rt_all_names, rt_w_mask, k_w, k_w_launch, notes, infer=not _has_hta_semantics(view)
    )
    q_rt, q_k = _queue_lengths(rt_r, rt_all_names, k_r, k_launch, k_in)
    gpu_edges, blocking_sync = _gpu_edges(
        k_w,
        k_event,
        launch_event,
        ev_ts,
        ev_end,
        q_rt,
        q_k,
        syncs,
        n_events=len(ev_ts),
        view=view,
        rt_r=rt_r,
        rt_event=rt_event,
        k_w_launch=k_w_launch,
        rt_all_names=rt_all_names,
        notes=notes,
    )
    edges.append(gpu_edges)
    src = np.concatenate([e[0] for e in edges]).astype(np.int64)
    dst = np.concatenate([e[1] for e in edges]).astype(np.int64)
    kind = np.concatenate([e[2] for e in edges]).astype(np.int8)
    event = np.concatenate([e[3] for e in edges]).astype(np.int64)
    node_ts = np.empty(2 * len(ev_ts))
    node_ts[0::2], node_ts[1::2] = ev_ts, ev_end
    weight = node_ts[dst] - node_ts[src] if len(src) else np.zeros(0)
    weight = np.where(np.isin(kind, [_K["dependency"], _K["sync"]]), 0.0, weight)
    weight = np.where(event == -2, 0.0, weight)  # a blocking call's end: weight 0
    event = np.where(event == -2, -1, event)
    negative = weight < 0
    if (weight < -1.0).any():
        notes.append(
            f"{int((weight < -1.0).sum())} edge(s) ran backwards in time by more than 1 µs "
            "(events out of order on their thread or stream): taken as 0"
        )
    weight[negative] = 0.0
    # one edge per (src, dst): the last added wins, as in HTA's graph
    if len(src):
        key = src * (2 * len(ev_ts) + 1) + dst
        _, last = np.unique(key[::-1], return_index=True)
        keep = np.sort(len(key) - 1 - last)
        src, dst, kind, event, weight = src[keep], dst[keep], kind[keep], event[keep], weight[keep]
    semantics = view.semantics.name
    return _Graph(
        rank,
        step,
        start,
        end,
        ev_source,
        ev_row,
        ev_name,
        ev_ts,
        ev_end,
        ev_tid,
        ev_stream,
        ev_op_name,
        ev_kind,
        src,
        dst,
        weight,
        kind,
        event,
        blocking_sync,
        notes,
        semantics,
    )


def _has_hta_semantics(view) -> bool:
    return view.semantics.name.startswith("hta") or view.semantics.hta_kernel_types


def _positions(full: pd.DataFrame, part: pd.DataFrame) -> np.ndarray:
    """Rows in the trace's table of the rows of ``part`` (views keep the trace tables' row labels)."""
    return part.index.to_numpy().astype(np.int64) if len(part) else np.zeros(0, dtype=np.int64)


def _pair_in_time_order(k_r: pd.DataFrame, rt_r: pd.DataFrame, is_launch: np.ndarray) -> np.ndarray:
    """No correlation ids: the n-th launch call (in time order) launched the n-th GPU activity, kept where
    the activity starts after its call."""
    launches = np.flatnonzero(is_launch)
    launches = launches[np.argsort(rt_r["ts_us"].to_numpy()[launches], kind="stable")]
    order = np.argsort(k_r["ts_us"].to_numpy(), kind="stable")
    out = np.full(len(k_r), -1, dtype=np.int64)
    n = min(len(order), len(launches))
    out[order[:n]] = launches[:n]
    ok = k_r["ts_us"].to_numpy()[order[:n]] >= rt_r["ts_us"].to_numpy()[launches[:n]]
    out[order[:n][~ok]] = -1
    return out


def _merged_tids(ops_w, rt_w, ops_r) -> np.ndarray:
    """Thread of each CPU event; the backward thread (the one thread with ``autograd`` ops or annotations)
    merged into the forward thread (the one thread with ``forward`` ones), as HTA does."""
    tids = (
        np.concatenate(
            [ops_w["tid"].astype(str).to_numpy(dtype=object), rt_w["tid"].astype(str).to_numpy(dtype=object)]
        )
        if len(ops_w) + len(rt_w)
        else np.zeros(0, dtype=object)
    )
    pid = (
        np.concatenate(
            [ops_w["pid"].astype(str).to_numpy(dtype=object), rt_w["pid"].astype(str).to_numpy(dtype=object)]
        )
        if len(tids)
        else tids
    )
    tids = pid + "/" + tids if len(tids) else tids
    if not len(ops_r):
        return tids
    names = ops_r["name"].astype(str)
    keys = ops_r["pid"].astype(str) + "/" + ops_r["tid"].astype(str)

    def only(word):
        found = set(keys[names.str.contains(word, regex=False)].tolist())
        return next(iter(found)) if len(found) == 1 else None

    fwd, bwd = only("forward"), only("autograd")
    if fwd and bwd and fwd != bwd:
        tids = np.where(tids == bwd, fwd, tids)
    return tids


def _cpu_chains(ts, end, tid, source, file_index, is_lock, blocking):
    """Per thread, the nesting walk of its events: an edge between consecutive nodes (HTA's call-stack
    edges). Returns (src node, dst node, kind, attributed event; -2: weightless blocking end)."""
    n = len(ts)
    if not n:
        return (np.zeros(0, np.int64),) * 4
    order = np.lexsort((file_index, source, -end, ts, tid))
    src_l: list[int] = []
    dst_l: list[int] = []
    kind_l: list[int] = []
    ev_l: list[int] = []
    tid_l, ts_l = tid[order].tolist(), ts[order].tolist()
    lock_l, block_l = is_lock.tolist(), blocking.tolist()
    end_py = end.tolist()
    order_l = order.tolist()
    host, dep = _K["host"], _K["dependency"]
    cur_tid = None
    stack: list[int] = []
    last = -1  # last node visited on this thread
    last_parent = -1  # enclosing event of the last node visited

    def visit(node: int, parent: int) -> None:
        nonlocal last, last_parent
        e, is_start = node >> 1, not (node & 1)
        if last >= 0:
            le, l_start = last >> 1, not (last & 1)
            shares = lock_l[le] and lock_l[e] and (l_start or not is_start)
            if not shares:
                if is_start and not stack_depth[0]:
                    kind, ev = dep, -1
                else:
                    kind = host
                    if l_start:
                        ev = le
                    elif not is_start:
                        ev = e
                    else:
                        ev = last_parent
                    if not is_start and block_l[e]:
                        ev = -2
                src_l.append(last)
                dst_l.append(node)
                kind_l.append(kind)
                ev_l.append(ev)
        last, last_parent = node, parent

    stack_depth = [0]
    for i, e in enumerate(order_l):
        t = tid_l[i]
        if t != cur_tid:
            while stack:
                top = stack.pop()
                stack_depth[0] = len(stack) + 1
                visit(2 * top + 1, stack[-1] if stack else -1)
                stack_depth[0] = len(stack)
            cur_tid, last, last_parent = t, -1, -1
        s = ts_l[i]
        while stack and end_py[stack[-1]] <= s:
            top = stack.pop()
            visit(2 * top + 1, stack[-1] if stack else -1)
        stack_depth[0] = len(stack)
        visit(2 * e, stack[-1] if stack else -1)
        stack.append(e)
    while stack:
        top = stack.pop()
        visit(2 * top + 1, stack[-1] if stack else -1)
    return (np.array(src_l, np.int64), np.array(dst_l, np.int64), np.array(kind_l, np.int8), np.array(ev_l, np.int64))


def _lock_edges(ts, end, is_lock, file_index):
    """HTA's CUDA-runtime-lock edges: calls holding the lock, in the order their nodes come, chained by
    their ends (each call's own start -> end edge is made here too)."""
    lock = np.flatnonzero(is_lock)
    if not len(lock):
        return (np.zeros(0, np.int64),) * 4
    nodes = np.concatenate([2 * lock, 2 * lock + 1])
    node_ts = np.concatenate([ts[lock], end[lock]])
    fi = np.concatenate([file_index[lock], file_index[lock]])
    order = np.lexsort((fi, node_ts))
    src_l, dst_l, kind_l, ev_l = [], [], [], []
    starts: list[int] = []
    last = -1
    host, dep = _K["host"], _K["dependency"]
    for node in nodes[order].tolist():
        if not node & 1:
            starts.append(node)
        else:
            while starts:
                prev = starts.pop()
                src_l.append(prev)
                dst_l.append(node)
                if prev >> 1 == node >> 1:
                    kind_l.append(host)
                    ev_l.append(node >> 1)
                else:
                    kind_l.append(dep)
                    ev_l.append(-1)
            if last >= 0 and last & 1:
                src_l.append(last)
                dst_l.append(node)
                kind_l.append(dep)
                ev_l.append(-1)
        last = node
    return (np.array(src_l, np.int64), np.array(dst_l, np.int64), np.array(kind_l, np.int8), np.array(ev_l, np.int64))


def _queue_lengths(rt_r, rt_names, k_r, k_launch, k_in):
    """HTA's queue length per stream over the whole trace: +1 at each counted launch call, -1 at each GPU
    activity's start. Returns, per GPU activity in the window: the length at its launch, at its start."""
    n_in = int(k_in.sum())
    q_rt = np.full(n_in, np.nan)
    q_k = np.full(n_in, np.nan)
    if not len(k_r):
        return q_rt, q_k
    counted = np.zeros(len(k_r), dtype=bool)
    has = k_launch >= 0
    counted[has] = np.isin(rt_names[k_launch[has]], list(QUEUE_LAUNCH_CALLS))
    idx = np.flatnonzero(counted)
    if not len(idx):
        return q_rt, q_k
    stream = k_r["stream"].to_numpy(np.int64)[idx]
    t_launch = rt_r["ts_us"].to_numpy(np.float64)[k_launch[idx]]
    t_start = k_r["ts_us"].to_numpy(np.float64)[idx]
    m = len(idx)
    all_ts = np.concatenate([t_launch, t_start])
    all_stream = np.concatenate([stream, stream])
    delta = np.concatenate([np.ones(m), -np.ones(m)])
    order = np.lexsort((np.arange(2 * m), all_ts, all_stream))
    cum = np.empty(2 * m)
    s_sorted = all_stream[order]
    d_sorted = delta[order]
    c = np.cumsum(d_sorted)
    first = np.ones(2 * m, dtype=bool)
    first[1:] = s_sorted[1:] != s_sorted[:-1]
    base = np.maximum.accumulate(np.where(first, np.arange(2 * m), 0))
    before = np.where(base > 0, c[base - 1], 0.0)
    cum[order] = c - before
    per_k_rt = np.full(len(k_r), np.nan)
    per_k_k = np.full(len(k_r), np.nan)
    per_k_rt[idx], per_k_k[idx] = cum[:m], cum[m:]
    return per_k_rt[k_in], per_k_k[k_in]


@dataclass
class _Syncs:
    """GPU-side sync markers of the window, in the kernel loop's order: kind ('stream', 'context', 'event',
    'wait'), sort time, stream, the blocking call's event, the source activity (event or wait), the
    destination activity (wait)."""

    kind: list
    ts: list
    stream: list
    call_event: list
    src_activity: list
    dst_activity: list


def _sync_rows(trace, rank, rt_r, rt_event, rt_names, rt_w_mask, k_w, k_w_launch, notes, infer=True) -> _Syncs:
    out = _Syncs([], [], [], [], [], [])
    syncs = getattr(trace, "syncs", None)
    gpu = (
        syncs[(syncs["rank"] == rank).to_numpy() & (syncs["source"].astype(str) == "cuda_sync").to_numpy()]
        if syncs is not None and len(syncs)
        else None
    )
    rt_corr = rt_r["correlation"].to_numpy(np.int64)
    rt_first = pd.Series(np.arange(len(rt_r)), index=rt_corr)
    rt_first = rt_first[~rt_first.index.duplicated()]
    rt_tid = (rt_r["pid"].astype(str) + "/" + rt_r["tid"].astype(str)).to_numpy(dtype=object)
    rt_ts = rt_r["ts_us"].to_numpy(np.float64)
    # per launch call in rt_r: the GPU activity (position in k_w) it launched in the window, stream
    launch_to_k = {}
    for pos, lp in enumerate(k_w_launch.tolist()):
        if lp >= 0 and lp not in launch_to_k:
            launch_to_k[lp] = pos
    k_stream = k_w["stream"].to_numpy(np.int64)
    launches_sorted = np.array(sorted(launch_to_k), dtype=np.int64)
    launches_ts = rt_ts[launches_sorted] if len(launches_sorted) else np.zeros(0)
    record = np.isin(rt_names, list(RECORD_CALLS))

    def previous_launch(call_pos: int, stream: int | None) -> int:
        """The GPU activity launched last before the cudaEventRecord preceding ``call_pos`` on its thread."""
        rec = np.flatnonzero(record & (rt_tid == rt_tid[call_pos]) & (rt_ts <= rt_ts[call_pos]))
        rec = rec[rec != call_pos]
        if not len(rec):
            return -1
        return _launch_before(rec[-1], stream)

    def _launch_before(call_pos: int, stream: int | None) -> int:
        cand = launches_sorted[launches_ts <= rt_ts[call_pos]]
        for lp in cand[::-1].tolist():
            kp = launch_to_k[lp]
            if stream is None or k_stream[kp] == stream:
                return kp
        return -1

    has_wait_cols = gpu is not None and "wait_on_correlation" in gpu.columns and "wait_on_stream" in gpu.columns
    if (gpu is None or not len(gpu)) and not infer:
        if rt_w_mask.any() and np.isin(rt_names[rt_w_mask], list(BLOCKING_CALLS)).any():
            notes.append(
                "no GPU-side sync events in this trace: the host's waits are not linked to the GPU work "
                "they wait for (as HTA has it; the workbench semantics infer them from the blocking calls)"
            )
        return out
    if gpu is None or not len(gpu):
        _inferred_syncs(
            out,
            rt_r,
            rt_names,
            rt_event,
            rt_w_mask,
            rt_tid,
            rt_ts,
            launches_sorted,
            launches_ts,
            launch_to_k,
            k_stream,
            notes,
        )
        return out
    inferred_record = 0
    for row in gpu.itertuples(index=False):
        pos = rt_first.get(int(row.correlation), -1)
        if pos < 0 or not rt_w_mask[pos]:
            continue
        name = str(row.name)
        call_ev = int(rt_event[pos])
        end_ts = float(row.ts_us + row.dur_us)
        if name in ("Stream Sync", "Context Sync"):
            out.kind.append("stream" if name == "Stream Sync" else "context")
            out.ts.append(end_ts)
            out.stream.append(int(row.stream))
            out.call_event.append(call_ev)
            out.src_activity.append(-1)
            out.dst_activity.append(-1)
        elif name in ("Event Sync", "Stream Wait Event"):
            if has_wait_cols:
                rec_corr, rec_stream = int(row.wait_on_correlation), int(row.wait_on_stream)
                rec_pos = rt_first.get(rec_corr, -1) if rec_corr >= 0 else -1
                src = _launch_before(rec_pos, rec_stream) if rec_pos >= 0 and rec_stream >= 0 else -1
            else:
                src = previous_launch(pos, None)
                inferred_record += 1
            if src < 0:
                continue
            dst = -1
            if name == "Stream Wait Event":
                later = launches_sorted[launches_ts >= rt_ts[pos]]
                for lp in later.tolist():
                    kp = launch_to_k[lp]
                    if rt_tid[lp] == rt_tid[pos] and k_stream[kp] == int(row.stream):
                        dst = kp
                        break
                if dst < 0:
                    continue
            out.kind.append("event" if name == "Event Sync" else "wait")
            out.ts.append(end_ts)
            out.stream.append(int(row.stream))
            out.call_event.append(call_ev)
            out.src_activity.append(src)
            out.dst_activity.append(dst)
    if inferred_record:
        notes.append(
            f"event syncs ({inferred_record}) wait on the GPU activity launched last before the "
            "preceding cudaEventRecord on their thread: the syncs table has no wait_on_stream column"
        )
    return out


def _inferred_syncs(
    out, rt_r, rt_names, rt_event, rt_w_mask, rt_tid, rt_ts, launches_sorted, launches_ts, launch_to_k, k_stream, notes
) -> None:
    """No GPU-side sync events (older traces): sync edges from the blocking calls themselves."""
    blocking = rt_w_mask & np.isin(rt_names, list(DEVICE_SYNC_CALLS | STREAM_SYNC_CALLS | EVENT_SYNC_CALLS))
    if not blocking.any():
        return
    end = (rt_r["ts_us"] + rt_r["dur_us"]).to_numpy(np.float64)
    for pos in np.flatnonzero(blocking).tolist():
        name = rt_names[pos]
        out.kind.append("context" if name in DEVICE_SYNC_CALLS else "stream")
        out.ts.append(float(end[pos]))
        stream = -1
        if name not in DEVICE_SYNC_CALLS:  # the stream of the last launch from this thread before the call
            cand = launches_sorted[(launches_ts <= rt_ts[pos])]
            for lp in cand[::-1].tolist():
                if rt_tid[lp] == rt_tid[pos]:
                    stream = int(k_stream[launch_to_k[lp]])
                    break
        out.stream.append(stream)
        out.call_event.append(int(rt_event[pos]))
        out.src_activity.append(-1)
        out.dst_activity.append(-1)
    notes.append(
        f"sync edges inferred from {int(blocking.sum())} blocking call(s): no GPU-side sync events in "
        "this trace (a stream sync waits on the stream its thread launched on last)"
    )


def _gpu_edges(
    k_w,
    k_event,
    launch_event,
    ev_ts,
    ev_end,
    q_rt,
    q_k,
    syncs: _Syncs,
    n_events,
    view,
    rt_r,
    rt_event,
    k_w_launch,
    rt_all_names,
    notes,
):
    """HTA's kernel loop: each activity's own edge, its launch or kernel-kernel edge, the sync edges."""
    n_k = len(k_w)
    blocking_sync = np.zeros(n_events, dtype=bool)
    src_l, dst_l, kind_l, ev_l = [], [], [], []
    if not n_k and not syncs.kind:
        return (np.zeros(0, np.int64),) * 4, blocking_sync
    k_ts = ev_ts[k_event] if n_k else np.zeros(0)
    stream = k_w["stream"].to_numpy(np.int64)
    launch_ts = np.where(launch_event >= 0, ev_ts[np.clip(launch_event, 0, None)], np.nan) if n_k else np.zeros(0)
    # blocking copies wait for their copy (not in HTA's graph)
    copy_wait = np.zeros(n_k, dtype=bool)
    if n_k and not _has_hta_semantics(view):
        kind_col = k_w["kind"].astype(str).to_numpy(dtype=object)
        names = k_w["name"].astype(str).to_numpy(dtype=object)
        call = np.where(k_w_launch >= 0, rt_all_names[np.clip(k_w_launch, 0, None)] if len(rt_all_names) else "", "")
        is_copy = kind_col == "memcpy"
        sync_call = np.isin(call, ["cudaMemcpy", "hipMemcpy", "hipMemcpyWithStream"])
        async_blocking = np.isin(call, ["cudaMemcpyAsync", "hipMemcpyAsync"]) & np.array(
            [("DtoH" in n) or ("Pageable" in n) for n in names], dtype=bool
        )
        copy_wait = is_copy & (sync_call | async_blocking) & (launch_event >= 0)
        # the host waited for the copy only where its call returned after the copy ended (a pageable
        # host-to-device copy returns once staged, its copy can end later)
        call_end = np.where(launch_event >= 0, ev_end[np.clip(launch_event, 0, None)], -np.inf)
        copy_wait &= ev_end[k_event] <= call_end
    # the loop's order: activities by start, sync markers by end
    order_ts = np.concatenate([k_ts, np.array(syncs.ts, dtype=np.float64)])
    is_sync = np.concatenate([np.zeros(n_k, bool), np.ones(len(syncs.kind), bool)])
    order = np.lexsort((np.arange(len(order_ts)), order_ts))
    last: dict[int, int] = {}  # stream -> end node of the last activity
    kernel_sync: dict[int, int] = {}  # activity position -> activity position it waits for
    k_event_l = k_event.tolist()
    kt = _K
    stream_l = stream.tolist()
    q_rt_l, q_k_l = q_rt.tolist(), q_k.tolist()
    launch_event_l, launch_ts_l = launch_event.tolist(), launch_ts.tolist()
    k_ts_l = k_ts.tolist()
    copy_wait_l = copy_wait.tolist()
    node_end = lambda e: 2 * e + 1  # noqa: E731
    node_start = lambda e: 2 * e  # noqa: E731
    for i in order.tolist():
        if is_sync[i]:
            j = i - n_k
            kind, call_ev = syncs.kind[j], syncs.call_event[j]
            if call_ev < 0:
                continue
            if kind in ("stream", "context"):
                targets = (
                    list(last.values())
                    if kind == "context" or syncs.stream[j] < 0
                    else ([last[syncs.stream[j]]] if syncs.stream[j] in last else [])
                )
                for node in targets:
                    src_l.append(node)
                    dst_l.append(node_end(call_ev))
                    kind_l.append(kt["sync"])
                    ev_l.append(-1)
                if targets:
                    blocking_sync[call_ev] = True
            elif kind == "event":
                src_l.append(node_end(k_event_l[syncs.src_activity[j]]))
                dst_l.append(node_end(call_ev))
                kind_l.append(kt["sync"])
                ev_l.append(-1)
                blocking_sync[call_ev] = True
            else:  # stream wait event
                kernel_sync[syncs.dst_activity[j]] = syncs.src_activity[j]
            continue
        e = k_event_l[i]
        s = stream_l[i]
        src_l.append(node_start(e))
        dst_l.append(node_end(e))
        kind_l.append(-1)  # its own kind, filled below
        ev_l.append(e)
        sync_src = kernel_sync.pop(i, None)
        sync_end_ts = None
        if sync_src is not None:
            se = k_event_l[sync_src]
            src_l.append(node_end(se))
            dst_l.append(node_start(e))
            kind_l.append(kt["sync"])
            ev_l.append(-1)
            sync_end_ts = ev_end[se]
        prev = last.get(s)
        lts = launch_ts_l[i]
        prev_ts = ev_end[prev >> 1] if prev is not None else None
        if (
            q_rt_l[i] == 1
            and q_k_l[i] == 0
            and launch_event_l[i] >= 0
            and (prev is None or prev_ts < lts)
            and (sync_end_ts is None or sync_end_ts < lts)
        ):
            src_l.append(node_start(launch_event_l[i]))
            dst_l.append(node_start(e))
            kind_l.append(kt["launch"])
            ev_l.append(-1)
        elif (
            prev is not None
            and k_ts_l[i] - prev_ts < KERNEL_KERNEL_DELAY_THRESHOLD_US
            and (sync_end_ts is None or sync_end_ts < prev_ts)
        ):
            src_l.append(prev)
            dst_l.append(node_start(e))
            kind_l.append(kt["gpu_idle"])
            ev_l.append(prev >> 1)
        if copy_wait_l[i]:
            src_l.append(node_end(e))
            dst_l.append(node_end(launch_event_l[i]))
            kind_l.append(kt["sync"])
            ev_l.append(-1)
            blocking_sync[launch_event_l[i]] = True
        last[s] = node_end(e)
    kinds = np.array(kind_l, dtype=np.int16)
    evs = np.array(ev_l, dtype=np.int64)
    own = kinds == -1
    if own.any():
        own_kind = _own_kinds(k_w)
        pos = np.searchsorted(k_event, evs[own])
        kinds[own] = own_kind[pos]
    return (np.array(src_l, np.int64), np.array(dst_l, np.int64), kinds.astype(np.int8), evs), blocking_sync


def _own_kinds(k_w) -> np.ndarray:
    t = k_w["kernel_type"].astype(str).to_numpy(dtype=object) if len(k_w) else np.zeros(0, dtype=object)
    return np.where(t == "communication", _K["communication"], np.where(t == "memory", _K["memory"], _K["kernel"]))


# --- the longest path -------------------------------------------------------------------------------


def _longest(n_nodes: int, src: np.ndarray, dst: np.ndarray, weight: np.ndarray) -> list[int]:
    """Edges (indices) of a longest path of the DAG, in order (Kahn's topological order, one pass)."""
    if not len(src):
        return []
    order = np.argsort(src, kind="stable")
    starts = np.searchsorted(src[order], np.arange(n_nodes + 1)).tolist()
    dst_o, w_o, order_l = dst[order].tolist(), weight[order].tolist(), order.tolist()
    indeg = np.bincount(dst, minlength=n_nodes).tolist()
    dist = [0.0] * n_nodes
    pred = [-1] * n_nodes
    stack = [v for v in range(n_nodes) if indeg[v] == 0]
    seen = 0
    while stack:
        u = stack.pop()
        seen += 1
        du = dist[u]
        for j in range(starts[u], starts[u + 1]):
            v = dst_o[j]
            d = du + w_o[j]
            if d > dist[v] or pred[v] < 0 and d >= dist[v]:
                dist[v] = d
                pred[v] = order_l[j]
            indeg[v] -= 1
            if not indeg[v]:
                stack.append(v)
    if seen < n_nodes:
        raise InvalidArgumentError(
            "the dependency graph has a cycle (events out of order in the trace): no longest path; report the trace"
        )
    node = int(np.argmax(dist))
    path = []
    while pred[node] >= 0:
        e = pred[node]
        path.append(e)
        node = int(src[e])
    return path[::-1]


def _result(graph: _Graph, weight: np.ndarray, ctx, scopes: bool = True) -> CriticalPath:
    path = np.array(_longest(graph.n_nodes, graph.src, graph.dst, weight), dtype=np.int64)
    node_ts = graph.node_ts()
    ev = graph.event[path] if len(path) else np.zeros(0, np.int64)
    kind = graph.kind[path] if len(path) else np.zeros(0, np.int8)
    has = ev >= 0
    evc = np.clip(ev, 0, None)
    n = len(path)

    def pick(arr, fill):
        return np.where(has, arr[evc] if len(arr) else fill, fill) if n else np.zeros(0, dtype=object)

    table = pd.DataFrame(
        {
            "rank": np.full(n, graph.rank, dtype=np.int64),
            "kind": np.array(KINDS, dtype=object)[kind] if n else np.zeros(0, dtype=object),
            "hta_type": np.array([HTA_TYPE[k] for k in KINDS], dtype=object)[kind] if n else np.zeros(0, dtype=object),
            "ts_us": node_ts[graph.src[path]] if n else np.zeros(0),
            "end_us": node_ts[graph.dst[path]] if n else np.zeros(0),
            "dur_us": weight[path].astype(np.float64) if n else np.zeros(0),
            "source": pick(np.array(SOURCES, dtype=object)[graph.ev_source], ""),
            "row": np.where(has, graph.ev_row[evc], -1).astype(np.int64) if n else np.zeros(0, np.int64),
            "name": pick(graph.ev_name, ""),
            "tid": pick(graph.ev_tid, ""),
            "stream": np.where(has, graph.ev_stream[evc], -1).astype(np.int64) if n else np.zeros(0, np.int64),
            "op_name": pick(graph.ev_op_name, ""),
        }
    )
    # a launch or gpu_idle edge: named after the activity it leads to / follows
    if n:
        launch = kind == _K["launch"]
        if launch.any():
            to_ev = graph.dst[path][launch] >> 1
            table.loc[launch, "name"] = graph.ev_name[to_ev]
            table.loc[launch, "stream"] = graph.ev_stream[to_ev]
        gpu_idle = kind == _K["gpu_idle"]
        table.loc[gpu_idle, "source"] = "kernel"
    module, location = _scopes(ctx["trace"], table) if scopes else (np.full(n, "", dtype=object),) * 2
    table["module"], table["location"] = module, location
    by_kind = {k: float(table.loc[table["kind"] == k, "dur_us"].sum()) for k in SHARE_KINDS}
    length = float(table["dur_us"].sum())
    shares = {k: (100.0 * v / length if length > 0 else 0.0) for k, v in by_kind.items()}
    cpu = shares["host"]
    gpu = sum(shares[k] for k in GPU_KINDS)
    bound = max(SHARE_KINDS, key=lambda k: by_kind[k]) if length > 0 else "nothing"
    sync_wait = _sync_wait(graph, path, table)
    waited_on = _waited_on(graph, table)
    return CriticalPath(
        table=table,
        rank=int(graph.rank),
        step=graph.step,
        window_start_us=graph.start_us,
        window_end_us=graph.end_us,
        step_us=graph.end_us - graph.start_us,
        length_us=length,
        by_kind_us=by_kind,
        shares_pct=shares,
        cpu_pct=cpu,
        gpu_pct=gpu,
        bound_by=bound,
        sync_wait_us=sync_wait,
        waited_on_us=waited_on,
        n_nodes=int(graph.n_nodes),
        n_edges=int(len(graph.src)),
        notes=tuple(graph.notes),
        semantics=graph.semantics,
    )


def _waited_on(graph: _Graph, table: pd.DataFrame) -> dict:
    """Per GPU kind: GPU work overlapping the path's host edges inside blocking calls (each edge's share
    capped at its own length)."""
    out = {k: 0.0 for k in ("kernel", "memory", "communication")}
    if not len(table):
        return out
    host = table[
        (table["kind"] == "host").to_numpy()
        & (table["dur_us"] > 0).to_numpy()
        & table["name"].isin(list(BLOCKING_CALLS)).to_numpy()
    ]
    if not len(host):
        return out
    gpu = np.flatnonzero(graph.ev_source == _SRC_GPU)
    g_ts, g_end, g_kind = graph.ev_ts[gpu], graph.ev_end[gpu], graph.ev_kind[gpu]
    for lo, hi in zip(host["ts_us"].to_numpy(), host["end_us"].to_numpy()):
        overlap = np.clip(np.minimum(g_end, hi) - np.maximum(g_ts, lo), 0, None)
        for k in out:
            out[k] += float(min(overlap[g_kind == _K[k]].sum(), hi - lo))
    return out


def _sync_wait(graph: _Graph, path: np.ndarray, table: pd.DataFrame) -> float:
    """Time of the path's GPU edges inside a blocking call whose end the path reaches through a sync edge."""
    if not len(path):
        return 0.0
    sync_edges = path[graph.kind[path] == _K["sync"]]
    calls = [int(d) >> 1 for d in graph.dst[sync_edges].tolist() if int(d) & 1 and graph.blocking_sync[int(d) >> 1]]
    if not calls:
        return 0.0
    gpu = table["kind"].isin(GPU_KINDS + ("launch",)).to_numpy()
    ts, end = table["ts_us"].to_numpy()[gpu], table["end_us"].to_numpy()[gpu]
    total = 0.0
    for c in calls:
        lo, hi = graph.ev_ts[c], graph.ev_end[c]
        total += float(np.clip(np.minimum(end, hi) - np.maximum(ts, lo), 0, None).sum())
    return total


def _scopes(trace, table: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Module path and user source line of each path edge's CPU event (a kernel's: its launch call)."""
    n = len(table)
    empty = np.full(n, "", dtype=object)
    python_calls = getattr(trace, "python_calls", None)
    if python_calls is None or not len(python_calls) or not n:
        return empty, empty.copy()
    from workbench.analysis.attribution import _stack_events
    from workbench.analysis.python_stack import python_stack

    src = table["source"].to_numpy(dtype=object)
    rows = table["row"].to_numpy(np.int64).copy()
    is_kernel = (src == "kernel") & (rows >= 0)
    if is_kernel.any():  # a kernel's CPU side: its launch call
        launch = (
            trace.kernels["runtime_index"].to_numpy(np.int64)
            if "runtime_index" in trace.kernels.columns
            else np.full(len(trace.kernels), -1)
        )
        rows[is_kernel] = launch[rows[is_kernel]]
    table_of = np.where(src == "cpu_op", 0, np.where((src == "runtime") | is_kernel, 1, -1))
    ok_mask = (rows >= 0) & (table_of >= 0)
    if not ok_mask.any():
        return empty, empty.copy()
    ok = np.flatnonzero(ok_mask)
    parts = []
    for which, df in ((0, trace.cpu_ops), (1, trace.runtime)):
        sel = ok[table_of[ok] == which]
        if len(sel):
            sub = df.iloc[rows[sel]][["rank", "pid", "tid", "ts_us", "end_us"]].reset_index(drop=True)
            parts.append((sel, sub.astype({"pid": str, "tid": str})))
    ok = np.concatenate([p[0] for p in parts])
    points = pd.concat([p[1] for p in parts], ignore_index=True)
    # the Python events open during the path's edges: this step's, not the whole trace's
    lo, hi = float(table["ts_us"].min()), float(table["end_us"].max())
    rank = int(table["rank"].iloc[0])

    def overlapping(df):
        if not len(df):
            return df
        ts = df["ts_us"].to_numpy(np.float64)
        end = ts + df["dur_us"].to_numpy(np.float64) if "dur_us" in df.columns else df["end_us"].to_numpy(np.float64)
        return df[(df["rank"] == rank).to_numpy() & (ts <= hi) & (end >= lo)]

    stack = python_stack(_stack_events(overlapping(python_calls), overlapping(trace.annotations)))
    enclosing = stack.enclosing(points)
    module = empty.copy()
    location = empty.copy()
    mod = np.where(enclosing >= 0, stack.module[np.clip(enclosing, 0, None)], -1) if len(stack.module) else enclosing
    usr = np.where(enclosing >= 0, stack.user[np.clip(enclosing, 0, None)], -1) if len(stack.user) else enclosing
    module[ok] = np.where(mod >= 0, stack.module_path[np.clip(mod, 0, None)] if len(stack.module_path) else "", "")
    location[ok] = np.where(usr >= 0, stack.location[np.clip(usr, 0, None)] if len(stack.location) else "", "")
    return module, location


def critical_paths(trace, annotation: str = "ProfilerStep", instance: int = 0, semantics="workbench") -> dict:
    """{rank: CriticalPath} for every rank of a multi-rank trace (a rank without the step is left out)."""
    return {r: g.path for r, g in path_graphs(trace, annotation, instance, semantics).items()}


def path_graphs(
    trace, annotation: str = "ProfilerStep", instance: int = 0, semantics="workbench", scopes: bool = True
) -> dict:
    """{rank: PathGraph} for every rank that has the step (a rank without it is left out)."""
    view = prepare(trace, semantics)
    ranks = sorted(set(view.cpu_ops["rank"].tolist()) | set(view.runtime["rank"].tolist()))
    out = {}
    for r in ranks:
        try:
            out[r] = PathGraph(trace, annotation, instance, rank=r, semantics=semantics, scopes=scopes)
        except InvalidArgumentError:
            continue
    return out


@dataclass(frozen=True, eq=False)
class CollectiveWaits(AnalysisResult):
    """``table``: one row per collective of the step, matched across ranks by order (the n-th communication
    kernel of each rank's window is the same collective): index, name (rank ``waits_on``'s kernel), n_ranks,
    waits_on (the rank whose kernel started last: the others' kernels wait for it to arrive), wait_us (its
    start less the earliest start), on_path_ranks (the ranks whose critical path holds this collective).
    ``paths``: {rank: CriticalPath}. ``notes``: why some collectives could not be matched."""

    paths: dict
    notes: tuple
    kind: ClassVar[str] = "collective_waits"

    def to_dict(self) -> dict:
        d = super().to_dict()
        d["paths"] = {str(r): p.to_dict() for r, p in self.paths.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "CollectiveWaits":
        d = dict(d)
        d["paths"] = {int(r): CriticalPath.from_dict(p) for r, p in d["paths"].items()}
        return super().from_dict.__func__(cls, d)  # type: ignore[attr-defined]


def collective_waits(
    trace, annotation: str = "ProfilerStep", instance: int = 0, semantics="workbench"
) -> CollectiveWaits:
    """Per-rank critical paths of one step and, for each collective, which rank's path the others wait on."""
    graphs = path_graphs(trace, annotation, instance, semantics)
    paths = {r: g.path for r, g in graphs.items()}
    per_rank = {}
    host_side: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for r, g in graphs.items():
        gr = g._graph
        comm = np.flatnonzero((gr.ev_source == _SRC_GPU) & (gr.ev_kind == _K["communication"]))
        comm = comm[np.argsort(gr.ev_ts[comm], kind="stable")]
        on_path = set(paths[r].table.loc[paths[r].table["kind"] == "communication", "row"].tolist())
        per_rank[r] = [(float(gr.ev_ts[e]), str(gr.ev_name[e]), int(gr.ev_row[e]) in on_path) for e in comm]
        if not per_rank[r]:  # a CPU-only job (gloo): its collectives are host ops (c10d::allreduce_)
            per_rank[r], host_side[r] = _host_collectives(trace, r, paths[r])
    notes = []
    counts = {r: len(v) for r, v in per_rank.items() if v}
    if len(set(counts.values())) > 1:
        notes.append(
            f"ranks hold different numbers of collectives in the step ({counts}): matched by order up to the fewest"
        )
    n = min(counts.values()) if counts else 0
    # each rank's times count from its own origin: compared across ranks on the one clock of the files
    origins = {r: int(trace.meta.origins_ns.get(r, 0) or 0) for r in counts}
    base = min(origins.values(), default=0)
    shift = {r: (origins[r] - base) / 1000.0 for r in counts}
    rows = []
    for i in range(n):
        starts = {r: per_rank[r][i] for r in counts}
        last = max(starts, key=lambda r: starts[r][0] + shift[r])
        first = min(v[0] + shift[r] for r, v in starts.items())
        previous = per_rank[last][i - 1][0] if i else paths[last].window_start_us
        rows.append(
            {
                "index": i,
                "name": starts[last][1],
                "n_ranks": len(starts),
                "waits_on": int(last),
                "wait_us": starts[last][0] + shift[last] - first,
                "on_path_ranks": ",".join(str(r) for r in sorted(starts) if starts[r][2]),
                "waits_for": _work_before(host_side.get(last), previous, starts[last][0]),
            }
        )
    if len(counts) < 2:
        notes.append("fewer than two ranks with collectives in the step: nothing to match")
    table = pd.DataFrame(
        rows, columns=["index", "name", "n_ranks", "waits_on", "wait_us", "on_path_ranks", "waits_for"]
    )
    return CollectiveWaits(table=table, paths=paths, notes=tuple(notes))


def _host_collectives(trace, rank: int, path: CriticalPath) -> tuple[list, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """A CPU-only rank's collectives in the window (its top-level collective ops: ``c10d::allreduce_``), as
    (start, name, on the rank's path), and its top-level ops (start, end, name) for what it did before each."""
    import workbench.trace.classify as classify

    ops = trace.cpu_ops
    ops = ops[(ops["rank"] == rank) & (ops["ts_us"] >= path.window_start_us) & (ops["ts_us"] < path.window_end_us)]
    if "depth" in ops.columns:
        ops = ops[ops["depth"] == 0]
    ops = ops.sort_values("ts_us", kind="stable")
    names = ops["name"].astype(str)
    comm = ops[np.asarray(classify.host_activity_types(pd.Categorical(names))) == "communication"]
    on_path = set(path.table.loc[path.table["source"] == "cpu_op", "row"].tolist()) if len(path.table) else set()
    found = [(float(r.ts_us), str(r.name), int(i) in on_path) for i, r in zip(comm.index, comm.itertuples())]
    work = (ops["ts_us"].to_numpy(float), ops["end_us"].to_numpy(float), names.to_numpy())
    return found, work


def _work_before(work: tuple[np.ndarray, np.ndarray, np.ndarray] | None, lo: float, hi: float) -> str:
    """What the rank waited on did between its previous collective and this one: time in ops (the longest
    named) and time outside any op (Python, data loading: the host issuing its work late); "" on a GPU rank."""
    if work is None or hi <= lo:
        return ""
    starts, ends, names = work
    inside = (ends > lo) & (starts < hi)
    s, e = np.clip(starts[inside], lo, hi), np.clip(ends[inside], lo, hi)
    from workbench.analysis.intervals import union_length

    busy = union_length(s, e) if len(s) else 0.0
    idle = (hi - lo) - busy
    top = ""
    if len(s):
        k = int(np.argmax(e - s))
        top = f" (longest {names[inside][k]}, {(e[k] - s[k]) / 1e3:.3f} ms)"
    return f"host: {busy / 1e3:.3f} ms in ops{top}, {idle / 1e3:.3f} ms outside any op"
