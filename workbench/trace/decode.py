"""Read one trace file into typed event structs (msgspec), a chunk at a time, never a dict per event.

The file streams in (gunzipped on the fly); the ``traceEvents`` array is cut at event boundaries
into pieces of about CHUNK_BYTES, and each piece is decoded into ``Event`` structs whose ``args``
hold only the keys the tables use. A piece and its events are dropped before the next is read,
so neither the file's text nor a Python object per event ever exists for the whole file.
Pieces are decoded with the fast per-category structs where they can be (events.py).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from json import detect_encoding
from types import FrameType
from typing import Any

import msgspec

import workbench.trace.stream as stream
from workbench.errors import TraceFormatError
from workbench.trace.events import FAST_DECODER, GENERIC_DECODER, ONE_EVENT_DECODER, SKIPPED_PH, Event
from workbench.trace.paths import shown

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
    skipped: list = []  # (index in the file's traceEvents, why) of events that could not be read
    nan_values: int = 0  # NaN / Infinity tokens read as absent (null)
    indexes: Any = None  # the events' file indexes, where they are not first_index + position
    ts_ns: Any = None  # their exact timestamps, where known already (paired B/E events)


# decoded this many bytes at a time: a piece's events are still in the CPU cache when they
# become columns (16 MB pieces measured slower), and the text in memory stays small
CHUNK_BYTES = 4 << 20
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
# reading is bounded: a file is judged from its first bytes, and no piece of it grows past these
HEADER_LIMIT = 64 << 20  # bytes searched for the start of the "traceEvents" array
WHOLE_LIMIT = 256 << 20  # a file of an unusual layout is read whole only up to this size
PIECE_LIMIT = 64 << 20  # the longest run of text without an event boundary
MAX_EVENT_DEPTH = 64  # an event nested deeper than this (arrays in objects in arrays ...) is skipped
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
    return header, Chunks(
        _chunks(path, header, buf[pos - 1 :], blocks, bare),
        path,
        header,
        pos - 1 if _text_is_bytes(path) else None,
        bare,
    )


class Chunks:
    """A file's chunks (iterate them once), and where its events array's "[" is in the file when the
    file's bytes are its text (plain UTF-8: not gzip, no byte-order mark, not transcoded): then pieces
    of it can be read by offset in other processes (split_decode.py) instead."""

    def __init__(
        self, pieces: Iterator[DecodedFile], path: str, header: TraceHeader, events_at: int | None, bare: bool
    ) -> None:
        self.pieces, self.path, self.header = pieces, path, header
        self.events_at, self.bare = events_at, bare

    def __iter__(self) -> Iterator[DecodedFile]:
        return self.pieces

    def __next__(self) -> DecodedFile:
        return next(self.pieces)


def _text_is_bytes(path: str) -> bool:
    """Whether the stream's bytes are the file's bytes, offset for offset (plain UTF-8 without a BOM)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError:
        return False
    return len(head) == 4 and head[:2] != stream.GZIP_MAGIC and detect_encoding(head) == "utf-8"


def _find_events(buf: bytearray, blocks: Iterator[bytes], path: str):
    """Read until the start of the events array: (header, position after "[", bare array?).

    A file is judged from its first bytes (no JSON object or array: an error at once) and the
    search is bounded, so a stream of something else is never read whole into memory.
    """
    for block in blocks:
        searched = max(0, len(buf) - 64)
        buf += block
        stripped = buf.lstrip()
        if not stripped:
            if len(buf) > HEADER_LIMIT:
                raise TraceFormatError(
                    f"not valid JSON: the first {len(buf) >> 20} MB are only whitespace; {_HINT}", path=shown(path)
                )
            continue
        first = stripped[:1]
        if first == b"[":
            return TraceHeader(), buf.index(b"[") + 1, True
        if first != b"{":
            raise TraceFormatError(
                f"not valid JSON: the file starts with {bytes(stripped[:12])!r}, not a JSON object or array; {_HINT}",
                path=shown(path),
            )
        match = _EVENTS_KEY.search(buf, searched)
        if match is not None:
            header = _prefix_header(bytes(buf[: match.start()]), path)
            if header is None:
                break
            return header, match.end(), False
        if len(buf) > HEADER_LIMIT:
            raise TraceFormatError(
                f"no 'traceEvents' array in the first {HEADER_LIMIT >> 20} MB; {_HINT}", path=shown(path)
            )
    for block in blocks:  # an unusual layout: read it whole, up to a bound
        buf += block
        if len(buf) > WHOLE_LIMIT:
            raise TraceFormatError(
                f"no top-level 'traceEvents' array found in the first {WHOLE_LIMIT >> 20} MB; {_HINT}", path=shown(path)
            )
    return None


