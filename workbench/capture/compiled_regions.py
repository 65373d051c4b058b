"""Compile facts that do not depend on when the compile happened: how many graphs a call of the
profiled function runs as, and where (and why) it breaks, for code compiled before the profile too.

``CompileWatcher`` reads dynamo's counters and logs while the profile runs, so a function compiled
and called before ``wb.profile`` shows nothing there. Two sources that do not care when:

* the trace (``source="trace"``): dynamo runs each compiled frame under a ``Torch-Compiled Region:
  <frame>/<compile>`` record function (``convert_frame``'s ``GuardedCode`` annotation), one per
  frame entered per call, nested when compiled code calls the next compiled frame. A graph break
  leaves the frame's graph, runs the unsupported code eagerly and calls a *resume function*
  (``torch_dynamo_resume_in_<fn>_at_<line>``, compiled as a frame of its own): each resume region
  a call enters is one break, and the regions that hold a graph are the graphs it runs. Counted
  per ``ProfilerStep#`` (one per traced call), the median over the traced calls.
* dynamo's cache (``source="dynamo cache"``, where the run has no trace): the cache entries of the
  profiled function's code (``torch._C._dynamo.eval_frame._debug_get_cache_entry_list``), followed
  through the resume functions each entry's code calls (``__resume_at_*`` globals): the frames
  compiled for it. Graphs compiled, not graphs run: a data-dependent branch's two sides both count.

Frame names, first lines and op counts come from dynamo's compilation metrics
(``torch._dynamo.utils._compilation_metrics``, the last 64 compiles), keyed by compile id;
break reasons and their user-code locations from ``torch._dynamo.utils.graph_break_reasons``
(every break dynamo met since its last reset, with the user stack), else from the breaking
frame's restart reasons. All are read, nothing is compiled: ``torch._dynamo.explain`` is not used,
because it calls ``torch._dynamo.reset()`` before and after (``eval_frame.explain``): the user's
compiled function would compile again on its next call.
"""

from __future__ import annotations

import linecache
import statistics
import sys
import warnings
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable

from workbench.capture.compile_diag import (
    BREAK_IN_CACHE,
    BREAK_IN_TRACE,
    CompileDiagnostics,
    GraphBreak,
    parse_graph_break,
)

REGION_PREFIX = "Torch-Compiled Region: "
RESUME_PREFIX = "torch_dynamo_resume_in_"
STEP_PREFIX = "ProfilerStep#"
SOURCE_TRACE = BREAK_IN_TRACE
SOURCE_CACHE = BREAK_IN_CACHE
_DETAIL_CHARS = 2000
_WALK_DEPTH = 3  # callables reached from the profiled one (closures, globals) looked into
_OWN_MODULES = ("torch", "workbench.", "functools")
_GENERIC_JUMP = (
    "data-dependent control flow: a Python branch (if/while/and/or) on a tensor's value "
    "(dynamo cannot trace it and breaks the graph there)"
)


@dataclass(frozen=True)
class Frame:
    """One compiled frame, from dynamo's compilation metrics."""

    compile_id: str
    name: str  # the code's co_name: the function, or torch_dynamo_resume_in_<fn>_at_<line>
    filename: str
    line: int
    op_count: int | None  # ops in its graph; 0 or None: the frame holds no graph
    restart_reasons: tuple[str, ...]

    @property
    def is_resume(self) -> bool:
        return self.name.startswith(RESUME_PREFIX)


@dataclass(frozen=True)
class CompiledStructure:
    """Graphs a call runs as and its breaks, found whatever the time of compilation."""

    source: str  # SOURCE_TRACE or SOURCE_CACHE
    graphs_per_call: float
    breaks_per_call: float
    breaks: tuple[GraphBreak, ...]
    frames: tuple[str, ...]  # "<compile id> <name> at <file:line>", the frames seen


def dynamo_frames() -> dict[str, Frame]:
    """Compile id -> frame, from the compilation metrics dynamo keeps (the latest per id: ids
    restart at 0 after ``torch._dynamo.reset()``)."""
    utils = sys.modules.get("torch._dynamo.utils")
    out: dict[str, Frame] = {}
    for m in list(getattr(utils, "_compilation_metrics", ()) or ()):
        cid = getattr(m, "compile_id", None)
        if not cid:
            continue
        ops = getattr(m, "graph_op_count", None)
        out[str(cid)] = Frame(
            str(cid),
            str(getattr(m, "co_name", "") or ""),
            str(getattr(m, "co_filename", "") or ""),
            int(getattr(m, "co_firstlineno", 0) or 0),
            None if ops is None else int(ops),
            tuple(str(r) for r in (getattr(m, "restart_reasons", None) or ())),
        )
    return out


