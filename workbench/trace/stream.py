"""A trace file as a stream of byte blocks, gunzipped and turned into UTF-8 on the fly (the whole
file is never held).

Plain and gzip files are told apart by their magic number, not by their name. What Python's
``json`` and ``gzip`` accept is accepted here too: a UTF-8 byte-order mark is dropped, UTF-16 and
UTF-32 text (with or without a byte-order mark) is transcoded to UTF-8 block by block, and zero
bytes padding a gzip file after its last member are ignored.
"""

from __future__ import annotations

import codecs
import zlib
from collections.abc import Iterator
from json import detect_encoding

from workbench.errors import TraceFormatError
from workbench.trace.paths import open_checked, shown

BLOCK_BYTES = 1 << 20  # bytes read (or decompressed) at a time
GZIP_MAGIC = b"\x1f\x8b"


def blocks(path: str) -> Iterator[bytes]:
    """The file's (decompressed) bytes as UTF-8, BLOCK_BYTES or so at a time."""
    with open_checked(path) as fh:
        head = fh.read(BLOCK_BYTES)
        if head[:2] == GZIP_MAGIC:
            yield from _utf8(_gunzip(head, fh, path), path)
            return
        yield from _utf8(_plain(head, fh), path)


def _plain(head: bytes, fh) -> Iterator[bytes]:
    while head:
        yield head
        head = fh.read(BLOCK_BYTES)


def _utf8(raw: Iterator[bytes], path: str) -> Iterator[bytes]:
    """The blocks as UTF-8: a byte-order mark dropped, UTF-16/32 transcoded."""
    head = b""
    for block in raw:
        head += block
        if len(head) >= 4:
            break
    if not head:
        return
    encoding = detect_encoding(head)
    if encoding == "utf-8":
        yield head
        yield from raw
        return
    if encoding == "utf-8-sig":
        yield head[3:]
        yield from raw
        return
    decoder = codecs.getincrementaldecoder(encoding)("strict")
    try:
        yield decoder.decode(head).encode("utf-8", "surrogatepass")
        for block in raw:
            yield decoder.decode(block).encode("utf-8", "surrogatepass")
        yield decoder.decode(b"", final=True).encode("utf-8", "surrogatepass")
    except UnicodeDecodeError as exc:
        raise TraceFormatError(
            f"the file looks like {encoding.upper()} text but is not valid {encoding} "
            f"({exc.reason} at byte {exc.start}); re-export the trace as UTF-8 JSON",
            path=shown(path),
        ) from None


def _gunzip(head: bytes, fh, path: str) -> Iterator[bytes]:
    inflater = zlib.decompressobj(wbits=31)
    data = head
    padding = False  # zero bytes after the last member, as gzip writes to fill a block
    try:
        while data:
            if padding:
                if data.strip(b"\0"):
                    raise zlib.error("data after the zero padding that ends the gzip stream")
            else:
                yield from _inflate(inflater, data)
                while inflater.eof and inflater.unused_data:  # a file of several gzip members
                    rest = inflater.unused_data
                    if not rest.strip(b"\0"):
                        padding = True
                        break
                    inflater = zlib.decompressobj(wbits=31)
                    yield from _inflate(inflater, rest)
            data = fh.read(BLOCK_BYTES)
        tail = inflater.flush()
        if tail:
            yield tail
    except zlib.error as exc:
        raise TraceFormatError(
            f"gzip data is truncated or corrupt ({exc}); copy the file again from where it was recorded",
            path=shown(path),
        ) from None
    if not inflater.eof:
        raise TraceFormatError(
            "gzip data is truncated or corrupt (the stream ends early); copy the file again from where it was recorded",
            path=shown(path),
        )


def _inflate(inflater, data: bytes) -> Iterator[bytes]:
    """Decompress ``data`` without letting one call's output grow past ~4 blocks."""
    while data:
        out = inflater.decompress(data, 4 * BLOCK_BYTES)
        if out:
            yield out
        data = inflater.unconsumed_tail
        if inflater.eof:
            return