def _prefix_header(prefix: bytes, path: str) -> TraceHeader | None:
    """The header keys before "traceEvents"; None if the match was not a top-level key."""
    try:
        header = msgspec.json.decode(prefix + b'"traceEvents":[0]}', type=TraceHeader)
    except (*_BAD_TEXT, msgspec.ValidationError):
        return None
    except RecursionError:
        raise TraceFormatError(
            f"the header (before 'traceEvents') is nested too deeply to read; {_HINT}", path=shown(path)
        ) from None
    header.traceEvents = msgspec.Raw()
    return header


_OPEN, _CLOSE, _COMMA = ord("["), ord("]"), ord(",")


def _chunks(
    path: str, header: TraceHeader, buf: bytearray, blocks: Iterator[bytes], bare: bool
) -> Iterator[DecodedFile]:
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
            _check_piece_size(buf, path, first)
            continue
        buf[0], buf[comma] = _OPEN, _CLOSE
        text = memoryview(buf)[: comma + 1]
        piece = _decode_piece(text, path, first, fast)
        if piece is None:  # the cut fell inside a string: read on, cut later
            buf[comma] = _COMMA
            del text
            _check_piece_size(buf, path, first)
            continue
        pending, size = [buf[comma:]], len(buf) - comma
        yield piece
        first += len(piece.events)
        del piece, text, buf  # before the next piece is read
    tail = _tail(path, header, pending, first, bare)
    del pending
    if tail.events:
        yield tail
    if first + len(tail.events) == 0:
        raise TraceFormatError(
            "'traceEvents' is empty: the profiler recorded nothing; profile "
            "a region that runs work (inside the profiler context)",
            path=shown(path),
        )


def _check_piece_size(buf: bytearray, path: str, first: int) -> None:
    """A run of text this long without a decodable event boundary is not a trace: stop reading."""
    if len(buf) <= PIECE_LIMIT:
        return
    try:
        msgspec.json.decode(bytes(buf[: 1 << 20]) + b"]")
        why = "no event boundary"
    except (*_BAD_TEXT, RecursionError) as exc:
        why = str(exc) if not isinstance(exc, RecursionError) else "nested too deeply"
    raise TraceFormatError(
        f"not valid JSON, or not an array of event objects: {PIECE_LIMIT >> 20} MB "
        f"after event #{first} hold no readable event ({why}); {_HINT}",
        path=shown(path),
    )


def _tail(path: str, header: TraceHeader, pending: list[bytes | bytearray], first: int, bare: bool) -> DecodedFile:
    """The last events, and the header keys written after the array (merged into ``header``)."""
    body = bytearray(b'{"traceEvents":')
    for part in pending:
        body += part
    body[15] = _OPEN  # the leading "," of the rest (or the array's own "[")
    text = bytes(body + (b"}" if bare else b""))
    del body
    tail, text, skipped, nans = _decode_tail(text, path, first)
    _merge_header(header, tail)
    return DecodedFile(path, tail.traceEvents, text, first, skipped, nans)


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


DEPTH_MARGIN = 200  # frames above the events array: the decoder's own, and room for other threads while it runs


@contextmanager
def _bounded_depth() -> Iterator[None]:
    """msgspec counts JSON nesting against Python's recursion limit, which other libraries raise
    (torch._dynamo does): decode with a fixed budget above the current depth, so that which events
    are too deeply nested to read depends on the file only, not on what else the process imported."""
    depth = 0
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + MAX_EVENT_DEPTH + DEPTH_MARGIN)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


# Python 3.12 bounds C recursion apart from sys.setrecursionlimit, so msgspec then reads any nesting
# and _bounded_depth no longer makes it fail on a too-deep event: the piece's deepest bracket is
# found first (a vectorised count; brackets inside strings can only raise it, which sends a piece to
# the exact, event-by-event reading, never past it)
_DEPTH_BY_RECURSION = sys.version_info < (3, 12)
_OPEN_CLOSE = None


def _may_nest_deeper(text: bytes | memoryview, limit: int) -> bool:
    """Whether some bracket of ``text`` may lie more than ``limit`` levels deep."""
    import numpy as np

    global _OPEN_CLOSE
    if _OPEN_CLOSE is None:
        table = np.zeros(256, dtype=np.int8)
        table[list(b"[{")] = 1
        table[list(b"]}")] = -1
        _OPEN_CLOSE = table
    steps = _OPEN_CLOSE[np.frombuffer(text, dtype=np.uint8)]
    if not steps.any():
        return False
    return int(np.cumsum(steps, dtype=np.int32).max()) > limit


