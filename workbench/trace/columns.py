"""Typed events of one chunk -> column arrays per table (absolute int64 ns times).

Each event field is pulled out once for the whole chunk (a C-level map per field, no Python
loop per event); name, pid, tid, ph and cat become int codes of the file's interners in one
pass (categoricals only once the file's chunks are joined). Events are then sorted by kind,
and each kind's columns and ``args`` fields are gathered in bulk.
"""

# no ``from __future__ import annotations`` here: the annotations table's function is named so
from operator import attrgetter, itemgetter

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

import workbench.trace.args as event_args
import workbench.trace.classify as classify
from workbench.trace.decode import DecodedFile
from workbench.trace.events import SKIPPED_PH, Event
from workbench.trace.intern import Interner, KeyInterner
from workbench.trace.issues import Issues
from workbench.trace.numbers import MISSING_NS, timestamps_ns, us_to_ns

_PAIR_CACHE: dict[tuple[str, str], int] = {}
_INSTANT = 100  # an "i" event: a [memory] event or other, decided by name
EDGE = 99  # a "B" or "E" event: paired into a span per thread once the file is read (pair_spans)
LARGEST_US = 9.2e15  # a larger 'ts' does not fit int64 ns (epoch ns read as µs is ~1.7e18)
# categories the tables deliberately do not read (no warning): the profiler's own span and overhead,
# instants and Kineto's category-less events (a span "X" without a category is counted, though)
IGNORED_CATEGORIES = frozenset({"", "Trace", "overhead", "cpu_instant_event"})


def _pair_kind(ph: str, cat: str) -> int:
    kind = _PAIR_CACHE.get((ph, cat))
    if kind is None:
        kind = _INSTANT if ph in ("i", "I") else EDGE if ph in ("B", "E") else classify.event_kind(ph, cat, "")
        _PAIR_CACHE[(ph, cat)] = kind
    return kind


def _objects(events, name: str) -> np.ndarray:
    return np.fromiter(map(attrgetter(name), events), dtype=object, count=len(events))


def _floats(events: list, name: str) -> np.ndarray:
    """A numeric field as float64 (nan where absent)."""
    try:
        return np.fromiter(map(attrgetter(name), events), dtype=np.float64, count=len(events))
    except TypeError:  # a None among them
        return np.array(list(map(attrgetter(name), events)), dtype=np.float64)


class Interners:
    """The text columns of one file, coded the same way in every chunk."""

    def __init__(self) -> None:
        self.name, self.pid, self.tid, self.ph, self.cat = (Interner() for _ in range(5))
        self.keys = KeyInterner(("name", "pid", "tid", "ph", "cat"), (self.name, self.pid, self.tid, self.ph, self.cat))

    def decode_columns(self, table: dict) -> None:
        """Turn a table's code columns into categoricals (once, after its chunks are joined)."""
        for column, interner in (
            ("name", self.name),
            ("pid", self.pid),
            ("tid", self.tid),
            ("cat", self.cat),
            ("phase", self.ph),
        ):
            if column in table:
                table[column] = interner.categorical(table[column])


def _is_memory(name: str) -> bool:
    return name == "[memory]"


def _is_step(name: str) -> bool:
    return name.startswith("ProfilerStep#")


