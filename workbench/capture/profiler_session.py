"""One torch.profiler session over the traced calls, exported as a gzipped Chrome trace.

The session covers a separate, short traced pass (``wb.profile(trace_repeat=...)``), never the
clean timed repeats: the profiler's per-op overhead stays out of ``run.timing``.

CPU activity always, CUDA activity when a GPU is present; ``record_shapes`` and
``profile_memory`` on. Each repeat is annotated ``ProfilerStep#<i>`` (the name torch's own
``profiler.step()`` uses) so step-based analyses see one step per traced call. The first profiler
session in a process can mis-time or drop GPU events (pytorch issues 175790, 192021), so a short
warm-up session on a trivial op runs once per process before the first measured one.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, ContextManager

TRACE_FILE_NAME = "trace.json.gz"
STEP_NAME = "ProfilerStep#{}"

_warmed_up_in_process = False


def activities(torch: Any, cuda: bool) -> list[Any]:
    acts = [torch.profiler.ProfilerActivity.CPU]
    if cuda and torch.profiler.ProfilerActivity.CUDA in torch.profiler.supported_activities():
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    return acts


def _quiet_native_stderr() -> ContextManager[Any]:
    """Hold back the ``USDT: ... profiler_start`` lines the profiler prints to C-level stderr
    (``workbench.capture.quiet``: written back to stderr only if the block raises). ``wb.profile``
    also holds back the whole traced pass and keeps the text on the run."""
    from workbench.capture.quiet import captured_native_stderr

    return captured_native_stderr()


def warm_up_profiler(torch: Any, cuda: bool) -> str:
    """Run the once-per-process warm-up session; returns what was done, for the run's record."""
    global _warmed_up_in_process
    if _warmed_up_in_process:
        return "skipped: a warm-up session already ran in this process"
    device = "cuda" if cuda else "cpu"
    with _quiet_native_stderr():
        with torch.profiler.profile(activities=activities(torch, cuda), record_shapes=True,
                                    profile_memory=True):
            x = torch.ones(64, device=device)
            (x + x).sum()
            if cuda:
                torch.cuda.synchronize()
    _warmed_up_in_process = True
    return f"ran: one short session on a {device} op before the measured one"


class ProfilerSession:
    """``with ProfilerSession(torch, cuda, folder) as s:`` … ``s.step(i)`` per repeat.

    The profiler is stopped on every exit path; the trace is exported only on success.
    """

    def __init__(self, torch: Any, cuda: bool, folder: Path) -> None:
        self._torch = torch
        self._cuda = cuda
        self.trace_path = Path(folder) / TRACE_FILE_NAME
        self._prof: Any = None

    def step(self, index: int) -> ContextManager[Any]:
        return self._torch.profiler.record_function(STEP_NAME.format(index))

    def __enter__(self) -> "ProfilerSession":
        self._prof = self._torch.profiler.profile(
            activities=activities(self._torch, self._cuda), record_shapes=True,
            profile_memory=True)
        with _quiet_native_stderr():
            self._prof.__enter__()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        prof, self._prof = self._prof, None
        with _quiet_native_stderr():
            prof.__exit__(exc_type, exc, tb)
        if exc_type is None:
            prof.export_chrome_trace(str(self.trace_path))