def _decode_piece(text: bytes | memoryview, path: str, first: int, fast: _FastState) -> DecodedFile | None:
    """The events of one piece ("[...]"); None if the piece is not valid JSON (a cut inside a string).

    An event that cannot be read (a field of the wrong type, nested too deeply) does not reject the
    piece: the piece is then read event by event and that event is skipped, with its index and why.
    NaN / Infinity tokens (which Python's json writes) are read as absent values.
    """
    if not _DEPTH_BY_RECURSION and _may_nest_deeper(text, MAX_EVENT_DEPTH + 1):
        try:  # the events array is one level, each event's own brackets the rest
            return _one_by_one(text, 0, path, first)
        except TraceFormatError:
            return None  # not one valid array (a cut inside a string): as msgspec's DecodeError says
    if fast.use():
        try:
            with _bounded_depth():
                events = FAST_DECODER.decode(text)
            fast.record(failed=False)
            return DecodedFile(path, events, text, first)
        except (msgspec.ValidationError, RecursionError):  # an unknown or absent cat, or a bad value
            fast.record(failed=True)
        except msgspec.DecodeError:
            return _decode_nan(text, path, first)
        except UnicodeDecodeError as exc:
            raise _not_utf8(exc, path) from None
    try:
        with _bounded_depth():
            events = GENERIC_DECODER.decode(text)
        return DecodedFile(path, events, text, first)
    except (msgspec.ValidationError, RecursionError):
        return _one_by_one(text, 0, path, first)
    except msgspec.DecodeError:
        return _decode_nan(text, path, first)
    except UnicodeDecodeError as exc:
        raise _not_utf8(exc, path) from None


_NAN_TOKEN = re.compile(rb'("[^"\\]*(?:\\.[^"\\]*)*")|-?Infinity|NaN')
_HAS_NAN = re.compile(rb"NaN|Infinity")


def _without_nan(text: bytes | memoryview) -> tuple[bytes, int] | None:
    """The text with NaN / Infinity tokens (outside strings) as null, and how many; None if none."""
    if _HAS_NAN.search(text) is None:
        return None
    count = 0

    def swap(match: re.Match) -> bytes:
        nonlocal count
        if match.group(1) is not None:
            return match.group(1)
        count += 1
        return b"null"

    fixed = _NAN_TOKEN.sub(swap, bytes(text))
    return (fixed, count) if count else None


def _decode_nan(text: bytes | memoryview, path: str, first: int) -> DecodedFile | None:
    fixed = _without_nan(text)
    if fixed is None:
        return None
    clean, count = fixed
    try:
        with _bounded_depth():
            events = GENERIC_DECODER.decode(clean)
        piece = DecodedFile(path, events, clean, first)
    except (msgspec.ValidationError, RecursionError):
        piece = _one_by_one(clean, 0, path, first)
    except _BAD_TEXT:
        return None
    piece.nan_values = count
    return piece


_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},]')
_OPENERS, _CLOSERS = frozenset(b"[{"), frozenset(b"]}")


def split_array(text: bytes | memoryview, start: int) -> tuple[list[tuple[int, int, int]], int]:
    """The elements of the JSON array whose "[" is at ``text[start]``: (begin, end, depth) each,
    depth counting the element's own brackets; and the position just after the array's "]".
    A tokenizer (strings skipped whole), so any depth of nesting is read without recursion."""
    elements: list[tuple[int, int, int]] = []
    depth, deepest, begin = 0, 0, start + 1
    for match in _TOKEN.finditer(text, start):
        at = match.start()
        char = text[at]
        if char in _OPENERS:
            depth += 1
            deepest = max(deepest, depth)
        elif char in _CLOSERS:
            depth -= 1
            if depth == 0:
                if bytes(text[begin:at]).strip():
                    elements.append((begin, at, deepest - 1))
                return elements, match.end()
        elif char == _COMMA and depth == 1:
            elements.append((begin, at, deepest - 1))
            begin, deepest = match.end(), 1
    raise ValueError("the array does not end")


def _one_by_one(
    text: bytes | memoryview,
    start: int,
    path: str,
    first: int,
) -> DecodedFile:
    """The piece read event by event: an event that cannot be read becomes a skipped placeholder."""
    try:
        elements, _ = split_array(text, start)
    except ValueError:
        raise TraceFormatError(
            f"not valid JSON, or truncated (the events array does not end); {_HINT}", path=shown(path)
        ) from None
    events, skipped, clean = _read_elements(text, elements, first)
    return DecodedFile(path, events, clean, first, skipped)


