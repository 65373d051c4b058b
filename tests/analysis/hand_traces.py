"""Hand-written Chrome/Kineto traces for the attribution tests: events, a loader, a breakdown's row."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import workbench as wb
from workbench.analysis.attribution import ModuleBreakdown, SourceBreakdown


def event(cat: str, name: str, ts: float, dur: float, tid: int = 1, **args: object) -> dict:
    """One complete ("X") event of process 1."""
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def python_event(name: str, ts: float, dur: float) -> dict:
    """A Python frame or module scope as the profiler's Python tracer records it."""
    return event("python_function", name, ts, dur)


def load_events(tmp_path: Path, events: list[dict], name: str = "trace.json.gz") -> wb.Trace:
    """The events written as a gzipped trace under ``tmp_path`` and loaded (no cache)."""
    path = tmp_path / name
    with gzip.open(path, "wt", encoding="utf-8") as out:
        json.dump({"traceEvents": events}, out)
    return wb.load_trace(path, cache=False)


def breakdown_row(result: ModuleBreakdown | SourceBreakdown, key: str) -> dict:
    """The one row of a module (by path) or source (by location) breakdown."""
    column = "path" if isinstance(result, ModuleBreakdown) else "location"
    rows = result.table[result.table[column] == key]
    assert len(rows) == 1, f"{key!r} not in {list(result.table[column])}"
    return rows.iloc[0].to_dict()
