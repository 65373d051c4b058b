"""One large trace file decoded by several processes: its events array cut into byte ranges at event
boundaries, each range read, decoded and turned into column arrays in a worker, and the results
joined in file order into the same tables the single-process path builds.

Used only where it is safe and exact: a plain UTF-8 file (its bytes are its text, so a range can be
read by offset) of at least PARALLEL_MIN_BYTES, in a main process with one thread (workers are
forked), with two or more cores; the caller's ``decode_workers`` (``read_trace``, ``load_trace(workers=)``)
overrides the size rule and the core count, and 1 keeps every file in its process. A piece that is not plain (a cut that fell inside a string, an
event that cannot be read, NaN tokens, begin/end pairs, a warning of any kind) makes the whole file
go the single-process way instead, so every odd case keeps its one implementation. The last range
(the final events and any header keys after the array) is always read here.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

import numpy as np

import workbench.trace.columns as columns
import workbench.trace.decode as decode
import workbench.trace.rank_map as rank_map
from workbench.errors import TraceFormatError
from workbench.trace.issues import Issues

PARALLEL_MIN_BYTES = 96 << 20  # smaller files: a fork pool costs more than it saves
MAX_WORKERS = 8
_WINDOW = 1 << 16  # bytes searched after each nominal cut for an event boundary
# table column -> the file interner its codes belong to
_CODED = {"name": "name", "pid": "pid", "tid": "tid", "cat": "cat", "phase": "ph"}


@dataclass
class Piece:
    """What a worker sends back for one byte range."""

    events: int
    parts: dict[str, dict]
    names: dict[str, dict[str, str]]
    unknown: dict[tuple[str, str], int]
    worker: int  # the process that read it
    labels: dict[str, list[str]]  # interner -> the labels that worker coded first in this piece


def worker_count(size: int, requested: int | None = None) -> int:
    """Processes to use for a file of ``size`` bytes (1: decode it here). ``requested``: the caller's
    ``decode_workers`` (None: one per core, at most MAX_WORKERS, for files of PARALLEL_MIN_BYTES or more;
    1: this process; n: n processes for any file of two or more pieces). Never in a worker process (a rank
    worker decodes its file alone: the cores are its siblings'), nor where fork is not safe
    (``rank_map.fork_is_safe``)."""
    if requested == 1 or multiprocessing.parent_process() is not None or not rank_map.fork_is_safe():
        return 1
    pieces = size // decode.CHUNK_BYTES
    if requested is not None:
        return max(1, min(requested, pieces))
    if size < PARALLEL_MIN_BYTES:
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_WORKERS, pieces))


def cut_points(path: str, start: int, size: int) -> list[int] | None:
    """Positions of the "," between two events about every CHUNK_BYTES after ``start`` (the array's
    "["); None where a window holds no boundary. A cut inside a string or a nested value is found
    out by its piece not decoding (then the file is read the single-process way)."""
    cuts: list[int] = []
    with open(path, "rb") as fh:
        target = start + decode.CHUNK_BYTES
        while target + decode.CHUNK_BYTES < size:
            fh.seek(target)
            window = fh.read(_WINDOW)
            match = decode._BOUNDARY.search(window)
            if match is None:
                return None
            cuts.append(target + window.index(b",", match.start()))
            target = cuts[-1] + decode.CHUNK_BYTES
    return cuts or None


def _read_range(path: str, begin: int, end: int) -> bytearray:
    """The file's bytes ``begin`` .. ``end`` (both included)."""
    text = bytearray(end + 1 - begin)
    with open(path, "rb", buffering=0) as fh:
        fh.seek(begin)
        got = fh.readinto(text)
    if got != len(text):
        raise OSError(f"{path} changed while it was read")
    return text


def decode_range(path: str, begin: int, end: int) -> Piece | None:
    """The columns of the events between ``begin`` ("[" or ",") and ``end`` (","); None where the
    piece is anything but plain events, or fails in any way (the single-process path then reads the
    file, and says what is wrong with it as it always does)."""
    try:
        return _decode_range(path, begin, end)
    except Exception:  # noqa: BLE001 - any failure here is reported by the single-process read
        return None


def _decode_range(path: str, begin: int, end: int) -> Piece | None:
    text = _read_range(path, begin, end)
    text[0], text[-1] = ord("["), ord("]")
    decoded = decode._decode_piece(memoryview(text), path, 0, decode._FastState())
    if decoded is None or decoded.skipped or decoded.nan_values:
        return None
    in_pool = _worker_interners is not None
    interners = _worker_interners if _worker_interners is not None else columns.Interners()
    chunk = columns.Chunk(decoded, interners)
    if columns.EDGE in chunk.kinds:
        return None
    issues = Issues(path)
    parts = {name: part for name, part in columns.extract(chunk, issues).items() if part is not None}
    if issues.messages or issues.huge_ts_count:
        return None
    labels = {}
    sent = _labels_sent if in_pool else {}
    for key in _INTERNERS:
        known = getattr(interners, key).labels
        labels[key] = known[sent.get(key, 0) :]
        sent[key] = len(known)
    worker = os.getpid() if in_pool else -next(_solo)  # outside a pool: a piece coded on its own
    return Piece(len(decoded.events), parts, columns.metadata(chunk), chunk.unknown(), worker, labels)


_INTERNERS = ("name", "pid", "tid", "ph", "cat")
_worker_interners: columns.Interners | None = None
_labels_sent: dict[str, int] = {}  # interner -> how many of its labels went out with earlier pieces
_solo = itertools.count(1)


def _start_worker() -> None:
    """A worker codes its pieces with interners of its own, kept from piece to piece; each piece
    carries the labels that worker had not sent before (a worker reads its pieces in file order, and
    the parent takes them in file order, so it re-codes them as the single process would)."""
    global _worker_interners
    _worker_interners = columns.Interners()
    _labels_sent.clear()


def _run(path: str, ranges: list[tuple[int, int]], workers: int) -> list[Piece] | None:
    context = multiprocessing.get_context("fork")
    pieces: list[Piece] = []
    try:
        with (
            rank_map.fork_warning_silenced(),
            ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_start_worker) as pool,
        ):
            for piece in pool.map(decode_range, *zip(*[(path, b, e) for b, e in ranges])):
                if piece is None:
                    pool.shutdown(wait=True, cancel_futures=True)
                    return None
                pieces.append(piece)
    except (BrokenProcessPool, OSError, MemoryError):
        return None
    return pieces


