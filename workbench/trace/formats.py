"""Which format a trace file is in, judged from its content (never its name), and its reader.

- ``SQLite format 3\\0`` at the start: an Nsight Systems SQLite export (``nsys_sqlite``);
- JSON (plain or gzip) whose top-level object starts with the ``rocprofiler-sdk-tool`` key: rocprofv3
  JSON (``rocprof_json``);
- anything else: a Chrome/Kineto trace (``decode``), whose reader says what is wrong with a file that
  is not one.
"""

from __future__ import annotations

import re
import zlib

from workbench.trace.data import TraceData
from workbench.trace.paths import open_checked

KINETO, NSYS, ROCPROF = "kineto", "nsys-sqlite", "rocprofv3-json"
SNIFF_BYTES = 1 << 16
_ROCPROF_KEY = re.compile(rb'^\s*\{\s*"rocprofiler-sdk-tool"\s*:')
_ROCPROF_ANYWHERE = re.compile(rb'"rocprofiler-sdk-tool"\s*:')


def head(path: str, n: int = SNIFF_BYTES) -> bytes:
    """The first ``n`` bytes of the file's content (gunzipped for a gzip file; as much as is there)."""
    with open_checked(path) as fh:
        raw = fh.read(n)
    if raw[:2] != b"\x1f\x8b":
        return raw
    try:
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw, n)
    except zlib.error:
        return raw


def sniff(path: str) -> str:
    """``KINETO``, ``NSYS`` or ``ROCPROF`` for the file at ``path``, from its first bytes."""
    start = head(path)
    if start.startswith(b"SQLite format 3\x00"):
        return NSYS
    text = start.lstrip(b"\xef\xbb\xbf")
    if _ROCPROF_KEY.match(text) or (
        text.lstrip()[:1] == b"{" and _ROCPROF_ANYWHERE.search(text[:4096]) and b'"traceEvents"' not in text[:4096]
    ):
        return ROCPROF
    return KINETO


def read_other(path: str, fmt: str) -> TraceData:
    """The tables of a file in a format other than Kineto's."""
    if fmt == NSYS:
        from workbench.trace.nsys_sqlite import read_nsys

        return read_nsys(path)
    from workbench.trace.rocprof_json import read_rocprof

    return read_rocprof(path)


__all__ = ["KINETO", "NSYS", "ROCPROF", "sniff", "read_other", "head"]
