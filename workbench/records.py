"""The layer-free part of one reader/writer discipline for every file workbench writes and reads again.

Every layer may import it (standard library and ``workbench.errors`` only): the study's files
(``workbench.study.records``, which adds JSON lines and typed fields over this), run bundles
(``workbench.capture.bundle``) and the trace cache (``workbench.trace.cache``). Each function
raises the error type its caller passes (``error=BundleError``, ``error=StudyError``; by default
``RecordFileError``), with a message that names the file and says what to do.

    st = check_regular(path, "run record", error=BundleError)     # None: missing; refused: not a file
    data = read_bytes(path, "run record", max_bytes=1 << 26, error=BundleError)
    write_atomic(path, text, "run record", error=BundleError)      # temp file + fsync + rename
    with locked(path, "study rounds", error=StudyError) as log:   # read and append under one lock
        log.append_bytes(b"...\\n")
    check_writable(folder, "run bundle folder", error=BundleError, action="nothing was saved")

Reading:
    * the path must be a ``str`` or ``os.PathLike`` (``as_path``);
    * before opening, a path that is not a regular file (a folder, a FIFO, a device, a socket, a
      symlink to one of these, to nothing, or a symlink loop) is refused, saying which, and so is
      a file over ``max_bytes``: reading it could block, never end or exhaust the memory. The file
      is opened non-blocking and checked again on the open descriptor, and at most
      ``max_bytes + 1`` bytes are read;
    * ``at``: an open folder descriptor; the file is then looked up by its name in that folder
      (``path`` is what messages show), so that a folder renamed or replaced meanwhile is read
      as one folder, never half of one and half of another;
    * readers take a shared lock while reading (``lock=True``), so a record being appended under
      ``locked`` is never read half-way.

Writing:
    * ``locked``: the file (created if missing, its folder too) under an exclusive lock
      (``fcntl.flock``; on a system without it, a ``<file>.lock`` created exclusively beside the
      file, removed after); waits are bounded (``timeout``): past it, an error, never a hang;
    * ``write_atomic``: a whole document written to a temporary file beside the target, fsynced,
      renamed over it: a reader sees the old file or the new one, never a part;
    * ``check_writable``: a probe file is created in the folder (made if missing) and removed, so
      that a folder that cannot be written is said before any long work, not after.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from workbench.errors import WorkbenchError

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows: the lock-file fallback below
    fcntl = None  # type: ignore[assignment]

MAX_BYTES = 256 * 1024 * 1024  # the default bound on a file read whole
UNBOUNDED = 1 << 62  # for a file checked but not read whole (copied in chunks, read by its own reader)
LOCK_TIMEOUT_S = 60.0  # the default longest wait for another writer's lock
KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class RecordFileError(WorkbenchError):
    """A file workbench writes and reads again cannot be used (the error where a caller names none)."""


Error = Callable[[str], Exception]


# -- paths ---------------------------------------------------------------------------------------
def as_path(path: Any, what: str, *, error: Error = RecordFileError) -> Path:
    """``path`` as a Path: a str or os.PathLike, else an error naming what was given."""
    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
        raise error(f"the {what} path must be a str or a path; got {type(path).__name__} {path!r:.80}")
    try:
        p = Path(path)
    except TypeError:  # an os.PathLike whose __fspath__ gives no str
        raise error(f"the {what} path must be a str or a path; got {type(path).__name__} {path!r:.80}") from None
    if not str(p).strip():
        raise error(f"the {what} path is empty")
    if "\x00" in str(p):
        raise error(f"the {what} path {str(p)!r} holds a NUL character; check how the path was built")
    return p


def file_kind(mode: int) -> str | None:
    """What a stat mode is when it is not a regular file ("a folder", "a FIFO (named pipe)", ...)."""
    return next((name for test, name in KINDS if test(mode)), None if stat.S_ISREG(mode) else "not a regular file")


def _name(path: Path, at: int | None) -> str | Path:
    return path.name if at is not None else path


def check_regular(
    path: Path,
    what: str,
    *,
    max_bytes: int = MAX_BYTES,
    error: Error = RecordFileError,
    at: int | None = None,
) -> os.stat_result | None:
    """The file's stat, or None where it does not exist; an error for anything that is not a
    regular file (a folder, FIFO, device, socket, a symlink to one, to nothing, a symlink loop)
    or is over ``max_bytes``. Nothing is opened."""
    name = _name(path, at)
    try:
        st = os.stat(name, dir_fd=at)
    except FileNotFoundError:
        if os.path.islink(path) if at is None else _is_link(name, at):
            target = _readlink(name, at)
            raise error(
                f"{what} {str(path)!r} is a symlink to nothing ({target!r}); point it at a "
                f"file or remove it; nothing was read or written"
            ) from None
        return None
    except NotADirectoryError:
        raise error(f"{what} {str(path)!r}: a folder on its path is a file; nothing was read or written") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise error(
                f"{what} {str(path)!r} is a symlink loop (its links lead back to themselves): refused "
                f"before opening it; remove the link or point it at a file; nothing was read or written"
            ) from None
        raise error(
            f"{what} {str(path)!r} cannot be examined ({exc.strerror or exc}); nothing was read or written"
        ) from None
    kind = file_kind(st.st_mode)
    if kind is not None:
        via = " (through a symlink)" if (os.path.islink(path) if at is None else _is_link(name, at)) else ""
        raise error(
            f"{what} {str(path)!r} is {kind}{via}, not a regular file: refused before opening it "
            f"(reading it could block or never end); point at the file itself; nothing was read or "
            f"written"
        )
    if st.st_size > max_bytes:
        raise error(
            f"{what} {str(path)!r} is {st.st_size} bytes, over the {max_bytes} bytes a {what} may "
            f"hold: it is not one workbench wrote (or has grown past use); split it or point at another "
            f"file; nothing was read"
        )
    return st


def _is_link(name: str | Path, at: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=at, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _readlink(name: str | Path, at: int | None) -> str:
    try:
        return os.readlink(name, dir_fd=at) if at is not None else os.readlink(name)
    except OSError:
        return "?"


def open_checked(
    path: Path,
    what: str,
    flags: int,
    max_bytes: int = MAX_BYTES,
    *,
    error: Error = RecordFileError,
    at: int | None = None,
) -> int:
    """An fd opened non-blocking, checked again on the descriptor (a path swapped after the check)."""
    flags |= getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(_name(path, at), flags, 0o644, dir_fd=at)
    except IsADirectoryError:
        raise error(f"{what} {str(path)!r} is a folder, not a file; nothing was read or written") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            check_regular(path, what, max_bytes=max_bytes, error=error, at=at)  # says which
        raise error(
            f"{what} {str(path)!r} cannot be opened ({exc.strerror or exc}); nothing was read or written"
        ) from None
    st = os.fstat(fd)
    if file_kind(st.st_mode) is not None or st.st_size > max_bytes:
        os.close(fd)
        check_regular(path, what, max_bytes=max_bytes, error=error, at=at)  # says which
        raise error(f"{what} {str(path)!r} changed while it was opened; try again")
    return fd


def pread(fd: int, size: int, offset: int) -> bytes:
    if hasattr(os, "pread"):
        return os.pread(fd, size, offset)
    os.lseek(fd, offset, os.SEEK_SET)  # pragma: no cover - Windows
    return os.read(fd, size)


def read_fd(fd: int, path: Path, what: str, max_bytes: int = MAX_BYTES, *, error: Error = RecordFileError) -> bytes:
    """Everything in the open file ``fd`` (from its start), at most ``max_bytes``: past it, an error."""
    chunks, total = [], 0
    while True:
        try:
            chunk = pread(fd, min(1 << 20, max_bytes + 1 - total), total)
        except OSError as exc:
            raise error(f"{what} {str(path)!r} cannot be read ({exc.strerror or exc}); nothing was read") from None
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        if total > max_bytes:
            raise error(
                f"{what} {str(path)!r} grew past the {max_bytes} bytes a {what} may hold while it was "
                f"read; nothing was read"
            )
    return b"".join(chunks)


# -- locks ---------------------------------------------------------------------------------------
def lock_fd(
    fd: int,
    path: Path,
    what: str,
    *,
    exclusive: bool,
    timeout: float = LOCK_TIMEOUT_S,
    error: Error = RecordFileError,
) -> None:
    """``flock`` the open file, waiting at most ``timeout`` seconds (then an error, never a hang).
    A filesystem without locks (or a system without ``fcntl``) is not locked."""
    if fcntl is None:  # pragma: no cover - Windows: ``locked`` uses a lock file instead
        return
    op = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB
    deadline, pause = time.monotonic() + timeout, 0.0005
    while True:
        try:
            fcntl.flock(fd, op)
            return
        except BlockingIOError:
            pass
        except OSError as exc:
            if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):  # a filesystem without locks
                return
            raise error(f"{what} {str(path)!r} cannot be locked ({exc.strerror or exc})") from None
        if time.monotonic() > deadline:
            raise error(
                f"{what} {str(path)!r}: another process has held its lock for over {timeout:.0f} s; "
                f"wait for it to finish (or end it) and try again; nothing was written"
            )
        time.sleep(pause)
        pause = min(pause * 2, 0.02)


@contextlib.contextmanager
def lockfile(
    path: Path, what: str, timeout: float = LOCK_TIMEOUT_S, *, error: Error = RecordFileError
) -> Iterator[None]:  # pragma: no cover - used where fcntl is missing
    """The fallback where ``fcntl`` is missing: ``<file>.lock`` created exclusively, removed after."""
    lock = path.with_name(path.name + ".lock")
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            break
        except FileExistsError:
            if time.monotonic() > deadline:
                raise error(
                    f"{what} {str(path)!r} is locked by {str(lock)!r} for over {timeout:.0f} s: another "
                    f"process writes it, or one crashed holding it (then remove that file)"
                ) from None
            time.sleep(0.01)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(lock)


# -- reading -------------------------------------------------------------------------------------
def read_bytes(
    path: Path,
    what: str,
    *,
    max_bytes: int = MAX_BYTES,
    error: Error = RecordFileError,
    timeout: float = LOCK_TIMEOUT_S,
    lock: bool = True,
    at: int | None = None,
) -> bytes | None:
    """The file's bytes (None where it does not exist), bounded, under a shared lock (``lock``)."""
    if check_regular(path, what, max_bytes=max_bytes, error=error, at=at) is None:
        return None
    try:
        fd = open_checked(path, what, os.O_RDONLY, max_bytes, error=error, at=at)
    except Exception:  # ``error``: a file removed between the check and the open is missing, not an error
        if not (os.path.lexists(path) if at is None else _lexists(path.name, at)):  # removed meanwhile
            return None
        raise
    try:
        if lock:
            lock_fd(fd, path, what, exclusive=False, timeout=timeout, error=error)
        return read_fd(fd, path, what, max_bytes, error=error)
    finally:
        os.close(fd)


