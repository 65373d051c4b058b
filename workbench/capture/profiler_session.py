"""One torch.profiler session over the traced calls, exported as a gzipped Chrome trace.

The session covers a separate, short traced pass (``wb.profile(trace_repeat=...)``), never the
clean timed repeats: the profiler's per-op overhead stays out of ``run.timing``.

CPU activity always, CUDA activity when a GPU is present; ``record_shapes`` and
``profile_memory`` on. Each repeat is annotated ``ProfilerStep#<i>`` (the name torch's own
``profiler.step()`` uses) so step-based analyses see one step per traced call. The first profiler
session in a process can mis-time or drop GPU events (pytorch issues 175790, 192021), so a short
warm-up session on a trivial op runs once per process before the first measured one.

The traced pass also records the Python stack (``with_stack=True``, ``with_modules=True``): its
``python_function`` events name each ``nn.Module`` scope and each Python function, which is what
``workbench.analysis.attribution`` needs to give time by module and by the user's source line.
The Python tracer adds its cost to the traced calls only (``run.profiler_overhead`` includes it);
the clean timing never runs under it. Where the profiler refuses the Python tracer, the session
starts without it, records module scopes with forward hooks instead
(``workbench.capture.module_scopes``) and says so (``stack_note``): module time is still there,
source lines are not.

With the Python stack, the session also records which statement of the user's code runs
(``workbench.capture.statements``: ``sys.settrace`` on this thread, installed last on entry and
removed first on exit, whatever the calls did): ``s.statements`` (``workbench.trace.statements.
StatementLines``, or one with no change points and a note saying why), so that time by source line
can name ``model.py:42``, the statement, rather than the function's first line.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Any, ContextManager

from workbench.capture.module_scopes import ModuleNames, ModuleScopes
from workbench.capture.optimizer_params import OptimizerWatch
from workbench.capture.statements import StatementRecorder
from workbench.trace.optimizer_params import OptimizerStepParams
from workbench.trace.statements import StatementLines

if TYPE_CHECKING:
    from torch.profiler import profile as TorchProfiler

TRACE_FILE_NAME = "trace.json.gz"
STEP_NAME = "ProfilerStep#{}"
RECORD_STACK = True  # the traced pass records Python frames and nn.Module scopes (attribution)
RECORD_STATEMENTS = True  # and, with them, the statements of the user's code that ran (attribution by line)

_warmed_up_in_process = False


def activities(torch: ModuleType, cuda: bool) -> list[Any]:
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


def warm_up_profiler(torch: ModuleType, cuda: bool) -> str:
    """Run the once-per-process warm-up session; returns what was done, for the run's record."""
    global _warmed_up_in_process
    if _warmed_up_in_process:
        return "skipped: a warm-up session already ran in this process"
    device = "cuda" if cuda else "cpu"
    with _quiet_native_stderr():
        with torch.profiler.profile(activities=activities(torch, cuda), record_shapes=True, profile_memory=True):
            x = torch.ones(64, device=device)
            (x + x).sum()
            if cuda:
                torch.cuda.synchronize()
    _warmed_up_in_process = True
    return f"ran: one short session on a {device} op before the measured one"


def _stop_quietly(prof: TorchProfiler) -> None:
    """Stop a profiler whose start failed part way; one that never started has nothing to stop."""
    try:
        with _quiet_native_stderr():
            prof.__exit__(None, None, None)
    except Exception:  # noqa: BLE001 - nothing was running: the start failed before it began
        pass


