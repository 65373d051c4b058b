"""One decoded file -> per-table column dicts in µs relative to the rank's origin.

Options reproduce Holistic Trace Analysis where asked (``round_ns``, ``drop_last_step``);
the defaults keep every event and every nanosecond.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

import workbench.trace.columns as columns
from workbench.trace.decode import Chunks, DecodedFile, TraceHeader
from workbench.trace.events import Event
from workbench.trace.issues import Issues
from workbench.trace.split_decode import decode_split

TIMED_TABLES = (
    "cpu_ops",
    "python_calls",
    "runtime",
    "kernels",
    "gpu_syncs",
    "memory",
    "annotations",
    "gpu_annotations",
    "flows",
)
CPU_SIDE = ("cpu_ops", "python_calls", "runtime", "memory", "annotations", "flows")
GPU_SIDE = ("kernels", "gpu_syncs")


@dataclass(frozen=True)
class LoadOptions:
    round_ns: bool = False  # HTA: ts = ceil(ts), end = floor(ts + dur), in µs
    drop_last_step: bool = False  # HTA: with >= 2 ProfilerStep#, drop the last step


@dataclass
class FileTables:
    """One file's tables (column arrays), before the files of a trace are joined."""

    path: str
    rank: int  # -1 until the files' ranks are assigned
    origin_ns: int
    tables: dict[str, dict]
    names: dict[str, dict[str, str]]
    warnings: list[str]
    notes: list[str] = field(default_factory=list)


def build_file(
    header: TraceHeader,
    chunks: Iterable[DecodedFile],
    options: LoadOptions,
    issues: Issues,
    decode_workers: int | None = None,
) -> FileTables:
    """One file's tables. ``decode_workers``: processes decoding a large plain file in byte ranges
    (``split_decode.worker_count``; 1: this process only)."""
    parts: dict[str, list[dict]] = {name: [] for name in TIMED_TABLES}
    names: dict[str, dict[str, str]] = {"process": {}, "thread": {}}
    path = ""
    interners = columns.Interners()
    edges: list[tuple[int, int, Event]] = []  # B/E events, paired once the file is read
    if isinstance(chunks, Chunks):
        path = chunks.path
        split = decode_split(chunks, interners, parts, names, issues, decode_workers)  # a large file: in processes
        if split is None:
            chunks = iter(())
        elif isinstance(split, DecodedFile):
            chunks = iter((split,))
    for decoded in chunks:
        path = decoded.path
        issues.skipped(decoded.skipped)
        issues.nan_values(decoded.nan_values)
        chunk = columns.Chunk(decoded, interners)
        del decoded  # the event objects go now: the chunk holds arrays
        _take(chunk, parts, names, edges, issues)
        del chunk
    if edges:
        paired = columns.pair_spans(edges, path, issues)
        del edges
        if paired is not None:
            _take(columns.Chunk(paired, interners), parts, names, [], issues)
    issues.finish()
    if issues.skipped_count and not any(parts.values()) and not issues.huge_ts_count:
        from workbench.errors import TraceFormatError

        raise TraceFormatError(
            f"no event could be read: {issues.skipped_message}; "
            "re-export the trace with torch.profiler or check the file",
            path=issues.shown,
        )
    tables = {name: columns.concat_parts(p) for name, p in parts.items() if p}
    del parts
    for table in tables.values():
        interners.decode_columns(table)
    if options.round_ns:
        for table in tables.values():
            _round_like_hta(table)
    origin_ns = _origin(tables, path, issues)
    for table in tables.values():
        _to_relative_us(table, origin_ns)
    if options.drop_last_step:
        _drop_last_step(tables, issues)
    return FileTables(path, -1, origin_ns, tables, names, issues.messages)


def _take(
    chunk: columns.Chunk, parts: dict[str, list[dict]], names: dict[str, dict[str, str]], edges: list, issues: Issues
) -> None:
    for name, part in columns.extract(chunk, issues).items():
        if part is not None:
            parts[name].append(part)
    for key, found in columns.metadata(chunk).items():
        names[key].update(found)
    issues.unknown(chunk.unknown())
    edge_index = chunk.kinds.get(columns.EDGE)
    if edge_index is not None:
        edges.extend(
            zip(
                chunk.file_indexes(edge_index).tolist(),
                chunk.ts_ns[edge_index].tolist(),
                [chunk.events[i] for i in edge_index],
            )
        )


def _round_like_hta(table: dict) -> None:
    ts, dur = table["ts_ns"], table["dur_ns"]
    start = -((-ts) // 1000) * 1000  # ceil to the µs
    end = ((ts + dur) // 1000) * 1000  # floor to the µs
    table["ts_ns"], table["dur_ns"] = start, end - start


def _origin(tables: dict[str, dict], path: str, issues: Issues) -> int:
    starts = [int(t["ts_ns"].min()) for t in tables.values() if len(t["ts_ns"])]
    if not starts:
        from workbench.errors import TraceFormatError

        if issues.huge_ts_count:
            raise TraceFormatError(f"no event has a usable timestamp: {issues.unit_hint}", path=issues.shown)
        raise TraceFormatError(
            "no timed event (op, kernel, runtime call, annotation) in the trace; profile a region that runs work",
            path=issues.shown,
        )
    return min(starts)


def _to_relative_us(table: dict, origin_ns: int) -> None:
    ts_ns = table.pop("ts_ns")
    dur_ns = table.pop("dur_ns")
    table["ts_us"] = (ts_ns - origin_ns) / 1000.0
    table["dur_us"] = dur_ns / 1000.0
    table["end_us"] = (ts_ns - origin_ns + dur_ns) / 1000.0


def _drop_last_step(tables: dict[str, dict], issues: Issues) -> None:
    notes = tables.get("annotations")
    if notes is None:
        return
    is_step = np.array([str(n).startswith("ProfilerStep#") for n in notes["name"]], dtype=bool)
    if is_step.sum() < 2:
        return
    last_start = float(notes["ts_us"][is_step].max())
    for name in CPU_SIDE:
        if name in tables:
            _filter(tables[name], tables[name]["ts_us"] < last_start)
    kept = set(tables["runtime"]["correlation"].tolist()) if "runtime" in tables else set()
    for name in GPU_SIDE:
        if name in tables:
            _filter(tables[name], np.isin(tables[name]["correlation"], list(kept)))
    if "gpu_annotations" in tables:
        _filter(tables["gpu_annotations"], tables["gpu_annotations"]["ts_us"] < last_start)
    issues.note(
        f"{issues.path}: dropped the last profiler step (starting at {last_start:.3f} µs), "
        "as Holistic Trace Analysis does (drop_last_step=True)"
    )


def _filter(table: dict, keep: np.ndarray) -> None:
    for key, values in list(table.items()):
        table[key] = values[keep]
