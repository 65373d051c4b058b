"""Profiling a multi-process job: torch.profiler on every rank, one trace per rank, a run summary.

Two ways in, one folder layout out (``DIR/rank-{rank}.pt.trace.json``, ``DIR/rank-{rank}.status`` and,
written last, ``DIR/summary.json`` with ``complete``):

- ``workbench profile`` runs a script under torchrun; torchrun starts this module on every rank
  (``python -m workbench.capture.rank_entry SCRIPT ARGS``, configured through ``WORKBENCH_PROFILE_*``
  environment variables), which starts the profiler, runs the script with ``runpy`` and its own argv,
  stops the profiler and exports the rank's trace (``rank_main``);
- ``run_local`` spawns N local processes for a picklable function (``wb.profile_distributed``), each with
  its process group on a free loopback port and the profiler around the call.

A script marks its steps with ``step()`` (a no-op outside a profiled run); with a window
(``wait``/``warmup``/``active``) only those steps are recorded (``torch.profiler.schedule``).

This module writes traces; it never loads them (loading is the trace layer's, the Trace the face's).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from types import FrameType
from typing import TYPE_CHECKING, Any

from workbench.errors import InvalidArgumentError, ProfileError
from workbench.trace.rank_map import available_memory_bytes

if TYPE_CHECKING:
    from torch.profiler import profile as TorchProfiler

ENV_OUT = "WORKBENCH_PROFILE_DIR"
ENV_SCHEDULE = "WORKBENCH_PROFILE_SCHEDULE"  # "wait,warmup,active"; unset: the whole script
SUMMARY = "summary.json"
TRACE_NAME = "rank-{rank}.pt.trace.json"
STATUS_NAME = "rank-{rank}.status"
# Each local rank is a whole interpreter with torch loaded and its own threads: beyond this many per CPU
# core the ranks cannot keep up with each other's collectives, and the job only times out.
MAX_RANKS_PER_CPU = 4
RANK_MEMORY_BYTES = 300 * 2**20  # what one rank's interpreter with torch loaded needs, at least
TERMINATE_GRACE_S = 10.0  # after SIGTERM (each rank then exports what it recorded), before SIGKILL


@dataclass(frozen=True)
class Window:
    """Which steps are recorded: ``wait`` skipped, ``warmup`` traced and dropped, ``active`` kept."""

    wait: int = 0
    warmup: int = 0
    active: int = 0

    def __post_init__(self) -> None:
        for name in ("wait", "warmup", "active"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise InvalidArgumentError(f"{name} must be a whole number of steps >= 0, got {value!r}")
        if self.active < 1:
            raise InvalidArgumentError(
                "a step window needs active >= 1 (the steps recorded); without --active the whole script is profiled"
            )

    def to_env(self) -> str:
        return f"{self.wait},{self.warmup},{self.active}"

    @classmethod
    def from_env(cls, text: str | None) -> "Window | None":
        if not text:
            return None
        wait, warmup, active = (int(x) for x in text.split(","))
        return cls(wait, warmup, active)

    def to_dict(self) -> dict:
        return {"wait": self.wait, "warmup": self.warmup, "active": self.active}


# --- the limits of one machine ------------------------------------------------------------------
def check_world_size(nproc: int, backend: str | None = None) -> None:
    """Refuse a number of local ranks this machine cannot run, saying the rule."""
    if not isinstance(nproc, int) or isinstance(nproc, bool) or nproc < 1:
        raise InvalidArgumentError(f"the number of processes must be a whole number >= 1, got {nproc!r}")
    cpus = os.cpu_count() or 1
    if nproc > MAX_RANKS_PER_CPU * cpus:
        raise InvalidArgumentError(
            f"{nproc} processes on this machine is too many: it has {cpus} CPU core(s) and workbench runs at most "
            f"{MAX_RANKS_PER_CPU} ranks per core (each is an interpreter with torch and its own threads; more "
            f"cannot keep up in collectives); use {MAX_RANKS_PER_CPU * cpus} or fewer, or more nodes (--nnodes)"
        )
    available = available_memory_bytes()
    if available is not None and nproc * RANK_MEMORY_BYTES > available:
        raise InvalidArgumentError(
            f"{nproc} processes need at least {nproc * RANK_MEMORY_BYTES / 2**30:.1f} GiB "
            f"({RANK_MEMORY_BYTES // 2**20} MiB each for an interpreter with torch); this machine has "
            f"{available / 2**30:.1f} GiB available; use fewer processes"
        )
    if backend in ("nccl", "rccl"):
        import torch

        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if nproc > gpus:
            raise InvalidArgumentError(
                f"backend {backend!r} needs one GPU per rank: {nproc} rank(s), "
                f"{gpus} GPU(s) on this machine; use gloo for CPU ranks"
            )


# --- the output folder --------------------------------------------------------------------------
def prepare_out(out: str, force: bool = False) -> list[str]:
    """Make ``out`` ready for a new run; returns the files removed (``force``). A folder holding trace
    files or an earlier run is refused unless ``force``: traces of two runs are never mixed."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise InvalidArgumentError(f"--out {out!r} is a file, not a folder; give a folder for the rank traces")
    if not os.path.isdir(out):
        os.makedirs(out)
        return []
    ours = [n for n in sorted(os.listdir(out)) if _is_run_file(n)]
    if ours and not force:
        shown = ", ".join(ours[:4]) + (f" and {len(ours) - 4} more" if len(ours) > 4 else "")
        raise InvalidArgumentError(
            f"the output folder {out!r} already holds traces or an earlier run ({shown}); traces of two runs "
            "are never mixed: give another folder, or --force to delete those files first"
        )
    for name in ours:
        os.remove(os.path.join(out, name))
    return ours


