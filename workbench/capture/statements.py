"""Record which statement of the user's code runs through the traced pass (``StatementRecorder``).

The exported trace names a Python frame by its function's first line only, so "time by source
line" could not tell ``y = self.attn(x)`` from the other statements of ``forward``. The traced pass
records them beside the trace: ``sys.settrace`` on the profiled thread (torch's Python tracer uses
the profile hook, ``sys.setprofile``'s slot; the two coexist), with a global trace function that
gives a local one only to frames in the user's files (``workbench.trace.user_files``, decided
once per code object, by the file name the trace gives it). Each 'call', 'line' and 'return'
event of such a frame appends two integers to one list (the time, and the line or a call / return
mark): no frame walking, nothing per event but a clock read and two appends. The list is moved into
a compact array every ``CHUNK`` entries; recording stops at ``MAX_EVENTS`` events with a note (the
prefix recorded stays valid). ``stop()`` turns it into ``workbench.trace.statements.
StatementLines``: each change point's time on the trace's clock, the user's frames on the stack
after it, the innermost one's function and line.

The clock: torch's profiler writes its event times as the system's realtime clock less the trace's
``baseTimeNanoseconds``; the recorder reads ``time.perf_counter_ns`` per event (monotonic, cheap)
and converts with the offset between the two clocks, read as the closest of a few back-to-back
pairs when recording starts (and checked when it stops). Checked against the trace: a recorded
call lands within about a microsecond of the profiler's own event for the same call (the
analysis re-aligns on those events where they disagree: ``workbench.analysis.statement_lines``).

Safety: the trace function is installed only where no other one is (a debugger's or coverage's
stays untouched; the run notes it), removed in ``stop()`` whatever happened (the caller runs it in
a ``finally``), never raises into the user's code (a failure stops recording and becomes the note),
and a profiled call that replaces the trace function itself makes the recording void (noted).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from array import array
from types import CodeType, FrameType, ModuleType
from typing import Any, Callable

import numpy as np

from workbench.trace.statements import StatementLines
from workbench.trace.user_files import is_user_file

MAX_EVENTS = 2_000_000  # 'call' / 'line' / 'return' events recorded at most (32 MB of arrays)
CHUNK = 1 << 16  # list entries (two per event) moved into the array at a time
_CALL, _RETURN = -1, -2  # marks in the value slot (a line number is >= 0)
_PAIRS = 7  # clock pairs read for the perf_counter -> realtime offset
_CLOCK_MOVED_NS = 1_000_000  # the realtime clock stepped (NTP) while recording: noted

Tracer = Callable[[FrameType, str, Any], Any]


def clock_offset_ns() -> tuple[int, int]:
    """(realtime - perf_counter in ns, the read's uncertainty in ns): the closest of a few pairs."""
    best: tuple[int, int] | None = None
    for _ in range(_PAIRS):
        before = time.perf_counter_ns()
        wall = time.time_ns()
        after = time.perf_counter_ns()
        if best is None or after - before < best[1]:
            best = (wall - (before + after) // 2, after - before)
    assert best is not None
    return best


def trace_file_prefixes(torch: ModuleType | None = None) -> list[str]:
    """The folder prefixes torch's Python tracer strips from a frame's file (``torch.profiler.
    python_tracer._prefix_regex``: site-packages, ``sys.path``, the user base, torch's parent), in
    the order it tries them; the same rule where that private function is not there."""
    if torch is not None:
        try:
            import importlib

            found = importlib.import_module("torch.profiler.python_tracer")._prefix_regex()
            if isinstance(found, list) and all(isinstance(p, str) for p in found):
                return found
        except Exception:  # noqa: BLE001 - another torch: the same rule, written out below
            pass
    import site

    raw: list[str] = []
    for get in (site.getsitepackages, lambda: sys.path, lambda: [site.getuserbase(), site.getusersitepackages()]):
        try:
            raw += [p for p in get() if isinstance(p, str)]
        except Exception:  # noqa: BLE001 - a virtualenv without site's functions
            pass
    torch_file = getattr(torch, "__file__", None) if torch is not None else None
    if isinstance(torch_file, str):
        raw.append(os.path.dirname(os.path.dirname(torch_file)))
    return [p + os.sep for p in sorted({os.path.abspath(p) for p in raw}, reverse=True)]


def trace_file_name(filename: str, prefixes: list[str]) -> str:
    """A code object's file as the trace names it: less the first prefix it starts with."""
    for prefix in prefixes:
        if filename.startswith(prefix):
            return filename[len(prefix) :]
    return filename


def _hide_from_dynamo(*functions: Any) -> None:
    """Have torch.compile's frame hook pass the recorder's own frames by (where dynamo is loaded): the
    trace functions run inside compiled calls' frames, and dynamo would otherwise convert (and count)
    them as frames of the user's, on every traced call (``workbench.capture.compile_diag``)."""
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    skip = getattr(eval_frame, "skip_code", None)
    if skip is None:
        return
    pending = [getattr(getattr(f, "__func__", f), "__code__", None) for f in functions]
    while pending:
        code = pending.pop()
        if not isinstance(code, CodeType):
            continue
        pending.extend(c for c in code.co_consts if isinstance(c, CodeType))  # closures, generator expressions
        try:
            skip(code)
        except Exception:  # noqa: BLE001 - another dynamo: its frames are then counted, nothing worse
            return


class StatementRecorder:
    """``start()`` on the profiled thread, ``stop()`` (in a ``finally``) -> ``StatementLines`` or
    None; ``note`` says why there is none, or why what there is is partial."""

    def __init__(self, torch: ModuleType | None = None, max_events: int = MAX_EVENTS) -> None:
        self._torch = torch
        self._max_entries = 2 * int(max_events)
        self.note = ""
        self.statements: StatementLines | None = None
        self._installed = False
        self._previous: Any = None
        self._thread = 0
        self._buffer: list[int] = []
        self._done = array("q")
        self._calls: list[CodeType] = []  # the code of each 'call' event, in order
        self._user: dict[CodeType, bool] = {}
        self._prefixes: list[str] = []
        self._stopped = False  # bound reached or a failure: no more events
        self._stop_ns = 0  # perf_counter time recording stopped early
        self._offset = (0, 0)
        self._global: Tracer | None = None
        self._void = ""  # why nothing recorded can be trusted (the trace function was replaced)
        self._pid = 0
        self._native_tid = 0

    # -- the trace functions --------------------------------------------------------------
    def _tracers(self) -> Tracer:
        buffer, append = self._buffer, self._buffer.append
        calls = self._calls.append
        user = self._user
        clock = time.perf_counter_ns
        chunk = CHUNK
        flush, classify, fail = self._flush, self._classify, self._fail

        def local(frame: FrameType, event: str, arg: Any) -> Any:
            try:
                if event == "line":
                    append(clock())
                    append(frame.f_lineno)
                elif event == "return":
                    append(clock())
                    append(_RETURN)
                else:  # 'exception', 'opcode'
                    return local
                if len(buffer) >= chunk and not flush():
                    frame.f_trace = None
                    return None
                return local
            except Exception as exc:  # noqa: BLE001 - never into the user's code
                fail(exc)
                frame.f_trace = None
                return None

        def global_(frame: FrameType, event: str, arg: Any) -> Any:
            try:
                code = frame.f_code
                mine = user.get(code)
                if mine is None:
                    mine = classify(code)
                if not mine or self._stopped:
                    return None
                append(clock())
                append(_CALL)
                calls(code)
                if len(buffer) >= chunk and not flush():
                    return None
                return local
            except Exception as exc:  # noqa: BLE001 - never into the user's code
                fail(exc)
                return None

        return global_

    def _classify(self, code: CodeType) -> bool:
        mine = is_user_file(trace_file_name(code.co_filename, self._prefixes))
        self._user[code] = mine
        return mine

    def _flush(self, final: bool = False) -> bool:
        """Move the list into the array; False once the bound is reached (recording stops)."""
        if self._stopped and not final:
            del self._buffer[:]
            return False
        room = max(0, self._max_entries - len(self._done)) // 2 * 2
        kept = len(self._buffer) // 2 * 2
        first_dropped = self._buffer[room] if room < kept else None  # the time of the first event not kept
        self._done.extend(self._buffer[: min(room, kept)])
        del self._buffer[:]
        if len(self._done) >= self._max_entries:
            self._stopped = True
            self._stop_ns = first_dropped if first_dropped is not None else time.perf_counter_ns()
            self.note = (
                f"statement lines recorded for the first {self._max_entries // 2:,} events of your code "
                "only (the recorder's bound); later ops are attributed to their function's first line"
            )
            return False
        return True

    def _fail(self, exc: BaseException) -> None:
        if not self._stopped:
            self._stopped = True
            lost = self._buffer[0] if self._buffer else None  # the first event not kept
            self._stop_ns = lost if isinstance(lost, int) and lost > 0 else time.perf_counter_ns()
            self.note = f"statement lines: recording stopped early ({type(exc).__name__}: {exc})"
        self._buffer.clear()

    # -- start and stop ----------------------------------------------------------------------
    def start(self) -> bool:
        """Install the trace function on this thread; False (and ``note``) where it cannot."""
        try:
            previous = sys.gettrace()
            if previous is not None:
                self.note = (
                    "statement lines not recorded: another trace function is installed (a debugger or "
                    "coverage); source lines name each function's first line"
                )
                return False
            self._prefixes = trace_file_prefixes(self._torch)
            self._offset = clock_offset_ns()
            self._thread = threading.get_ident()
            self._pid, self._native_tid = os.getpid(), threading.get_native_id()
            self._global = self._tracers()
            _hide_from_dynamo(self._tracers, self._flush, self._fail, self._classify, is_user_file, trace_file_name)
            self._previous = previous
            sys.settrace(self._global)
            self._installed = True
            return True
        except Exception as exc:  # noqa: BLE001 - a failure here never breaks the profile
            self.note = f"statement lines not recorded ({type(exc).__name__}: {exc})"
            return False

    def uninstall(self) -> None:
        """Put the previous trace function back (only ours is removed); idempotent."""
        if not self._installed:
            return
        self._installed = False
        self._stopped = True
        if threading.get_ident() != self._thread:  # sys.settrace reaches this thread only
            self._void = "statement lines not recorded: the traced pass ended on another thread than it began"
            return
        if sys.gettrace() is self._global:
            sys.settrace(self._previous)
        else:  # the profiled code set its own (or removed ours): leave it; what was recorded may be incomplete
            self._void = (
                "statement lines not recorded: the profiled code changed the trace function "
                "(sys.settrace) during the traced pass"
            )

    def stop(self) -> StatementLines | None:
        """Uninstall (if still installed) and build the record; None (with ``note``) where there is none."""
        stopped_early = self._stopped
        self.uninstall()
        end_perf = time.perf_counter_ns()
        try:
            if self._void:
                self.note = self._void
                return None
            if self._global is None:
                return None
            if not stopped_early:
                self._flush(final=True)
            end_perf = self._stop_ns or end_perf  # where recording stopped early: the first event not kept
            offset, spread = self._offset
            later, _ = clock_offset_ns()
            if abs(later - offset) > _CLOCK_MOVED_NS + spread:
                moved = f"the system clock moved by {(later - offset) / 1e6:.1f} ms while recording"
                self.note = "; ".join(n for n in (self.note, moved) if n)
            flat = np.frombuffer(self._done, dtype=np.int64) if len(self._done) else np.zeros(0, np.int64)
            self.statements = _decode(
                flat, self._calls, self._prefixes, offset, end_perf, self.note, (self._pid, self._native_tid)
            )
            return self.statements
        except Exception as exc:  # noqa: BLE001 - a failure here never breaks the profile
            self.note = f"statement lines not recorded ({type(exc).__name__}: {exc})"
            return None
        finally:
            self._done = array("q")
            self._calls = []
            self._user = {}


def _decode(
    flat: np.ndarray,
    calls: list[CodeType],
    prefixes: list[str],
    offset_ns: int,
    end_perf_ns: int,
    note: str,
    thread: tuple[int, int],
) -> StatementLines:
    """The recorded (time, value) pairs as change points: the depth after each, the innermost
    frame's function and line (vectorised: for each change point, the last call at its depth is
    the frame on top, and that frame's last line event its line)."""
    pairs = flat.reshape(-1, 2)
    ts, value = pairs[:, 0], pairs[:, 1]
    n = len(ts)
    is_call, is_return = value == _CALL, value == _RETURN
    is_line = value >= 0
    depth = np.cumsum(is_call.astype(np.int64) - is_return.astype(np.int64))
    n_calls = int(is_call.sum())
    if n_calls > len(calls) or (depth < 0).any():
        raise ValueError("the recorded calls and returns do not pair up")
    ids: dict[CodeType, int] = {}
    call_code = np.fromiter((ids.setdefault(c, len(ids)) for c in calls[:n_calls]), dtype=np.int64, count=n_calls)
    codes = tuple((trace_file_name(c.co_filename, prefixes), int(c.co_firstlineno), c.co_name) for c in ids)
    first_line = np.array([line for _, line, _ in codes], dtype=np.int64)
    opened = _last_at_depth(is_call, depth)  # the call that opened the frame on top
    lined = _last_at_depth(is_line, depth)  # that depth's last line event
    code_at = np.full(n, -1, dtype=np.int64)
    call_rank = np.cumsum(is_call) - 1  # the index of each call among the calls
    top = opened >= 0
    code_at[top] = call_code[call_rank[opened[top]]]
    line_at = np.full(n, -1, dtype=np.int64)
    line_at[top] = first_line[code_at[top]]
    current = top & (lined >= opened)
    line_at[current] = value[lined[current]]
    code_at[depth == 0], line_at[depth == 0] = -1, -1
    return StatementLines(
        pid=thread[0],
        tid=thread[1],
        ts_ns=(ts + offset_ns).astype(np.int64),
        code=code_at.astype(np.int32),
        line=line_at.astype(np.int32),
        depth=depth.astype(np.int32),
        codes=codes,
        end_ns=int(end_perf_ns + offset_ns),
        note=note,
    )


def _last_at_depth(flag: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """Per change point i: the last j <= i with ``flag[j]`` and ``depth[j] == depth[i]``, else -1
    (one sort by depth, then a running maximum that cannot cross from one depth to the next)."""
    n = len(flag)
    if not n:
        return np.zeros(0, dtype=np.int64)
    index = np.arange(n, dtype=np.int64)
    order = np.lexsort((index, depth))
    base = depth[order].astype(np.int64) * (n + 1)
    running = np.maximum.accumulate(np.where(flag[order], base + order, -1))
    found = np.where(running >= base, running - base, -1)
    out = np.empty(n, dtype=np.int64)
    out[order] = found
    return out