def merge(
    piece: Piece,
    first: int,
    interners: columns.Interners,
    remaps: dict[int, dict[str, np.ndarray]],
    parts: dict[str, list[dict]],
    names: dict[str, dict[str, str]],
    issues: Issues,
) -> None:
    """Add one worker's piece, whose events begin at file index ``first``: its codes re-coded with the
    file's interners (new labels in the order they first appear, as the single process codes them).
    ``remaps``: per worker, its code -> the file's code, grown piece by piece."""
    remap = remaps.setdefault(piece.worker, {key: np.zeros(0, dtype=np.int32) for key in _INTERNERS})
    for key, labels in piece.labels.items():
        if labels:
            interner = getattr(interners, key)
            added = np.fromiter(map(interner.code, labels), dtype=np.int32, count=len(labels))
            remap[key] = np.concatenate([remap[key], added])
    for name, part in piece.parts.items():
        for column, key in _CODED.items():
            if column in part:
                part[column] = remap[key][part[column]]
        part["event_index"] = part["event_index"] + first
        parts[name].append(part)
    for key, found in piece.names.items():
        names[key].update(found)
    issues.unknown(piece.unknown)


def decode_split(
    chunks: decode.Chunks,
    interners: columns.Interners,
    parts: dict[str, list[dict]],
    names: dict[str, dict[str, str]],
    issues: Issues,
    requested: int | None = None,
) -> decode.DecodedFile | None | bool:
    """Decode the file of ``chunks`` in worker processes, adding its columns to ``parts``; the last
    piece is returned to be taken here (None if it holds no event). False: nothing was done (not
    worth it, or not plain), read ``chunks`` the usual way. ``requested``: see ``worker_count``."""
    if chunks.events_at is None or requested == 1:
        return False
    try:
        size = os.stat(chunks.path).st_size
    except OSError:
        return False
    workers = worker_count(size, requested)
    if workers < 2:
        return False
    cuts = cut_points(chunks.path, chunks.events_at, size)
    if cuts is None:
        return False
    ranges = list(zip([chunks.events_at] + cuts[:-1], cuts))
    pieces = _run(chunks.path, ranges, workers)
    if pieces is None:
        return False
    try:
        tail_text = bytes(_read_range(chunks.path, cuts[-1], size - 1))
        header = decode.TraceHeader(**{k: getattr(chunks.header, k) for k in _HEADER_KEYS})
        first = sum(piece.events for piece in pieces)
        tail = decode._tail(chunks.path, header, [tail_text], first, chunks.bare)
    except (TraceFormatError, OSError):
        return False
    close = getattr(chunks.pieces, "close", None)  # a generator: the usual reader's stream is not needed
    if close is not None:
        close()
    for key in _HEADER_KEYS:
        setattr(chunks.header, key, getattr(header, key))
    remaps: dict[int, dict[str, np.ndarray]] = {}
    for piece, start in zip(pieces, np.cumsum([0] + [p.events for p in pieces[:-1]]).tolist()):
        merge(piece, start, interners, remaps, parts, names, issues)
    return tail if tail.events else None


_HEADER_KEYS = ("deviceProperties", "distributedInfo", "baseTimeNanoseconds", "displayTimeUnit", "schemaVersion")