class Chunk:
    """The fields of one chunk's events as arrays, and which events are of which kind.

    Text fields become codes of the file's interners; ``args`` and ``id`` are pulled out
    per kind, only for the kinds that use them.
    """

    def __init__(self, decoded: DecodedFile, interners: Interners):
        events = self.events = decoded.events
        self.path, self.first_index = decoded.path, decoded.first_index
        self.indexes = decoded.indexes
        ts_us = _floats(events, "ts")
        self.ts_huge = np.isfinite(ts_us) & (np.abs(ts_us) >= LARGEST_US)
        self.largest_ts_us = float(np.abs(ts_us[self.ts_huge]).max()) if self.ts_huge.any() else 0.0
        self.ts_ns = decoded.ts_ns if decoded.ts_ns is not None else timestamps_ns(decoded.text, ts_us)
        self.dur_us = _floats(events, "dur")
        self.interners = interners
        self.name, self.pid, self.tid, ph, cat = interners.keys.encode(events)
        self.kinds = self._split_kinds(ph, cat)

    def file_indexes(self, index: np.ndarray) -> np.ndarray:
        """Positions in the file's traceEvents of the chunk's events at ``index``."""
        return index + self.first_index if self.indexes is None else self.indexes[index]

    def unknown(self) -> dict[tuple[str, str], int]:
        """(ph, cat) -> count of the events no table reads, apart from the ones ignored on purpose."""
        index = self.kinds.get(classify.OTHER)
        if index is None:
            return {}
        ph_labels, cat_labels = self.interners.ph.labels, self.interners.cat.labels
        pairs, counts = np.unique(np.stack([self.ph[index], self.cat[index]]), axis=1, return_counts=True)
        out = {}
        for (p, c), n in zip(pairs.T.tolist(), counts.tolist()):
            ph, cat = ph_labels[p], cat_labels[c]
            if ph != SKIPPED_PH and ph != "M" and (cat not in IGNORED_CATEGORIES or (ph == "X" and not cat)):
                out[(ph, cat)] = n
        return out

    def field(self, index: np.ndarray, name: str) -> np.ndarray:
        """One field of the events at ``index`` (an object array)."""
        picked = itemgetter(*index)(self.events) if len(index) > 1 else [self.events[i] for i in index]
        return _objects(picked, name)

    def _split_kinds(self, ph: np.ndarray, cat: np.ndarray) -> dict[int, np.ndarray]:
        """Event indices per kind (classify.CPU_OP, classify.GPU, ...)."""
        self.ph, self.cat = ph, cat
        ph_labels, cat_labels = self.interners.ph.labels, self.interners.cat.labels
        lookup = np.array([[_pair_kind(p, c) for c in cat_labels] for p in ph_labels], dtype=np.int16)
        kinds = lookup[ph, cat] if len(ph) else np.zeros(0, np.int16)
        names = self.interners.name
        instant = kinds == _INSTANT
        kinds[instant] = np.where(names.flags(_is_memory)[self.name[instant]], classify.MEMORY, classify.OTHER)
        kinds[(kinds == classify.CPU_OP) & names.flags(_is_step)[self.name]] = classify.ANNOTATION  # 2021: "Operator"
        order = np.argsort(kinds, kind="stable")
        bounds = np.searchsorted(kinds[order], np.arange(_INSTANT + 2))
        return {k: order[bounds[k] : bounds[k + 1]] for k in range(_INSTANT + 1) if bounds[k + 1] > bounds[k]}


def _check_durations(dur_ns, keep, index, issues: Issues) -> np.ndarray:
    missing = dur_ns == MISSING_NS
    issues.missing(int(missing.sum()), "dur", index[missing])
    negative = ~missing & (dur_ns < 0)
    issues.negative(int(negative.sum()), index[negative])
    dur_ns[negative] = 0
    absurd = ~missing & (dur_ns > issues.absurd_dur_ns)
    issues.absurd(int(absurd.sum()), index[absurd])
    return keep & ~missing & ~absurd


def _base(chunk: Chunk, kind: int, issues: Issues, span: bool = True) -> tuple[dict, np.ndarray] | None:
    """The fields every event has, for one kind: (columns, chunk positions of the rows kept)."""
    index = chunk.kinds.get(kind)
    if index is None:
        return None
    ts_ns = chunk.ts_ns[index]
    file_index = chunk.file_indexes(index)  # position in the file's traceEvents
    keep = ts_ns != MISSING_NS
    huge = chunk.ts_huge[index]
    issues.missing(int((~keep & ~huge).sum()), "ts", file_index[~keep & ~huge])
    issues.huge_ts(int(huge.sum()), file_index[huge], chunk.largest_ts_us)
    dur_ns = np.zeros(len(index), dtype=np.int64)
    if span:
        dur_ns = us_to_ns(chunk.dur_us[index])
        keep = _check_durations(dur_ns, keep, file_index, issues)
    if not keep.all():
        index, ts_ns, dur_ns, file_index = index[keep], ts_ns[keep], dur_ns[keep], file_index[keep]
    if not len(index):
        return None
    out = {
        "pid": chunk.pid[index],
        "tid": chunk.tid[index],
        "name": chunk.name[index],
        "ts_ns": ts_ns,
        "dur_ns": dur_ns,
        "event_index": file_index,
    }
    return out, index


