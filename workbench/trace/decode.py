"""Read one trace file into typed event structs (msgspec), never a dict per event.

``args`` stay as raw JSON bytes (``msgspec.Raw``) until the columns that need them are built,
and only for the event kinds that need them.
"""
from __future__ import annotations

import gzip
import os
import re
import zlib
from typing import Any

import msgspec
import numpy as np

from workbench.errors import TraceFormatError
from workbench.trace.numbers import parse_us_to_ns

MISSING_NS = np.iinfo(np.int64).min

_HINT = "re-export the trace with torch.profiler (prof.export_chrome_trace) or check the file"


class Event(msgspec.Struct):
    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: int | float | None = None
    dur: int | float | None = None
    id: int | str | None = None
    args: msgspec.Raw = msgspec.Raw()


class _RawTime(msgspec.Struct):
    ts: msgspec.Raw = msgspec.Raw()


class TraceHeader(msgspec.Struct):
    traceEvents: msgspec.Raw = msgspec.Raw()  # noqa: N815 (the file's own key)
    deviceProperties: Any = None  # noqa: N815
    distributedInfo: Any = None  # noqa: N815
    baseTimeNanoseconds: Any = None  # noqa: N815
    displayTimeUnit: Any = None  # noqa: N815
    schemaVersion: Any = None  # noqa: N815


class DecodedFile(msgspec.Struct):
    path: str
    header: TraceHeader
    events: list[Event]
    ts_ns: np.ndarray  # int64 absolute ns per event; INT64_MIN where the event has no ts


def read_bytes(path: str) -> bytes:
    """The file's bytes, gunzipped when it is gzip (by magic number, not by name)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        raise TraceFormatError("trace file does not exist; check the path", path=path) from None
    except IsADirectoryError:
        raise TraceFormatError("expected a trace file, got a folder", path=path) from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise TraceFormatError(f"gzip data is truncated or corrupt ({exc}); copy the file "
                                   "again from where it was recorded", path=path) from None
    return data


def decode_file(path: str) -> DecodedFile:
    data = read_bytes(path)
    header, events_raw = _decode_header(data, path)
    events = _decode_events(events_raw, path)
    ts_ns = _timestamps_ns(events_raw, events)
    return DecodedFile(path=path, header=header, events=events, ts_ns=ts_ns)


def _decode_header(data: bytes, path: str) -> tuple[TraceHeader, bytes]:
    if not data.strip():
        raise TraceFormatError(f"the file is empty; {_HINT}", path=path)
    try:
        header = msgspec.json.decode(data, type=TraceHeader)
    except msgspec.ValidationError:
        if data.lstrip()[:1] == b"[":  # the bare-array Chrome trace form
            return TraceHeader(), data
        raise TraceFormatError(f"not a Chrome/Kineto trace: the top level is not a JSON object "
                               f"with 'traceEvents'; {_HINT}", path=path) from None
    except msgspec.DecodeError as exc:
        raise TraceFormatError(f"not valid JSON, or truncated ({exc}); {_HINT}", path=path) from None
    if not header.traceEvents:
        raise TraceFormatError(f"not a Chrome/Kineto trace: no 'traceEvents' key; {_HINT}", path=path)
    return header, bytes(header.traceEvents)


_INDEX = re.compile(r"\$\[(\d+)\]")


def _decode_events(raw: bytes, path: str) -> list[Event]:
    try:
        events = msgspec.json.decode(raw, type=list[Event])
    except msgspec.ValidationError as exc:
        match = _INDEX.search(str(exc))
        index = int(match.group(1)) if match else None
        raise TraceFormatError(f"an event has a field of the wrong type ({exc}); fix or drop "
                               "that event", path=path, event_index=index) from None
    except msgspec.DecodeError as exc:
        raise TraceFormatError(f"'traceEvents' is not valid JSON ({exc}); {_HINT}", path=path) from None
    if not events:
        raise TraceFormatError("'traceEvents' is empty: the profiler recorded nothing; profile "
                               "a region that runs work (inside the profiler context)", path=path)
    return events


# a float timestamp of 13+ integer digits: float64 cannot keep its ns digits
_LONG_FRACTIONAL_TS = re.compile(rb'"ts"\s*:\s*-?\d{13,}\.\d')
_FLOAT_EXACT_LIMIT_US = 2.0**41


def _timestamps_ns(raw: bytes, events: list[Event]) -> np.ndarray:
    """Absolute int64 ns per event (MISSING_NS where absent), exact to the ns in the text."""
    ts_us = np.array([e.ts for e in events], dtype=np.float64)  # None -> nan
    ts_ns = us_to_ns(ts_us)
    finite = np.isfinite(ts_us)
    if finite.any() and np.abs(ts_us[finite]).max() >= _FLOAT_EXACT_LIMIT_US \
            and _LONG_FRACTIONAL_TS.search(raw) is not None:
        stamps = msgspec.json.decode(raw, type=list[_RawTime])
        exact, ok = parse_us_to_ns([bytes(s.ts) for s in stamps])
        ts_ns = np.where(ok & finite, exact, ts_ns)
    return ts_ns


def us_to_ns(values_us: np.ndarray) -> np.ndarray:
    """float µs -> int64 ns, splitting off the integer part first so no digit is lost to *1000."""
    finite = np.isfinite(values_us) & (np.abs(values_us) < 9.2e15)
    safe = np.where(finite, values_us, 0.0)
    whole = np.floor(safe)
    ns = whole.astype(np.int64) * 1000 + np.rint((safe - whole) * 1000.0).astype(np.int64)
    return np.where(finite, ns, MISSING_NS)


def file_size_mb(path: str) -> float:
    return os.path.getsize(path) / 1e6
