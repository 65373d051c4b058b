"""``read_trace``: files -> decoded events -> per-rank columns -> one ``TraceData``."""

from __future__ import annotations

import gc
import os
import warnings
from collections.abc import Sequence

from workbench.errors import InvalidArgumentError, TraceFormatError, TraceWarning
from workbench.trace.build import FileTables, LoadOptions, build_file
from workbench.trace.data import TraceData, TraceMeta
from workbench.trace.decode import TraceHeader, decode_file
from workbench.trace.issues import Issues
from workbench.trace.paths import shown
from workbench.trace.ranks import (
    RankFile,
    assign_ranks,
    declared_rank,
    device_names,
    one_job,
    rank_problem,
    trace_paths,
)
from workbench.trace.tables import assemble


def read_trace(
    source: str | os.PathLike | Sequence[str | os.PathLike],
    *,
    hta_compat: bool = False,
    round_ns: bool | None = None,
    drop_last_step: bool | None = None,
    cache: bool = False,
    decode_workers: int | None = None,
) -> TraceData:
    """Read a Kineto/Chrome trace: a ``.json``/``.json.gz`` file, a folder of rank files, or a list.

    The tables only; ``wb.load_trace`` (``workbench.api.trace``) returns the same tables as a
    ``Trace`` whose methods run the analyses and the diagnosis.

    Defaults keep every event and every nanosecond. ``hta_compat=True`` reproduces Holistic
    Trace Analysis's reading (both options below); each can also be set alone:
    ``round_ns`` (ts = ceil(ts), end = floor(ts + dur), in µs) and ``drop_last_step`` (with two
    or more ``ProfilerStep#`` annotations, drop the last step as HTA does).

    ``cache=True`` reads the tables from the columnar cache (``workbench.trace.cache``) when the
    files are unchanged since they were cached, and writes them there after a fresh read.

    ``decode_workers``: processes that decode one large file, each a byte range of its events
    (``workbench.trace.split_decode``; the tables are identical to one process's). None: one per core
    (at most 8) for a plain JSON file of PARALLEL_MIN_BYTES (96 MB) or more; 1: this process only; n: n
    processes for any plain file of two or more 4 MB pieces. Gzip files, files with a byte-order mark or
    another encoding, a caller that runs other threads, and a caller that is itself a worker process are
    always decoded in this process.

    Raises TraceFormatError for a file that cannot be read as a trace (for a folder: only when
    no rank file can be read; a bad rank file is left out with a warning naming it); warns
    (TraceWarning) where the trace is usable but something was odd, saying what was done.
    """
    if decode_workers is not None and (type(decode_workers) is not int or decode_workers < 1):
        raise InvalidArgumentError(
            f"decode_workers must be a whole number >= 1 (or None: as many as pay), got {decode_workers!r}"
        )
    options = LoadOptions(
        round_ns=hta_compat if round_ns is None else round_ns,
        drop_last_step=hta_compat if drop_last_step is None else drop_last_step,
    )
    paths = trace_paths(source)
    other = _other_format(paths)
    if other is not None:  # an Nsight Systems or rocprofv3 file: its own reader, no cache (it reads fast)
        from workbench.trace.formats import read_other

        return read_other(paths[0], other)
    entry = None
    if cache:
        from workbench.trace.cache import TraceCache  # pyarrow only when the cache is used

        entry = TraceCache(paths, _options_dict(options))
        cached = entry.load()
        if cached is not None:
            for message in cached.meta.warnings:
                warnings.warn(message, TraceWarning, stacklevel=2)
            return cached
    collecting = gc.isenabled()
    gc.disable()  # millions of short-lived objects, no cycles: collections would only cost time
    try:
        data = _load(paths, options, decode_workers)
    finally:
        if collecting:
            gc.enable()
    if entry is not None:
        entry.store(data)
    return data


def _other_format(paths: list[str]) -> str | None:
    """The format of the source when it is not Kineto's (judged by content: ``workbench.trace.formats``);
    None for Kineto files. Files of other formats are read one at a time."""
    from workbench.trace.formats import KINETO, sniff

    found = [sniff(p) for p in paths]
    other = [(p, f) for p, f in zip(paths, found) if f != KINETO]
    if not other:
        return None
    if len(paths) > 1:
        p, f = other[0]
        raise TraceFormatError(
            f"a {f} file among {len(paths)} trace files: a file of another tool's format is "
            "loaded on its own (one file holds all its processes and devices); load it alone",
            path=shown(p),
        )
    return other[0][1]