def _break_records() -> list[tuple[str, list[tuple[str, int, str]]]]:
    """(reason text, user stack as (file, line, function)) of every break dynamo recorded."""
    utils = sys.modules.get("torch._dynamo.utils")
    out = []
    for r in list(getattr(utils, "graph_break_reasons", ()) or ()):
        stack = [(str(s.filename), int(s.lineno or 0), str(s.name)) for s in (getattr(r, "user_stack", None) or ())]
        out.append((str(getattr(r, "reason", r)), stack))
    return out


def _readable(text: str) -> str:
    reason = parse_graph_break(text)[0]
    return _GENERIC_JUMP if reason.startswith("generic_jump") else reason


def _source_line(filename: str, line: int) -> str:
    return linecache.getline(filename, line).strip() if filename and line else ""


class _Reasons:
    """Break reasons by user-code location, from dynamo's break records."""

    def __init__(self) -> None:
        self._at: dict[tuple[str, int], tuple[str, str]] = {}
        for text, stack in _break_records():
            if not stack:
                continue
            file, line, _ = stack[-1]
            found = (text, f"{file}:{line}")  # the innermost user frame: where the unsupported code is
            for f_file, f_line, _ in stack:  # a break in an inlined call resumes its callers there too
                self._at[(f_file, f_line)] = found  # later records win: the latest compile

    def for_frame(self, frame: Frame) -> tuple[str, str] | None:
        """(reason text, location) of the break a resume function exists for: it starts at the
        line of its break (or, for a break inside an inlined call, of that call)."""
        return self._at.get((frame.filename, frame.line)) if frame.is_resume else None


def _break_of(frame: Frame | None, parent: Frame | None, reasons: _Reasons, source: str) -> GraphBreak:
    found = reasons.for_frame(frame) if frame is not None else None
    if found is None and parent is not None and parent.restart_reasons:
        where = f"{frame.filename}:{frame.line}" if frame is not None and frame.is_resume else ""
        found = ("\n".join(parent.restart_reasons), where)
    if found is None:
        where = f"{frame.filename}:{frame.line}" if frame is not None else ""
        code = _source_line(frame.filename, frame.line) if frame is not None and frame.is_resume else ""
        reason = "reason not recorded by dynamo" + (f" (the code there: `{code}`)" if code else "")
        return GraphBreak(reason, where, 1, "", source)
    text, where = found
    file, _, line = where.rpartition(":")
    code = _source_line(file, int(line)) if line.isdigit() else ""
    detail = text[:_DETAIL_CHARS] + (f"\nsource: {code}" if code else "")
    return GraphBreak(_readable(text), where, 1, detail, source)


def _frame_label(cid: str, frame: Frame | None) -> str:
    if frame is None:
        return f"{cid} (frame not in dynamo's last compiles)"
    ops = "no graph" if not frame.op_count else f"{frame.op_count} ops"
    return f"{cid} {frame.name} at {frame.filename}:{frame.line} ({ops})"


def _holds_graph(frame: Frame | None) -> bool:
    """A frame dynamo recorded without ops runs no graph; one it no longer records is counted."""
    return frame is None or bool(frame.op_count)


def _grouped(breaks: Iterable[GraphBreak], per: float) -> tuple[GraphBreak, ...]:
    """One entry per (reason, location), its count per call (``per``: occurrences per call)."""
    seen: dict[tuple[str, str], GraphBreak] = {}
    counts: Counter = Counter()
    for b in breaks:
        seen.setdefault((b.reason, b.location), b)
        counts[(b.reason, b.location)] += 1
    return tuple(
        GraphBreak(b.reason, b.location, max(1, round(counts[key] * per)), b.detail, b.source)
        for key, b in seen.items()
    )


