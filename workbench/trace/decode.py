"""Read one trace file into typed event structs (msgspec), a chunk at a time, never a dict per event.

The file streams in (gunzipped on the fly); the ``traceEvents`` array is cut at event boundaries
into pieces of about CHUNK_BYTES, and each piece is decoded into ``Event`` structs whose ``args``
hold only the keys the tables use. A piece and its events are dropped before the next is read,
so neither the file's text nor a Python object per event ever exists for the whole file.
Pieces are decoded with the fast per-category structs where they can be (events.py).
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import msgspec

from workbench.errors import TraceFormatError
from workbench.trace import stream
from workbench.trace.events import FAST_DECODER, GENERIC_DECODER, Event


_HINT = "re-export the trace with torch.profiler (prof.export_chrome_trace) or check the file"


class TraceHeader(msgspec.Struct):
    traceEvents: msgspec.Raw = msgspec.Raw()  # noqa: N815 (the file's own key)
    deviceProperties: Any = None  # noqa: N815
    distributedInfo: Any = None  # noqa: N815
    baseTimeNanoseconds: Any = None  # noqa: N815
    displayTimeUnit: Any = None  # noqa: N815
    schemaVersion: Any = None  # noqa: N815


class _Tail(msgspec.Struct):
    """The last piece: the final events, and the header keys written after the array."""
    traceEvents: list[Event] = []  # noqa: N815
    deviceProperties: Any = None  # noqa: N815
    distributedInfo: Any = None  # noqa: N815
    baseTimeNanoseconds: Any = None  # noqa: N815
    displayTimeUnit: Any = None  # noqa: N815
    schemaVersion: Any = None  # noqa: N815


class DecodedFile(msgspec.Struct):
    """One chunk of a file's events (a whole small file is one chunk)."""
    path: str
    events: list  # fast per-category structs or generic ``Event``s (events.py)
    text: Any  # the JSON they came from (bytes-like): "[...]", or '{"traceEvents": [...], ...}'
    first_index: int = 0  # index in the file's traceEvents of events[0]


# decoded this many bytes at a time: a piece's events are still in the CPU cache when they
# become columns (16 MB pieces measured slower), and the text in memory stays small
CHUNK_BYTES = 4 << 20
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_INDEX = re.compile(r"\[(\d+)\]")
_BAD_TEXT = (msgspec.DecodeError, UnicodeDecodeError)  # msgspec raises the second for bad UTF-8


def decode_file(path: str) -> tuple[TraceHeader, Iterator[DecodedFile]]:
    """The header, and the events in chunks (so per-event objects never exist all at once).

    Header keys written after the events (``baseTimeNanoseconds``) are filled in on the
    header once the chunks have all been read.
    """
    blocks = stream.blocks(path)
    buf = bytearray()
    start = _find_events(buf, blocks, path)
    if start is None:  # an unusual layout, or an error to report: read it whole
        return _decode_whole(bytes(buf), path)
    header, pos, bare = start
    return header, _chunks(path, header, buf[pos - 1:], blocks, bare)


def _find_events(buf: bytearray, blocks: Iterator[bytes], path: str):
    """Read until the start of the events array: (header, position after "[", bare array?)."""
    for block in blocks:
        searched = max(0, len(buf) - 64)
        buf += block
        first = buf.lstrip()[:1]
        if first == b"[":
            return TraceHeader(), buf.index(b"[") + 1, True
        if first != b"{":
            break
        match = _EVENTS_KEY.search(buf, searched)
        if match is not None:
            header = _prefix_header(bytes(buf[:match.start()]))
            if header is None:
                break
            return header, match.end(), False
    buf += b"".join(blocks)
    return None


def _prefix_header(prefix: bytes) -> TraceHeader | None:
    """The header keys before "traceEvents"; None if the match was not a top-level key."""
    try:
        header = msgspec.json.decode(prefix + b'"traceEvents":[0]}', type=TraceHeader)
    except (*_BAD_TEXT, msgspec.ValidationError):
        return None
    header.traceEvents = msgspec.Raw()
    return header


_OPEN, _CLOSE, _COMMA = ord("["), ord("]"), ord(",")


def _chunks(path: str, header: TraceHeader, buf: bytearray, blocks: Iterator[bytes],
            bare: bool) -> Iterator[DecodedFile]:
    """Events in pieces of about CHUNK_BYTES. ``buf`` starts at the events array's "[".

    Each piece is decoded in place: the "," after its last event is overwritten with "]" (and
    the next piece's leading "," with "["), so no copy of the text is made for the decoder.
    """
    pending: list[bytes | bytearray] = [buf]
    first, size = 0, len(buf)
    fast = _FastState()
    for block in blocks:
        pending.append(block)
        size += len(block)
        if size < CHUNK_BYTES:
            continue
        buf = bytearray().join(pending)
        pending, size = [buf], len(buf)
        comma = _last_boundary(buf)
        if comma is None:
            continue
        buf[0], buf[comma] = _OPEN, _CLOSE
        text = memoryview(buf)[:comma + 1]
        events = _decode_piece(text, path, first, fast)
        if events is None:  # the cut fell inside a string: read on, cut later
            buf[comma] = _COMMA
            del text
            continue
        pending, size = [buf[comma:]], len(buf) - comma
        yield DecodedFile(path, events, text, first)
        first += len(events)
        del events, text, buf  # before the next piece is read
    tail = _tail(path, header, pending, first, bare)
    del pending
    if tail.events:
        yield tail
    if first + len(tail.events) == 0:
        raise TraceFormatError("'traceEvents' is empty: the profiler recorded nothing; profile "
                               "a region that runs work (inside the profiler context)", path=path)


