"""Which files a trace source names, each checked before it is opened.

A source is a path (``str`` or ``os.PathLike``) to a trace file or to a folder of rank files, or
a list of trace file paths. Anything else, and every path that cannot be a readable regular file
(missing, a symlink loop, too long, a NUL in it, a FIFO, a device such as ``/dev/zero``, no read
permission), is a ``TraceFormatError`` naming the path and saying what to do. Special files are
refused from ``os.stat`` alone: a FIFO without a writer would block ``open`` for ever, and a
character device would stream without end.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence

from workbench.errors import TraceFormatError

TRACE_SUFFIXES = (".json", ".json.gz")
RUN_SUMMARY = "summary.json"  # the run summary ``workbench profile`` writes beside its rank traces: not a trace
_SOURCE_HINT = "pass a trace file, a folder of rank files, or a list of trace files (str or pathlib.Path)"


def trace_paths(source: object) -> list[str]:
    """The files named by a path, a folder (its trace files, sorted) or a list of paths, each
    checked to be a readable regular file."""
    if isinstance(source, (str, os.PathLike)):
        path = _as_path(source)
        if _is_dir(path):
            return _folder(path)
        check_file(path)
        return [path]
    if isinstance(source, (bytes, bytearray, memoryview)):
        raise TraceFormatError(
            f"load_trace got {type(source).__name__}, not a path; {_SOURCE_HINT} "
            "(JSON text already in memory: write it to a .json file first)"
        )
    if not isinstance(source, Sequence):
        raise TraceFormatError(f"load_trace got {type(source).__name__} ({_short(source)}), not a path; {_SOURCE_HINT}")
    items = list(source)
    if not items:
        raise TraceFormatError(f"load_trace got an empty list of trace paths; {_SOURCE_HINT}")
    paths = []
    for i, item in enumerate(items):
        if not isinstance(item, (str, os.PathLike)):
            raise TraceFormatError(
                f"item #{i} of the list of trace paths is {type(item).__name__} "
                f"({_short(item)}), not a path; list only trace file paths"
            )
        path = _as_path(item)
        if _is_dir(path):
            raise TraceFormatError(
                f"item #{i} of the list of trace paths is a folder; pass the folder "
                "itself (not inside a list) to load its rank files, or list its files",
                path=_shown(path),
            )
        check_file(path)
        paths.append(path)
    return paths


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _as_path(item: str | os.PathLike) -> str:
    try:
        path = os.fspath(item)
    except TypeError as exc:
        raise TraceFormatError(f"not a usable path ({exc}); {_SOURCE_HINT}") from None
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if "\x00" in path:
        raise TraceFormatError(
            "the path holds a NUL character (\\x00), which no file name can; check how the path was built",
            path=_shown(path),
        )
    if not path:
        raise TraceFormatError(f"the path is empty; {_SOURCE_HINT}")
    return path


def _shown(path: str) -> str:
    """The path as it can be printed: a file name that is not UTF-8 keeps its bytes as \\x.. escapes."""
    try:
        path.encode("utf-8")
        return path if len(path) <= 300 else path[:150] + "..." + path[-100:]
    except UnicodeEncodeError:
        return os.fsencode(path).decode("utf-8", "backslashreplace")


def _stat(path: str) -> os.stat_result:
    try:
        return os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise TraceFormatError(
                "the path is a symbolic link to a file that does not exist; fix or remove the link", path=_shown(path)
            ) from None
        raise TraceFormatError("trace file does not exist; check the path", path=_shown(path)) from None
    except PermissionError:
        raise _unreadable(path, "a folder on the path cannot be searched") from None
    except OSError as exc:
        raise _os_error(path, exc) from None


def _os_error(path: str, exc: OSError) -> TraceFormatError:
    if exc.errno == errno.ELOOP:
        return TraceFormatError(
            "the path is a loop of symbolic links (a link that points back to "
            "itself); fix the link to point at the trace file",
            path=_shown(path),
        )
    if exc.errno == errno.ENAMETOOLONG:
        return TraceFormatError(
            f"the path is too long for the file system ({len(path)} characters); "
            "check how the path was built, or move the trace to a shorter path",
            path=_shown(path),
        )
    if exc.errno in (errno.EACCES, errno.EPERM):
        return _unreadable(path, "no permission to read it")
    if exc.errno == errno.ENOTDIR:
        return TraceFormatError(
            "a part of the path that should be a folder is a file; check the path", path=_shown(path)
        )
    return TraceFormatError(
        f"cannot read the path ({exc.strerror or exc}); check that it exists and is readable", path=_shown(path)
    )


def _unreadable(path: str, why: str) -> TraceFormatError:
    return TraceFormatError(
        f"permission denied: {why}; make it readable (chmod u+r, or the folder u+rx) "
        "or copy the trace somewhere you can read",
        path=_shown(path),
    )


def _is_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False  # check_file says what is wrong


_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def check_file(path: str) -> os.stat_result:
    """The path's stat if it is a readable regular file; else a TraceFormatError saying why.
    Decided without opening it."""
    info = _stat(path)
    if stat.S_ISDIR(info.st_mode):
        raise TraceFormatError(
            "expected a trace file, got a folder; pass the folder as the whole source to load its rank files",
            path=_shown(path),
        )
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a regular file")
        target = os.path.realpath(path)
        via = f" (a link to {_shown(target)})" if target != os.path.abspath(path) else ""
        raise TraceFormatError(
            f"the path is {kind}{via}, not a trace file; it was not opened (it could "
            "block or never end); save the trace to a regular file and load that",
            path=_shown(path),
        )
    if not os.access(path, os.R_OK):
        raise _unreadable(path, "no permission to read the file")
    return info


def _folder(path: str) -> list[str]:
    if not os.access(path, os.R_OK | os.X_OK):
        raise _unreadable(path, "no permission to list the folder")
    try:
        names = os.listdir(path)
    except OSError as exc:
        raise _os_error(path, exc) from None
    found = []
    for name in sorted(names):
        if not name.endswith(TRACE_SUFFIXES) or name == RUN_SUMMARY:
            continue
        full = os.path.join(path, name)
        try:
            mode = os.stat(full).st_mode
        except OSError as exc:
            # a dangling or looping link among the files: not a rank file, and said so
            _warn_left_out(full, f"it cannot be followed ({exc.strerror or type(exc).__name__})")
            continue
        if stat.S_ISREG(mode):
            found.append(full)
        elif not stat.S_ISDIR(mode):
            kind = next((what for test, what in _KINDS if test(mode)), "not a regular file")
            _warn_left_out(full, f"it is {kind}, not a trace file (not opened: it could block or never end)")
    if not found:
        raise TraceFormatError(
            "the folder has no .json or .json.gz trace files; pass a trace file or a folder of rank files",
            path=_shown(path),
        )
    if RUN_SUMMARY in names:
        _warn_if_incomplete(os.path.join(path, RUN_SUMMARY))
    elif any(n.startswith("rank-") and n.endswith(".status") for n in names):
        import warnings

        from workbench.errors import TraceWarning

        # rank status files are written by ``workbench profile`` / ``wb.profile_distributed``, whose
        # summary comes first (provisional) and last: a folder with them and no summary was cut short
        warnings.warn(
            f"{_shown(path)}: an incomplete profiled run (rank status files but no {RUN_SUMMARY}: "
            "the run was stopped before it could write its summary); the traces here may be missing "
            "or partial",
            TraceWarning,
            stacklevel=3,
        )
    return found


def _warn_left_out(path: str, why: str) -> None:
    import warnings

    from workbench.errors import TraceWarning

    warnings.warn(f"{_shown(path)}: left out of the folder: {why}", TraceWarning, stacklevel=4)


def _warn_if_incomplete(summary_path: str) -> None:
    """A folder written by ``workbench profile`` / ``wb.profile_distributed`` holds its run summary
    (written last): say so when the run did not finish on every rank, so a partial folder is not taken
    for a whole one."""
    import json
    import warnings

    from workbench.errors import TraceWarning

    try:
        with open(summary_path, encoding="utf-8") as fh:
            summary = json.load(fh)
    except (OSError, ValueError):
        return
    if not isinstance(summary, dict) or summary.get("complete", True) is not False:
        return
    why = summary.get("reason") or "not every rank finished"
    warnings.warn(
        f"{_shown(os.path.dirname(summary_path))}: an incomplete profiled run ({why}); "
        "the traces of the ranks that finished are loaded, the others are missing or partial",
        TraceWarning,
        stacklevel=4,
    )


def open_checked(path: str):
    """Open a checked trace file for reading, bytes mode; errors as TraceFormatError."""
    check_file(path)
    try:
        return open(path, "rb")
    except PermissionError:
        raise _unreadable(path, "no permission to read the file") from None
    except OSError as exc:
        raise _os_error(path, exc) from None


def shown(path: str) -> str:
    return _shown(path)
