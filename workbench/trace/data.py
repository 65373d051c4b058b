"""The tables of one profiled run (one or many ranks) plus what is known about it: ``TraceData``.

Times in the tables are float64 µs relative to each rank's own origin (its earliest event,
as Holistic Trace Analysis does). ``meta.origins_ns[rank]`` is that origin in the file's
absolute ns, so ranks can be re-aligned: ``abs_ns = origins_ns[rank] + ts_us * 1000``.

This is data only: the analyses (``workbench.analysis``) take a ``TraceData``, and the public
``Trace`` (``workbench.api.trace``, ``wb.load_trace``) is a ``TraceData`` whose methods call them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Self

import numpy as np
import pandas as pd

from workbench.errors import InvalidArgumentError


@dataclass(frozen=True)
class TraceMeta:
    """What is known about a trace besides its tables: files, ranks, origins, devices, options."""

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
    # the format it was read from, with its version ("kineto", "nsys-sqlite 3.25.0", "rocprofv3-json ...")
    source: str = "kineto"
    # table or "table.column" -> what the format could not provide (workbench.trace.fidelity); {} for Kineto
    fidelity: dict[str, str] = field(default_factory=dict)


STREAM_COLUMNS = ["rank", "device", "stream", "events", "sum_dur_us", "first_ts_us", "last_end_us"]


class TraceData:
    """A loaded trace's tables (see ``workbench.trace.schema``) and its ``meta``.

    Tables: ``cpu_ops``, ``python_calls``, ``runtime``, ``kernels``, ``syncs``, ``memory``,
    ``annotations``, ``flows``; derived: ``copies``, ``streams``.
    """

    def __init__(self, tables: dict[str, pd.DataFrame], meta: TraceMeta):
        self._tables = tables
        self.meta = meta

    @classmethod
    def of(cls, data: TraceData) -> Self:
        """The same tables and meta (not copied) as an instance of ``cls``."""
        return cls(data._tables, data.meta)

    # --- tables ---------------------------------------------------------------------------
    @property
    def cpu_ops(self) -> pd.DataFrame:
        """CPU operators (``cpu_op`` events): one row each, with parent links and self time."""
        return self._tables["cpu_ops"]

    @property
    def python_calls(self) -> pd.DataFrame:
        """Python function events (``python_function``), when the trace recorded the stack."""
        return self._tables["python_calls"]

    @property
    def runtime(self) -> pd.DataFrame:
        """CUDA/HIP runtime and driver calls (launches, copies, synchronizations)."""
        return self._tables["runtime"]

    @property
    def kernels(self) -> pd.DataFrame:
        """GPU activity: kernels, memcpy and memset, linked to their launch and CPU op."""
        return self._tables["kernels"]

    @property
    def syncs(self) -> pd.DataFrame:
        """Synchronizations: the runtime's synchronize calls and ``cuda_sync`` events."""
        return self._tables["syncs"]

    @property
    def memory(self) -> pd.DataFrame:
        """Allocator events ([memory] instants): bytes, address, totals."""
        return self._tables["memory"]

    @property
    def annotations(self) -> pd.DataFrame:
        """User annotations (``record_function``, ``ProfilerStep#``, GPU user annotations)."""
        return self._tables["annotations"]

    @property
    def flows(self) -> pd.DataFrame:
        """Flow events linking CPU ops, runtime calls and kernels."""
        return self._tables["flows"]

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
            return pd.DataFrame(columns=STREAM_COLUMNS)
        grouped = k.groupby(["rank", "device", "stream"], observed=True, sort=True)
        return grouped.agg(
            events=("ts_us", "size"),
            sum_dur_us=("dur_us", "sum"),
            first_ts_us=("ts_us", "min"),
            last_end_us=("end_us", "max"),
        ).reset_index()

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
        """The table called ``name`` (one of ``workbench.trace.schema.TABLES``)."""
        try:
            return self._tables[name]
        except KeyError:
            raise InvalidArgumentError(
                f"a trace has no table {name!r}; its tables are {sorted(self._tables)}"
            ) from None

    def rank(self, rank: int) -> Self:
        """The same trace (of the same class) restricted to one rank."""
        if rank not in self.meta.ranks:
            raise InvalidArgumentError(f"rank {rank} is not in this trace; its ranks are {self.ranks}")
        tables = {name: t[t["rank"] == rank].reset_index(drop=True) for name, t in self._tables.items()}
        # row positions (parent, op_index, runtime_index) refer to the full tables; re-map them
        return type(self)(_reindexed(tables, self._tables, rank), replace(self.meta, ranks=(rank,)))

    # --- description ----------------------------------------------------------------------
    def span_us(self) -> float:
        """From the earliest start to the latest end over every table, in µs."""
        ends = [t["end_us"].max() for t in self._tables.values() if "end_us" in t and len(t)]
        return float(max(ends)) if ends else 0.0

    def event_count(self) -> int:
        """Rows over every table."""
        return int(sum(len(t) for t in self._tables.values()))

    def summary(self) -> str:
        """One line: ranks, events, span, CPU only or GPU (and which), warnings."""
        gpu = "GPU" if self.has_gpu else "CPU only"
        names = sorted(
            {
                str(d.get("name"))
                for props in self.device_properties.values()
                for d in props
                if isinstance(d, dict) and d.get("name")
            }
        )
        device = f" on {', '.join(names)}" if names else ""
        return (
            f"Trace: {len(self.ranks)} rank(s) {self.ranks}, {self.event_count():,} events "
            f"({len(self.cpu_ops):,} CPU ops, {len(self.runtime):,} runtime calls, "
            f"{len(self.kernels):,} GPU events), span {self.span_us() / 1000:.3f} ms, "
            f"{gpu}{device}; {len(self.meta.warnings)} warning(s)"
        )

    def __repr__(self) -> str:
        return f"<{self.summary()}>"


def _reindexed(part: dict[str, pd.DataFrame], full: dict[str, pd.DataFrame], rank: int) -> dict[str, pd.DataFrame]:
    """Row-position link columns of a one-rank subset, pointing into the subset's own rows."""

    def mapping(table: str) -> np.ndarray:
        rows = np.flatnonzero(full[table]["rank"].to_numpy() == rank)
        new = np.full(len(full[table]) + 1, -1, dtype=np.int64)
        new[rows] = np.arange(len(rows))
        return new

    ops, calls = mapping("cpu_ops"), mapping("runtime")
    for table, column, target in (
        ("cpu_ops", "parent", ops),
        ("runtime", "op_index", ops),
        ("kernels", "op_index", ops),
        ("kernels", "runtime_index", calls),
    ):
        values = part[table][column].to_numpy()
        part[table][column] = target[np.where(values >= 0, values, -1)]
    return part
