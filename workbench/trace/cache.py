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

Reading and writing follow workbench's one discipline for the files it reads again
(``workbench.records``):

* an entry is read through one open descriptor of its folder, so that an entry replaced or
  evicted by another process meanwhile is read whole or not at all (then a plain miss);
* each file of it must be a regular file (a FIFO, a device, a folder, a symlink loop or a link to
  nothing is refused before it is opened), the meta at most ``META_MAX_BYTES``, each table of the
  size the meta recorded (at most ``TABLE_MAX_BYTES`` for an entry that recorded none); the meta is
  checked field by field (``check_stored``), each table's rows, columns and dtypes against it.
  Whatever fails is a miss with a ``TraceWarning`` naming the entry and the file, the entry is
  removed and rewritten: never a raw exception, never tables of another trace;
* an entry is written in a temporary folder beside it and renamed into place; one already there is
  first renamed aside (then removed), so that concurrent writers of one entry leave one whole entry
  and a reader never sees a folder half removed.
"""

from __future__ import annotations

import errno
import hashlib
import mmap
import os
import shutil
import stat
import time
import uuid
import warnings
from dataclasses import fields
from pathlib import Path
from typing import Any

import msgspec
import pandas as pd
import pyarrow as pa

import workbench.records as files
import workbench.trace.schema as trace_schema
from workbench.errors import TraceWarning
from workbench.trace.data import TraceData, TraceMeta

FORMAT_VERSION = 1
ENV_DIR = "WORKBENCH_CACHE_DIR"
ENV_MAX_BYTES = "WORKBENCH_CACHE_MAX_BYTES"
DEFAULT_MAX_BYTES = 4 << 30
HASH_BYTES = 1 << 20  # hashed from the start and from the end of each file
_META = "meta.msgpack"
META_MAX_BYTES = 256 << 20  # the largest meta.msgpack read
TABLE_MAX_BYTES = 64 << 30  # the largest table of an entry that recorded no sizes
STALE_S = 3600.0  # a temporary folder older than this was left by a writer that died: evict removes it
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
        try:
            st = os.stat(self.entry, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):  # no entry, or no cache folder (``store`` says why)
            return None
        except OSError as exc:
            self._discard(f"it cannot be examined ({exc.strerror or exc})")
            return None
        if not stat.S_ISDIR(st.st_mode):
            kind = "a symlink" if stat.S_ISLNK(st.st_mode) else files.file_kind(st.st_mode) or "a file"
            self._discard(f"it is {kind}, not a folder the cache wrote")
            return None
        try:
            folder = os.open(self.entry, _DIR_FLAGS)
        except FileNotFoundError:
            return None  # removed meanwhile: a miss
        except OSError as exc:
            self._discard(f"its folder cannot be opened ({exc.strerror or exc})")
            return None
        try:
            data = self._load_from(folder)
        finally:
            os.close(folder)
        if data is not None:
            _touch(self.entry)
        return data

    def _load_from(self, folder: int) -> TraceData | None:
        """The entry read through the open folder ``folder``: one folder, whatever is renamed meanwhile."""
        at = folder if _DIR_FD else None
        try:
            raw = files.read_bytes(
                self.entry / _META,
                "trace cache entry file",
                max_bytes=META_MAX_BYTES,
                error=_Damaged,
                lock=False,
                at=at,
            )
            if raw is None:
                return None  # no meta: a miss, the entry is rewritten
            stored = _unpack(raw)
            if not isinstance(stored, dict):
                raise _Damaged(f"{_META} holds a {type(stored).__name__}, not a map")
            if stored.get("format") != FORMAT_VERSION or stored.get("schema") != SCHEMA_VERSION:
                other = (
                    f"it is from another version of the cache (format {stored.get('format')}, "
                    f"schema {stored.get('schema')}; this is format {FORMAT_VERSION}, schema "
                    f"{SCHEMA_VERSION})"
                )
            elif stored.get("identities") != self.identities or stored.get("options") != self.options:
                return None  # the file changed: a miss, the entry is rewritten
            else:
                other = None
                check_stored(stored)
                sizes = stored.get("bytes") or {}
                tables = {
                    name: self._read_table(
                        name, rows, stored["columns"][name], stored["dtypes"][name], sizes.get(name), at
                    )
                    for name, rows in stored["rows"].items()
                }
                meta = _meta_from(stored["meta"])
        except Exception as exc:  # noqa: BLE001 (any damage to an entry is a miss, said once)
            if self._replaced(folder):
                return None  # another process replaced or evicted the entry while it was read: a miss
            said = str(exc) if isinstance(exc, _Damaged) else f"{type(exc).__name__}: {exc}"
            self._discard(f"it cannot be read ({said})", folder, stacklevel=5)
            return None
        if other is not None:
            self._discard(other, folder, stacklevel=5)
            return None
        return TraceData(tables, meta)

    def _read_table(
        self, name: str, rows: int, columns: list[str], dtypes: list[str], size: int | None, at: int | None
    ) -> pd.DataFrame:
        path = self.entry / f"{name}.arrow"
        bound = TABLE_MAX_BYTES if size is None else size
        st = files.check_regular(path, "trace cache entry file", max_bytes=bound, error=_Damaged, at=at)
        if st is None:
            raise _Damaged(f"table file {str(path)!r} is missing")
        if size is not None and st.st_size != size:
            raise _Damaged(f"table file {str(path)!r} holds {st.st_size} bytes, {size} were written (cut short?)")
        fd = files.open_checked(path, "trace cache entry file", os.O_RDONLY, bound, error=_Damaged, at=at)
        try:
            mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)  # the file's own pages: kept alive by the table
        finally:
            os.close(fd)
        table = pa.ipc.open_file(pa.BufferReader(pa.py_buffer(mapped))).read_all()
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

    def _replaced(self, folder: int) -> bool:
        """Whether the entry's path no longer names the folder open as ``folder``."""
        try:
            now, then = os.stat(self.entry, follow_symlinks=False), os.fstat(folder)
        except OSError:
            return True
        return (now.st_dev, now.st_ino) != (then.st_dev, then.st_ino)

    def _discard(self, why: str, folder: int | None = None, *, stacklevel: int = 4) -> None:
        """Warn (naming the entry, its files and why) and remove the entry: the one open as ``folder``
        only, never one another process wrote since (that one is left alone)."""
        warnings.warn(
            f"trace cache entry {self.entry} for {', '.join(self.paths)} is ignored: {why}; "
            "the trace is read from its file again and the entry rewritten",
            TraceWarning,
            stacklevel=stacklevel,
        )
        if folder is not None and self._replaced(folder):
            return
        _remove(self.entry, self.root)

    # --- writing --------------------------------------------------------------------------
    def store(self, data: TraceData) -> Path | None:
        """Write the entry (atomically: a temporary folder renamed into place); None where it could
        not be written (a warning says why; the load itself is unaffected)."""
        tmp = self.root / f".{self.entry.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            tmp.mkdir(parents=True)
            rows, columns, dtypes, sizes = {}, {}, {}, {}
            for name, frame in data._tables.items():
                table = pa.Table.from_pandas(frame, preserve_index=False)
                target = tmp / f"{name}.arrow"
                with pa.OSFile(str(target), "wb") as sink:
                    with pa.ipc.new_file(sink, table.schema) as writer:
                        writer.write_table(table)
                rows[name] = len(frame)
                columns[name] = [str(c) for c in frame.columns]
                dtypes[name] = [_dtype_text(frame[c]) for c in frame.columns]
                sizes[name] = os.path.getsize(target)
            stored = {
                "format": FORMAT_VERSION,
                "schema": SCHEMA_VERSION,
                "identities": self.identities,
                "options": self.options,
                "rows": rows,
                "columns": columns,
                "dtypes": dtypes,
                "bytes": sizes,
                "meta": _meta_to(data.meta),
                "written": time.time(),
            }
            (tmp / _META).write_bytes(_pack(stored))
            _install(tmp, self.entry, self.root)
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


