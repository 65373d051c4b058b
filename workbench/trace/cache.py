"""The columnar cache: a trace's tables kept as Arrow IPC files, so the next load of the same
files (in any process) reads columns back instead of decoding JSON again.

Where: ``$WORKBENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/workbench``, else ``~/.cache/workbench``
(the user's cache folder; never beside the trace, which may be read-only or shared), in ``traces/``.

An entry is one folder per (files, reading options): ``meta.msgpack`` (the trace's ``TraceMeta``,
the files' identities, the cache format and schema versions) and one ``<table>.arrow`` per table.
A file's identity is its resolved path, size, mtime_ns and a BLAKE2 hash of its first and last MB
and its size: an entry is served only if every file's identity is unchanged, so a changed file is
never served from an old entry (its entry is rewritten). An entry that cannot be read, or one from
another version of the format or schema, is ignored with a warning and rewritten.

Size: at most ``$WORKBENCH_CACHE_MAX_BYTES`` (default 4 GiB) in all; the least recently used
entries are evicted first. ``cache=False`` (``workbench analyze --no-cache``) skips it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
import uuid
import warnings
from dataclasses import fields
from pathlib import Path

import msgspec
import pandas as pd
import pyarrow as pa

import workbench.trace.schema as trace_schema
from workbench.errors import TraceWarning
from workbench.trace.data import TraceData, TraceMeta

FORMAT_VERSION = 1
ENV_DIR = "WORKBENCH_CACHE_DIR"
ENV_MAX_BYTES = "WORKBENCH_CACHE_MAX_BYTES"
DEFAULT_MAX_BYTES = 4 << 30
HASH_BYTES = 1 << 20  # hashed from the start and from the end of each file
_META = "meta.msgpack"
# a change to any table's columns or dtypes makes old entries "another version"
SCHEMA_VERSION = hashlib.blake2b(repr(sorted(trace_schema.TABLES.items())).encode(), digest_size=8).hexdigest()


def cache_dir() -> Path:
    """The folder the cache lives in (created on first write)."""
    explicit = os.environ.get(ENV_DIR)
    if explicit:
        return Path(explicit).expanduser() / "traces"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "workbench" / "traces"


def max_bytes() -> int:
    try:
        return int(os.environ.get(ENV_MAX_BYTES, DEFAULT_MAX_BYTES))
    except ValueError:
        return DEFAULT_MAX_BYTES


def file_identity(path: str) -> dict:
    """What must be unchanged for an entry to be served: resolved path, size, mtime_ns, content hash."""
    resolved = os.path.realpath(path)
    info = os.stat(resolved)
    digest = hashlib.blake2b(digest_size=16)
    digest.update(str(info.st_size).encode())
    with open(resolved, "rb") as fh:
        digest.update(fh.read(HASH_BYTES))
        if info.st_size > HASH_BYTES:
            fh.seek(max(HASH_BYTES, info.st_size - HASH_BYTES))
            digest.update(fh.read(HASH_BYTES))
    return {"path": resolved, "size": info.st_size, "mtime_ns": info.st_mtime_ns, "hash": digest.hexdigest()}


def entry_key(paths: list[str], options: dict[str, bool]) -> str:
    """The entry's folder name: the files (resolved) and the reading options."""
    text = repr(([os.path.realpath(p) for p in paths], sorted(options.items())))
    return hashlib.blake2b(text.encode(errors="surrogateescape"), digest_size=16).hexdigest()