def _is_run_file(name: str) -> bool:
    return (
        name.endswith((".json", ".json.gz"))
        or name.endswith(".status")
        or (name.startswith(".rank-") and name.endswith(".part"))
    )


# --- on each rank -------------------------------------------------------------------------------
class _Terminated(BaseException):
    """SIGTERM reached a profiled rank (a timeout, or torchrun stopping the job): export, then exit."""


class RankProfiler:
    """torch.profiler on one rank: ``start``, ``step`` once per step, ``stop`` exports the trace."""

    def __init__(self, out: str, rank: int, world_size: int, window: Window | None = None):
        self.out, self.rank, self.world_size, self.window = out, rank, world_size, window
        self.path = os.path.join(out, TRACE_NAME.format(rank=rank))
        self.steps = 0
        self.backend: str | None = None
        self._prof: Any = None
        self._exported = False

    def start(self) -> None:
        import torch
        from torch.profiler import ProfilerActivity, profile, schedule

        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        kwargs: dict[str, Any] = {}
        if self.window is not None:
            w = self.window
            kwargs["schedule"] = schedule(wait=w.wait, warmup=w.warmup, active=w.active, repeat=1)
            kwargs["on_trace_ready"] = self._export
        self._prof = profile(activities=activities, record_shapes=True, **kwargs)
        self._prof.start()

    def step(self) -> None:
        self.steps += 1
        self.note_backend()
        if self._prof is not None:
            self._prof.step()

    def note_backend(self) -> None:
        try:
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                self.backend = str(dist.get_backend())
        except Exception:  # noqa: BLE001 - a backend we cannot name is left unnamed
            pass

    def stop(self) -> str | None:
        """Stop the profiler and write the rank's trace; its path, or None when nothing was recorded
        (a window whose steps never came)."""
        self.note_backend()
        prof, self._prof = self._prof, None
        if prof is None:
            return self.path if self._exported else None
        prof.stop()
        if self.window is None:
            self._export(prof)
        return self.path if self._exported else None

    def _export(self, prof: TorchProfiler) -> None:
        part = os.path.join(self.out, f".rank-{self.rank}.part")
        prof.export_chrome_trace(part)
        self.timed_events = add_distributed_info(part, self.rank, self.world_size, self.backend)
        os.replace(part, self.path)
        self._exported = True


