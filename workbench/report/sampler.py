"""Clean per-call samples of a workload from several fresh interpreter processes: the gate's evidence.

Each process (``python -m workbench.report.sampler``) imports the workload afresh, runs
``wb.profile(fn, *args, warmup=W, repeat=R, trace=False)`` (no profiler running) and writes its
samples, its first-call time and its environment (CPU/GPU model, torch version, threads, ...) to a
JSON file. Processes run one after another (never two at once, so they do not slow each other).

What the workload does is reported, not hidden: one that raises, calls ``sys.exit`` or dies ends
the sampling with a ``WorkloadError`` (exit status 3 of ``workbench report``) naming the process,
the exception and the tail of its output; one that runs past ``time_limit_s`` is killed and ends it
with a ``WorkloadTimeout`` (exit status 4).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import workbench.capture.allocator as allocator
from workbench.errors import InvalidArgumentError
from workbench.report.regression import SampleSet
from workbench.report.workload import WorkloadError, WorkloadTimeout

WORKER_FAILED = 3  # exit status of a worker whose workload raised or called sys.exit
WORKER_BAD_INPUT = 2  # the workload spec could not be resolved
OUTPUT_TAIL_LINES = 15


def gate_environment(fingerprint: dict[str, Any], device: str, allocator_mode: str | None = None) -> dict[str, Any]:
    """The environment values the gate compares, from ``environment_fingerprint()`` and the
    allocator mode the samples were timed in (``capture.allocator``; None: this process's)."""
    host, torch = fingerprint.get("host", {}), fingerprint.get("torch", {})
    gpu = torch.get("gpu", {}) if isinstance(torch, dict) else {}
    if gpu.get("available"):
        names = sorted({d.get("name", "?") for d in gpu.get("devices", [])})
        gpu_text = f"{gpu.get('count', len(names))}x {', '.join(names)}"
    else:
        gpu_text = "none"
    return {
        "cpu_model": host.get("cpu_model"),
        "logical_cpus": host.get("logical_cpus"),
        "gpu": gpu_text,
        "device": device,
        "torch": torch.get("version"),
        "cuda": torch.get("cuda_version"),
        "threads": torch.get("num_threads"),
        "python": host.get("python"),
        "omp_wait_policy": host.get("env", {}).get("OMP_WAIT_POLICY", "(unset)"),
        "allocator": allocator_mode or allocator.current_mode().name,
    }


def current_gate_environment(device: str = "auto") -> dict[str, Any]:
    """This process's gate environment (checked against an old report before anything runs)."""
    import torch

    from workbench.devices.fingerprint import environment_fingerprint

    cuda = device == "cuda" or (device == "auto" and torch.cuda.is_available())
    return gate_environment(environment_fingerprint(), f"cuda:{torch.cuda.current_device()}" if cuda else "cpu")


def fresh_gate_environment(time_limit_s: float = 120.0, allocator_mode: str = allocator.STEADY) -> dict[str, Any]:
    """The gate environment of a fresh worker process (what the samples will record), found
    without running the workload: checked against an earlier report before anything is timed."""
    with tempfile.TemporaryDirectory(prefix="workbench-sampler-") as tmp:
        out = Path(tmp) / "environment.json"
        proc = subprocess.run(
            [sys.executable, "-m", "workbench.report.sampler", "--environment", str(out)],
            cwd=os.getcwd(),
            env=_worker_env(allocator_mode),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=time_limit_s,
        )
        if proc.returncode != 0 or not out.is_file():
            raise WorkloadError(
                f"a fresh Python process could not report its environment (exit status "
                f"{proc.returncode}):\n{_tail(proc.stderr) or '    (no output)'}"
            )
        return dict(json.loads(out.read_text()))


def _tail(text: str, lines: int = OUTPUT_TAIL_LINES) -> str:
    kept = [line for line in text.strip().splitlines() if line.strip()][-lines:]
    return "\n".join("    " + line for line in kept)


def _worker_env(allocator_mode: str = allocator.STEADY) -> dict[str, str]:
    """A worker's environment: this one, workbench importable, OpenMP threads that sleep when idle,
    and (``steady``) glibc's malloc thresholds pinned, as the report's own process pins them."""
    import workbench

    env = dict(os.environ)
    if allocator.check_mode(allocator_mode) == allocator.STEADY:
        env.update(allocator.steady_env())
    parent = str(Path(workbench.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (parent, os.getcwd(), env.get("PYTHONPATH", "")) if p)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


HEARTBEAT_S = 30.0  # a process timing a slow workload says it is still running this often


def _run_with_heartbeat(
    cmd: list[str],
    *,
    env: dict[str, str],
    time_limit_s: float | None,
    heartbeat: Callable[[str], None] | None,
    where: str,
) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, capture_output=True, timeout=time_limit_s)``, telling ``heartbeat`` every
    ``HEARTBEAT_S`` that it still runs; a timeout or an interrupt kills the process before raising."""
    started = time.monotonic()
    with subprocess.Popen(
        cmd,
        cwd=os.getcwd(),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    ) as proc:
        try:
            while True:
                elapsed = time.monotonic() - started
                left = None if time_limit_s is None else time_limit_s - elapsed
                if left is not None and left <= 0:
                    proc.kill()
                    stdout, stderr = proc.communicate()
                    raise subprocess.TimeoutExpired(cmd, time_limit_s or 0.0, output=stdout, stderr=stderr)
                wait_s = HEARTBEAT_S if left is None else min(HEARTBEAT_S, left)
                try:
                    stdout, stderr = proc.communicate(timeout=wait_s)
                    break
                except subprocess.TimeoutExpired:
                    if heartbeat is not None and (left is None or left > wait_s):
                        limit = (
                            f" of at most {time_limit_s:g} s (--time-limit)" if time_limit_s else " (no --time-limit)"
                        )
                        heartbeat(f"  ... {where} still timing the workload: {time.monotonic() - started:.0f} s{limit}")
        except BaseException:
            proc.kill()
            raise
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def run_worker(
    spec: str,
    *,
    warmup: int,
    repeat: int,
    index: int = 1,
    total: int = 1,
    time_limit_s: float | None = None,
    python: str | None = None,
    allocator_mode: str = allocator.STEADY,
    heartbeat: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """One fresh process: its samples, cold call and environment (a dict), or the failure raised.
    ``heartbeat`` is told every ``HEARTBEAT_S`` seconds that the process is still running."""
    where = f"process {index}/{total}"
    with tempfile.TemporaryDirectory(prefix="workbench-sampler-") as tmp:
        out = Path(tmp) / "samples.json"
        request = json.dumps({"workload": spec, "warmup": warmup, "repeat": repeat})
        try:
            proc = _run_with_heartbeat(
                [python or sys.executable, "-m", "workbench.report.sampler", request, str(out)],
                env=_worker_env(allocator_mode),
                time_limit_s=time_limit_s,
                heartbeat=heartbeat,
                where=where,
            )
        except subprocess.TimeoutExpired as exc:
            output = (
                (exc.stderr or b"").decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
            )
            raise WorkloadTimeout(
                f"the workload {spec!r} ran past the time limit of {time_limit_s:g} s in {where} "
                f"(1 cold + {warmup} warm-up + {repeat} timed calls) and was stopped; raise --time-limit "
                "or lower --repeat" + (f"\n  its last output:\n{_tail(output)}" if output.strip() else "")
            ) from None
        result = json.loads(out.read_text()) if out.is_file() else {}
    output = "\n".join(s for s in (proc.stdout, proc.stderr) if s)
    error = result.get("error")
    if proc.returncode == 0 and "samples_ms" in result:
        return result
    if error and error.get("kind") == "bad_input":
        raise InvalidArgumentError(error["message"])
    if error and error.get("kind") == "exit":
        raise WorkloadError(
            f"the workload {spec!r} called sys.exit({error['code']!r}) in {where}, so it "
            "could not be timed; a workload must return (raise an exception to signal a failure)"
            + (f"\n  its output:\n{_tail(output)}" if output.strip() else "")
        )
    if error:
        raise WorkloadError(
            f"the workload {spec!r} raised {error['type']}: {error['message']} in {where}; "
            f'fix it, or check it runs with python -c "import {spec.partition(":")[0]}"\n'
            f"  traceback (last lines):\n{_tail(error.get('traceback', ''))}"
        )
    how = (
        f"was killed by signal {-proc.returncode}"
        if proc.returncode < 0
        else f"exited with status {proc.returncode} without a result"
    )
    raise WorkloadError(
        f"the process timing the workload {spec!r} {how} ({where}); its output:\n{_tail(output) or '    (none)'}"
    )


def sample_processes(
    spec: str,
    *,
    processes: int,
    warmup: int,
    repeat: int,
    time_limit_s: float | None = None,
    allocator_mode: str = allocator.STEADY,
    progress: Callable[[str], None] | None = None,
) -> SampleSet:
    """Samples of ``spec`` from ``processes`` fresh processes, one after another, each in the
    allocator mode ``allocator_mode`` (``capture.allocator``: steady pins glibc malloc's thresholds)."""
    if isinstance(processes, bool) or not isinstance(processes, int) or processes < 1:
        raise InvalidArgumentError(f"processes must be an integer >= 1; got {processes!r}")
    results = []
    for i in range(processes):
        if progress:
            progress(f"timing the workload in a fresh process ({i + 1}/{processes})...")
        results.append(
            run_worker(
                spec,
                warmup=warmup,
                repeat=repeat,
                index=i + 1,
                total=processes,
                time_limit_s=time_limit_s,
                allocator_mode=allocator_mode,
                heartbeat=progress,
            )
        )
    return SampleSet(
        processes=tuple(tuple(r["samples_ms"]) for r in results),
        environment=results[0]["environment"],
        workload=spec,
        warmup=warmup,
        repeat=repeat,
        cold_ms=tuple(r["cold_ms"] for r in results),
        cpu_wait_pct=tuple(r.get("cpu_wait_pct") for r in results),
    )


# -- the worker process ------------------------------------------------------------------------
def user_traceback(exc: BaseException) -> str:
    """The traceback of ``exc`` without workbench's own frames (the workload's code is what to fix)."""
    import workbench

    package = str(Path(workbench.__file__).resolve().parent)
    frames = [
        f for f in traceback.extract_tb(exc.__traceback__) if not str(Path(f.filename).resolve()).startswith(package)
    ]
    lines = traceback.format_list(frames) + traceback.format_exception_only(type(exc), exc)
    return "".join(lines)


def schedstat_ns() -> tuple[int, int] | None:
    """(CPU time, run-queue wait) in ns summed over this process's threads (Linux), else None."""
    tasks = Path("/proc/self/task")
    if not tasks.is_dir():
        return None
    cpu = wait = 0
    for task in tasks.iterdir():
        try:
            fields = (task / "schedstat").read_text().split()
            cpu, wait = cpu + int(fields[0]), wait + int(fields[1])
        except (OSError, ValueError, IndexError):  # a thread that ended meanwhile
            continue
    return cpu, wait


def _write(path: str, doc: dict[str, Any]) -> None:
    Path(path).write_text(json.dumps(doc, default=str), encoding="utf-8")


def worker_main(argv: list[str]) -> int:
    """``python -m workbench.report.sampler REQUEST_JSON OUT_JSON``: time the workload once."""
    if argv[0] == "--environment":
        _write(argv[1], current_gate_environment())
        return 0
    request, out = json.loads(argv[0]), argv[1]
    from workbench.errors import WorkbenchError
    from workbench.report.workload import resolve_workload

    try:
        func, args = resolve_workload(request["workload"])
    except WorkloadError as exc:
        _write(
            out,
            {
                "error": {
                    "kind": "raised",
                    "type": type(exc.__cause__ or exc).__name__,
                    "message": str(exc),
                    "traceback": user_traceback(exc),
                }
            },
        )
        return WORKER_FAILED
    except WorkbenchError as exc:
        _write(out, {"error": {"kind": "bad_input", "message": str(exc)}})
        return WORKER_BAD_INPUT
    import time

    from workbench.capture.profile import profile
    from workbench.capture.run import RunRecord
    from workbench.devices.fingerprint import environment_fingerprint

    before, started = schedstat_ns(), time.perf_counter_ns()
    try:
        run: RunRecord = profile(
            func,
            *args,
            warmup=request["warmup"],
            repeat=request["repeat"],
            trace=False,
            name=request["workload"],
            environment=environment_fingerprint(),
        )
    except SystemExit as exc:
        _write(out, {"error": {"kind": "exit", "code": exc.code}})
        return WORKER_FAILED
    except Exception as exc:  # the workload's own failure, reported by the parent
        _write(
            out,
            {
                "error": {
                    "kind": "raised",
                    "type": type(exc).__name__,
                    "message": str(exc),
                    "traceback": user_traceback(exc),
                }
            },
        )
        return WORKER_FAILED
    after, wall_ns = schedstat_ns(), time.perf_counter_ns() - started
    wait_pct = 100.0 * (after[1] - before[1]) / wall_ns if before and after and wall_ns > 0 else None
    _write(
        out,
        {
            "samples_ms": list(run.timing.samples_ms),
            "cold_ms": run.cold_ms,
            "pid": os.getpid(),
            "cpu_wait_pct": wait_pct,
            "load_average_1min": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
            "environment": gate_environment(run.environment, run.device),
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
