"""Repair of the one known way torch's own exporter writes invalid JSON: unescaped quotes in names.

Kineto writes each event one field per line and puts names in quotes without escaping them, so a
``record_function('attn "qkv"')`` label comes out as ``"name": "attn "qkv"",`` and the whole file is
no longer JSON. Such a file is not lost for a label: :func:`repair_unescaped_quotes` writes a
copy in which every line of that shape (one ``"key": "text"`` pair that does not parse as it
stands) has the inner quotes escaped, and the copy is read in its place. Nothing else is changed:
a line that is valid stays byte for byte, and a file the repair does not make valid is reported
as it was (the caller raises its own error).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import workbench.trace.stream as stream

# a Kineto field line: indentation, "key": "text", an optional comma; the text may hold bare quotes
_FIELD_LINE = re.compile(rb'^(?P<head>\s*"[^"\\]+"\s*:\s*")(?P<text>.*)(?P<tail>"\s*,?\s*)$')
_BARE_QUOTE = re.compile(rb'(?<!\\)"')
REPAIR_LIMIT_BYTES = 4 << 30  # a copy is written only for files up to this size (decompressed)


@dataclass(frozen=True)
class Repaired:
    """A repaired copy of a trace file (delete it when read) and how many lines were mended."""

    path: Path
    lines: int

    def note(self, original: str) -> str:
        return (
            f"{self.lines} event field(s) with unescaped quotes (torch's exporter does not escape quotes in "
            f"names, e.g. record_function labels) were repaired while reading {original}"
        )


def _valid_pair(line: bytes) -> bool:
    body = line.strip().rstrip(b",")
    try:
        json.loads(b"{" + body + b"}")
    except ValueError:
        return False
    return True


def repair_line(line: bytes) -> bytes | None:
    """The line with its text's bare quotes escaped, or None where it needs no repair (or cannot have it)."""
    bare = line.rstrip(b"\r\n")
    match = _FIELD_LINE.match(bare)
    if match is not None and b'"' not in match.group("text"):
        return None  # one "key": "text" field with no inner quote
    if (match is None and _NAME_FIELD.search(bare) is None) or _valid_pair(line):
        return None
    fixed = _repair_name_among_fields(bare)  # the name's line holds other fields too (torch 2.11)
    if fixed is None and match is not None:
        fixed = match.group("head") + _BARE_QUOTE.sub(rb'\\"', match.group("text")) + match.group("tail")
        fixed = fixed if _valid_pair(fixed) else None
    return None if fixed is None else fixed + line[len(bare) :]


# torch 2.11's exporter writes several fields on the name's line:
#     "ph": "X", "cat": "user_annotation", "name": "attn "qkv"", "pid": 30442, "tid": 30442,
_NAME_FIELD = re.compile(rb'"name"\s*:\s*"')
_FIELD_END = re.compile(rb'"\s*,\s*"[^"\\]+"\s*:|"\s*,?\s*$')


def _repair_name_among_fields(bare: bytes) -> bytes | None:
    """A line of several ``"key": value`` pairs whose ``name`` holds bare quotes, with them escaped; the
    name ends at the first field boundary after it that leaves the line valid. None if none does."""
    head = _NAME_FIELD.search(bare)
    if head is None:
        return None
    start = head.end()
    for end in [m.start() for m in _FIELD_END.finditer(bare, start)]:
        fixed = bare[:start] + _BARE_QUOTE.sub(rb'\\"', bare[start:end]) + bare[end:]
        if _valid_pair(fixed):
            return fixed
    return None


def _lines(path: str) -> Iterator[bytes]:
    """The file's (decompressed, UTF-8) lines, each with its newline."""
    pending = b""
    for block in stream.blocks(path):
        pending += block
        *whole, pending = pending.split(b"\n")
        for line in whole:
            yield line + b"\n"
    if pending:
        yield pending


_KINETO_FIELD = re.compile(rb'\n[ \t]*"(?:ph|cat|name)"\s*:\s*"')


def _kineto_layout(path: str) -> bool:
    """Whether the file's first block reads like torch's exporter wrote it (a ``traceEvents`` array,
    one field per line): only such a file is scanned, so a file broken another way (a log, 8 GB of
    zeros) is judged from its first block, as the reader judges it."""
    try:
        head = next(iter(stream.blocks(path)), b"")
    except Exception:  # noqa: BLE001 - unreadable: the reader's own error stands
        return False
    return b'"traceEvents"' in head and _KINETO_FIELD.search(head) is not None


def repair_unescaped_quotes(path: str, folder: str | None = None) -> Repaired | None:
    """A copy of ``path`` (plain JSON, in ``folder`` or the temp folder) with the names torch's
    exporter left unescaped mended; None when no line needed it (the file is broken some other
    way, or not at all), the file does not have the exporter's layout, or it is larger than
    ``REPAIR_LIMIT_BYTES``."""
    if not _kineto_layout(path) or not _needs_repair(path):
        return None
    mended = 0
    size = 0
    handle = tempfile.NamedTemporaryFile("wb", suffix=".json", prefix="workbench-repaired-", dir=folder, delete=False)
    target = Path(handle.name)
    try:
        with handle:
            for line in _lines(path):
                size += len(line)
                if size > REPAIR_LIMIT_BYTES:
                    raise _TooLarge
                fixed = repair_line(line) if b'"' in line else None
                if fixed is not None:
                    mended += 1
                    line = fixed
                handle.write(line)
    except _TooLarge:
        target.unlink(missing_ok=True)
        return None
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    if not mended:
        target.unlink(missing_ok=True)
        return None
    return Repaired(target, mended)


class _TooLarge(Exception):
    pass


def _needs_repair(path: str) -> bool:
    """Whether some line of the file (within ``REPAIR_LIMIT_BYTES``) is a field the repair mends; read
    without writing anything."""
    size = 0
    for line in _lines(path):
        size += len(line)
        if size > REPAIR_LIMIT_BYTES:
            return False
        if b'"' in line and repair_line(line) is not None:
            return True
    return False


__all__ = ["REPAIR_LIMIT_BYTES", "Repaired", "repair_line", "repair_unescaped_quotes"]
