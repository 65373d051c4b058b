"""``wb.profile``: profile a callable (``workbench.capture.profile``) and return the face's ProfileRun.

The capture layer measures; this face function adds what capture may not compute itself: the
environment fingerprint (``workbench.devices``), and the run type whose trace, hypotheses and
history the notebook, the report and the CLI read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import workbench.capture.profile as capture_profile
from workbench.api.run import ProfileRun
from workbench.capture.cells import notebook_cells
from workbench.devices.fingerprint import environment_fingerprint
from workbench.study.history import callable_source, record_profile

__all__ = ["profile"]


def profile(
    fn: Callable[..., Any],
    *args: Any,
    warmup: int = 3,
    repeat: int = 20,
    trace: bool = True,
    name: str | None = None,
    threads: int | None = None,
    grad_enabled: bool | None = None,
    device: str = "auto",
    trace_repeat: int | None = None,
    expected_calls: int | None = None,
    history: bool = True,
    memory: bool = False,
    **kwargs: Any,
) -> ProfileRun:
    """Profile ``fn(*args, **kwargs)``: a cold call, ``warmup`` calls, ``repeat`` clean timed calls,
    then (``trace=True``) a separate traced pass.

    Args:
        fn: the callable to profile (the function itself, not its result).
        *args: positional arguments for ``fn``.
        warmup: untimed calls after the cold first call (>= 0).
        repeat: timed calls with no profiler running (>= 1): ``run.timing``.
        trace: record a separate traced pass under torch.profiler (``run.trace``).
        name: the run's name (default: the callable's qualified name).
        threads: ``torch.set_num_threads`` for the profile (restored after).
        grad_enabled: the grad mode for the profile (restored after); None leaves it.
        device: ``"auto"`` (CUDA events when a GPU is there), ``"cpu"`` or ``"cuda"``.
        trace_repeat: calls in the traced pass (None: 3 to 20, enough to cover 50 ms).
        expected_calls: how many calls you expect to make; one-time costs are ranked spread over them.
        history: append the run to the callable's history (``run.history``: entries and change points;
            ``workbench-history.jsonl`` in the current folder, or ``WORKBENCH_HISTORY``).
        memory: record memory in the traced pass (named tensors; on CUDA the allocator's history and
            snapshot) and what recording it cost: ``run.memory`` (its timeline, peak, growth).
        **kwargs: keyword arguments for ``fn``.

    Returns:
        ProfileRun: clean timing, cold call, traced pass, health, trace, hypotheses
        (``workbench.capture.profile.profile`` measures; the fingerprint comes from
        ``workbench.devices``).
    """
    __tracebackhide__ = True
    record = capture_profile.profile(
        fn,
        *args,
        warmup=warmup,
        repeat=repeat,
        trace=trace,
        name=name,
        threads=threads,
        grad_enabled=grad_enabled,
        device=device,
        trace_repeat=trace_repeat,
        expected_calls=expected_calls,
        memory=memory,
        environment=environment_fingerprint(),
        **kwargs,
    )
    run = ProfileRun(record, code=fn, code_args=(args, dict(kwargs)), cells=notebook_cells())  # code: never saved
    if history:  # the callable's history (study.history.record_profile); never fails the profile
        run.history = record_profile(run.record, callable_source(fn))
    return run