# the events a trace's reader counts as work (workbench.trace: ops, kernels, runtime calls, annotations)
WORK_CATEGORIES = frozenset(
    {
        "cpu_op",
        "user_annotation",
        "gpu_user_annotation",
        "kernel",
        "cuda_runtime",
        "cuda_driver",
        "gpu_memcpy",
        "gpu_memset",
        "python_function",
    }
)


def add_distributed_info(path: str, rank: int, world_size: int, backend: str | None) -> int:
    """Add ``distributedInfo`` (rank, world_size, backend) to an exported trace that lacks it (the
    exporter writes it only while a process group exists); returns how many timed events of work
    (``WORK_CATEGORIES``) the trace holds: 0 for a script that ran nothing under the profiler."""
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    events = data.get("traceEvents")
    timed = sum(
        1
        for e in (events if isinstance(events, list) else ())
        if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") in WORK_CATEGORIES
    )
    info = data.get("distributedInfo")
    if isinstance(info, dict) and "rank" in info and "world_size" in info:
        if info.get("backend") is None and backend:
            info["backend"] = backend
        else:
            return timed
    else:
        data["distributedInfo"] = {"rank": rank, "world_size": world_size, "backend": backend}
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
    return timed


_ACTIVE: RankProfiler | None = None


def step() -> None:
    """Mark the end of one step of a profiled script (call it once per training step). With a step
    window (``workbench profile --active N``) it moves the profiler through wait / warm-up / active; in
    any case the trace gets ``ProfilerStep#N`` spans. Outside a profiled run it does nothing."""
    if _ACTIVE is not None:
        _ACTIVE.step()


def _write_json(path: str, data: dict) -> None:
    part = path + ".part"
    with open(part, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1, default=str)
    os.replace(part, path)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise _Terminated()


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def profiled_call(out: str, rank: int, world_size: int, window: Window | None, call: Callable[[], Any]) -> dict:
    """Run ``call`` on this rank under the profiler, export the trace, write the rank's status file;
    returns the status (rank, status, exit_code, wall_s, trace, steps, error, backend)."""
    global _ACTIVE
    session = RankProfiler(out, rank, world_size, window)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    status, code, error = "ok", 0, ""
    _ACTIVE = session
    started = time.perf_counter()
    try:
        session.start()
        started = time.perf_counter()
        call()
    except SystemExit as exc:
        code = _exit_code(exc.code)
        status = "ok" if code == 0 else "failed"
        error = "" if code == 0 else f"sys.exit({exc.code!r})"
    except _Terminated:
        status, code, error = "terminated", 128 + signal.SIGTERM, "stopped by SIGTERM (a timeout, or the job stopped)"
    except KeyboardInterrupt:
        status, code, error = "interrupted", 128 + signal.SIGINT, "interrupted (SIGINT)"
    except BaseException as exc:  # noqa: BLE001 - the rank's failure is reported, its trace kept
        status, code = "failed", 1
        error = f"{type(exc).__name__}: {exc}"
        traceback.print_exc()
    wall_s = time.perf_counter() - started
    _ACTIVE = None
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the export short
    trace_path = None
    try:
        trace_path = session.stop()
    except Exception as exc:  # noqa: BLE001
        error = (error + "; " if error else "") + f"the trace could not be exported: {type(exc).__name__}: {exc}"
        if status == "ok":
            status, code = "failed", code or 1
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
    if trace_path is None and not error and window is not None:
        error = (
            f"no trace: the step window (wait {window.wait}, warm-up {window.warmup}, active {window.active}) "
            f"was not reached in {session.steps} step(s); call workbench.api.distributed.step() once per step"
        )
    record = {
        "rank": rank,
        "status": status,
        "exit_code": code,
        "wall_s": wall_s,
        "trace": os.path.basename(trace_path) if trace_path else None,
        "steps": session.steps,
        "timed_events": getattr(session, "timed_events", None),  # None: no trace exported
        "backend": session.backend,
        "error": error,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "ended_unix": time.time(),
        "partial": status != "ok",
    }
    _write_json(os.path.join(out, STATUS_NAME.format(rank=rank)), record)
    return record


