"""Plain files of a study: JSON documents and append-only JSON lines.

Nothing here rewrites a line once written: records are appended, and a reader that meets a line
it cannot read (truncated by a crash, edited by hand) warns, naming the file and the line, and
reads the rest. A file whose header says it was written by a newer format is refused with a
``StudyError``: guessing at a newer layout could misread it, and nothing is changed.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterator

import workbench.study.records as records
from workbench.errors import StudyError
from workbench.study.records import Line, StudyWarning

__all__ = [
    "Line",
    "StudyWarning",
    "plain",
    "dumps",
    "write_json",
    "read_json",
    "append_line",
    "read_lines",
    "check_format",
]


def plain(value: Any) -> Any:
    """JSON-able plain values: numpy scalars, tuples, Paths and non-finite floats made plain."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item"):
        try:
            return plain(value.item())
        except (TypeError, ValueError):
            pass
    if hasattr(value, "to_dict"):
        return plain(value.to_dict())
    return str(value)


def dumps(record: dict[str, Any]) -> str:
    return json.dumps(plain(record), sort_keys=False, separators=(",", ":"))


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write a whole JSON document atomically (a temporary file renamed over the target)."""
    records.write_json_atomic(path, json.dumps(plain(data), indent=1) + "\n", "study file")


def read_json(path: Path, what: str) -> dict[str, Any]:
    """A whole JSON document (bounded; a folder, FIFO or device is refused before opening)."""
    return records.read_json(path, what)


def append_line(path: Path, record: dict[str, Any], what: str = "study file") -> None:
    """Append one record as one line, under the file's lock (``records.append_jsonl``). A file whose
    last line lacks its newline (a crash in the middle of a write) gets the newline first, so the
    new record stays a line of its own."""
    records.append_jsonl(path, record, what, dumps)


def read_lines(
    path: Path, what: str, *, required: tuple[str, ...] = (), parse: records.Parse | None = None
) -> Iterator[Line]:
    """The readable records of a JSON lines file, in order; each unreadable line (not JSON, not an
    object, without a ``required`` key, or refused by ``parse``) is skipped with a
    ``StudyWarning`` that names the file and the line. A missing file has no records; a path that
    is not a regular file is refused (StudyError) before it is opened."""

    def check(record: dict[str, Any]) -> Any:
        missing = [k for k in required if k not in record]
        if missing:
            raise ValueError(f"a record without {missing}")
        return parse(record) if parse is not None else record

    lines, _ = records.read_jsonl(path, what, check, stacklevel=3)
    yield from lines


def check_format(header: dict[str, Any], *, kind: str, version: int, path: Path) -> None:
    """Refuse a header of another kind, or one written by a newer format version."""
    if header.get("format") != kind:
        raise StudyError(
            f"{str(path)!r} is not a {kind} file (its format is {header.get('format')!r}); "
            f"point at the folder or file the study wrote; nothing was changed"
        )
    found = header.get("version")
    if not isinstance(found, int) or found < 1:
        raise StudyError(f"{str(path)!r} has no readable format version ({found!r}); nothing was changed")
    if found > version:
        raise StudyError(
            f"{str(path)!r} was written by a newer workbench (format version {found}; this one "
            f"reads up to {version}): upgrade workbench to read it; nothing was changed"
        )
