"""Typed events of one file -> column arrays per table (absolute int64 ns times).

One pass sorts events by kind; each kind's columns and ``args`` are then built in bulk.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from workbench.trace import args as A
from workbench.trace import classify as C
from workbench.trace.decode import MISSING_NS, DecodedFile, us_to_ns
from workbench.trace.issues import Issues

_PAIR_CACHE: dict[tuple[str, str], int] = {}
_INSTANT = 100  # an "i" event: a [memory] event or other, decided by name


def _pair_kind(ph: str, cat: str) -> int:
    kind = _PAIR_CACHE.get((ph, cat))
    if kind is None:
        kind = _INSTANT if ph in ("i", "I") else C.event_kind(ph, cat, "")
        _PAIR_CACHE[(ph, cat)] = kind
    return kind


def split_kinds(decoded: DecodedFile) -> dict[int, np.ndarray]:
    """Event indices per kind (C.CPU_OP, C.GPU, ...)."""
    events = decoded.events
    ph_codes, ph_values = pd.factorize(np.array([e.ph for e in events], dtype=object))
    cat_codes, cat_values = pd.factorize(np.array([e.cat for e in events], dtype=object))
    lookup = np.array([[_pair_kind(p, c) for c in cat_values] for p in ph_values], dtype=np.int16)
    kinds = lookup[ph_codes, cat_codes]
    instant = np.flatnonzero(kinds == _INSTANT)
    kinds[instant] = [C.MEMORY if events[i].name == "[memory]" else C.OTHER for i in instant]
    ops = np.flatnonzero(kinds == C.CPU_OP)  # 2021 traces: ProfilerStep#N is an "Operator"
    steps = [i for i in ops if events[i].name.startswith("ProfilerStep#")]
    kinds[steps] = C.ANNOTATION
    return {int(k): np.flatnonzero(kinds == k) for k in np.unique(kinds)}


class Base:
    """The fields every event has, for one kind, as arrays."""

    def __init__(self, decoded: DecodedFile, index: np.ndarray, issues: Issues, *, span: bool):
        events = [decoded.events[i] for i in index]
        ts_ns = decoded.ts_ns[index]
        keep = ts_ns != MISSING_NS
        if span:
            dur_ns = us_to_ns(np.array([e.dur for e in events], dtype=np.float64))
            keep = self._check_durations(dur_ns, keep, index + decoded.first_index, issues)
            self.dur_ns = dur_ns[keep]
        index = index + decoded.first_index  # position in the file's traceEvents
        issues.missing(int((ts_ns == MISSING_NS).sum()), "ts", index[ts_ns == MISSING_NS])
        self.events = [e for e, k in zip(events, keep) if k] if not keep.all() else events
        self.index = index[keep]
        self.ts_ns = ts_ns[keep]
        self.name = categorical([e.name for e in self.events])
        self.pid = categorical([e.pid for e in self.events])
        self.tid = categorical([e.tid for e in self.events])

    @staticmethod
    def _check_durations(dur_ns, keep, index, issues: Issues) -> np.ndarray:
        missing = dur_ns == MISSING_NS
        issues.missing(int(missing.sum()), "dur", index[missing])
        negative = ~missing & (dur_ns < 0)
        issues.negative(int(negative.sum()), index[negative])
        dur_ns[negative] = 0
        absurd = ~missing & (dur_ns > issues.absurd_dur_ns)
        issues.absurd(int(absurd.sum()), index[absurd])
        return keep & ~missing & ~absurd

    def args(self, struct: type) -> list:
        return A.decode_args([e.args for e in self.events], struct, self.path_for_errors,
                             int(self.index[0]) if len(self.index) else 0)

    path_for_errors = ""

    def common(self) -> dict:
        return {"pid": self.pid, "tid": self.tid, "name": self.name, "ts_ns": self.ts_ns,
                "dur_ns": getattr(self, "dur_ns", np.zeros(len(self.ts_ns), np.int64)),
                "event_index": self.index}


def _base(decoded, kinds, kind, issues, span=True) -> Base | None:
    index = kinds.get(kind)
    if index is None or len(index) == 0:
        return None
    base = Base(decoded, index, issues, span=span)
    base.path_for_errors = decoded.path
    return base if len(base.index) else None


def cpu_ops(decoded, kinds, issues) -> dict | None:
    base = _base(decoded, kinds, C.CPU_OP, issues)
    if base is None:
        return None
    a = base.args(A.CpuArgs)
    out = base.common()
    out["cat"] = categorical([e.cat for e in base.events])
    out["external_id"] = A.ints(A.first_present([x.external_id for x in a], [x.external_id_old for x in a]))
    out["sequence_number"] = A.ints([x.sequence_number for x in a])
    out["input_dims"] = A.compact_json([x.input_dims for x in a])
    out["input_types"] = A.compact_json([x.input_types for x in a])
    return out


def python_calls(decoded, kinds, issues) -> dict | None:
    base = _base(decoded, kinds, C.PYTHON, issues)
    return None if base is None else base.common()


def runtime(decoded, kinds, issues) -> dict | None:
    base = _base(decoded, kinds, C.RUNTIME, issues)
    if base is None:
        return None
    a = base.args(A.RuntimeArgs)
    out = base.common()
    out["correlation"] = A.ints([x.correlation for x in a])
    out["external_id"] = A.ints(A.first_present([x.external_id for x in a], [x.external_id_old for x in a]))
    return out


def gpu(decoded, kinds, kind, issues) -> dict | None:
    base = _base(decoded, kinds, kind, issues)
    if base is None:
        return None
    a = base.args(A.GpuArgs)
    out = base.common()
    device = A.ints([x.device for x in a])
    pid_num = pd.to_numeric(pd.Series(np.asarray(base.pid)), errors="coerce").fillna(-1).to_numpy()
    out["device"] = np.where(device >= 0, device, pid_num.astype(np.int64))
    stream = A.ints([x.stream for x in a])
    tid_num = pd.to_numeric(pd.Series(np.asarray(base.tid)).str.replace("stream ", "", regex=False),
                            errors="coerce").fillna(-1).to_numpy().astype(np.int64)
    out["stream"] = np.where(stream >= 0, stream, tid_num)
    out["correlation"] = A.ints([x.correlation for x in a])
    out["external_id"] = A.ints(A.first_present([x.external_id for x in a], [x.external_id_old for x in a]))
    out["bytes"] = A.ints([x.bytes for x in a])
    out["gbps"] = A.floats([x.gbps for x in a])
    grid, block = [x.grid for x in a], [x.block for x in a]
    for axis, letter in enumerate("xyz"):
        out[f"grid_{letter}"] = A.dim3(grid, axis)
        out[f"block_{letter}"] = A.dim3(block, axis)
    out["registers_per_thread"] = A.ints([x.registers for x in a])
    out["shared_memory_bytes"] = A.ints([x.shared_memory for x in a])
    out["blocks_per_sm"] = A.floats([x.blocks_per_sm for x in a])
    out["warps_per_sm"] = A.floats([x.warps_per_sm for x in a])
    out["occupancy_pct"] = A.floats([x.occupancy for x in a])
    return out


def memory(decoded, kinds, issues) -> dict | None:
    base = _base(decoded, kinds, C.MEMORY, issues, span=False)
    if base is None:
        return None
    a = base.args(A.MemoryArgs)
    out = base.common()
    for field in ("bytes", "total_allocated", "total_reserved", "addr", "device_type", "device_id"):
        out[field] = A.ints([getattr(x, field) for x in a])
    return out


def annotations(decoded, kinds, kind, issues) -> dict | None:
    base = _base(decoded, kinds, kind, issues)
    if base is None:
        return None
    a = base.args(A.AnnotationArgs)
    out = base.common()
    out["external_id"] = A.ints([x.external_id for x in a])
    return out


def flows(decoded, kinds, issues) -> dict | None:
    base = _base(decoded, kinds, C.FLOW, issues, span=False)
    if base is None:
        return None
    out = base.common()
    out["cat"] = categorical([e.cat for e in base.events])
    out["phase"] = categorical([e.ph for e in base.events])
    out["flow_id"] = A.ints([e.id for e in base.events])
    return out


def metadata(decoded, kinds) -> dict[str, dict[str, str]]:
    """Process and thread names from "M" events: {"process": {pid: name}, "thread": {tid: name}}."""
    names: dict[str, dict[str, str]] = {"process": {}, "thread": {}}
    for i in kinds.get(C.META, []):
        event = decoded.events[i]
        if event.name in ("process_name", "thread_name") and event.args:
            value = A.decode_args([event.args], _NameArgs, decoded.path, int(i))[0].name
            if isinstance(value, str):
                key = "process" if event.name == "process_name" else "thread"
                names[key][str(event.pid if key == "process" else event.tid)] = value
    return names


class _NameArgs(A.msgspec.Struct):
    name: object = None


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


def categorical(values: list) -> pd.Categorical:
    """Text categorical of ``values`` (ints become their decimal text), factorised once."""
    codes, uniques = pd.factorize(np.array(values, dtype=object))
    labels = pd.Index([v if isinstance(v, str) else str(v) for v in uniques], dtype="str")
    if labels.has_duplicates:  # 1 and "1" in one column: merge them
        return pd.Categorical(labels.to_numpy()[codes] if len(codes) else [])
    return pd.Categorical.from_codes(codes, categories=labels)