def rank_main(argv: Sequence[str] | None = None) -> int:
    """What torchrun runs on each rank for ``workbench profile``: ``SCRIPT [ARGS...]``."""
    import runpy

    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        print(
            "usage: python -m workbench.capture.rank_entry SCRIPT [ARGS...] (run by workbench profile)", file=sys.stderr
        )
        return 2
    out = os.environ.get(ENV_OUT)
    if not out:
        print(f"workbench: {ENV_OUT} is not set: this module is started by `workbench profile`", file=sys.stderr)
        return 2
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    window = Window.from_env(os.environ.get(ENV_SCHEDULE))
    script = argv[0]
    sys.argv = [script, *argv[1:]]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    _remember_backend_on_destroy()
    _stop_when_orphaned()
    record = profiled_call(out, rank, world, window, lambda: runpy.run_path(script, run_name="__main__"))
    return int(record["exit_code"])


def _stop_when_orphaned(poll_s: float = 0.5) -> None:
    """A rank whose launcher (torchrun) is gone stops itself: SIGTERM to itself (it then exports what it
    recorded), and ``os._exit`` after the grace period if that did not end it. torchrun killed outright
    (SIGKILL) cannot stop its ranks, and a rank left running holds its port and its memory."""
    import threading

    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(TERMINATE_GRACE_S)
        os._exit(128 + signal.SIGTERM)

    threading.Thread(target=watch, name="workbench-orphan-watch", daemon=True).start()


def _remember_backend_on_destroy() -> None:
    """A script that destroys its process group before it ends would leave the backend unknown when the
    trace is exported: note it just before the group goes."""
    try:
        import torch.distributed as dist
    except ImportError:
        return
    if not dist.is_available():
        return
    original = dist.destroy_process_group

    def destroy_process_group(*args: Any, **kwargs: Any) -> Any:
        if _ACTIVE is not None:
            _ACTIVE.note_backend()
        return original(*args, **kwargs)

    dist.destroy_process_group = destroy_process_group


# --- the run summary ----------------------------------------------------------------------------
def rank_statuses(out: str, expected: Sequence[int]) -> list[dict]:
    """Each expected rank's status file, or a record saying it wrote none (killed, never started)."""
    found = {}
    for name in os.listdir(out):
        if name.startswith("rank-") and name.endswith(".status"):
            try:
                with open(os.path.join(out, name), encoding="utf-8") as fh:
                    rec = json.load(fh)
                found[int(rec["rank"])] = rec
            except (OSError, ValueError, KeyError, TypeError):
                continue
    records = [
        found.pop(r)
        if r in found
        else {
            "rank": r,
            "status": "missing",
            "exit_code": None,
            "wall_s": None,
            "trace": None,
            "error": "the rank wrote no status: it was killed (SIGKILL, out of memory) or never started",
        }
        for r in expected
    ]
    return records + [found[r] for r in sorted(found)]


def write_provisional_summary(out: str, *, command: Sequence[str] | str, tool: str) -> None:
    """The summary a run starts with: "complete": false until the final one replaces it, so a folder whose
    run was killed (SIGKILL, a cancelled CI job) before it could write its summary says so."""
    _write_json(
        os.path.join(out, SUMMARY),
        {
            "tool": tool,
            "command": list(command) if not isinstance(command, str) else command,
            "started_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "provisional": True,
            "complete": False,
            "reason": f"the run did not finish: {tool} ended (killed, or still running) before it wrote its final "
            "summary; the traces here may be missing or partial",
            "traces": [],
            "partial_traces": [],
            "ranks": [],
        },
    )


