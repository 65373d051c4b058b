"""Map a named function over the rank files of a trace, each rank where it is read; reduce elsewhere.

    outcome = map_ranks("workbench.api.rank_folder:summarize_rank_file", paths, {"cache": True})
    outcome.results[path]        # what the function returned for that rank file
    outcome.failures             # the rank files it failed on, each with why (partial=True)

The function is named ``"module:qualname"`` so any worker can import it (it and its arguments must be
picklable). It runs:

- in worker processes on this machine (``workers=None``: one per core, at most one per rank file,
  bounded by the free memory in ``/proc/meminfo`` against an estimate per rank from its size). Workers are
  forked from the caller where that is safe (Linux, the caller runs no other thread: a fork copies only
  the thread that calls it, so a lock another thread held would stay locked in the child; and torch is
  not imported: its thread pools and device state do not survive a fork), so they
  start with the caller's modules already imported (a fresh interpreter importing numpy, pandas and the
  analyses costs about a second, on every core at once); elsewhere (a notebook kernel runs threads) they
  start from the ``forkserver`` (else ``spawn``), which imports those modules once;
- on a Dask cluster (``client=`` a ``distributed.Client``; nothing here imports ``distributed``: the
  client is used through its ``submit`` / futures API);
- in this process (``workers=1``), one rank file after another.

Only the function's (small) results come back. A rank file the function cannot read
(``TraceFormatError``), a function that raises, and a worker process that dies (killed, out of
memory) each become a ``RankFailure`` naming the rank file: ``partial=False`` (the default) raises
``RankMapError`` listing every failure, ``partial=True`` returns the other ranks' results with the
failures named. Nothing is dropped silently. When a worker process dies, every rank that was running
in the pool is retried alone in a fresh process, so the rank whose worker dies is the one named.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from workbench.errors import InvalidArgumentError, TraceFormatError, WorkbenchError
from workbench.trace.paths import shown

if TYPE_CHECKING:  # only its futures API is used; distributed is an optional extra
    from distributed import Client

# a rank's peak memory while it is read and analysed, per byte of its (uncompressed) JSON; measured:
# 1.05 GB of JSON peaked at 0.73 GB (benchmarks/ingest.py), analyses included
PEAK_BYTES_PER_JSON_BYTE = 1.0
WORKER_BASE_BYTES = 200 << 20  # an idle worker: Python, numpy, pandas, pyarrow imported
GZIP_RATIO_GUESS = 10  # JSON bytes per gzip byte, where the gzip trailer cannot say


class RankMapError(WorkbenchError):
    """The map failed on one or more rank files (``failures`` names each, with why)."""

    def __init__(self, failures: Sequence[RankFailure], total: int):
        lines = "; ".join(f.describe() for f in failures[:8])
        more = f"; and {len(failures) - 8} more" if len(failures) > 8 else ""
        super().__init__(
            f"{len(failures)} of {total} rank file(s) failed: {lines}{more}. Pass partial=True to "
            "keep the other ranks' results (the failed rank files are then named in a warning)"
        )
        self.failures = tuple(failures)


class SchedulerError(WorkbenchError):
    """A Dask scheduler could not be reached, or the cluster could not run the map."""


@dataclass(frozen=True)
class RankFailure:
    """One rank file the map failed on. ``kind``: ``"unreadable"`` (the file is not a trace it can
    read: a ``TraceFormatError``), ``"worker_died"`` (the process running it ended: killed, out of
    memory), ``"failed"`` (the function raised something else)."""

    path: str
    kind: str
    message: str

    def describe(self) -> str:
        what = {
            "unreadable": "cannot be read",
            "worker_died": "its worker process died",
            "failed": "the per-rank function failed",
        }[self.kind]
        return f"rank file {shown(self.path)}: {what} ({self.message})"


@dataclass(frozen=True)
class RankMapOutcome:
    """The map's results per rank file (in the order of the paths), its failures, and where it ran."""

    results: dict[str, object]
    failures: tuple[RankFailure, ...]
    workers: int
    where: str  # "this process", "processes", "dask"


def resolve(function: str) -> Callable[..., object]:
    """The function a ``"module:qualname"`` name refers to."""
    module_name, sep, qualname = function.partition(":")
    if not sep or not module_name or not qualname:
        raise InvalidArgumentError(
            f"a mapped function is named 'module:qualname' (an importable, picklable function), got {function!r}"
        )
    target: object = importlib.import_module(module_name)
    for part in qualname.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise InvalidArgumentError(f"{function!r} is not callable")
    return target


def run_named(
    function: str, path: str, kwargs: Mapping[str, object], environment: Mapping[str, str | None] | None = None
) -> object:
    """What a worker runs: ``function(path, **kwargs)``, with the caller's ``environment`` variables set
    (a forkserver worker has the environment of the moment the server started, not the caller's now)."""
    for name, value in (environment or {}).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    return resolve(function)(path, **dict(kwargs))


