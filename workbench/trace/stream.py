"""A trace file as a stream of byte blocks, gunzipped on the fly (the whole file is never held).

Plain and gzip files are told apart by their magic number, not by their name.
"""
from __future__ import annotations

import zlib
from collections.abc import Iterator

from workbench.errors import TraceFormatError

BLOCK_BYTES = 1 << 20  # bytes read (or decompressed) at a time
_GZIP_MAGIC = b"\x1f\x8b"


def blocks(path: str) -> Iterator[bytes]:
    """The file's (decompressed) bytes, BLOCK_BYTES or so at a time."""
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        raise TraceFormatError("trace file does not exist; check the path", path=path) from None
    except IsADirectoryError:
        raise TraceFormatError("expected a trace file, got a folder", path=path) from None
    with fh:
        head = fh.read(BLOCK_BYTES)
        if head[:2] == _GZIP_MAGIC:
            yield from _gunzip(head, fh, path)
            return
        while head:
            yield head
            head = fh.read(BLOCK_BYTES)


def _gunzip(head: bytes, fh, path: str) -> Iterator[bytes]:
    inflater = zlib.decompressobj(wbits=31)
    data = head
    try:
        while data:
            yield from _inflate(inflater, data)
            while inflater.eof and inflater.unused_data:  # a file of several gzip members
                rest = inflater.unused_data
                inflater = zlib.decompressobj(wbits=31)
                yield from _inflate(inflater, rest)
            data = fh.read(BLOCK_BYTES)
        tail = inflater.flush()
        if tail:
            yield tail
    except zlib.error as exc:
        raise TraceFormatError(f"gzip data is truncated or corrupt ({exc}); copy the file "
                               "again from where it was recorded", path=path) from None
    if not inflater.eof:
        raise TraceFormatError("gzip data is truncated or corrupt (the stream ends early); copy "
                               "the file again from where it was recorded", path=path)


def _inflate(inflater, data: bytes) -> Iterator[bytes]:
    """Decompress ``data`` without letting one call's output grow past ~4 blocks."""
    while data:
        out = inflater.decompress(data, 4 * BLOCK_BYTES)
        if out:
            yield out
        data = inflater.unconsumed_tail