def _tail(path: str, header: TraceHeader, pending: list[bytes | bytearray], first: int, bare: bool) -> DecodedFile:
    """The last events, and the header keys written after the array (merged into ``header``)."""
    body = bytearray(b'{"traceEvents":')
    for part in pending:
        body += part
    body[15] = _OPEN  # the leading "," of the rest (or the array's own "[")
    text = bytes(body + (b"}" if bare else b""))
    del body
    tail = _decode_tail(text, path, first)
    _merge_header(header, tail)
    return DecodedFile(path, tail.traceEvents, text, first)


_WINDOW = 1 << 16


def _last_boundary(buf: bytearray) -> int | None:
    """Position of the "," of the last "},{" in ``buf`` (None if there is none)."""
    window = _WINDOW
    while True:
        low = max(1, len(buf) - window)
        last = None
        for last in _BOUNDARY.finditer(buf, low):
            pass
        if last is not None:
            return buf.index(b",", last.start())
        if low == 1:
            return None
        window *= 16


class _FastState:
    """Whether to try the fast decoder: given up for a file once it fails on most pieces
    (a trace whose categories it does not know), kept where only some pieces fail (the
    metadata events at the end of a Kineto file)."""
    enabled = True

    def __init__(self) -> None:
        self.tries = self.failures = 0

    def use(self) -> bool:
        return self.enabled and (self.tries < 4 or 2 * self.failures <= self.tries)

    def record(self, failed: bool) -> None:
        self.tries += 1
        self.failures += failed


def _decode_piece(text: bytes | memoryview, path: str, first: int, fast: _FastState) -> list | None:
    """Events of one piece; None if the piece is not valid JSON (a cut inside a string)."""
    if fast.use():
        try:
            events = FAST_DECODER.decode(text)
            fast.record(failed=False)
            return events
        except msgspec.ValidationError:  # an unknown or absent cat, or a bad value
            fast.record(failed=True)
        except msgspec.DecodeError:
            return None
        except UnicodeDecodeError as exc:
            raise _not_utf8(exc, path) from None
    try:
        return GENERIC_DECODER.decode(text)
    except msgspec.ValidationError as exc:
        if not _is_json(text):
            return None
        raise _wrong_type(exc, path, first) from None
    except msgspec.DecodeError:
        return None
    except UnicodeDecodeError as exc:
        raise _not_utf8(exc, path) from None


def _not_utf8(exc: UnicodeDecodeError, path: str) -> TraceFormatError:
    return TraceFormatError(f"not valid JSON: a string is not UTF-8 ({exc}); {_HINT}", path=path)


def _decode_tail(body: bytes, path: str, first: int) -> _Tail:
    try:
        return msgspec.json.decode(body, type=_Tail)
    except msgspec.ValidationError as exc:
        if _is_json(body):
            raise _wrong_type(exc, path, first) from None
        raise TraceFormatError(f"not valid JSON, or truncated ({exc}); {_HINT}", path=path) from None
    except _BAD_TEXT as exc:
        raise TraceFormatError(f"not valid JSON, or truncated ({exc}); {_HINT}", path=path) from None


def _is_json(text: bytes | memoryview) -> bool:
    try:
        msgspec.json.decode(text)
    except _BAD_TEXT:
        return False
    return True


def _wrong_type(exc: msgspec.ValidationError, path: str, first: int) -> TraceFormatError:
    message = str(exc)
    match = _INDEX.search(message)
    index = first + int(match.group(1)) if match else None
    if message.endswith(".args`") and "Expected `object`" in message:
        return TraceFormatError(f"an event's 'args' is not an object ({exc}); fix or drop that "
                                "event", path=path, event_index=index)
    return TraceFormatError(f"an event has a field of the wrong type ({exc}); fix or drop "
                            "that event", path=path, event_index=index)


def _merge_header(header: TraceHeader, tail: _Tail) -> None:
    for key in ("deviceProperties", "distributedInfo", "baseTimeNanoseconds", "displayTimeUnit",
                "schemaVersion"):
        if getattr(header, key) is None:
            setattr(header, key, getattr(tail, key))


def _decode_whole(data: bytes, path: str) -> tuple[TraceHeader, Iterator[DecodedFile]]:
    """The file read whole (after the streaming reader found no top-level "traceEvents": [)."""
    if not data.strip():
        raise TraceFormatError(f"the file is empty; {_HINT}", path=path)
    try:
        header = msgspec.json.decode(data, type=TraceHeader)
    except msgspec.ValidationError:
        raise TraceFormatError(f"not a Chrome/Kineto trace: the top level is not a JSON object "
                               f"with 'traceEvents'; {_HINT}", path=path) from None
    except _BAD_TEXT as exc:
        raise TraceFormatError(f"not valid JSON, or truncated ({exc}); {_HINT}", path=path) from None
    if not header.traceEvents:
        raise TraceFormatError(f"not a Chrome/Kineto trace: no 'traceEvents' key; {_HINT}", path=path)
    events = bytes(header.traceEvents)
    header.traceEvents = msgspec.Raw()
    if events.lstrip()[:1] != b"[":
        raise TraceFormatError(f"'traceEvents' is not a list; {_HINT}", path=path)
    return header, _chunks(path, header, bytearray(events[events.index(b"["):]), iter(()), True)
