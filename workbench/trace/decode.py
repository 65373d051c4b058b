"""Read one trace file into typed event structs (msgspec), never a dict per event.

``args`` stay as raw JSON bytes (``msgspec.Raw``) until the columns that need them are built,
and only for the event kinds that need them.
"""
from __future__ import annotations

import gzip
import os
import re
import zlib
from collections.abc import Iterator
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
    """One chunk of a file's events (a whole small file is one chunk)."""
    path: str
    header: TraceHeader
    events: list[Event]
    ts_ns: np.ndarray  # int64 absolute ns per event; MISSING_NS where the event has no ts
    first_index: int = 0  # index in the file's traceEvents of events[0]


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


CHUNK_BYTES = 16 << 20  # events are decoded this many bytes at a time, then become columns
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")


def decode_file(path: str) -> tuple[TraceHeader, Iterator[DecodedFile]]:
    """The header, and the events in chunks (so per-event objects never exist all at once)."""
    data = read_bytes(path)
    header, events_raw = _decode_header(data, path)
    return header, _chunks(path, header, events_raw)


def _chunks(path: str, header: TraceHeader, raw: memoryview) -> Iterator[DecodedFile]:
    first = 0
    spans = list(_spans(raw))
    begin = 0
    for k, (start, stop) in enumerate(spans):
        start = spans[begin][0]
        piece = b"[" + bytes(raw[start:stop]) + b"]" if len(spans) > 1 else bytes(raw)
        try:
            events = _decode_events(piece, path, first)
        except TraceFormatError:
            if k + 1 < len(spans) and not _is_wrong_type(piece):
                continue  # the cut fell inside an event: join it with the next span
            raise
        begin = k + 1
        if events:
            yield DecodedFile(path, header, events, _timestamps_ns(piece, events), first)
        first += len(events)
    if first == 0:
        raise TraceFormatError("'traceEvents' is empty: the profiler recorded nothing; profile "
                               "a region that runs work (inside the profiler context)", path=path)


def _spans(raw: memoryview) -> Iterator[tuple[int, int]]:
    """(start, stop) byte ranges of the events array, about CHUNK_BYTES each, cut at "},{"."""
    if len(raw) <= CHUNK_BYTES:
        yield 0, len(raw)
        return
    pos = bytes(raw[:64]).index(b"[") + 1
    end = len(raw) - bytes(raw[-64:])[::-1].index(b"]") - 1
    while pos < end:
        cut = _BOUNDARY.search(raw, pos + CHUNK_BYTES, end) if pos + CHUNK_BYTES < end else None
        yield pos, (cut.start() + 1 if cut else end)
        pos = cut.end() - 1 if cut else end


def _is_wrong_type(piece: bytes) -> bool:
    """True if the piece is valid JSON (so the error was a wrong type, not a bad cut)."""
    try:
        msgspec.json.decode(piece)
    except msgspec.DecodeError:
        return False
    return True


def _decode_header(data: bytes, path: str) -> tuple[TraceHeader, memoryview]:
    if not data.strip():
        raise TraceFormatError(f"the file is empty; {_HINT}", path=path)
    try:
        header = msgspec.json.decode(data, type=TraceHeader)
    except msgspec.ValidationError:
        if data.lstrip()[:1] == b"[":  # the bare-array Chrome trace form
            return TraceHeader(), memoryview(data)
        raise TraceFormatError(f"not a Chrome/Kineto trace: the top level is not a JSON object "
                               f"with 'traceEvents'; {_HINT}", path=path) from None
    except msgspec.DecodeError as exc:
        raise TraceFormatError(f"not valid JSON, or truncated ({exc}); {_HINT}", path=path) from None
    if not header.traceEvents:
        raise TraceFormatError(f"not a Chrome/Kineto trace: no 'traceEvents' key; {_HINT}", path=path)
    return header, memoryview(header.traceEvents)


_INDEX = re.compile(r"\$\[(\d+)\]")


def _decode_events(raw: bytes, path: str, first: int) -> list[Event]:
    try:
        events = msgspec.json.decode(raw, type=list[Event])
    except msgspec.ValidationError as exc:
        match = _INDEX.search(str(exc))
        index = first + int(match.group(1)) if match else None
        raise TraceFormatError(f"an event has a field of the wrong type ({exc}); fix or drop "
                               "that event", path=path, event_index=index) from None
    except msgspec.DecodeError as exc:
        raise TraceFormatError(f"'traceEvents' is not valid JSON ({exc}); {_HINT}", path=path) from None
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