def cpu_ops(chunk: Chunk, issues: Issues) -> dict | None:
    found = _base(chunk, classify.CPU_OP, issues)
    if found is None:
        return None
    out, index = found
    args = chunk.field(index, "args")
    out["cat"] = chunk.cat[index]
    out["external_id"] = event_args.external_ids(args)
    out["sequence_number"] = event_args.ints(event_args.field(args, "sequence_number"))
    out["input_dims"] = event_args.compact_json(event_args.field(args, "input_dims"))
    out["input_types"] = event_args.compact_json(event_args.field(args, "input_types"))
    return out


def python_calls(chunk: Chunk, issues: Issues) -> dict | None:
    found = _base(chunk, classify.PYTHON, issues)
    return None if found is None else found[0]


def runtime(chunk: Chunk, issues: Issues) -> dict | None:
    found = _base(chunk, classify.RUNTIME, issues)
    if found is None:
        return None
    out, index = found
    args = chunk.field(index, "args")
    out["correlation"] = event_args.ints(event_args.field(args, "correlation"))
    out["external_id"] = event_args.external_ids(args)
    return out


def gpu(chunk: Chunk, kind: int, issues: Issues) -> dict | None:
    found = _base(chunk, kind, issues)
    if found is None:
        return None
    out, index = found
    args = chunk.field(index, "args")
    device = event_args.ints(event_args.field(args, "device"))
    pid_number = chunk.interners.pid.numbers()[chunk.pid[index]]
    out["device"] = np.where(device >= 0, device, pid_number)
    stream = event_args.ints(event_args.field(args, "stream"))
    tid_number = chunk.interners.tid.numbers("stream ")[chunk.tid[index]]
    out["stream"] = np.where(stream >= 0, stream, tid_number)
    out["correlation"] = event_args.ints(event_args.field(args, "correlation"))
    out["external_id"] = event_args.external_ids(args)
    out["bytes"] = event_args.ints(event_args.field(args, "bytes"))
    out["gbps"] = event_args.floats(event_args.field(args, "gbps"))
    grid, block = event_args.dim3(event_args.field(args, "grid")), event_args.dim3(event_args.field(args, "block"))
    for axis, letter in enumerate("xyz"):
        out[f"grid_{letter}"] = grid[:, axis]
        out[f"block_{letter}"] = block[:, axis]
    out["registers_per_thread"] = event_args.ints(event_args.field(args, "registers"))
    out["shared_memory_bytes"] = event_args.ints(event_args.field(args, "shared_memory"))
    out["blocks_per_sm"] = event_args.floats(event_args.field(args, "blocks_per_sm"))
    out["warps_per_sm"] = event_args.floats(event_args.field(args, "warps_per_sm"))
    out["occupancy_pct"] = event_args.floats(event_args.field(args, "occupancy"))
    return out


_MEMORY_FIELDS = {
    "bytes": "mem_bytes",
    "total_allocated": "total_allocated",
    "total_reserved": "total_reserved",
    "addr": "addr",
    "device_type": "device_type",
    "device_id": "device_id",
}


def memory(chunk: Chunk, issues: Issues) -> dict | None:
    found = _base(chunk, classify.MEMORY, issues, span=False)
    if found is None:
        return None
    out, index = found
    args = chunk.field(index, "args")
    for column, key in _MEMORY_FIELDS.items():
        out[column] = event_args.ints(event_args.field(args, key))
    return out


def annotations(chunk: Chunk, kind: int, issues: Issues) -> dict | None:
    found = _base(chunk, kind, issues)
    if found is None:
        return None
    out, index = found
    out["external_id"] = event_args.ints(event_args.field(chunk.field(index, "args"), "external_id"))
    return out