class TraceCache:
    """One trace's entry: ``load()`` it if valid, ``store()`` it after a fresh read."""

    def __init__(self, paths: list[str], options: dict[str, bool], folder: Path | None = None):
        self.paths = paths
        self.options = dict(options)
        self.root = folder if folder is not None else cache_dir()
        self.entry = self.root / entry_key(paths, self.options)
        self.identities = [file_identity(p) for p in paths]

    # --- reading --------------------------------------------------------------------------
    def load(self) -> TraceData | None:
        """The cached tables and meta, or None (a miss; a bad entry warns and is removed)."""
        meta_path = self.entry / _META
        if not meta_path.exists():
            return None
        try:
            stored = _unpack(meta_path.read_bytes())
            if stored.get("format") != FORMAT_VERSION or stored.get("schema") != SCHEMA_VERSION:
                self._discard(
                    f"it is from another version of the cache (format {stored.get('format')}, "
                    f"schema {stored.get('schema')}; this is format {FORMAT_VERSION}, schema "
                    f"{SCHEMA_VERSION})"
                )
                return None
            if stored.get("identities") != self.identities or stored.get("options") != self.options:
                return None  # the file changed: a miss, the entry is rewritten
            tables = {
                name: self._read_table(name, rows, stored["columns"][name], stored["dtypes"][name])
                for name, rows in stored["rows"].items()
            }
            meta = _meta_from(stored["meta"])
        except Exception as exc:  # noqa: BLE001 (any damage to an entry is a miss, said once)
            self._discard(f"it cannot be read ({type(exc).__name__}: {exc})")
            return None
        _touch(self.entry)
        return TraceData(tables, meta)

    def _read_table(self, name: str, rows: int, columns: list[str], dtypes: list[str]) -> pd.DataFrame:
        with pa.memory_map(str(self.entry / f"{name}.arrow"), "r") as source:
            table = pa.ipc.open_file(source).read_all()
        frame = table.to_pandas()
        if len(frame) != rows or list(frame.columns) != columns:
            raise ValueError(
                f"table {name} holds {len(frame)} rows and columns {list(frame.columns)[:4]}..., "
                f"not the {rows} rows written"
            )
        for column, dtype in zip(columns, dtypes):
            if _dtype_text(frame[column]) != dtype and isinstance(frame[column].dtype, pd.CategoricalDtype):
                # an empty dictionary comes back with object categories: give them their own dtype
                values = frame[column].array
                frame[column] = pd.Categorical.from_codes(
                    values.codes, categories=values.categories.astype(dtype.split(":", 1)[1])
                )
            if _dtype_text(frame[column]) != dtype:
                raise ValueError(f"column {name}.{column} is {_dtype_text(frame[column])}, {dtype} was written")
        return frame

    def _discard(self, why: str) -> None:
        warnings.warn(
            f"trace cache entry {self.entry} for {', '.join(self.paths)} is ignored: {why}; "
            "the trace is read from its file again and the entry rewritten",
            TraceWarning,
            stacklevel=4,
        )
        shutil.rmtree(self.entry, ignore_errors=True)

    # --- writing --------------------------------------------------------------------------
    def store(self, data: TraceData) -> Path | None:
        """Write the entry (atomically: a temporary folder renamed into place); None where it could
        not be written (a warning says why; the load itself is unaffected)."""
        tmp = self.root / f".{self.entry.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            tmp.mkdir(parents=True)
            rows, columns, dtypes = {}, {}, {}
            for name, frame in data._tables.items():
                table = pa.Table.from_pandas(frame, preserve_index=False)
                with pa.OSFile(str(tmp / f"{name}.arrow"), "wb") as sink:
                    with pa.ipc.new_file(sink, table.schema) as writer:
                        writer.write_table(table)
                rows[name] = len(frame)
                columns[name] = [str(c) for c in frame.columns]
                dtypes[name] = [_dtype_text(frame[c]) for c in frame.columns]
            stored = {
                "format": FORMAT_VERSION,
                "schema": SCHEMA_VERSION,
                "identities": self.identities,
                "options": self.options,
                "rows": rows,
                "columns": columns,
                "dtypes": dtypes,
                "meta": _meta_to(data.meta),
                "written": time.time(),
            }
            (tmp / _META).write_bytes(_pack(stored))
            if self.entry.exists():
                shutil.rmtree(self.entry, ignore_errors=True)
            try:
                os.replace(tmp, self.entry)
            except OSError:
                if not (self.entry / _META).exists():
                    raise
                shutil.rmtree(tmp, ignore_errors=True)  # another process wrote the same entry first
        except Exception as exc:  # noqa: BLE001 (a cache that cannot be written must not fail the load)
            shutil.rmtree(tmp, ignore_errors=True)
            warnings.warn(
                f"the trace cache could not be written to {self.root} ({type(exc).__name__}: "
                f"{exc}); loads stay uncached. Set {ENV_DIR} to a writable folder, or pass "
                "cache=False",
                TraceWarning,
                stacklevel=4,
            )
            return None
        evict(self.root, max_bytes(), keep=self.entry)
        return self.entry


