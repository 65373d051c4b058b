"""``torch.cuda.memory._snapshot()`` pickles -> the trace's ``memory`` table (``wb.load_memory_snapshot``).

The pickle is read with a **restricted unpickler**: a snapshot is plain data (dicts, lists, strings,
numbers), so only a short allow-list of harmless classes may be named in it; any other global (a function
such as ``os.system``, a class, a code object, ``torch`` storage) is refused with ``SnapshotError`` before
anything is called. No torch import: a snapshot taken on a GPU machine is read anywhere.

From the snapshot's ``device_traces`` (the allocator's history, a ring buffer of ``max_entries``):
``alloc`` adds a block's size, ``free_completed`` (or ``free_requested`` where the history has no completed
frees) subtracts it; ``segment_alloc`` / ``segment_map`` and ``segment_free`` / ``segment_unmap`` move the
reserved total. Allocated bytes before the history's first event are found from the snapshot's segments (the
active blocks at snapshot time, less what the history added), so ``total_allocated`` is the allocator's own
total where the history is complete. Each event keeps its innermost frame in the user's files
(``location``) and its innermost frame (``frame``).
"""

from __future__ import annotations

import io
import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from workbench.errors import TraceFormatError
from workbench.trace import schema
from workbench.trace.data import TraceData, TraceMeta

MAX_SNAPSHOT_BYTES = 2 << 30
ALLOWED_GLOBALS = frozenset(
    {
        ("collections", "OrderedDict"),
        ("builtins", "set"),
        ("builtins", "frozenset"),
        ("builtins", "complex"),
        ("builtins", "bytearray"),
        ("collections", "defaultdict"),
        ("builtins", "slice"),
        ("builtins", "range"),
    }
)
ALLOC, FREES, SEGMENT_UP, SEGMENT_DOWN = (
    "alloc",
    ("free_completed", "free_requested"),
    ("segment_alloc", "segment_map"),
    ("segment_free", "segment_unmap"),
)
_HINT = "pass the file that pickle.dump(torch.cuda.memory._snapshot(), f) wrote"


class SnapshotError(TraceFormatError):
    """A memory snapshot pickle that cannot (or must not) be read."""


