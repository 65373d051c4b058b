"""One reader/writer discipline for the files the study and the history write and read again.

    lines, skipped = read_jsonl(path, "study ledger", parse=parse_event)
    append_jsonl(path, record, "study ledger")
    with locked(path, "study rounds") as log:         # read the last round and write the next under one lock
        n = 1 + max(r["round"] for r in log.records())
        log.append({"event": "planned", "round": n})
    check_writable(folder, "study folder")             # before any long work

Reading:
    * the path must be a ``str`` or ``os.PathLike`` (StudyError otherwise);
    * before opening, a path that is not a regular file (a folder, a FIFO, a device, a socket, or a
      symlink to one of these or to nothing) is refused with a ``StudyError`` that says which, and
      so is a file over ``MAX_BYTES`` (256 MiB): reading it could block, never end or exhaust the
      memory. The file is opened non-blocking and checked again on the open descriptor, and at
      most ``MAX_BYTES + 1`` bytes are read;
    * every line is decoded, must be a JSON object and pass the caller's typed ``parse``; a line
      that does not (truncated by a crash, binary, edited by hand, of the wrong types) is skipped
      with a ``StudyWarning`` naming the file, the line and why (the first ``WARN_LINES`` of a
      file one by one, the rest in one warning with their line numbers), and returned in
      ``skipped``. Nothing is rewritten;
    * readers hold a shared lock while reading, so a record being appended is never read half-way.

Writing:
    * one record is one line, written with one ``write`` and fsynced, under an exclusive lock on
      the file itself (``fcntl.flock``; on a system without it, a ``<file>.lock`` created
      exclusively beside the file, removed after). Concurrent writers neither lose nor interleave
      a record. Lock waits are bounded (``LOCK_TIMEOUT_S``): past it, a StudyError, never a hang;
    * a file whose last line lacks its newline (a crash mid-write) gets one first, so the new
      record stays a line of its own;
    * whole JSON documents (a study's header) are written to a temporary file and renamed.

``check_writable(folder)`` creates (and removes) a probe file in the folder, so that a folder that
cannot be written is said before any profile runs, not after.

The layer-free part (bounded regular-file reads, the lock, atomic writes, the write check) is
``workbench.records``, shared with run bundles and the trace cache; this module is that with the
study's error (``StudyError``), its bounds (``MAX_BYTES``, ``LOCK_TIMEOUT_S``, read when called, so
that they can be changed), JSON lines, ``StudyWarning`` for what is skipped, and typed fields.
"""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import workbench.records as leaf
from workbench.errors import StudyError

MAX_BYTES = leaf.MAX_BYTES  # the largest study, ledger, rounds, baselines or history file read
LOCK_TIMEOUT_S = leaf.LOCK_TIMEOUT_S  # the longest wait for another writer's lock
WARN_LINES = 20  # skipped lines warned one by one; the rest in one warning
KINDS = leaf.KINDS


class StudyWarning(UserWarning):
    """A study or history file is readable, but a line of it was not (and was skipped)."""


@dataclass(frozen=True)
class Line:
    number: int  # 1-based, as an editor shows it
    record: dict[str, Any]
    value: Any = None  # what ``parse`` made of the record (the record itself without one)


@dataclass(frozen=True)
class Skipped:
    path: str
    number: int
    reason: str

    def describe(self, what: str) -> str:
        return (
            f"{what} {self.path!r}, line {self.number}: {self.reason}; the line is skipped, the rest is read "
            f"(the file is left as it is)"
        )


# -- paths ---------------------------------------------------------------------------------------
def as_path(path: Any, what: str) -> Path:
    """``path`` as a Path: a str or os.PathLike, else a StudyError naming what was given."""
    return leaf.as_path(path, what, error=StudyError)


def check_regular(path: Path, what: str, *, max_bytes: int | None = None) -> os.stat_result | None:
    """The file's stat, or None where it does not exist; a StudyError for anything that is not a
    regular file (a folder, FIFO, device, socket, a symlink to one or to nothing) or is too big."""
    return leaf.check_regular(path, what, max_bytes=MAX_BYTES if max_bytes is None else max_bytes, error=StudyError)


# -- reading -------------------------------------------------------------------------------------
Parse = Callable[[dict[str, Any]], Any]