PASSED_ENVIRONMENT = ("XDG_CACHE_HOME", "HOME")  # and every WORKBENCH_* variable (the cache folder, its limit)


def caller_environment() -> dict[str, str | None]:
    """The variables a local worker takes from the caller (None: unset in the caller)."""
    names = set(PASSED_ENVIRONMENT) | {n for n in os.environ if n.startswith("WORKBENCH_")}
    names |= {"WORKBENCH_CACHE_DIR", "WORKBENCH_CACHE_MAX_BYTES"}
    return {name: os.environ.get(name) for name in sorted(names)}


# --- how many workers -----------------------------------------------------------------------
def cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def available_memory_bytes() -> int | None:
    """``MemAvailable`` from /proc/meminfo (None where there is none)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def json_bytes(path: str) -> int:
    """The rank file's JSON size: its size, or for gzip the size its trailer states."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as fh:
            if fh.read(2) != b"\x1f\x8b":
                return size
            if size < 18:
                return size
            fh.seek(-4, os.SEEK_END)
            stated = int.from_bytes(fh.read(4), "little")  # the size mod 2**32
    except OSError:
        return 0
    guess = size * GZIP_RATIO_GUESS
    while stated and stated + (1 << 32) <= guess:  # a file of 4 GiB or more wraps around
        stated += 1 << 32
    return stated if stated >= size else guess


def estimate_rank_bytes(path: str) -> int:
    """Peak memory a worker needs for one rank file, from its size."""
    return WORKER_BASE_BYTES + int(PEAK_BYTES_PER_JSON_BYTE * json_bytes(path))