def structure_from_trace(trace: Any, frames: dict[str, Frame] | None = None) -> CompiledStructure | None:
    """Graphs and breaks per traced call from the trace's compiled regions; None without any."""
    ops = trace.cpu_ops
    if ops is None or ops.empty:
        return None
    names = ops["name"]
    if hasattr(names, "cat"):
        labels = [str(c) for c in names.cat.categories if str(c).startswith(REGION_PREFIX)]
        mask = names.isin(labels).to_numpy() if labels else None
    else:
        mask = names.astype(str).str.startswith(REGION_PREFIX).to_numpy()
    if mask is None or not mask.any():
        return None
    frames = dynamo_frames() if frames is None else frames
    reasons = _Reasons()
    rows = mask.nonzero()[0]
    is_region = dict.fromkeys(rows.tolist(), True)
    parents = ops["parent"].to_numpy()
    ts = ops["ts_us"].to_numpy()
    ids = {int(i): str(names.iloc[i])[len(REGION_PREFIX) :].strip() for i in rows}

    def enclosing(i: int) -> int | None:
        p = int(parents[i])
        while p >= 0:
            if p in is_region:
                return p
            p = int(parents[p])
        return None

    steps = _steps(trace)
    per_step: dict[int, list[tuple[bool, bool]]] = {k: [] for k in range(len(steps))} if steps else {0: []}
    breaks: list[GraphBreak] = []
    seen_ids: dict[str, None] = {}
    for i in rows.tolist():
        step = _step_of(float(ts[i]), steps)
        if step is None:
            continue
        cid = ids[i]
        seen_ids.setdefault(cid)
        frame = frames.get(cid)
        outer = enclosing(i)
        # a resume function is one break; a frame of unknown name counts as one where compiled
        # code entered it (a region inside a region), not where eager code called it
        is_break = frame.is_resume if frame is not None else outer is not None
        per_step[step].append((_holds_graph(frame), is_break))
        if is_break:
            parent = frames.get(ids[outer]) if outer is not None else None
            breaks.append(_break_of(frame, parent, reasons, SOURCE_TRACE))
    calls = [entries for entries in per_step.values()]
    if not any(calls):
        return None
    graphs = statistics.median(sum(g for g, _ in c) for c in calls)
    n_breaks = statistics.median(sum(b for _, b in c) for c in calls)
    return CompiledStructure(
        SOURCE_TRACE,
        float(graphs),
        float(n_breaks),
        _grouped(breaks, 1.0 / len(calls)),
        tuple(_frame_label(cid, frames.get(cid)) for cid in seen_ids),
    )


def _steps(trace: Any) -> list[tuple[float, float]]:
    ann = getattr(trace, "annotations", None)
    if ann is None or ann.empty:
        return []
    steps = ann[ann["name"].astype(str).str.startswith(STEP_PREFIX)]
    return sorted(zip(steps["ts_us"].astype(float), steps["end_us"].astype(float)))


def _step_of(ts: float, steps: list[tuple[float, float]]) -> int | None:
    if not steps:
        return 0
    for k, (start, end) in enumerate(steps):
        if start <= ts <= end:
            return k
    return None


# --- dynamo's cache, for runs without a trace ----------------------------------------------------
def _cache_entries(code: Any) -> list[Any]:
    from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list

    return list(_debug_get_cache_entry_list(code))