def parse_lines(data: bytes, path: Path, parse: Parse | None = None) -> tuple[list[Line], list[Skipped]]:
    """The records of JSON lines ``data`` (read from ``path``), each through ``parse``: a line that
    is not valid UTF-8 JSON, not an object, or that ``parse`` refuses is skipped (with why)."""
    lines: list[Line] = []
    skipped: list[Skipped] = []
    raw_lines = data.split(b"\n")
    for number, raw in enumerate(raw_lines, start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            skipped.append(Skipped(str(path), number, "not valid JSON (binary, not UTF-8 text)"))
            continue
        except (ValueError, RecursionError) as exc:
            cut = " (cut short: the file ends without a newline)" if number == len(raw_lines) else ""
            skipped.append(Skipped(str(path), number, f"not valid JSON{cut} ({type(exc).__name__}: {exc})"[:300]))
            continue
        if not isinstance(record, dict):
            skipped.append(Skipped(str(path), number, f"a JSON {type(record).__name__}, not an object"))
            continue
        value: Any = record
        if parse is not None:
            try:
                value = parse(record)
            except Exception as exc:  # noqa: BLE001 - parse is the validation: whatever it refuses is skipped
                skipped.append(Skipped(str(path), number, f"not a readable record ({type(exc).__name__}: {exc})"[:400]))
                continue
        lines.append(Line(number, record, value))
    return lines, skipped


def warn_skipped(skipped: Sequence[Skipped], what: str, *, stacklevel: int = 3) -> None:
    """One StudyWarning per skipped line (the first ``WARN_LINES``), then one for the rest."""
    for s in skipped[:WARN_LINES]:
        warnings.warn(s.describe(what), StudyWarning, stacklevel=stacklevel + 1)
    rest = skipped[WARN_LINES:]
    if rest:
        numbers = ", ".join(str(s.number) for s in rest[:50]) + (", ..." if len(rest) > 50 else "")
        warnings.warn(
            f"{what} {rest[0].path!r}: {len(rest)} more unreadable lines (lines {numbers}) are skipped; "
            f"the rest is read (the file is left as it is)",
            StudyWarning,
            stacklevel=stacklevel + 1,
        )


def read_bytes(path: Path, what: str, *, max_bytes: int | None = None) -> bytes | None:
    """The file's bytes (None where it does not exist), read under a shared lock, bounded."""
    return leaf.read_bytes(
        path,
        what,
        max_bytes=MAX_BYTES if max_bytes is None else max_bytes,
        error=StudyError,
        timeout=LOCK_TIMEOUT_S,
    )


def read_jsonl(
    path: Any,
    what: str,
    parse: Parse | None = None,
    *,
    max_bytes: int | None = None,
    warn: bool = True,
    stacklevel: int = 2,
) -> tuple[list[Line], list[Skipped]]:
    """The readable records of a JSON lines file and the lines skipped; each skipped line is also a
    StudyWarning naming the file, the line and why (unless ``warn=False``). A missing file has none."""
    p = as_path(path, what)
    data = read_bytes(p, what, max_bytes=max_bytes)
    if data is None:
        return [], []
    lines, skipped = parse_lines(data, p, parse)
    if warn:
        warn_skipped(skipped, what, stacklevel=stacklevel + 1)
    return lines, skipped


def read_json(path: Any, what: str, *, max_bytes: int = 16 * 1024 * 1024) -> dict[str, Any]:
    """A whole JSON document holding an object; StudyError when missing, not a file or not JSON."""
    p = as_path(path, what)
    data = read_bytes(p, what, max_bytes=max_bytes)
    if data is None:
        raise StudyError(f"{what} missing: {str(p)!r} does not exist")
    try:
        out = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise StudyError(
            f"{what} {str(p)!r} is not valid JSON ({type(exc).__name__}: {exc}); restore it from "
            f"version control or start a new study in another folder (nothing was changed)"
        ) from None
    if not isinstance(out, dict):
        raise StudyError(f"{what} {str(p)!r} does not hold a JSON object; nothing was changed")
    return out


# -- writing -------------------------------------------------------------------------------------
class LockedFile(leaf.LockedFile):
    """A JSON lines file held under an exclusive lock: read what is there, append records."""

    def lines(self, parse: Parse | None = None) -> list[Line]:
        """The readable lines as they are now (no warnings: the reader of the study warned)."""
        return parse_lines(self.read(), self.path, parse)[0]

    def records(self, parse: Parse | None = None) -> list[Any]:
        return [ln.value for ln in self.lines(parse)]

    def append(self, record: dict[str, Any], dumps: Callable[[dict[str, Any]], str]) -> None:
        """One record as one line (after a newline where the last line lacks one), fsynced."""
        self.append_bytes((dumps(record) + "\n").encode("utf-8"))


@contextlib.contextmanager
def locked(path: Any, what: str, *, max_bytes: int | None = None, timeout: float | None = None) -> Iterator[LockedFile]:
    """The JSON lines file at ``path`` (created if missing, its folder too), under an exclusive lock
    for as long as the ``with`` lasts: what is read and appended inside it is one step."""
    with leaf.locked(
        path,
        what,
        max_bytes=MAX_BYTES if max_bytes is None else max_bytes,
        timeout=LOCK_TIMEOUT_S if timeout is None else timeout,
        error=StudyError,
        factory=LockedFile,
    ) as log:
        yield log


def append_jsonl(path: Any, record: dict[str, Any], what: str, dumps: Callable[[dict[str, Any]], str]) -> None:
    """Append one record as one line, under the file's lock, fsynced."""
    with locked(path, what) as log:
        log.append(record, dumps)


def write_json_atomic(path: Path, text: str, what: str) -> None:
    """Write a whole document: a temporary file beside it, fsynced, renamed over the target."""
    leaf.write_atomic(path, text, what, error=StudyError)


def check_writable(
    folder: Any, what: str, *, files: Sequence[str] = (), folders: Sequence[str] = (), action: str = "nothing was run"
) -> Path:
    """Refuse, before any long work, a folder that cannot be written: it is created if missing, a
    probe file is created in it and removed, each of ``files`` that exists must be a regular file
    that opens for appending, each of ``folders`` that exists must be a folder."""
    f = leaf.check_writable(
        folder,
        what,
        error=StudyError,
        action=action,
        fix="make it writable, or copy the study to a writable folder and open it there",
    )
    for name in folders:
        sub = f / name
        if sub.exists() and not sub.is_dir():
            raise StudyError(
                f"{str(sub)!r} in the {what} is not a folder (the study keeps its run bundles there); "
                f"move it away; {action}"
            )
    for name in files:
        leaf.check_appendable(f / name, f"{what} file", max_bytes=MAX_BYTES, error=StudyError, action=action)
    return f


# -- typed fields --------------------------------------------------------------------------------
def _number(v: Any) -> bool:
    import math

    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "str": (lambda v: isinstance(v, str), "a string"),
    "int": (lambda v: isinstance(v, int) and not isinstance(v, bool) and abs(v) < 2**63, "an integer"),
    "count": (lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**63, "a count (integer >= 0)"),
    "round": (
        lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v < 2**63,
        "a round number (integer >= 1)",
    ),
    "number": (_number, "a finite number"),
    "positive": (lambda v: _number(v) and v > 0, "a finite number > 0"),
    "nonneg": (lambda v: _number(v) and v >= 0, "a finite number >= 0"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "dict": (lambda v: isinstance(v, dict), "an object"),
    "list": (lambda v: isinstance(v, list), "a list"),
    "strs": (lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v), "a list of strings"),
    "dicts": (lambda v: isinstance(v, list) and all(isinstance(x, dict) for x in v), "a list of objects"),
    "numbers": (lambda v: isinstance(v, list) and all(x is None or _number(x) for x in v), "a list of numbers"),
}