class _Restricted(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in ALLOWED_GLOBALS:
            import builtins
            import collections

            return getattr(builtins if module == "builtins" else collections, name)
        raise SnapshotError(
            f"the pickle names {module}.{name}: a memory snapshot holds plain data only, so "
            "nothing but dicts, lists, strings and numbers is read (no code from a pickle "
            f"runs); refused. If it is a snapshot of another torch version, {_HINT} with "
            "that version and read it again"
        )

    def persistent_load(self, pid: Any) -> Any:
        raise SnapshotError(
            "the pickle holds a persistent reference (torch storage?): a memory snapshot holds "
            f"plain data only; refused ({_HINT})"
        )


def read_snapshot_pickle(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The snapshot's dict, read with the restricted unpickler (bounded in size)."""
    p = Path(path)
    if not p.is_file():
        raise SnapshotError(f"no memory snapshot at {str(p)!r}: not a file; {_HINT}")
    size = p.stat().st_size
    if size > MAX_SNAPSHOT_BYTES:
        raise SnapshotError(
            f"{str(p)!r} is {size >> 20} MB: larger than a memory snapshot is read "
            f"({MAX_SNAPSHOT_BYTES >> 20} MB); record fewer entries (max_entries=)"
        )
    with open(p, "rb") as fh:
        data = fh.read(MAX_SNAPSHOT_BYTES + 1)
    try:
        doc = _Restricted(io.BytesIO(data)).load()
    except SnapshotError:
        raise
    except (
        pickle.UnpicklingError,
        EOFError,
        ValueError,
        TypeError,
        AttributeError,
        IndexError,
        RecursionError,
        MemoryError,
    ) as exc:
        raise SnapshotError(f"{str(p)!r} is not a readable pickle ({type(exc).__name__}: {exc}); {_HINT}") from None
    if not isinstance(doc, dict) or not ("segments" in doc or "device_traces" in doc):
        what = type(doc).__name__ if not isinstance(doc, dict) else f"a dict with keys {sorted(map(str, doc))[:8]}"
        raise SnapshotError(
            f"{str(p)!r} holds {what}, not a memory snapshot (a dict with 'segments' and 'device_traces'); {_HINT}"
        )
    return doc


_LIBRARY_PARTS = ("site-packages", "dist-packages", "/torch/", "/lib/python3", "<frozen", "<built-in")


def _is_user_file(file: str) -> bool:
    """A frame outside torch, the standard library and site-packages (the analysis layer has the full rule)."""
    path = file.replace("\\", "/")
    return bool(path) and not any(part in path for part in _LIBRARY_PARTS) and not path.startswith("torch/")


def _frames(event: dict[str, Any]) -> tuple[str, str]:
    """(innermost frame in the user's files, innermost frame) of an event's ``frames``, as ``file:line in fn``."""
    frames = event.get("frames")
    if not isinstance(frames, list) or not frames:
        return "", ""

    def text(f: dict[str, Any]) -> str:
        return f"{f.get('filename', '?')}:{f.get('line', '?')} in {f.get('name', '?')}"

    good = [f for f in frames if isinstance(f, dict)]
    if not good:
        return "", ""
    user = next((f for f in good if isinstance(f.get("filename"), str) and _is_user_file(f["filename"])), None)
    return (text(user) if user is not None else ""), text(good[0])


def snapshot_trace(path: str | os.PathLike[str]) -> TraceData:
    """A memory snapshot pickle as a ``TraceData`` whose ``memory`` table holds the allocator's history
    (other tables empty). ``meta.notes`` says what the snapshot could not tell."""
    doc = read_snapshot_pickle(path)
    traces = doc.get("device_traces") or []
    segments = doc.get("segments") or []
    if not isinstance(traces, list) or not isinstance(segments, list):
        raise SnapshotError(f"{str(path)!r}: 'device_traces' and 'segments' must be lists; {_HINT}")
    rows: dict[str, list] = {k: [] for k in ("ts_us", "bytes", "addr", "device_id", "kind", "location", "frame", "seq")}
    notes: list[str] = []
    for device, events in enumerate(traces):
        if not isinstance(events, list):
            continue
        actions = {e.get("action") for e in events if isinstance(e, dict)}
        free_action = "free_completed" if "free_completed" in actions else "free_requested"
        for i, e in enumerate(events):
            if not isinstance(e, dict):
                continue
            action = e.get("action")
            size = e.get("size")
            if not isinstance(size, int):
                continue
            if action == ALLOC:
                kind, signed = "alloc", size
            elif action == free_action:
                kind, signed = "free", -size
            elif action in SEGMENT_UP:
                kind, signed = "segment", size
            elif action in SEGMENT_DOWN:
                kind, signed = "segment", -size
            else:
                continue
            t = e.get("time_us")
            rows["ts_us"].append(float(t) if isinstance(t, (int, float)) else float("nan"))
            rows["bytes"].append(signed)
            rows["addr"].append(int(e["addr"]) if isinstance(e.get("addr"), int) else -1)
            rows["device_id"].append(device)
            rows["kind"].append(kind)
            user, frame = _frames(e)
            rows["location"].append(user)
            rows["frame"].append(frame)
            rows["seq"].append(i)
    frame = pd.DataFrame(rows)
    if frame["ts_us"].isna().any():
        notes.append("the snapshot's history has no times (time_us): events are placed one µs apart, in order")
        frame["ts_us"] = frame["seq"].astype(np.float64)
    origin = float(frame["ts_us"].min()) if len(frame) else 0.0
    frame["ts_us"] = frame["ts_us"] - origin
    active: dict[Any, int] = {}
    for seg in segments:
        if not isinstance(seg, dict):
            continue
        dev = int(seg.get("device", 0)) if isinstance(seg.get("device", 0), int) else 0
        blocks: list[Any] = seg["blocks"] if isinstance(seg.get("blocks"), list) else []
        active[dev] = active.get(dev, 0) + sum(
            int(b.get("size", 0))
            for b in blocks
            if isinstance(b, dict) and str(b.get("state", "")).startswith("active")
        )
        active.setdefault(("reserved", dev), 0)
        active[("reserved", dev)] += int(seg.get("total_size", 0)) if isinstance(seg.get("total_size", 0), int) else 0
    alloc_rows = frame[frame["kind"] != "segment"].reset_index(drop=True)
    seg_rows = frame[frame["kind"] == "segment"]
    total_allocated = np.full(len(alloc_rows), -1, dtype=np.int64)
    total_reserved = np.full(len(alloc_rows), -1, dtype=np.int64)
    for dev, part in alloc_rows.groupby("device_id").indices.items():
        running = np.cumsum(alloc_rows["bytes"].to_numpy()[part])
        if dev in active:
            base = int(active[dev]) - int(running[-1]) if len(running) else 0
            if base < 0:
                notes.append(
                    f"cuda:{dev}: the history adds more than the snapshot's segments hold at its end "
                    f"({-base:,} bytes): allocated bytes counted from the history's start"
                )
                base = max(0, -int(running.min()))
        else:
            base = max(0, -int(running.min()))
        total_allocated[part] = running + base
        seg_dev = seg_rows[seg_rows["device_id"] == dev]
        if len(seg_dev) or ("reserved", dev) in active:
            seg_running = np.cumsum(seg_dev["bytes"].to_numpy())
            seg_base = int(active.get(("reserved", dev), 0)) - (int(seg_running[-1]) if len(seg_running) else 0)
            where = np.searchsorted(seg_dev["seq"].to_numpy(), alloc_rows["seq"].to_numpy()[part], side="right")
            values = np.concatenate([[0], seg_running]) + max(0, seg_base)
            total_reserved[part] = values[where]
    if not len(alloc_rows):
        notes.append(
            "the snapshot's history holds no allocations (recorded without "
            "torch.cuda.memory._record_memory_history, or emptied)"
        )
    n = len(alloc_rows)
    table = schema.frame(
        "memory",
        {
            "rank": np.zeros(n, dtype=np.int64),
            "pid": [""] * n,
            "tid": [""] * n,
            "ts_us": alloc_rows["ts_us"].to_numpy(np.float64),
            "bytes": alloc_rows["bytes"].to_numpy(np.int64),
            "total_allocated": total_allocated,
            "total_reserved": total_reserved,
            "addr": alloc_rows["addr"].to_numpy(np.int64),
            "device_type": np.ones(n, dtype=np.int64),
            "device_id": alloc_rows["device_id"].to_numpy(np.int64),
        },
    )
    table["op_name"] = ""
    table["top_op"] = ""
    table["module"] = ""
    table["phase"] = "other"
    table["location"] = alloc_rows["location"].to_numpy(dtype=object)
    table["frame"] = alloc_rows["frame"].to_numpy(dtype=object)
    tables = {name: schema.empty(name) for name in schema.TABLES}
    tables["memory"] = table
    meta = TraceMeta(
        files=(str(path),),
        ranks=(0,),
        file_ranks={str(path): 0},
        origins_ns={0: 0},
        device_properties={},
        distributed_info={},
        process_names={0: {}},
        thread_names={0: {}},
        options={},
        warnings=(),
        notes=tuple(notes),
        source="cuda-memory-snapshot",
        fidelity={
            "cpu_ops": "a memory snapshot holds the allocator's history only",
            "kernels": "a memory snapshot holds the allocator's history only",
        },
    )
    return TraceData(tables, meta)