class _Damaged(Exception):
    """What is wrong with a file of an entry (said in the warning; the entry is a miss)."""


_DIR_FD = os.open in os.supports_dir_fd and os.stat in os.supports_dir_fd
_DIR_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_DIRECTORY", 0)
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_NONBLOCK", 0)
)
_INSTALL_TRIES = 5


def _install(tmp: Path, entry: Path, root: Path) -> None:
    """Rename the complete folder ``tmp`` into place as ``entry``. An entry already there (an older
    one, or one another process wrote the same moment) is first renamed aside and then removed, so
    that no reader ever sees a folder half removed; if other writers keep putting theirs in place,
    theirs stays (it holds the same tables) and ``tmp`` is removed."""
    for _ in range(_INSTALL_TRIES):
        try:
            os.rename(tmp, entry)
            return
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                raise
        _remove(entry, root)  # (gone already where another writer moved it aside: then simply again)
    if not os.path.isdir(entry):  # pragma: no cover - five writers in a row replaced it
        raise OSError(errno.EBUSY, f"{entry} kept being replaced by other processes")
    shutil.rmtree(tmp, ignore_errors=True)


def _remove(entry: Path, root: Path) -> None:
    """Remove an entry: renamed aside first (one step another process sees whole), then deleted. A
    non-folder in its place (a file, a FIFO, a link) is unlinked, never followed."""
    aside = root / f".{entry.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.old"
    try:
        os.rename(entry, aside)
    except FileNotFoundError:
        return  # another process removed it first
    except OSError:
        aside = entry  # cannot be renamed (a read-only cache): removed in place
    try:
        st = os.stat(aside, follow_symlinks=False)
    except OSError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(aside, ignore_errors=True)
    else:
        try:
            os.unlink(aside)
        except OSError:
            pass


