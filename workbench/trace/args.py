"""Typed views of the ``args`` of each event kind, decoded in one call per kind.

Fields are ``Any`` so that an odd value (a string where a number belongs) never aborts the
load: columns coerce it to "absent" (-1 / NaN) instead.
"""
from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
import pandas as pd

from workbench.errors import TraceFormatError

_EXT = msgspec.field(name="External id", default=None)
_EXT_OLD = msgspec.field(name="external id", default=None)


class CpuArgs(msgspec.Struct):
    external_id: Any = _EXT
    external_id_old: Any = _EXT_OLD
    input_dims: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw, name="Input Dims")
    input_types: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw, name="Input type")
    sequence_number: Any = msgspec.field(name="Sequence number", default=None)


class RuntimeArgs(msgspec.Struct):
    correlation: Any = None
    external_id: Any = _EXT
    external_id_old: Any = _EXT_OLD


class GpuArgs(msgspec.Struct):
    device: Any = None
    stream: Any = None
    correlation: Any = None
    external_id: Any = _EXT
    external_id_old: Any = _EXT_OLD
    bytes: Any = None
    gbps: Any = msgspec.field(name="memory bandwidth (GB/s)", default=None)
    grid: Any = None
    block: Any = None
    registers: Any = msgspec.field(name="registers per thread", default=None)
    shared_memory: Any = msgspec.field(name="shared memory", default=None)
    blocks_per_sm: Any = msgspec.field(name="blocks per SM", default=None)
    warps_per_sm: Any = msgspec.field(name="warps per SM", default=None)
    occupancy: Any = msgspec.field(name="est. achieved occupancy %", default=None)


class MemoryArgs(msgspec.Struct):
    bytes: Any = msgspec.field(name="Bytes", default=None)
    total_allocated: Any = msgspec.field(name="Total Allocated", default=None)
    total_reserved: Any = msgspec.field(name="Total Reserved", default=None)
    addr: Any = msgspec.field(name="Addr", default=None)
    device_type: Any = msgspec.field(name="Device Type", default=None)
    device_id: Any = msgspec.field(name="Device Id", default=None)


class AnnotationArgs(msgspec.Struct):
    external_id: Any = _EXT


def decode_args(raws: list, struct: type, path: str, first_index: int = 0) -> list:
    """Decode many ``args`` objects in one call (absent args become the struct's defaults)."""
    if not raws:
        return []
    body = b",".join(bytes(r) if r else b"{}" for r in raws)
    try:
        return msgspec.json.decode(b"[" + body + b"]", type=list[struct])
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise TraceFormatError(f"an event's 'args' is not an object ({exc}); fix or drop that "
                               "event", path=path, event_index=first_index) from None


def ints(values: list) -> np.ndarray:
    """int64 column; anything that is not an integer (or an integral float) becomes -1."""
    out = np.full(len(values), -1, dtype=np.int64)
    if values.count(None) == len(values):
        return out
    try:
        return np.array(values, dtype=np.int64)  # the common case: all plain ints
    except (TypeError, ValueError, OverflowError):
        pass
    for i, v in enumerate(values):
        if type(v) is int and -(2**63) <= v < 2**63:
            out[i] = v
        elif type(v) is float and v.is_integer() and abs(v) < 9e18:
            out[i] = int(v)
    return out


def floats(values: list) -> np.ndarray:
    try:
        return np.array(values, dtype=np.float64)  # None -> nan
    except (TypeError, ValueError, OverflowError):
        pass
    out = np.full(len(values), np.nan)
    for i, v in enumerate(values):
        if type(v) in (int, float):
            out[i] = v
    return out


def first_present(a: list, b: list) -> list:
    return [x if x is not None else y for x, y in zip(a, b)]


def dim3(values: list, axis: int) -> np.ndarray:
    """One axis of a CUDA grid/block list [x, y, z]; -1 where absent."""
    return ints([v[axis] if type(v) is list and len(v) > axis else None for v in values])


def raw_text(values: list) -> list[str]:
    return [bytes(v).decode("utf-8", "replace") if v else "" for v in values]


def compact_json(values: list) -> "pd.Categorical":
    """Raw JSON texts as a categorical of compact JSON (whitespace of pretty-printed files gone),
    normalised once per distinct text."""
    texts = pd.Categorical(raw_text(values))
    compact = np.array([_compact(c) for c in texts.categories] + [""], dtype=object)
    codes = texts.codes.copy()
    codes[codes < 0] = len(compact) - 1
    return pd.Categorical(compact[codes])


def _compact(text: str) -> str:
    try:
        return msgspec.json.encode(msgspec.json.decode(text)).decode()
    except (msgspec.DecodeError, UnicodeDecodeError):
        return text