def _functions_in(obj: Any, depth: int, seen: set[int]) -> Iterable[Any]:
    """Python functions the profiled callable is or reaches: a partial's function, a compiled
    wrapper's original, a method's function, and (``depth`` levels) those its closure cells and
    the globals its code names hold."""
    if obj is None or id(obj) in seen or depth < 0:
        return
    seen.add(id(obj))
    for attr in ("func", "_torchdynamo_orig_callable", "__func__"):
        inner = getattr(obj, attr, None)
        if inner is not None and callable(inner) and not isinstance(obj, type):
            yield from _functions_in(inner, depth, seen)
    code = getattr(obj, "__code__", None)
    if code is None or str(getattr(obj, "__module__", "") or "").startswith(_OWN_MODULES):
        return  # torch's wrappers and ours hold no user frames: only what they wrap (above) does
    yield obj
    for cell in getattr(obj, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        if callable(value):
            yield from _functions_in(value, depth - 1, seen)
    namespace = getattr(obj, "__globals__", {}) or {}
    for name in code.co_names:
        value = namespace.get(name)
        if callable(value) and not isinstance(value, type):
            yield from _functions_in(value, depth - 1, seen)


def structure_from_cache(fn: Callable[..., Any], frames: dict[str, Frame] | None = None) -> CompiledStructure | None:
    """Frames dynamo holds compiled for the profiled callable (and what it calls); None if none."""
    frames = dynamo_frames() if frames is None else frames
    reasons = _Reasons()
    graphs, breaks, labels = 0, [], []
    visited: set[Any] = set()

    def walk(code: Any, namespace: dict, parent: Frame | None, depth: int) -> None:
        if code in visited or depth > 50:
            return
        visited.add(code)
        for entry in _cache_entries(code):
            cid = str(getattr(entry, "compile_id", "") or "")
            frame = frames.get(cid)
            nonlocal graphs
            graphs += _holds_graph(frame)
            labels.append(_frame_label(cid, frame))
            if frame is not None and frame.is_resume:
                breaks.append(_break_of(frame, parent, reasons, SOURCE_CACHE))
            out_code = getattr(entry, "code", None)
            for name in getattr(out_code, "co_names", ()):
                if name.startswith("__resume_at_"):
                    resume = getattr(namespace.get(name), "__code__", None)
                    if resume is not None:
                        walk(resume, namespace, frame, depth + 1)

    for f in _functions_in(fn, _WALK_DEPTH, set()):
        walk(f.__code__, getattr(f, "__globals__", {}) or {}, None, 0)
    if not labels:
        return None
    grouped = _grouped(breaks, 1.0)
    return CompiledStructure(SOURCE_CACHE, float(graphs), float(len(breaks)), grouped, tuple(labels))


def _compiled_in_process() -> bool:
    """Dynamo compiled something in this process (else no compiled region can run)."""
    utils = sys.modules.get("torch._dynamo.utils")
    if utils is None:
        return False
    return bool(getattr(utils, "_compilation_metrics", None)) or utils.counters.get("frames", {}).get("ok", 0) > 0


def compiled_structure(fn: Callable[..., Any] | None, trace_path: str | Path | None) -> CompiledStructure | None:
    """The trace's compiled regions where the run has a trace, else dynamo's cache for ``fn``;
    None where nothing compiled ran (or dynamo never compiled anything in this process)."""
    if not _compiled_in_process():
        return None
    frames = dynamo_frames()
    if trace_path is not None:
        from workbench.capture.trace_link import load_trace

        with warnings.catch_warnings():  # the run's own load of the same trace reports what is odd
            warnings.simplefilter("ignore")
            trace, _ = load_trace(trace_path)
        if trace is not None:
            return structure_from_trace(trace, frames)
    return structure_from_cache(fn, frames) if fn is not None else None


def with_compiled_code(diag: CompileDiagnostics, fn: Any = None, trace_path: Any = None) -> CompileDiagnostics:
    """``diag`` (a ``CompileWatcher``'s result) with the compile facts that do not depend on when the
    compile happened: the graphs and breaks of the compiled code the traced pass ran (the trace at
    ``trace_path``), else of what dynamo holds compiled for ``fn``. Nothing new where no compiled code
    ran; where reading fails, ``diag`` with a note saying so."""
    try:
        found = compiled_structure(fn, trace_path)
    except Exception as exc:  # noqa: BLE001 - private torch state moved: the profile's own facts stand
        note = f"compiled regions not read: {exc!r}"
        return replace(diag, note="; ".join(n for n in (diag.note, note) if n))
    return diag if found is None else with_structure(diag, found)


def with_structure(diag: CompileDiagnostics, found: CompiledStructure) -> CompileDiagnostics:
    """``diag`` with a ``CompiledStructure``. The breaks logged during the
    profile stand (they carry dynamo's own message); breaks found elsewhere are added where they
    are more than the logged ones (the function was compiled, in whole or in part, before), each
    site once, at a location the logs do not already name."""
    breaks = diag.graph_breaks
    logged_sites = len({(b.reason, b.location) for b in breaks})
    if found.breaks and logged_sites < round(found.breaks_per_call):
        named = {b.location for b in breaks if b.location}
        breaks = breaks + tuple(b for b in found.breaks if not b.location or b.location not in named)
    return replace(
        diag,
        graph_breaks=breaks,
        graphs_per_call=found.graphs_per_call,
        breaks_per_call=found.breaks_per_call,
        structure_source=found.source,
        compiled_frames=tuple(found.frames),
    )