def _map_of(value: Any, name: str, check) -> None:
    if not isinstance(value, dict):
        raise _Damaged(f"{_META}: {name} is a {type(value).__name__}, not a map")
    for k, v in value.items():
        if not check(k, v):
            raise _Damaged(f"{_META}: {name} holds {k!r}: {v!r:.60}, not what the cache writes")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _rank(k: Any) -> bool:
    try:
        int(k)
        return not isinstance(k, (bool, float))
    except (TypeError, ValueError):
        return False


def _strs(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def check_stored(stored: dict) -> None:
    """The typed checks of an entry's meta (``_Damaged`` saying what is wrong): the tables named
    (known tables, each with its rows, columns, dtypes and, where recorded, its byte size) and the
    trace's ``TraceMeta``, field by field."""
    rows: Any = stored.get("rows")  # each a map once _map_of has passed it
    columns: Any = stored.get("columns")
    dtypes: Any = stored.get("dtypes")
    _map_of(rows, "rows", lambda k, v: k in trace_schema.TABLES and _is_int(v) and v >= 0)
    _map_of(columns, "columns", lambda k, v: k in rows and _strs(v))
    _map_of(dtypes, "dtypes", lambda k, v: k in rows and _strs(v) and len(v) == len(columns.get(k, ())))
    if set(columns) != set(rows) or set(dtypes) != set(rows):
        raise _Damaged(f"{_META}: the tables of rows, columns and dtypes differ")
    if stored.get("bytes") is not None:
        _map_of(stored["bytes"], "bytes", lambda k, v: k in rows and _is_int(v) and v > 0)
    meta = stored.get("meta")
    if not isinstance(meta, dict):
        raise _Damaged(f"{_META}: meta is a {type(meta).__name__}, not a map")
    known = {f.name for f in fields(TraceMeta)}
    unknown = sorted(set(meta) - known, key=str)
    if unknown:
        raise _Damaged(f"{_META}: meta has fields {unknown[:4]} a TraceMeta does not have")
    spec = {
        "files": _strs,
        "ranks": lambda v: isinstance(v, list) and all(_is_int(x) for x in v),
        "warnings": _strs,
        "notes": _strs,
        "source": lambda v: isinstance(v, str),
    }
    for name, ok in spec.items():
        if name in meta and not ok(meta[name]):
            raise _Damaged(f"{_META}: meta.{name} is {meta[name]!r:.60}, not what the cache writes")
    maps = {
        "file_ranks": lambda k, v: isinstance(k, str) and _is_int(v),
        "origins_ns": lambda k, v: _rank(k) and _is_int(v),
        "base_time_ns": lambda k, v: _rank(k) and _is_int(v),
        "device_properties": lambda k, v: _rank(k) and isinstance(v, list) and all(isinstance(x, dict) for x in v),
        "distributed_info": lambda k, v: _rank(k) and isinstance(v, dict),
        "process_names": lambda k, v: _rank(k) and isinstance(v, dict),
        "thread_names": lambda k, v: _rank(k) and isinstance(v, dict),
        "options": lambda k, v: isinstance(k, str) and isinstance(v, bool),
        "fidelity": lambda k, v: isinstance(k, str) and isinstance(v, str),
    }
    for name, entry_ok in maps.items():
        if name in meta:
            _map_of(meta[name], f"meta.{name}", entry_ok)


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
    total = 0
    try:
        for f in entry.iterdir():
            try:
                st = os.stat(f, follow_symlinks=False)
            except OSError:
                continue  # removed meanwhile
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
    except OSError:
        pass
    return total


def evict(root: Path, limit: int, keep: Path | None = None) -> list[Path]:
    """Remove the least recently used entries until the cache holds at most ``limit`` bytes (and
    the temporary folders of writers that died, older than ``STALE_S``). Entries that other
    processes remove meanwhile are skipped."""
    entries: list[tuple[float, Path]] = []
    now = time.time()
    try:
        names = list(root.iterdir())
    except OSError:
        return []
    for e in names:
        try:
            st = os.stat(e, follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode):
            continue
        if e.name.startswith("."):
            if e.name.endswith((".tmp", ".old")) and now - st.st_mtime > STALE_S:
                shutil.rmtree(e, ignore_errors=True)
            continue
        entries.append((st.st_mtime, e))
    entries.sort()
    sizes = {e: _size(e) for _, e in entries}
    total = sum(sizes.values())
    removed = []
    for _, entry in entries:
        if total <= limit:
            break
        if entry == keep:
            continue
        _remove(entry, root)
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