def _lexists(name: str, at: int) -> bool:
    try:
        os.stat(name, dir_fd=at, follow_symlinks=False)
        return True
    except OSError:
        return False


# -- writing -------------------------------------------------------------------------------------
class LockedFile:
    """A file held under an exclusive lock: read what is there, append bytes."""

    def __init__(self, fd: int, path: Path, what: str, max_bytes: int, error: Error = RecordFileError) -> None:
        self.fd, self.path, self.what, self.max_bytes, self.error = fd, path, what, max_bytes, error

    def read(self) -> bytes:
        """The file's bytes as they are now (bounded by ``max_bytes``)."""
        return read_fd(self.fd, self.path, self.what, self.max_bytes, error=self.error)

    def append_bytes(self, data: bytes, *, own_line: bool = True) -> None:
        """Write ``data`` at the end with one ``write`` loop, fsynced. ``own_line``: a file whose last
        line lacks its newline (a crash mid-write) gets one first, so ``data`` starts a line."""
        if own_line:
            size = os.fstat(self.fd).st_size
            if size > 0 and pread(self.fd, 1, size - 1) != b"\n":
                data = b"\n" + data
        try:
            view = memoryview(data)
            while view:
                written = os.write(self.fd, view)
                view = view[written:]
            os.fsync(self.fd)
        except OSError as exc:
            raise self.error(
                f"{self.what} {str(self.path)!r} could not be written ({exc.strerror or exc}); the record was not added"
            ) from None