def _options_dict(options: LoadOptions) -> dict[str, bool]:
    return {"round_ns": options.round_ns, "drop_last_step": options.drop_last_step}


def _load(paths: list[str], options: LoadOptions, decode_workers: int | None = None) -> TraceData:
    files: list[FileTables] = []
    headers: list[TraceHeader] = []
    left_out: list[tuple[str, TraceFormatError]] = []
    for path in paths:
        try:
            header, file = _load_file(path, options, decode_workers)
        except TraceFormatError as exc:
            if len(paths) == 1:
                raise
            left_out.append((path, exc))
            continue
        headers.append(header)
        files.append(file)
    if not files:
        first, first_error = left_out[0]
        raise TraceFormatError(
            f"none of the {len(paths)} rank files could be read; the first: {first_error}", path=shown(first)
        )
    messages = [
        f"{shown(path)}: rank file left out, it cannot be read ({exc}); the other {len(files)} rank file(s) were loaded"
        for path, exc in left_out
    ]
    kept, job_messages = one_job(
        [
            RankFile(f.path, h.distributedInfo, device_names(h.deviceProperties), _base_time_ns(h))
            for f, h in zip(files, headers)
        ]
    )
    files, headers = [files[i] for i in kept], [headers[i] for i in kept]
    messages += job_messages
    messages += [m for f, h in zip(files, headers) if (m := rank_problem(f.path, h.distributedInfo))]
    ranks, rank_messages = assign_ranks([f.path for f in files], [declared_rank(h.distributedInfo) for h in headers])
    messages += rank_messages
    for message in messages:
        warnings.warn(message, TraceWarning, stacklevel=3)
    for file, rank in zip(files, ranks):
        file.rank = rank
    return TraceData(assemble(files), _meta(files, headers, options, messages))


def _base_time_ns(header: TraceHeader) -> int | None:
    base = header.baseTimeNanoseconds
    return int(base) if type(base) is int and abs(base) < 2**63 else None


def _load_file(
    path: str,
    options: LoadOptions,
    decode_workers: int | None = None,
) -> tuple[TraceHeader, FileTables]:
    try:
        return _read_file(path, options, decode_workers)
    except TraceFormatError:
        # torch's exporter leaves quotes in names unescaped (record_function('attn "qkv"')): read a mended copy
        from workbench.trace.repair import repair_unescaped_quotes

        repaired = repair_unescaped_quotes(path)
        if repaired is None:
            raise
    try:
        header, file = _read_file(str(repaired.path), options, decode_workers)
    finally:
        repaired.path.unlink(missing_ok=True)
    file.path = path
    file.notes.append(repaired.note(shown(path)))
    return header, file


def _read_file(
    path: str,
    options: LoadOptions,
    decode_workers: int | None = None,
) -> tuple[TraceHeader, FileTables]:
    header, chunks = decode_file(path)
    issues = Issues(path)
    file = build_file(header, chunks, options, issues, decode_workers)
    issues.emit()
    file.warnings = list(issues.messages)
    file.notes = list(issues.notes)
    return header, file


def _meta(
    files: list[FileTables], headers: list[TraceHeader], options: LoadOptions, rank_messages: list[str]
) -> TraceMeta:
    props = {
        f.rank: tuple(h.deviceProperties) if isinstance(h.deviceProperties, list) else ()
        for f, h in zip(files, headers)
    }
    dist = {f.rank: dict(h.distributedInfo) for f, h in zip(files, headers) if isinstance(h.distributedInfo, dict)}
    base = {
        f.rank: int(h.baseTimeNanoseconds)
        for f, h in zip(files, headers)
        if type(h.baseTimeNanoseconds) is int and abs(h.baseTimeNanoseconds) < 2**63
    }
    return TraceMeta(
        files=tuple(f.path for f in files),
        ranks=tuple(sorted(f.rank for f in files)),
        file_ranks={f.path: f.rank for f in files},
        origins_ns={f.rank: f.origin_ns for f in files},
        device_properties=props,
        distributed_info=dist,
        process_names={f.rank: f.names["process"] for f in files},
        thread_names={f.rank: f.names["thread"] for f in files},
        options=_options_dict(options),
        warnings=tuple(w for f in files for w in f.warnings) + tuple(rank_messages),
        notes=tuple(n for f in files for n in f.notes),
        base_time_ns=base,
    )