def worker_count(paths: Sequence[str], requested: int | None = None) -> int:
    """Workers for ``paths``: ``requested``, or one per core; never more than the rank files, and no more
    than the free memory holds at the largest rank's estimate (at least one)."""
    if requested is not None:
        if type(requested) is not int or requested < 1:
            raise InvalidArgumentError(
                f"workers must be a whole number >= 1 (or None for every core), got {requested!r}"
            )
        return max(1, min(requested, len(paths)))
    count = min(cores(), len(paths))
    free = available_memory_bytes()
    if free is not None and paths:
        largest = max(estimate_rank_bytes(p) for p in paths)
        count = min(count, max(1, free // largest))
    return max(1, count)


# --- the map --------------------------------------------------------------------------------
def map_ranks(
    function: str,
    paths: Sequence[str],
    kwargs: Mapping[str, object] | None = None,
    *,
    workers: int | None = None,
    client: Client | None = None,
    partial: bool = False,
) -> RankMapOutcome:
    """``function(path, **kwargs)`` for every rank file; see the module docstring."""
    if function.startswith("__main__:"):
        raise InvalidArgumentError(
            f"{function!r}: a mapped function must live in an importable module (workers "
            "do not import the main script); move it into a module"
        )
    resolve(function)  # a bad name fails here, not once per rank in the workers
    paths = list(paths)
    if not paths:
        raise InvalidArgumentError("map_ranks got no rank files")
    arguments = dict(kwargs or {})
    if client is not None:
        values, failures = _on_dask(client, function, paths, arguments)
        where, count = "dask", len(paths)
    else:
        count = worker_count(paths, workers)
        if count == 1:
            values, failures = _here(function, paths, arguments)
            where = "this process"
        else:
            values, failures = _in_processes(function, paths, arguments, count)
            where = "processes"
    ordered = [f for p in paths for f in failures if f.path == p]
    if ordered and not partial:
        raise RankMapError(ordered, len(paths))
    return RankMapOutcome({p: values[p] for p in paths if p in values}, tuple(ordered), count, where)


def _failure(path: str, exc: BaseException) -> RankFailure:
    if isinstance(exc, TraceFormatError):
        return RankFailure(path, "unreadable", str(exc))
    if isinstance(exc, BrokenProcessPool) or type(exc).__name__ == "KilledWorker":
        return RankFailure(path, "worker_died", f"{type(exc).__name__}: {exc}")
    return RankFailure(path, "failed", f"{type(exc).__name__}: {exc}")


def _here(function: str, paths: list[str], kwargs: dict) -> tuple[dict[str, object], list[RankFailure]]:
    values, failures = {}, []
    for path in paths:
        try:
            values[path] = run_named(function, path, kwargs)
        except Exception as exc:  # noqa: BLE001 (each rank's failure is reported, none is dropped)
            failures.append(_failure(path, exc))
    return values, failures


FORK_UNSAFE_MODULES = ("torch",)  # their native thread pools and device state do not survive a fork


def fork_is_safe() -> bool:
    """Whether worker processes may be forked from this one: Linux, no thread but this one (a forked
    child holds only the forking thread; a lock held by another thread, in logging or an allocator,
    would never be released there), and none of FORK_UNSAFE_MODULES imported."""
    return (
        sys.platform.startswith("linux")
        and "fork" in multiprocessing.get_all_start_methods()
        and threading.active_count() == 1
        and not any(name in sys.modules for name in FORK_UNSAFE_MODULES)
    )


@contextmanager
def fork_warning_silenced() -> Iterator[None]:
    """Python 3.12+ warns (DeprecationWarning) at every fork from a process with more than one OS thread,
    and numpy's and pandas' idle native pools are such threads whenever they are imported. A fork that
    ``fork_is_safe`` allowed (no other Python thread, no torch) only decodes in the child, so that
    warning, and only it, is silenced while workers are forked."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r".*use of fork\(\) may lead to deadlocks", category=DeprecationWarning
        )
        yield


def _context(function: str) -> multiprocessing.context.BaseContext:
    """fork where it is safe (``fork_is_safe``: the workers start at once, with the caller's modules
    imported); else forkserver where there is one (the server imports the function's module once, and each
    worker forks from it with that module loaded); else spawn."""
    if fork_is_safe():
        return multiprocessing.get_context("fork")
    if "forkserver" in multiprocessing.get_all_start_methods() and sys.platform != "darwin":
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([__name__, function.partition(":")[0]])  # used when the server starts
        return context
    return multiprocessing.get_context("spawn")


@contextmanager
def _main_not_reimported() -> Iterator[None]:
    """Workers started meanwhile do not import the caller's main script again.

    A spawn or forkserver worker imports ``__main__`` from its path before it runs anything, so a
    script without an ``if __name__ == "__main__":`` guard would load the trace again in every worker
    (multiprocessing refuses with "An attempt has been made to start a new process before the current
    process has finished its bootstrapping phase"). The mapped function is named by module, never in
    ``__main__``, so the workers do not need it: its path and spec are hidden while they start."""
    main = sys.modules.get("__main__")
    saved = {
        name: main.__dict__[name] for name in ("__file__", "__spec__") if main is not None and name in main.__dict__
    }
    try:
        if main is not None:
            for name in saved:
                setattr(main, name, None) if name == "__spec__" else delattr(main, name)
        yield
    finally:
        if main is not None:
            for name, value in saved.items():
                setattr(main, name, value)


def _pool(count: int, function: str) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(max_workers=count, mp_context=_context(function))


def _in_processes(
    function: str, paths: list[str], kwargs: dict, count: int
) -> tuple[dict[str, object], list[RankFailure]]:
    with _main_not_reimported():  # workers start on submit, one at a time: hidden the whole time
        return _pooled(function, paths, kwargs, count)


def _pooled(function: str, paths: list[str], kwargs: dict, count: int) -> tuple[dict[str, object], list[RankFailure]]:
    values: dict[str, object] = {}
    failures: list[RankFailure] = []
    broken: list[str] = []
    with _pool(count, function) as pool:
        environment = caller_environment()
        futures: dict[Future, str] = {pool.submit(run_named, function, p, kwargs, environment): p for p in paths}
        for future in as_completed(futures):
            path = futures[future]
            try:
                values[path] = future.result()
            except BrokenProcessPool:
                broken.append(path)
            except Exception as exc:  # noqa: BLE001
                failures.append(_failure(path, exc))
    for path in sorted(broken, key=paths.index):  # alone in a fresh process: the rank that dies is named
        with _pool(1, function) as pool:
            try:
                values[path] = pool.submit(run_named, function, path, kwargs, environment).result()
            except BrokenProcessPool:
                failures.append(RankFailure(path, "worker_died", _died_message(path)))
            except Exception as exc:  # noqa: BLE001
                failures.append(_failure(path, exc))
    return values, failures


def _died_message(path: str) -> str:
    need = estimate_rank_bytes(path)
    free = available_memory_bytes()
    memory = f"; it needs about {need / 2**30:.1f} GiB" + (f", {free / 2**30:.1f} GiB are free" if free else "")
    return (
        "the process reading it ended abruptly (killed by a signal, or by the kernel's out-of-memory killer"
        f"{memory}); read it alone (workers=1) to see why, or give it more memory"
    )


def _on_dask(
    client: Client, function: str, paths: list[str], kwargs: dict
) -> tuple[dict[str, object], list[RankFailure]]:
    try:
        futures = {client.submit(run_named, function, p, kwargs, pure=False): p for p in paths}
    except Exception as exc:  # noqa: BLE001 (a closed client, a scheduler gone)
        raise SchedulerError(
            f"the Dask cluster could not take the map ({type(exc).__name__}: {exc}); check "
            "that its scheduler runs and the client is connected"
        ) from None
    values: dict[str, object] = {}
    failures: list[RankFailure] = []
    for future, path in futures.items():
        try:
            values[path] = future.result()
        except Exception as exc:  # noqa: BLE001
            failures.append(_failure(path, exc))
        finally:
            future.release()
    return values, failures


__all__ = [
    "RankFailure",
    "RankMapError",
    "RankMapOutcome",
    "SchedulerError",
    "available_memory_bytes",
    "cores",
    "estimate_rank_bytes",
    "fork_is_safe",
    "fork_warning_silenced",
    "map_ranks",
    "resolve",
    "run_named",
    "worker_count",
]
