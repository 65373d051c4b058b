"""Rows read from another tool's format -> the same ``TraceData`` the Kineto reader makes.

An importer (``nsys_sqlite``, ``rocprof_json``) hands over, per table of ``build.TIMED_TABLES``, a
dict of column arrays with absolute ``ts_ns`` / ``dur_ns`` (int64) and a ``rank`` column; this module
splits them per rank, makes times relative to each rank's origin (its earliest event, as for Kineto),
and runs the same ``tables.assemble`` (nesting, runtime call -> op, kernel -> call -> op, kernel types,
copy directions, syncs, annotation kinds), so the tables are identical in kind to Kineto's.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from workbench.errors import TraceFormatError, TraceWarning
from workbench.trace.build import TIMED_TABLES, FileTables, _to_relative_us
from workbench.trace.data import TraceData, TraceMeta
from workbench.trace.paths import shown
from workbench.trace.tables import assemble

# the columns each raw table may carry besides rank, ts_ns, dur_ns (anything else is dropped)
RAW_COLUMNS: dict[str, tuple[str, ...]] = {
    "cpu_ops": (
        "pid",
        "tid",
        "name",
        "cat",
        "external_id",
        "sequence_number",
        "input_dims",
        "input_types",
        "event_index",
    ),
    "python_calls": ("pid", "tid", "name", "event_index"),
    "runtime": ("pid", "tid", "name", "correlation", "external_id", "event_index"),
    "kernels": (
        "pid",
        "tid",
        "name",
        "device",
        "stream",
        "correlation",
        "external_id",
        "bytes",
        "gbps",
        "grid_x",
        "grid_y",
        "grid_z",
        "block_x",
        "block_y",
        "block_z",
        "registers_per_thread",
        "shared_memory_bytes",
        "blocks_per_sm",
        "warps_per_sm",
        "occupancy_pct",
        "event_index",
    ),
    "gpu_syncs": ("pid", "tid", "name", "device", "stream", "correlation", "event_index"),
    "memory": (
        "pid",
        "tid",
        "bytes",
        "total_allocated",
        "total_reserved",
        "addr",
        "device_type",
        "device_id",
        "event_index",
    ),
    "annotations": ("pid", "tid", "name", "external_id", "event_index"),
    "gpu_annotations": ("pid", "tid", "name", "external_id", "event_index"),
    "flows": ("cat", "phase", "flow_id", "pid", "tid", "event_index"),
}


def _split(table: dict, ranks: Sequence[int]) -> dict[int, dict]:
    rank = np.asarray(table["rank"], dtype=np.int64)
    out = {}
    for r in ranks:
        keep = rank == r
        if keep.any():
            out[r] = {k: np.asarray(v)[keep] for k, v in table.items() if k != "rank"}
    return out


def build_trace(
    path: str,
    source: str,
    raw: dict[str, dict],
    *,
    ranks: Sequence[int],
    device_properties: dict[int, tuple[dict, ...]],
    distributed_info: dict[int, dict],
    process_names: dict[int, dict[str, str]],
    thread_names: dict[int, dict[str, str]],
    fidelity: dict[str, str],
    warnings_: Sequence[str] = (),
    notes: Sequence[str] = (),
) -> TraceData:
    """The trace of one imported file: ``raw`` maps a table of ``TIMED_TABLES`` to its column arrays
    (absolute ns times, a ``rank`` column); tables it lacks are empty."""
    per_rank: dict[int, dict[str, dict]] = {r: {} for r in ranks}
    for name in TIMED_TABLES:
        table = raw.get(name)
        if not table or not len(table["ts_ns"]):
            continue
        wanted = {k: v for k, v in table.items() if k in ("rank", "ts_ns", "dur_ns") + RAW_COLUMNS[name]}
        for r, part in _split(wanted, ranks).items():
            part["ts_ns"] = part["ts_ns"].astype(np.int64)
            part["dur_ns"] = np.maximum(part["dur_ns"].astype(np.int64), 0)
            per_rank[r][name] = part
    files = []
    for r in ranks:
        tables = per_rank[r]
        starts = [int(t["ts_ns"].min()) for t in tables.values() if len(t["ts_ns"])]
        if not starts:
            continue
        origin = min(starts)
        for t in tables.values():
            _to_relative_us(t, origin)
        files.append(FileTables(path, r, origin, tables, {"process": {}, "thread": {}}, list(warnings_)))
    if not files:
        raise TraceFormatError(
            f"no timed event (kernel, copy, runtime call, range) could be read from this {source} file",
            path=shown(path),
        )
    for message in warnings_:
        warnings.warn(message, TraceWarning, stacklevel=4)
    kept = tuple(f.rank for f in files)
    meta = TraceMeta(
        files=(path,),
        ranks=tuple(sorted(kept)),
        file_ranks={path: min(kept)},
        origins_ns={f.rank: f.origin_ns for f in files},
        device_properties={r: device_properties.get(r, ()) for r in kept},
        distributed_info={r: distributed_info[r] for r in kept if r in distributed_info},
        process_names={r: process_names.get(r, {}) for r in kept},
        thread_names={r: thread_names.get(r, {}) for r in kept},
        options={"round_ns": False, "drop_last_step": False},
        warnings=tuple(warnings_),
        notes=tuple(notes),
        source=source,
        fidelity=dict(fidelity),
    )
    return TraceData(assemble(files), meta)


def strings(values: Sequence[str] | np.ndarray) -> np.ndarray:
    """An object array of str (a text column for ``schema.frame``)."""
    return np.asarray(values, dtype=object)


def ints(values, n: int | None = None) -> np.ndarray:
    """int64 with -1 for None."""
    if n is not None and values is None:
        return np.full(n, -1, dtype=np.int64)
    return np.array([-1 if v is None else int(v) for v in values], dtype=np.int64)
