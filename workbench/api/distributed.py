"""Many processes from a notebook or a script: ``wb.profile_distributed`` and the step marker.

import workbench as wb
trace = wb.profile_distributed(train, world_size=2, backend="gloo", args=(steps,))
trace.hypotheses(); trace.stragglers(); trace.timings   # per-rank wall time of the call

# in a script profiled with `workbench profile --active 3 ...`: mark each step
import workbench.api.distributed
for batch in loader:
    ...
    workbench.api.distributed.step()
"""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Callable
from typing import Any, cast

import pandas as pd

from workbench.api.trace import Trace, load_trace
from workbench.capture.distributed import Window, raise_if_no_trace, run_local, step
from workbench.errors import TraceWarning

__all__ = ["profile_distributed", "DistributedTrace", "step"]


class DistributedTrace(Trace):
    """The multi-rank Trace of a ``profile_distributed`` run, with the run beside it: ``timings`` (per rank:
    status, exit code, wall_ms of the call), ``summary`` (the run summary, also in ``folder``/summary.json)
    and ``folder`` (the rank traces)."""

    timings: pd.DataFrame
    summary_info: dict
    folder: str

    @property
    def complete(self) -> bool:
        return bool(self.summary_info.get("complete"))


def profile_distributed(
    fn: Callable[..., Any],
    world_size: int = 2,
    backend: str = "gloo",
    args: tuple = (),
    *,
    timeout_s: float = 300.0,
    out: str | None = None,
    force: bool = False,
    wait: int = 0,
    warmup: int = 0,
    active: int | None = None,
) -> DistributedTrace:
    """Run ``fn(*args)`` once on ``world_size`` local processes, each in a process group (``backend``; the
    rank from ``torch.distributed.get_rank()``) with torch.profiler around the call, and return the
    multi-rank Trace.

    Args:
        fn: a picklable function (defined in a module, not in the notebook): spawned processes import it.
        world_size: processes; at most 4 per CPU core (more cannot keep up in collectives), one GPU each
            for nccl.
        backend: "gloo" (CPU) or "nccl".
        args: passed to ``fn`` on every rank.
        timeout_s: the whole run's limit; ranks still running then are stopped (their traces kept when
            they can still export) and the run is marked incomplete.
        out: the folder for ``rank-N.pt.trace.json`` and ``summary.json`` (default: a new temporary folder).
        force: delete the trace files of an earlier run in ``out`` first (else refused).
        wait, warmup, active: record only a window of the steps ``fn`` marks with
            ``workbench.api.distributed.step()`` (default: the whole call).

    Returns ``DistributedTrace``: a Trace (analyses, ``hypotheses()``) plus ``timings`` (one row per rank:
    status, exit_code, wall_ms), ``summary_info`` and ``folder``. Raises ``ProfileError`` when no rank left a
    trace (every rank failed), with each rank's status; warns (``TraceWarning``) when some ranks did not
    finish, naming them.
    """
    window = Window(wait, warmup, active) if active is not None else None
    folder = out if out is not None else tempfile.mkdtemp(prefix="workbench-distributed-")
    summary = run_local(
        fn,
        world_size=world_size,
        backend=backend,
        args=tuple(args),
        out=folder,
        timeout_s=timeout_s,
        window=window,
        force=force,
    )
    raise_if_no_trace(summary, folder)
    if not summary["complete"]:
        warnings.warn(
            f"profile_distributed: {summary['reason']}; the Trace holds the ranks that left a trace "
            f"({', '.join(summary['traces'])})",
            TraceWarning,
            stacklevel=2,
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWarning)  # the incomplete-run warning was just given
        # workers=1: one process reads every table, so the Trace holds every table (no rank-folder backend)
        trace = DistributedTrace.of(load_trace(folder, cache=False, workers=1))
    trace.timings = timings_table(summary)
    trace.summary_info = summary
    trace.folder = os.path.abspath(folder)
    return trace


def timings_table(summary: dict) -> pd.DataFrame:
    """One row per rank of a run summary: rank, status, exit_code, wall_ms, steps, trace, error."""
    rows = [
        {
            "rank": r["rank"],
            "status": r.get("status"),
            "exit_code": r.get("exit_code"),
            "wall_ms": (r["wall_s"] * 1e3) if r.get("wall_s") is not None else float("nan"),
            "steps": r.get("steps"),
            "trace": r.get("trace"),
            "error": r.get("error") or "",
        }
        for r in summary["ranks"]
    ]
    return pd.DataFrame(rows, columns=["rank", "status", "exit_code", "wall_ms", "steps", "trace", "error"])
