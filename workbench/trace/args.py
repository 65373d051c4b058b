"""The ``args`` fields the tables use, decoded with the event itself (one typed struct, no second
pass), and the bulk converters that turn them into columns.

Fields are ``Any`` so that an odd value (a string where a number belongs) never aborts the
load: columns coerce it to "absent" (-1 / NaN) instead. Keys the tables do not use are
skipped by the decoder without building anything.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any

import msgspec
import numpy as np
import pandas as pd

_RAW = msgspec.Raw()


def _key(name: str, default: Any = None) -> Any:
    return msgspec.field(name=name, default=default)


class Args(msgspec.Struct, frozen=True, gc=False):
    """Every ``args`` key any table reads (CPU ops, runtime, GPU activity, memory, metadata)."""

    external_id: Any = _key("External id")
    external_id_old: Any = _key("external id")
    input_dims: msgspec.Raw = _key("Input Dims", _RAW)
    input_types: msgspec.Raw = _key("Input type", _RAW)
    sequence_number: Any = _key("Sequence number")
    correlation: Any = None
    device: Any = None
    stream: Any = None
    bytes: Any = None
    gbps: Any = _key("memory bandwidth (GB/s)")
    grid: Any = None
    block: Any = None
    registers: Any = _key("registers per thread")
    shared_memory: Any = _key("shared memory")
    blocks_per_sm: Any = _key("blocks per SM")
    warps_per_sm: Any = _key("warps per SM")
    occupancy: Any = _key("est. achieved occupancy %")
    mem_bytes: Any = _key("Bytes")
    total_allocated: Any = _key("Total Allocated")
    total_reserved: Any = _key("Total Reserved")
    addr: Any = _key("Addr")
    device_type: Any = _key("Device Type")
    device_id: Any = _key("Device Id")
    name: Any = None  # process_name / thread_name metadata


NO_ARGS = Args()


def field(args: np.ndarray, name: str) -> list:
    """One field of many args structs (a C-level map, no Python loop); None where a struct
    has no such field (an event whose kind did not match its category's struct)."""
    try:
        return list(map(attrgetter(name), args))
    except AttributeError:
        return [getattr(a, name, None) for a in args]


def external_ids(args: np.ndarray) -> np.ndarray:
    """ "External id", or the 2021 spelling "external id" where the first is absent."""
    new = ints(field(args, "external_id"))
    missing = new == -1
    if missing.any():
        old = ints(field(args, "external_id_old"))
        new[missing] = old[missing]
    return new


_NUMBER_TYPES = {int, float, type(None)}
_NONE_ONLY, _INT_ONLY = {type(None)}, {int}
_EXACT_FLOAT = 2.0**53


def ints(values: list) -> np.ndarray:
    """int64 column; anything that is not an integer (or an integral float) becomes -1."""
    n = len(values)
    types = set(map(type, values))
    if not n or types == _NONE_ONLY:
        return np.full(n, -1, dtype=np.int64)
    if types == _INT_ONLY:
        try:
            return np.fromiter(values, dtype=np.int64, count=n)  # the common case: all plain ints
        except OverflowError:
            return _ints_slow(values)
    if types <= _NUMBER_TYPES:
        as_float = np.array(values, dtype=np.float64)  # None -> nan
        finite = np.isfinite(as_float)
        if (np.abs(as_float[finite]) < _EXACT_FLOAT).all():
            whole = finite & (as_float == np.floor(np.where(finite, as_float, 0.0)))
            return np.where(whole, np.where(finite, as_float, 0.0).astype(np.int64), -1)
    return _ints_slow(values)


def _ints_slow(values: list) -> np.ndarray:
    out = np.full(len(values), -1, dtype=np.int64)
    for i, v in enumerate(values):
        if type(v) is int and -(2**63) <= v < 2**63:
            out[i] = v
        elif type(v) is float and v.is_integer() and abs(v) < 9e18:
            out[i] = int(v)
    return out


def floats(values: list) -> np.ndarray:
    if set(map(type, values)) <= _NUMBER_TYPES:
        try:
            return np.array(values, dtype=np.float64)  # None -> nan
        except OverflowError:
            pass
    out = np.full(len(values), np.nan)
    for i, v in enumerate(values):
        if type(v) in (int, float):
            out[i] = float(v)
    return out


def dim3(values: list) -> np.ndarray:
    """CUDA grid/block lists [x, y, z] as an (n, 3) int64 array; -1 where absent."""
    out = np.full((len(values), 3), -1, dtype=np.int64)
    # the types compared element-wise as objects (a vectorised `type(v) is list`)
    present = np.flatnonzero(np.fromiter(map(type, values), dtype=object, count=len(values)) == list)  # noqa: E721
    if not len(present):
        return out
    lists = [values[i] for i in present]
    try:
        found = np.array(lists)  # the common case: every list is 3 ints
        if found.shape == (len(lists), 3) and found.dtype == np.int64:
            out[present] = found
            return out
    except (TypeError, ValueError, OverflowError):
        pass
    for axis in range(3):
        out[present, axis] = ints([v[axis] if len(v) > axis else None for v in lists])
    return out


def compact_json(values: list) -> pd.Categorical:
    """Raw JSON texts as a categorical of compact JSON (whitespace of pretty-printed files gone),
    normalised once per distinct text; "" where absent."""
    try:
        texts = np.fromiter(map(bytes, values), dtype=object, count=len(values))
    except TypeError:  # None where an event's args struct has no such field
        texts = np.fromiter((bytes(v) if v is not None else b"" for v in values), dtype=object, count=len(values))
    codes, uniques = pd.factorize(texts)
    labels = pd.Index([_compact(t) for t in uniques], dtype="str")
    if labels.has_duplicates:  # two spellings of one value (whitespace): merge them
        return pd.Categorical(labels.to_numpy()[codes] if len(codes) else [])
    return pd.Categorical.from_codes(codes, categories=labels)


def _compact(text: bytes) -> str:
    if not text:
        return ""
    try:
        return msgspec.json.encode(msgspec.json.decode(text)).decode()
    except (msgspec.DecodeError, UnicodeDecodeError):
        return text.decode("utf-8", "replace")