def summarise(
    out: str,
    *,
    command: Sequence[str] | str,
    world_size: int,
    ranks: list[dict],
    wall_s: float,
    exit_code: int | None,
    timed_out: bool,
    timeout_s: float | None,
    window: Window | None,
    tool: str,
    backend: str | None = None,
    extra: dict | None = None,
    stopped_by: str | None = None,
) -> dict:
    """The run summary, written last (``summary.json``); ``complete`` only when every rank finished
    and exported its trace. ``stopped_by``: the signal (``"SIGTERM"``) that stopped the run."""
    bad = [r for r in ranks if r.get("status") != "ok" or not r.get("trace")]
    # a rank that exported a trace of no work (an empty script, work behind a guard that did not run)
    idle = [r for r in ranks if r not in bad and r.get("timed_events") == 0]
    reasons = []
    if stopped_by:
        reasons.append(f"stopped by {stopped_by} to {tool}")
    if timed_out:
        reasons.append(f"timed out after {timeout_s:g} s")
    for r in bad:
        what = r.get("status")
        if timed_out and what in ("terminated", "missing"):
            what = "was still running at the timeout and was stopped"
        code = r.get("exit_code")
        reasons.append(
            f"rank {r['rank']} {what}"
            + (f" (exit code {code})" if code not in (None, 0) else "")
            + ("" if r.get("trace") else ", no trace")
        )
    if idle:
        which = ", ".join(str(r["rank"]) for r in idle)
        reasons.append(
            f"rank{'s' if len(idle) > 1 else ''} {which} recorded no work: the trace holds no op, kernel or "
            "annotation, so there is nothing to diagnose (did the script run its work? an empty script, or one "
            "whose work is under a guard that was false, profiles nothing)"
        )
    if exit_code and not bad and not timed_out:
        reasons.append(
            f"the job exited with code {exit_code} although every rank reported success "
            "(a rank's process failed at exit, after its trace was written)"
        )
    failed = [r for r in ranks if r.get("status") == "failed" and r.get("ended_unix")]
    first_failed = min(failed, key=lambda r: r["ended_unix"])["rank"] if failed else None
    if len(failed) > 1:
        reasons.append(f"rank {first_failed} failed first")
    backends = {r.get("backend") for r in ranks if r.get("backend")}
    summary = {
        "tool": tool,
        "command": list(command) if not isinstance(command, str) else command,
        "world_size": world_size,
        "backend": backend or (backends.pop() if len(backends) == 1 else None),
        "finished_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "wall_s": wall_s,
        "exit_code": exit_code,
        "timed_out": timed_out,
        "timeout_s": timeout_s,
        "window": window.to_dict() if window else None,
        "complete": not bad and not idle and not timed_out and not exit_code and not stopped_by,
        "reason": "; ".join(reasons),
        "stopped_by": stopped_by,
        "first_failed_rank": first_failed,
        "traces": [r["trace"] for r in ranks if r.get("trace")],
        "partial_traces": [r["trace"] for r in ranks if r.get("trace") and r.get("status") != "ok"],
        "ranks": ranks,
        **(extra or {}),
    }
    _write_json(os.path.join(out, SUMMARY), summary)
    return summary


# --- N local processes for a function (wb.profile_distributed) ---------------------------------------
def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spawned_rank(
    rank: int,
    world_size: int,
    backend: str,
    port: int,
    fn: Callable,
    args: tuple,
    out: str,
    window_env: str,
    timeout_s: float,
    threads: int,
) -> None:
    import datetime as _dt

    import torch
    import torch.distributed as dist

    os.environ.update(
        {
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(world_size),
        }
    )
    torch.set_num_threads(threads)
    if backend in ("nccl", "rccl"):
        torch.cuda.set_device(rank)
    dist.init_process_group(
        backend, rank=rank, world_size=world_size, timeout=_dt.timedelta(seconds=max(30.0, float(timeout_s)))
    )
    code = 1
    try:
        _first_session()
        dist.barrier()  # connect the ranks before the profiler starts: setup is not the job's time
        code = int(profiled_call(out, rank, world_size, Window.from_env(window_env), lambda: fn(*args))["exit_code"])
    finally:
        try:
            dist.destroy_process_group()
        except Exception:  # noqa: BLE001
            pass
    exit_now(code)


def exit_now(code: int) -> None:
    """End a rank's process once its trace and status are written: run the atexit handlers, flush, and
    leave without the interpreter's teardown, where C++ threads left by the collective backend or the
    profiler can abort the process ("terminate called without an active exception") after the job is done."""
    import atexit

    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