def expect(d: Any, key: str, kind: str, *, optional: bool = False, where: str = "") -> Any:
    """``d[key]`` when it is of ``kind`` (see ``CHECKS``); ValueError saying what it is otherwise.
    ``optional``: a missing key or null is allowed (None is returned)."""
    if not isinstance(d, dict):
        raise ValueError(f"{where or 'the record'} is a {type(d).__name__}, not an object")
    value = d.get(key)
    if value is None and optional:
        return None
    test, name = CHECKS[kind]
    if key not in d:
        raise ValueError(f"{where + '.' if where else ''}{key!r} is missing")
    if not test(value):
        shown = repr(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise ValueError(f"{where + '.' if where else ''}{key!r} is {shown}, not {name}")
    return value


def expect_all(d: Any, spec: dict[str, str], *, where: str = "") -> None:
    """Each ``key: kind`` of ``spec``; a kind ending in ``?`` is optional."""
    for key, kind in spec.items():
        expect(d, key, kind.rstrip("?"), optional=kind.endswith("?"), where=where)


def expect_items(d: Any, key: str, spec: dict[str, str], *, where: str = "") -> None:
    """``d[key]`` (optional) is a list of objects, each with ``spec``."""
    items = expect(d, key, "dicts", optional=True, where=where)
    for i, item in enumerate(items or ()):
        expect_all(item, spec, where=f"{where + '.' if where else ''}{key}[{i}]")
