"""The Trace: tables of one profiled run (one or many ranks) plus what is known about it.

Times in the tables are float64 µs relative to each rank's own origin (its earliest event,
as Holistic Trace Analysis does). ``meta.origins_ns[rank]`` is that origin in the file's
absolute ns, so ranks can be re-aligned: ``abs_ns = origins_ns[rank] + ts_us * 1000``.

Analyses are thin methods that call ``workbench.analysis`` (imported lazily).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd


@dataclass(frozen=True)
class TraceMeta:
    files: tuple[str, ...]
    ranks: tuple[int, ...]
    file_ranks: dict[str, int]
    origins_ns: dict[int, int]  # rank -> absolute origin (ns, file's clock)
    device_properties: dict[int, tuple[dict, ...]]  # rank -> deviceProperties entries
    distributed_info: dict[int, dict]  # rank -> distributedInfo
    process_names: dict[int, dict[str, str]]
    thread_names: dict[int, dict[str, str]]
    options: dict[str, bool]
    warnings: tuple[str, ...]
    notes: tuple[str, ...] = ()
    base_time_ns: dict[int, int] = field(default_factory=dict)


class Trace:
    """A loaded trace. Tables: cpu_ops, python_calls, runtime, kernels, syncs, memory,
    annotations, flows (see ``workbench.trace.schema``)."""

    def __init__(self, tables: dict[str, pd.DataFrame], meta: TraceMeta):
        self._tables = tables
        self.meta = meta

    # --- tables ---------------------------------------------------------------------------
    cpu_ops = property(lambda self: self._tables["cpu_ops"])
    python_calls = property(lambda self: self._tables["python_calls"])
    runtime = property(lambda self: self._tables["runtime"])
    kernels = property(lambda self: self._tables["kernels"])
    syncs = property(lambda self: self._tables["syncs"])
    memory = property(lambda self: self._tables["memory"])
    annotations = property(lambda self: self._tables["annotations"])
    flows = property(lambda self: self._tables["flows"])

    @property
    def copies(self) -> pd.DataFrame:
        """Memcpy and memset rows of ``kernels``."""
        k = self.kernels
        return k[k["kind"] != "kernel"]

    @property
    def streams(self) -> pd.DataFrame:
        """One row per (rank, device, stream): events, busy time (sum of durations), first/last."""
        k = self.kernels
        if not len(k):
            return pd.DataFrame(columns=["rank", "device", "stream", "events", "sum_dur_us",
                                         "first_ts_us", "last_end_us"])
        grouped = k.groupby(["rank", "device", "stream"], observed=True, sort=True)
        return grouped.agg(events=("ts_us", "size"), sum_dur_us=("dur_us", "sum"),
                           first_ts_us=("ts_us", "min"), last_end_us=("end_us", "max")).reset_index()

    @property
    def ranks(self) -> list[int]:
        return list(self.meta.ranks)

    @property
    def device_properties(self) -> dict[int, tuple[dict, ...]]:
        return self.meta.device_properties

    @property
    def distributed_info(self) -> dict[int, dict]:
        return self.meta.distributed_info

    @property
    def has_gpu(self) -> bool:
        return len(self.kernels) > 0

    @property
    def warnings(self) -> tuple[str, ...]:
        return self.meta.warnings

    def table(self, name: str) -> pd.DataFrame:
        return self._tables[name]

    def rank(self, rank: int) -> "Trace":
        """The same trace restricted to one rank."""
        if rank not in self.meta.ranks:
            from workbench.errors import InvalidArgumentError

            raise InvalidArgumentError(f"rank {rank} is not in this trace; its ranks are {self.ranks}")
        tables = {name: t[t["rank"] == rank].reset_index(drop=True) for name, t in self._tables.items()}
        # row positions (parent, op_index, runtime_index) refer to the full tables; re-map them
        return Trace(_reindexed(tables, self._tables, rank), replace(self.meta, ranks=(rank,)))

    # --- description ----------------------------------------------------------------------
    def span_us(self) -> float:
        ends = [t["end_us"].max() for t in self._tables.values() if "end_us" in t and len(t)]
        return float(max(ends)) if ends else 0.0

    def event_count(self) -> int:
        return int(sum(len(t) for t in self._tables.values()))

    def summary(self) -> str:
        gpu = "GPU" if self.has_gpu else "CPU only"
        names = sorted({str(d.get("name")) for props in self.device_properties.values()
                        for d in props if isinstance(d, dict) and d.get("name")})
        device = f" on {', '.join(names)}" if names else ""
        return (f"Trace: {len(self.ranks)} rank(s) {self.ranks}, {self.event_count():,} events "
                f"({len(self.cpu_ops):,} CPU ops, {len(self.runtime):,} runtime calls, "
                f"{len(self.kernels):,} GPU events), span {self.span_us() / 1000:.3f} ms, "
                f"{gpu}{device}; {len(self.meta.warnings)} warning(s)")

    def __repr__(self) -> str:
        return f"<{self.summary()}>"

    def save_charts(self, folder: Any, *, formats: Any = ("svg",), scale: float = 1.0) -> list:
        """Write the charts the notebook shows for this result to ``folder`` (svg, png, html,
        json; see ``workbench.charts.save_charts``); returns the paths written."""
        from workbench.charts.export import save_charts

        return save_charts(self, folder, formats=formats, scale=scale)

    def _repr_html_(self) -> str:  # notebook display: summary and charts (workbench.charts, lazily)
        from workbench.charts.notebook import trace_html
        return trace_html(self)

    # --- analyses (workbench.analysis, lazily) --------------------------------------------
    def _analysis(self, name: str, **options: Any) -> Any:
        module = importlib.import_module("workbench.analysis")
        return getattr(module, name)(self, **options)

    def op_breakdown(self, **options: Any) -> Any:
        return self._analysis("op_breakdown", **options)

    def kernel_breakdown(self, **options: Any) -> Any:
        return self._analysis("kernel_breakdown", **options)

    def temporal_breakdown(self, **options: Any) -> Any:
        return self._analysis("temporal_breakdown", **options)

    def idle_breakdown(self, **options: Any) -> Any:
        return self._analysis("idle_breakdown", **options)

    def launch_stats(self, **options: Any) -> Any:
        return self._analysis("launch_stats", **options)

    def comm_overlap(self, **options: Any) -> Any:
        return self._analysis("comm_overlap", **options)

    def copy_stats(self, **options: Any) -> Any:
        return self._analysis("copy_stats", **options)

    def sync_audit(self, **options: Any) -> Any:
        return self._analysis("sync_audit", **options)

    def stragglers(self, **options: Any) -> Any:
        return self._analysis("stragglers", **options)

    def step_breakdown(self, **options: Any) -> Any:
        return self._analysis("step_breakdown", **options)

    def hypotheses(self, **options: Any) -> Any:
        module = importlib.import_module("workbench.hypotheses")
        return module.diagnose_trace(self, **options)


def _reindexed(part: dict[str, pd.DataFrame], full: dict[str, pd.DataFrame], rank: int) -> dict[str, pd.DataFrame]:
    """Row-position link columns of a one-rank subset, pointing into the subset's own rows."""
    import numpy as np

    def mapping(table: str) -> np.ndarray:
        rows = np.flatnonzero(full[table]["rank"].to_numpy() == rank)
        new = np.full(len(full[table]) + 1, -1, dtype=np.int64)
        new[rows] = np.arange(len(rows))
        return new

    ops, calls = mapping("cpu_ops"), mapping("runtime")
    for table, column, target in (("cpu_ops", "parent", ops), ("runtime", "op_index", ops),
                                  ("kernels", "op_index", ops), ("kernels", "runtime_index", calls)):
        values = part[table][column].to_numpy()
        part[table][column] = target[np.where(values >= 0, values, -1)]
    return part