@contextlib.contextmanager
def locked(
    path: Any,
    what: str,
    *,
    max_bytes: int = MAX_BYTES,
    timeout: float = LOCK_TIMEOUT_S,
    error: Error = RecordFileError,
    factory: Callable[..., LockedFile] = LockedFile,
) -> Iterator[Any]:
    """The file at ``path`` (created if missing, its folder too), opened for appending, under an
    exclusive lock for as long as the ``with`` lasts: what is read and appended inside it is one
    step. ``factory(fd, path, what, max_bytes, error)`` makes the object yielded."""
    p = as_path(path, what, error=error)
    check_regular(p, what, max_bytes=max_bytes, error=error)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise error(
            f"the folder of {what} {str(p)!r} cannot be created ({exc.strerror or exc}); nothing was written"
        ) from None
    fd = open_checked(p, what, os.O_RDWR | os.O_APPEND | os.O_CREAT, max_bytes, error=error)
    try:
        if fcntl is not None:
            lock_fd(fd, p, what, exclusive=True, timeout=timeout, error=error)
            yield factory(fd, p, what, max_bytes, error)
        else:  # pragma: no cover
            with lockfile(p, what, timeout, error=error):
                yield factory(fd, p, what, max_bytes, error)
    finally:
        os.close(fd)  # releases the flock


def temp_name(path: Path, tag: str = "tmp") -> Path:
    """A name beside ``path`` no other writer uses: ``.<name>.<pid>.<random>.<tag>`` (hidden)."""
    return path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.{tag}")