def _read_elements(text, elements, first: int) -> tuple[list, list, bytes]:
    """(events, skipped, the array's text with "{}" where an event was skipped: what the exact
    timestamps are read from)."""
    events: list = []
    skipped: list = []
    kept: list[bytes] = []
    for i, (begin, end, depth) in enumerate(elements):
        why = None
        if depth > MAX_EVENT_DEPTH:
            why = f"nested {depth} levels deep (at most {MAX_EVENT_DEPTH} are read)"
        else:
            try:
                events.append(ONE_EVENT_DECODER.decode(text[begin:end]))
                kept.append(bytes(text[begin:end]))
                continue
            except msgspec.ValidationError as exc:
                why = str(exc)
            except RecursionError:
                why = "nested too deeply to read"
            except _BAD_TEXT as exc:
                why = f"not valid JSON ({exc})"
        events.append(Event(ph=SKIPPED_PH))
        kept.append(b"{}")
        skipped.append((first + i, why))
    return events, skipped, b"[" + b",".join(kept) + b"]"


def _not_utf8(exc: UnicodeDecodeError, path: str) -> TraceFormatError:
    return TraceFormatError(f"not valid JSON: a string is not UTF-8 ({exc}); {_HINT}", path=shown(path))


def _decode_tail(body: bytes, path: str, first: int) -> tuple[_Tail, bytes, list, int]:
    """The last events and the header keys after them; (tail, its text, skipped events, NaNs)."""
    nans = 0
    try:
        if not _DEPTH_BY_RECURSION and _may_nest_deeper(body, MAX_EVENT_DEPTH + 1):
            raise RecursionError  # read event by event below (see _may_nest_deeper)
        with _bounded_depth():
            tail = msgspec.json.decode(body, type=_Tail)
        return tail, body, [], 0
    except (msgspec.ValidationError, RecursionError):
        pass
    except _BAD_TEXT as exc:
        fixed = _without_nan(body)
        if fixed is None:
            raise TraceFormatError(f"not valid JSON, or truncated ({exc}); {_HINT}", path=shown(path)) from None
        body, nans = fixed
        try:
            with _bounded_depth():
                tail = msgspec.json.decode(body, type=_Tail)
            return tail, body, [], nans
        except (msgspec.ValidationError, RecursionError):
            pass
        except _BAD_TEXT as exc2:
            raise TraceFormatError(f"not valid JSON, or truncated ({exc2}); {_HINT}", path=shown(path)) from None
    # read event by event; then the header keys after the array
    start = body.index(b"[")
    try:
        elements, after = split_array(body, start)
    except ValueError:
        raise TraceFormatError(
            f"not valid JSON, or truncated (the events array does not end); {_HINT}", path=shown(path)
        ) from None
    events, skipped, clean = _read_elements(body, elements, first)
    rest = body[after:].lstrip()
    keys = b"{" + rest[1:] if rest[:1] == b"," else b"{}"
    try:
        tail = msgspec.json.decode(keys, type=_Tail)
    except (msgspec.ValidationError, RecursionError) as exc:
        raise TraceFormatError(
            f"a header key after 'traceEvents' cannot be read ({exc}); {_HINT}", path=shown(path)
        ) from None
    except _BAD_TEXT as exc:
        raise TraceFormatError(f"not valid JSON, or truncated ({exc}); {_HINT}", path=shown(path)) from None
    tail.traceEvents = events
    return tail, clean, skipped, nans


def _merge_header(header: TraceHeader, tail: _Tail) -> None:
    for key in ("deviceProperties", "distributedInfo", "baseTimeNanoseconds", "displayTimeUnit", "schemaVersion"):
        if getattr(header, key) is None:
            setattr(header, key, getattr(tail, key))


def _decode_whole(data: bytes, path: str) -> tuple[TraceHeader, Iterator[DecodedFile]]:
    """The file read whole (after the streaming reader found no top-level "traceEvents": [)."""
    if not data.strip():
        raise TraceFormatError(f"the file is empty; {_HINT}", path=shown(path))
    try:
        header = msgspec.json.decode(data, type=TraceHeader)
    except msgspec.ValidationError:
        raise TraceFormatError(
            f"not a Chrome/Kineto trace: the top level is not a JSON object with 'traceEvents'; {_HINT}",
            path=shown(path),
        ) from None
    except RecursionError:
        raise TraceFormatError(
            f"nested too deeply to read (and no top-level 'traceEvents' array was found at its start); {_HINT}",
            path=shown(path),
        ) from None
    except _BAD_TEXT as exc:
        fixed = _without_nan(data)
        if fixed is None:
            raise TraceFormatError(f"not valid JSON, or truncated ({exc}); {_HINT}", path=shown(path)) from None
        return _decode_whole(fixed[0], path)
    if not header.traceEvents:
        raise TraceFormatError(f"not a Chrome/Kineto trace: no 'traceEvents' key; {_HINT}", path=shown(path))
    events = bytes(header.traceEvents)
    header.traceEvents = msgspec.Raw()
    if events.lstrip()[:1] != b"[":
        raise TraceFormatError(f"'traceEvents' is not a list; {_HINT}", path=shown(path))
    return header, _chunks(path, header, bytearray(events[events.index(b"[") :]), iter(()), True)
