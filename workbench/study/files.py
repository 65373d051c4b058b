"""Plain files of a study: JSON documents and append-only JSON lines.

Nothing here rewrites a line once written: records are appended, and a reader that meets a line
it cannot read (truncated by a crash, edited by hand) warns, naming the file and the line, and
reads the rest. A file whose header says it was written by a newer format is refused with a
``StudyError``: guessing at a newer layout could misread it, and nothing is changed.
"""
from __future__ import annotations

import json
import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from workbench.errors import StudyError


class StudyWarning(UserWarning):
    """A study or history file is readable, but a line of it was not (and was skipped)."""


@dataclass(frozen=True)
class Line:
    number: int          # 1-based, as an editor shows it
    record: dict[str, Any]


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
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(plain(data), indent=1) + "\n")
    os.replace(tmp, path)


def read_json(path: Path, what: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise StudyError(f"{what} missing: {str(path)!r} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise StudyError(f"{what} {str(path)!r} is not valid JSON ({exc}); restore it from version "
                         f"control or start a new study in another folder (nothing was changed)") from None
    if not isinstance(data, dict):
        raise StudyError(f"{what} {str(path)!r} does not hold a JSON object; nothing was changed")
    return data


def append_line(path: Path, record: dict[str, Any]) -> None:
    """Append one record as one line. A file whose last line lacks its newline (a crash in the
    middle of a write) gets the newline first, so the new record stays a line of its own."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = dumps(record) + "\n"
    with open(path, "ab+") as fh:
        fh.seek(0, os.SEEK_END)
        if fh.tell() > 0:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) != b"\n":
                text = "\n" + text
        fh.seek(0, os.SEEK_END)
        fh.write(text.encode())
        fh.flush()
        os.fsync(fh.fileno())


def read_lines(path: Path, what: str, *, required: tuple[str, ...] = ()) -> Iterator[Line]:
    """The readable records of a JSON lines file, in order; each unreadable line is skipped with a
    ``StudyWarning`` that names the file and the line. A missing file has no records."""
    if not path.exists():
        return
    with open(path, "rb") as fh:
        raw_lines = fh.read().split(b"\n")
    for number, raw in enumerate(raw_lines, start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw.decode("utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            warnings.warn(f"{what} {str(path)!r}, line {number}: not valid JSON ({exc}); the line is "
                          f"skipped, the rest is read (the file is left as it is)", StudyWarning, stacklevel=3)
            continue
        missing = [k for k in required if not isinstance(record, dict) or k not in record]
        if missing:
            warnings.warn(f"{what} {str(path)!r}, line {number}: a record without {missing}; the line is "
                          f"skipped, the rest is read (the file is left as it is)", StudyWarning, stacklevel=3)
            continue
        yield Line(number, record)


def check_format(header: dict[str, Any], *, kind: str, version: int, path: Path) -> None:
    """Refuse a header of another kind, or one written by a newer format version."""
    if header.get("format") != kind:
        raise StudyError(f"{str(path)!r} is not a {kind} file (its format is {header.get('format')!r}); "
                         f"point at the folder or file the study wrote; nothing was changed")
    found = header.get("version")
    if not isinstance(found, int) or found < 1:
        raise StudyError(f"{str(path)!r} has no readable format version ({found!r}); nothing was changed")
    if found > version:
        raise StudyError(f"{str(path)!r} was written by a newer workbench (format version {found}; this one "
                         f"reads up to {version}): upgrade workbench to read it; nothing was changed")