class ProfilerSession:
    """``with ProfilerSession(torch, cuda, folder) as s:`` … ``s.step(i)`` per repeat.

    ``record_stack`` (default ``RECORD_STACK``): record the Python stack and module scopes for
    attribution. ``s.records_stack`` says whether it was recorded, ``s.stack_note`` why not.
    ``record_statements`` (default ``RECORD_STATEMENTS``; only with the Python stack): record the
    statements that ran, ``s.statements`` (None where not asked for or without the stack).
    The profiler is stopped on every exit path; the trace is exported only on success.
    """

    def __init__(
        self,
        torch: ModuleType,
        cuda: bool,
        folder: Path,
        record_stack: bool | None = None,
        profile_memory: bool = True,
        export: bool = True,
        record_statements: bool | None = None,
    ) -> None:
        self._torch = torch
        self._profile_memory = bool(profile_memory)  # False: a comparison pass without allocator events
        self._export = bool(export)
        self._cuda = cuda
        self.trace_path = Path(folder) / TRACE_FILE_NAME
        self._prof: TorchProfiler | None = None
        self._scopes: ModuleScopes | None = None  # the fallback's module scopes, when in use
        self._record_stack = RECORD_STACK if record_stack is None else bool(record_stack)
        self.records_stack = False
        self.stack_note = "" if self._record_stack else "not asked for (record_stack=False)"
        self._names: ModuleNames | None = None
        self.module_names: dict[str, str] = {}  # the scopes' labels -> the modules' names (ModuleNames)
        self._optimizers: OptimizerWatch | None = None
        self.optimizer_params: tuple[OptimizerStepParams, ...] = ()  # what each optimizer's step visited
        self._record_statements = RECORD_STATEMENTS if record_statements is None else bool(record_statements)
        self._recorder: StatementRecorder | None = None
        self.statements: StatementLines | None = None  # the statements that ran (StatementRecorder)

    def step(self, index: int) -> ContextManager[Any]:
        return self._torch.profiler.record_function(STEP_NAME.format(index))

    def _profiler(self, with_stack: bool) -> TorchProfiler:
        return self._torch.profiler.profile(
            activities=activities(self._torch, self._cuda),
            record_shapes=True,
            profile_memory=self._profile_memory,
            with_stack=with_stack,
            with_modules=with_stack,
        )

    def __enter__(self) -> "ProfilerSession":
        prof = self._profiler(self._record_stack)
        try:
            with _quiet_native_stderr():
                prof.__enter__()
        except RuntimeError as error:  # the Python tracer refused (another tracer active, say)
            if not self._record_stack:
                raise
            _stop_quietly(prof)  # whatever the failed start left running
            self.stack_note = (
                f"the profiler did not start with the Python stack ({error}): module scopes "
                "recorded with forward hooks instead; source lines not recorded"
            )
            prof = self._profiler(False)
            with _quiet_native_stderr():
                prof.__enter__()
            self._scopes = ModuleScopes(self._torch).__enter__()
        else:
            self.records_stack = self._record_stack
        self._prof = prof
        self._names = ModuleNames(self._torch).__enter__()  # after the start: it sees what the tracer sees
        self._optimizers = OptimizerWatch(self._torch).__enter__()
        if self.records_stack and self._record_statements:  # last: nothing of the session's own is traced
            self._recorder = StatementRecorder(self._torch)
            self._recorder.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        prof, self._prof = self._prof, None
        scopes, self._scopes = self._scopes, None
        names, self._names = self._names, None
        optimizers, self._optimizers = self._optimizers, None
        recorder, self._recorder = self._recorder, None
        assert prof is not None, "__exit__ follows a successful __enter__"
        try:
            try:
                if recorder is not None:  # first: the trace function is removed whatever happens next
                    found = recorder.stop()
                    self.statements = found if found is not None else StatementLines.empty(recorder.note)
            finally:
                if optimizers is not None:
                    optimizers.__exit__(exc_type, exc, tb)
                if names is not None:
                    names.__exit__(exc_type, exc, tb)
                    try:
                        self.module_names = names.paths()
                    except Exception:  # noqa: BLE001 - a model whose modules cannot be walked keeps the labels
                        self.module_names = {}
                if optimizers is not None:
                    self.optimizer_params = optimizers.records(names.owners if names is not None else {})
                if scopes is not None:
                    scopes.__exit__(exc_type, exc, tb)
        finally:
            with _quiet_native_stderr():
                prof.__exit__(exc_type, exc, tb)
        if exc_type is None and self._export:
            prof.export_chrome_trace(str(self.trace_path))