def _first_session() -> None:
    """A throwaway profiler session: the first one in a process pays the profiler's set-up (100 ms or more
    on a loaded machine), and ranks paying it at different times would show as a straggler."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]):
        torch.ones(1).add_(1)


def run_local(
    fn: Callable,
    *,
    world_size: int,
    backend: str = "gloo",
    args: tuple = (),
    out: str,
    timeout_s: float = 300.0,
    window: Window | None = None,
    force: bool = False,
) -> dict:
    """Run ``fn(*args)`` on ``world_size`` spawned local processes, each in the process group
    (``backend``, a free loopback port) with the profiler around the call; write the rank traces and the
    summary into ``out``. Returns the summary; raises ``ProfileError`` when no rank left a trace."""
    import pickle

    import torch.multiprocessing as mp

    check_world_size(world_size, backend)
    if timeout_s is None or not timeout_s > 0:
        raise InvalidArgumentError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
    try:
        pickle.dumps((fn, args))
    except Exception as exc:  # noqa: BLE001
        raise InvalidArgumentError(
            f"the function and its args must be picklable to reach the spawned ranks ({type(exc).__name__}: {exc}); "
            "define the function in a module (not in the notebook or as a lambda) and import it"
        ) from None
    prepare_out(out, force=force)
    port = free_port()
    threads = max(1, (os.cpu_count() or 1) // world_size)
    ctx = mp.get_context("spawn")
    started = time.perf_counter()
    procs = [
        ctx.Process(
            target=_spawned_rank,
            name=f"workbench-rank-{r}",
            daemon=False,
            args=(
                r,
                world_size,
                backend,
                port,
                fn,
                tuple(args),
                out,
                window.to_env() if window else "",
                timeout_s,
                threads,
            ),
        )
        for r in range(world_size)
    ]
    for p in procs:
        p.start()
    deadline = started + timeout_s
    timed_out = False
    failed_at: float | None = None
    while any(p.is_alive() for p in procs):
        now = time.perf_counter()
        if failed_at is None and any(p.exitcode not in (None, 0) for p in procs):
            failed_at = now  # a rank died: the others may wait for it in a collective forever
        if now >= deadline:
            timed_out = True
            break
        if failed_at is not None and now - failed_at > TERMINATE_GRACE_S:
            break
        time.sleep(0.05)
    _stop(procs)
    wall_s = time.perf_counter() - started
    ranks = rank_statuses(out, range(world_size))
    for rec, p in zip(ranks, procs):
        if rec["status"] == "missing" and p.exitcode is not None:
            rec["exit_code"] = p.exitcode
            rec["error"] = (
                f"the process ended with exit code {p.exitcode} before it wrote its status "
                "(it failed in process-group setup, or was killed)"
            )
        if rec["status"] in ("terminated", "missing") and timed_out:
            rec["error"] = f"still running after timeout_s={timeout_s:g} s: stopped (a hang?)"
    codes = [p.exitcode for p in procs]
    exit_code = next((c for c in codes if c not in (0, None)), 0)
    return summarise(
        out,
        command=f"wb.profile_distributed({getattr(fn, '__qualname__', fn)!s}, "
        f"world_size={world_size}, backend={backend!r})",
        world_size=world_size,
        ranks=ranks,
        wall_s=wall_s,
        exit_code=exit_code,
        timed_out=timed_out,
        timeout_s=timeout_s,
        window=window,
        tool="wb.profile_distributed",
        backend=backend,
    )


def _stop(procs: list) -> None:
    """SIGTERM the ranks still running (each exports what it recorded), SIGKILL after a grace period."""
    alive = [p for p in procs if p.is_alive()]
    for p in alive:
        p.terminate()
    end = time.perf_counter() + TERMINATE_GRACE_S
    for p in alive:
        p.join(max(0.0, end - time.perf_counter()))
    for p in alive:
        if p.is_alive():
            p.kill()
            p.join(5)
    for p in procs:
        p.join(5)


def raise_if_no_trace(summary: dict, out: str) -> None:
    if not summary["traces"]:
        details = "; ".join(
            f"rank {r['rank']}: {r.get('status')}" + (f" ({r['error']})" if r.get("error") else "")
            for r in summary["ranks"]
        )
        raise ProfileError(f"no rank left a trace in {out}: {details}")