def write_atomic(
    path: Path,
    data: str | bytes,
    what: str,
    *,
    error: Error = RecordFileError,
    mkdir: bool = True,
    action: str = "nothing was changed",
    commit: bool = True,
) -> Path:
    """Write a whole document: a temporary file beside it, fsynced, renamed over the target (a
    reader sees the old file or the new one, never a part; a failed write leaves the old one).
    ``commit=False``: the temporary file is left for the caller to rename (``commit``); its path
    is returned (the target's otherwise)."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    tmp = temp_name(path)
    try:
        if mkdir:
            path.parent.mkdir(parents=True, exist_ok=True)
        if os.path.isdir(path) and not os.path.islink(path):
            raise IsADirectoryError(errno.EISDIR, "a folder is in the way")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        if commit:
            os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise error(f"{what} {str(path)!r} could not be written ({exc.strerror or exc}); {action}") from None
    return path if commit else tmp


def copy_atomic(
    source: Path,
    target: Path,
    what: str,
    *,
    error: Error = RecordFileError,
    action: str = "nothing was changed",
    commit: bool = True,
) -> Path:
    """Copy a regular file ``source`` (refused otherwise, before it is opened) to ``target`` through
    a temporary file beside it, fsynced and renamed over the target. ``commit=False``: as in
    ``write_atomic``, the temporary file's path is returned and the rename left to the caller."""
    check_regular(source, what, max_bytes=UNBOUNDED, error=error)
    fd = open_checked(source, what, os.O_RDONLY, UNBOUNDED, error=error)
    tmp = temp_name(target)
    try:
        with os.fdopen(fd, "rb", closefd=False) as src, open(tmp, "xb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
            dst.flush()
            os.fsync(dst.fileno())
        if commit:
            os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise error(
            f"{what} {str(source)!r} could not be copied to {str(target)!r} ({exc.strerror or exc}); {action}"
        ) from None
    finally:
        os.close(fd)
    return target if commit else tmp


def commit(staged: Sequence[tuple[Path, Path]], what: str, *, error: Error = RecordFileError) -> None:
    """Rename each staged temporary file over its target, in order (the last one is the one that
    makes the whole visible: a reader that finds it finds the others). On a failure the temporary
    files not renamed yet are removed and an error says which target was not written."""
    for i, (tmp, target) in enumerate(staged):
        try:
            os.replace(tmp, target)
        except OSError as exc:
            discard(staged[i:])
            raise error(
                f"{what}: {str(target)!r} could not be written ({exc.strerror or exc}); "
                f"{'nothing was changed' if i == 0 else 'it holds part of the new files: write it again'}"
            ) from None


def discard(staged: Sequence[tuple[Path, Path]]) -> None:
    """Remove staged temporary files (a write given up)."""
    for tmp, _ in staged:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def check_writable(
    folder: Any,
    what: str,
    *,
    error: Error = RecordFileError,
    action: str = "nothing was written",
    fix: str = "make it writable or choose another folder",
) -> Path:
    """Refuse, before any long work, a folder that cannot be written: it is created if missing, a
    probe file is created in it and removed. Returns the folder as a Path."""
    f = as_path(folder, what, error=error)
    try:
        st = os.stat(f)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise error(f"the {what} {str(f)!r} is a symlink loop; remove the link or {fix}; {action}") from None
        st = None  # said by the probe below
    if st is not None and not stat.S_ISDIR(st.st_mode):
        kind = "a file" if stat.S_ISREG(st.st_mode) else file_kind(st.st_mode)
        raise error(f"the {what} {str(f)!r} is {kind}, not a folder; {action}")
    try:
        f.mkdir(parents=True, exist_ok=True)
        probe = f / f".workbench-write-check-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        os.unlink(probe)
    except OSError as exc:
        raise error(f"the {what} {str(f)!r} cannot be written ({exc.strerror or exc}): {fix}; {action}") from None
    return f


def check_appendable(
    path: Path,
    what: str,
    *,
    max_bytes: int = MAX_BYTES,
    error: Error = RecordFileError,
    action: str = "nothing was run",
) -> None:
    """Where ``path`` exists: it must be a regular file of at most ``max_bytes`` that opens for appending."""
    check_regular(path, what, max_bytes=max_bytes, error=error)
    if os.path.exists(path):
        try:
            os.close(open_checked(path, what, os.O_WRONLY | os.O_APPEND, UNBOUNDED, error=error))
        except Exception as exc:
            raise error(f"{exc}; {action}") from None


def is_directory(path: Path) -> bool:
    """Whether ``path`` is a folder (links followed); False for anything else, a loop included."""
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


__all__ = [
    "MAX_BYTES",
    "LOCK_TIMEOUT_S",
    "RecordFileError",
    "as_path",
    "file_kind",
    "check_regular",
    "open_checked",
    "pread",
    "read_fd",
    "lock_fd",
    "lockfile",
    "read_bytes",
    "LockedFile",
    "locked",
    "temp_name",
    "write_atomic",
    "copy_atomic",
    "commit",
    "discard",
    "UNBOUNDED",
    "check_writable",
    "check_appendable",
    "is_directory",
]