def flows(chunk: Chunk, issues: Issues) -> dict | None:
    found = _base(chunk, classify.FLOW, issues, span=False)
    if found is None:
        return None
    out, index = found
    out["cat"] = chunk.cat[index]
    out["phase"] = chunk.ph[index]
    out["flow_id"] = event_args.ints(list(chunk.field(index, "id")))
    return out


def extract(chunk: Chunk, issues: Issues) -> dict[str, dict | None]:
    """Every table's columns from one chunk (None for a table it has no rows of)."""
    return {
        "cpu_ops": cpu_ops(chunk, issues),
        "python_calls": python_calls(chunk, issues),
        "runtime": runtime(chunk, issues),
        "kernels": gpu(chunk, classify.GPU, issues),
        "gpu_syncs": gpu(chunk, classify.GPU_SYNC, issues),
        "memory": memory(chunk, issues),
        "annotations": annotations(chunk, classify.ANNOTATION, issues),
        "gpu_annotations": annotations(chunk, classify.GPU_ANNOTATION, issues),
        "flows": flows(chunk, issues),
    }


def metadata(chunk: Chunk) -> dict[str, dict[str, str]]:
    """Process and thread names from "M" events: {"process": {pid: name}, "thread": {tid: name}}."""
    names: dict[str, dict[str, str]] = {"process": {}, "thread": {}}
    for i in chunk.kinds.get(classify.META, []):
        event = chunk.events[i]
        value = getattr(event.args, "name", None)
        if event.name in ("process_name", "thread_name") and isinstance(value, str):
            key = "process" if event.name == "process_name" else "thread"
            names[key][str(event.pid if key == "process" else event.tid)] = value
    return names


def concat_parts(parts: list[dict]) -> dict:
    """Join the column dicts of several chunks (categoricals by union of categories)."""
    if len(parts) == 1:
        return parts[0]
    out = {}
    for key in parts[0]:
        values = [p[key] for p in parts]
        if isinstance(values[0], pd.Categorical):
            out[key] = union_categoricals(values)
        else:
            out[key] = np.concatenate(values)
    return out


def pair_spans(edges: list[tuple[int, int, Event]], path: str, issues: Issues) -> DecodedFile | None:
    """``B``/``E`` events (file index, ts ns, event) -> one span per pair, as "X" events would be.

    Per (pid, tid), in time order, an ``E`` closes the latest open ``B`` (the Chrome trace format's
    rule; an ``E`` needs no name or cat). The span has the ``B``'s name, cat and args. A ``B``
    without its ``E`` and an ``E`` without a ``B`` are skipped, counted in a warning."""
    edges = [e for e in edges if e[1] != MISSING_NS]
    edges.sort(key=itemgetter(1, 0))
    open_spans: dict[tuple, list] = {}
    events, indexes, stamps = [], [], []
    lone_ends: list[int] = []
    for file_index, ts_ns, event in edges:
        key = (event.pid, event.tid)
        if event.ph == "B":
            open_spans.setdefault(key, []).append((file_index, ts_ns, event))
            continue
        stack = open_spans.get(key)
        if not stack:
            lone_ends.append(file_index)
            continue
        begin_index, begin_ns, begin = stack.pop()
        events.append(
            Event(
                ph="X",
                cat=begin.cat,
                name=begin.name,
                pid=begin.pid,
                tid=begin.tid,
                ts=begin.ts,
                dur=(ts_ns - begin_ns) / 1000.0,
                id=begin.id,
                args=begin.args,
            )
        )
        indexes.append(begin_index)
        stamps.append(begin_ns)
    lone_begins = sorted(i for stack in open_spans.values() for i, _, _ in stack)
    issues.unpaired(len(lone_begins), "'B' event(s) without a matching 'E'", np.array(lone_begins, dtype=np.int64))
    issues.unpaired(
        len(lone_ends), "'E' event(s) without an open 'B' on their thread", np.array(lone_ends, dtype=np.int64)
    )
    if not events:
        return None
    return DecodedFile(
        path, events, b"[]", 0, indexes=np.array(indexes, dtype=np.int64), ts_ns=np.array(stamps, dtype=np.int64)
    )
