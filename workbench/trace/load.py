"""``read_trace``: files -> decoded events -> per-rank columns -> one ``TraceData``."""
from __future__ import annotations

import gc
import os
import warnings
from collections.abc import Sequence

from workbench.errors import TraceWarning
from workbench.trace.build import FileTables, LoadOptions, build_file
from workbench.trace.data import TraceData, TraceMeta
from workbench.trace.decode import TraceHeader, decode_file
from workbench.trace.issues import Issues
from workbench.trace.ranks import assign_ranks, declared_rank, trace_paths
from workbench.trace.tables import assemble


def read_trace(source: str | os.PathLike | Sequence[str | os.PathLike], *, hta_compat: bool = False,
               round_ns: bool | None = None, drop_last_step: bool | None = None) -> TraceData:
    """Read a Kineto/Chrome trace: a ``.json``/``.json.gz`` file, a folder of rank files, or a list.

    The tables only; ``wb.load_trace`` (``workbench.facade``) returns the same tables as a
    ``Trace`` whose methods run the analyses and the diagnosis.

    Defaults keep every event and every nanosecond. ``hta_compat=True`` reproduces Holistic
    Trace Analysis's reading (both options below); each can also be set alone:
    ``round_ns`` (ts = ceil(ts), end = floor(ts + dur), in µs) and ``drop_last_step`` (with two
    or more ``ProfilerStep#`` annotations, drop the last step as HTA does).

    Raises TraceFormatError for a file that cannot be read as a trace; warns (TraceWarning)
    where the trace is usable but something was odd, saying what was done.
    """
    collecting = gc.isenabled()
    gc.disable()  # millions of short-lived objects, no cycles: collections would only cost time
    try:
        return _load(source, hta_compat, round_ns, drop_last_step)
    finally:
        if collecting:
            gc.enable()


def _load(source: str | os.PathLike | Sequence[str | os.PathLike], hta_compat: bool,
          round_ns: bool | None, drop_last_step: bool | None) -> TraceData:
    options = LoadOptions(round_ns=hta_compat if round_ns is None else round_ns,
                          drop_last_step=hta_compat if drop_last_step is None else drop_last_step)
    paths = trace_paths(source)
    files: list[FileTables] = []
    headers: list[TraceHeader] = []
    for path in paths:
        header, chunks = decode_file(path)
        headers.append(header)
        issues = Issues(path)
        files.append(build_file(header, chunks, options, issues))
        issues.emit()
        files[-1].warnings = list(issues.messages)
        files[-1].notes = list(issues.notes)
    ranks, rank_messages = assign_ranks(paths, [declared_rank(h.distributedInfo) for h in headers])
    for message in rank_messages:
        warnings.warn(message, TraceWarning, stacklevel=2)
    for file, rank in zip(files, ranks):
        file.rank = rank
    return TraceData(assemble(files), _meta(files, headers, options, rank_messages))


def _meta(files: list[FileTables], headers: list[TraceHeader], options: LoadOptions,
          rank_messages: list[str]) -> TraceMeta:
    props = {f.rank: tuple(h.deviceProperties) if isinstance(h.deviceProperties, list) else ()
             for f, h in zip(files, headers)}
    dist = {f.rank: dict(h.distributedInfo) for f, h in zip(files, headers)
            if isinstance(h.distributedInfo, dict)}
    base = {f.rank: int(h.baseTimeNanoseconds) for f, h in zip(files, headers)
            if type(h.baseTimeNanoseconds) is int}
    return TraceMeta(
        files=tuple(f.path for f in files), ranks=tuple(sorted(f.rank for f in files)),
        file_ranks={f.path: f.rank for f in files}, origins_ns={f.rank: f.origin_ns for f in files},
        device_properties=props, distributed_info=dist,
        process_names={f.rank: f.names["process"] for f in files},
        thread_names={f.rank: f.names["thread"] for f in files},
        options={"round_ns": options.round_ns, "drop_last_step": options.drop_last_step},
        warnings=tuple(w for f in files for w in f.warnings) + tuple(rank_messages),
        notes=tuple(n for f in files for n in f.notes), base_time_ns=base)