def _dtype_text(column: pd.Series) -> str:
    """A column's dtype as text, a categorical's with the dtype of its categories ("category:str")."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return f"category:{column.dtype.categories.dtype}"
    return str(column.dtype)


def _touch(entry: Path) -> None:
    try:
        os.utime(entry)
    except OSError:
        pass


def _size(entry: Path) -> int:
    return sum(f.stat().st_size for f in entry.iterdir() if f.is_file())


def evict(root: Path, limit: int, keep: Path | None = None) -> list[Path]:
    """Remove the least recently used entries until the cache holds at most ``limit`` bytes."""
    try:
        entries = [(e.stat().st_mtime, e) for e in root.iterdir() if e.is_dir() and not e.name.startswith(".")]
    except OSError:
        return []
    entries.sort()
    sizes = {e: _size(e) for _, e in entries}
    total = sum(sizes.values())
    removed = []
    for _, entry in entries:
        if total <= limit:
            break
        if entry == keep:
            continue
        shutil.rmtree(entry, ignore_errors=True)
        total -= sizes[entry]
        removed.append(entry)
    return removed


_SURROGATE_TEXT, _BIG_INT, _PAIRS = 1, 2, 3  # msgpack extension codes: what msgpack itself cannot hold


def _safe(value):
    """``value`` with what msgpack cannot hold as extensions: text that is not UTF-8 (a file name
    with undecodable bytes) and integers beyond 64 bits (a ``distributedInfo`` of 2**70)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return msgspec.msgpack.Ext(_SURROGATE_TEXT, value.encode("utf-8", "surrogateescape"))
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return value
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**64 else msgspec.msgpack.Ext(_BIG_INT, str(value).encode())
    if isinstance(value, dict):
        pairs = [(_safe(k), _safe(v)) for k, v in value.items()]
        if any(isinstance(k, msgspec.msgpack.Ext) for k, _ in pairs):  # a key that is not UTF-8 text
            return msgspec.msgpack.Ext(_PAIRS, msgspec.msgpack.encode([list(p) for p in pairs]))
        return dict(pairs)
    if isinstance(value, (list, tuple)):
        return [_safe(v) for v in value]
    return value


def _ext(code: int, data: memoryview):
    if code == _SURROGATE_TEXT:
        return bytes(data).decode("utf-8", "surrogateescape")
    if code == _BIG_INT:
        return int(bytes(data))
    if code == _PAIRS:
        return {k: v for k, v in msgspec.msgpack.decode(data, ext_hook=_ext)}
    raise ValueError(f"unknown msgpack extension {code}")


def _pack(stored: dict) -> bytes:
    return msgspec.msgpack.encode(_safe(stored))


def _unpack(data: bytes) -> dict:
    return msgspec.msgpack.decode(data, ext_hook=_ext)


_TUPLE_FIELDS = ("files", "ranks", "warnings", "notes")


def _meta_to(meta: TraceMeta) -> dict:
    return {f.name: getattr(meta, f.name) for f in fields(TraceMeta)}


def _meta_from(stored: dict) -> TraceMeta:
    values = dict(stored)
    for name in _TUPLE_FIELDS:
        values[name] = tuple(values[name])
    values["device_properties"] = {int(r): tuple(v) for r, v in values["device_properties"].items()}
    for name in ("origins_ns", "distributed_info", "process_names", "thread_names", "base_time_ns"):
        values[name] = {int(r): v for r, v in values[name].items()}
    return TraceMeta(**values)
