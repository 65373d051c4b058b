"""Time attributed to the user's code: by ``nn.Module`` path and by the user's source line.

``module_breakdown``: op and kernel time per module path (``Block_0/LnGelu_0``, the chain of
``nn.Module`` scopes the profiler recorded with ``with_stack=True``), inclusive (the module and
everything it called) and self (not inside a child module), as TensorBoard's module view showed.
``source_breakdown``: the same time per user source location, the innermost frame in the user's
files (``model.py:42 in forward``: not torch's, the standard library's or a site-package's), as
``key_averages(group_by_stack_n=...)`` grouped; inclusive time counts every user frame on the stack.

What is attributed (``basis``): on a trace with GPU activity, kernel (and memcpy/memset) time,
each kernel reaching its Python scope through its launch (kernel -> runtime call by correlation ->
the Python events open on the launching thread when the launch started); on a CPU-only trace,
CPU op self time (each op by where it started), so nothing is counted twice. Both are reported for
modules (``cpu_op_us``, ``kernel_us``). The module's own Python time under the tracer (``wall_us``)
is there too: it holds the tracer's overhead, so read it as an upper bound.

Times are totals over the trace in µs; ``*_ms_per_call`` divide by ``calls`` (default: the
trace's ``ProfilerStep#`` annotations, else 1) and multiply by ``scale`` (``run.trace_scale`` for a
profiled run: the clean / traced time). A trace without Python events gives a result whose
``not_recorded`` says why (the table is then empty), never a silently empty table. Module scopes
recorded as annotations (``record_function("nn.Module: <Class>_<k>")``, what the traced pass
records with forward hooks where the Python tracer is unavailable) count as module scopes.

The line of a source location: the statement that was running in that frame, where the traced
pass recorded the statements of the user's code (``statements=``: ``workbench.trace.statements.
StatementLines``, ``ProfileRun.attribution`` passes the run's; ``workbench.analysis.statement_lines``
puts them on the trace's timeline): an op is attributed to the statement executing in its innermost
user frame when it started on its thread, so that ``model.py:42 in forward`` is ``y = self.attn(x)``,
and its inclusive time to the statement each enclosing user frame was at (the call into the next).
``def_line`` keeps the function's first line. Without statements (a trace from a file, an older
run), or for a frame the recording does not cover, the line is the function's first line, as the
profiler names Python events (``file.py(123): fn``): the exported trace holds no call-site lines.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import pandas as pd

from workbench.analysis.backward_scopes import backward_module_paths, in_spans, optimizer_step_spans
from workbench.analysis.optimizer_split import OptimizerSplit, optimizer_split
from workbench.analysis.python_stack import MODULE_PREFIX, Frame, PythonStack, python_stack
from workbench.analysis.result import AnalysisResult
from workbench.analysis.statement_lines import TimedStatements, on_trace
from workbench.errors import InvalidArgumentError

if TYPE_CHECKING:
    from workbench.trace import TraceData
    from workbench.trace.optimizer_params import OptimizerStepParams
    from workbench.trace.statements import StatementLines

BASES = ("auto", "kernel", "cpu_op")
TOP_ITEMS = 3  # ops / kernels kept per module or source line
NO_PYTHON_EVENTS = (
    "the trace has no Python events (python_function): it was recorded without the "
    "Python stack; profile with torch.profiler.profile(with_stack=True, with_modules=True), "
    "as wb.profile does"
)
NO_MODULES = (
    "the Python events of the trace hold no nn.Module scope: no nn.Module ran in the traced "
    "calls (or the profiler did not record module scopes)"
)
NO_USER_FRAMES = (
    "no Python frame in the trace is in your files (every frame is in torch, the standard "
    "library or site-packages); name your files with user_paths="
)
NO_FRAMES = (
    "the trace holds nn.Module scopes but no Python frames (recorded without the Python tracer); "
    "source lines need torch.profiler.profile(with_stack=True)"
)
NO_WORK = "the trace has no CPU ops or GPU kernels to attribute"

MODULE_COLUMNS = [
    "path",
    "module",
    "name",
    "depth",
    "parent",
    "count",
    "inclusive_us",
    "self_us",
    "inclusive_pct",
    "self_pct",
    "inclusive_ms_per_call",
    "self_ms_per_call",
    "cpu_op_us",
    "cpu_op_self_us",
    "kernel_us",
    "kernel_self_us",
    "wall_us",
    "backward_us",
    "backward_self_us",
    "backward_pct",
    "optimizer_us",
    "optimizer_self_us",
]
SOURCE_COLUMNS = [
    "location",
    "file",
    "line",
    "def_line",
    "function",
    "count",
    "self_us",
    "inclusive_us",
    "self_pct",
    "inclusive_pct",
    "self_ms_per_call",
    "inclusive_ms_per_call",
]
ITEM_COLUMNS = ["key", "name", "us", "pct_of_key"]


def _empty(columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="float64") for c in columns})


@dataclass(frozen=True, eq=False)
class ModuleBreakdown(AnalysisResult):
    """``table``: one row per ``nn.Module`` path, in tree order (a module, then its children by
    inclusive time): path, module (the last scope, ``LnGelu_0``), name (the module's name in its model,
    ``blocks.1.mlp.fc``, where a profiled run recorded it: ``module_names``; else the label), depth (0 at the top), parent
    (its path, "" at the top), count (its calls in the trace), inclusive_us / self_us (``basis``
    time in it and its children / in it alone), their pct of ``total_us`` and ms per call,
    cpu_op_us / cpu_op_self_us (CPU op self time), kernel_us / kernel_self_us (GPU time through
    launches), wall_us (its Python time under the tracer), backward_us / backward_self_us / backward_pct
    (``basis`` time in the backward of the module's forward ops, and its children's, linked by autograd's
    sequence numbers: ``workbench.analysis.backward_scopes``; not part of inclusive_us, which is the
    time inside the module's scope), optimizer_us / optimizer_self_us (``basis`` time of the optimizer's
    step updating the module's parameters, and its children's: ``workbench.analysis.optimizer_split``,
    where the profiled run recorded what each step visited and the step updates one parameter at a time;
    not part of inclusive_us either). ``items``: the top ops or kernels of
    each path, inclusive (key = path). ``outside_us``: time in no module's scope, of which
    ``backward_us`` is the backward of some module's ops and ``optimizer_us`` ran inside an
    ``Optimizer.step`` (``optimizer_split_us`` of it split by module; ``optimizer_not_split``: per optimizer
    class, why its step was not); ``unlinked_us``: GPU time whose launch is not in the trace. ``not_recorded``: why there is no table ("" when there is;
    when there is none, nothing is attributed and ``outside_us`` is all of ``total_us``)."""

    items: pd.DataFrame
    basis: str
    total_us: float
    outside_us: float
    unlinked_us: float
    calls: int
    scale: float
    not_recorded: str
    backward_us: float = 0.0
    optimizer_us: float = 0.0
    optimizer_split_us: float = 0.0
    optimizer_not_split: tuple[str, ...] = ()  # "AdamW: why", per optimizer class whose step was not split
    kind: ClassVar[str] = "module_breakdown"

    @property
    def recorded(self) -> bool:
        return not self.not_recorded

    @property
    def other_outside_us(self) -> float:
        """Time outside every module's scope that is neither a module's backward nor the optimizer step."""
        return max(0.0, self.outside_us - self.backward_us - self.optimizer_us)

    @property
    def attributed_us(self) -> float:
        """Time inside some module (the top-level modules' inclusive time)."""
        if not len(self.table):
            return 0.0
        return float(self.table.loc[self.table["depth"] == 0, "inclusive_us"].sum())

    def top_items(self, path: str) -> pd.DataFrame:
        """The top ops or kernels under the module ``path`` (inclusive), largest first."""
        return self.items[self.items["key"] == path].reset_index(drop=True)


@dataclass(frozen=True, eq=False)
class SourceBreakdown(AnalysisResult):
    """``table``: one row per source location in the user's files under which some op or kernel
    ran, by self time: location
    (``file.py:123 in fn``), file, line (the statement's line where the run recorded statements, else
    the function's first line), def_line (the function's first line), function, count (calls of it
    in the trace; for a statement, its executions that ran some op or kernel), self_us (``basis`` time whose innermost user frame it is), inclusive_us (time
    with it anywhere on the user's stack), their pct of ``total_us`` and ms per call. ``items``:
    the top ops or kernels of each location (self; key = location). ``outside_us``: time with no
    user frame on its stack. ``not_recorded``: why there is no table ("" when there is)."""

    items: pd.DataFrame
    basis: str
    total_us: float
    outside_us: float
    calls: int
    scale: float
    not_recorded: str
    kind: ClassVar[str] = "source_breakdown"

    @property
    def recorded(self) -> bool:
        return not self.not_recorded

    def top_items(self, location: str) -> pd.DataFrame:
        """The top ops or kernels whose innermost user frame is ``location``, largest first."""
        return self.items[self.items["key"] == location].reset_index(drop=True)


@dataclass(frozen=True, eq=False)
class Attribution:
    """A run's or trace's time by module and by source line (what the run card and report show)."""

    modules: ModuleBreakdown
    sources: SourceBreakdown

    @property
    def recorded(self) -> bool:
        return self.modules.recorded or self.sources.recorded

    def to_dict(self) -> dict:
        return {"kind": "attribution", "modules": self.modules.to_dict(), "sources": self.sources.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> Attribution:
        if data.get("kind") != "attribution":
            raise InvalidArgumentError(
                f"Attribution.from_dict got a {data.get('kind')!r} result; pass the "
                "dict that Attribution.to_dict() produced"
            )
        modules, sources = ModuleBreakdown.from_dict(data["modules"]), SourceBreakdown.from_dict(data["sources"])
        assert isinstance(modules, ModuleBreakdown) and isinstance(sources, SourceBreakdown)  # kinds checked
        return cls(modules, sources)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.modules == other.modules and self.sources == other.sources

    __hash__ = None  # type: ignore[assignment]


# --- public functions -------------------------------------------------------------------------


def module_breakdown(
    trace: TraceData,
    *,
    basis: str = "auto",
    calls: int | None = None,
    scale: float = 1.0,
    top: int = TOP_ITEMS,
    module_names: Mapping[str, str] | None = None,
    optimizer_params: Sequence[OptimizerStepParams] = (),
) -> ModuleBreakdown:
    """Op and kernel time per ``nn.Module`` path (see the module docstring). ``module_names``: the
    scopes' labels -> the modules' names in their model (``{"Linear_6": "blocks.1.mlp.fc"}``, what a
    profiled run recorded: ``RunRecord.module_names``); the table's ``name`` column reads them, and
    the label where there is none or where the names do not nest as the scopes do. ``optimizer_params``:
    what each optimizer's step visited (``RunRecord.optimizer_params``), for the optimizer's time by module."""
    work = _work(trace, basis, calls, scale, top)
    reason = work.reason or (NO_MODULES if not work.stack.has_modules else "")
    if reason:
        return ModuleBreakdown(
            _empty(MODULE_COLUMNS),
            _empty(ITEM_COLUMNS),
            work.basis,
            work.total_us,
            work.total_us,
            work.unlinked_us,
            work.calls,
            work.scale,
            reason,
        )
    stack = work.stack
    cpu_path = _paths(stack, work.cpu_event)
    gpu_path = _paths(stack, work.gpu_event)
    basis_path = cpu_path if work.basis == "cpu_op" else gpu_path
    self_basis = _sums(basis_path, work.us)
    self_cpu = _sums(cpu_path, work.cpu_us)
    self_gpu = _sums(gpu_path, work.gpu_us)
    modules = np.flatnonzero(stack.module_path != "")
    counts = pd.Series(stack.module_path[modules]).value_counts().to_dict()
    dur = stack.events["end_us"].to_numpy() - stack.events["ts_us"].to_numpy()
    walls = pd.Series(dur[modules]).groupby(stack.module_path[modules]).sum().to_dict()
    all_paths = set(counts)
    inclusive_basis, inclusive_cpu, inclusive_gpu = (
        _inclusive(sums, all_paths) for sums in (self_basis, self_cpu, self_gpu)
    )
    backward_path, in_optimizer = _outside_split(trace, work, cpu_path, basis_path)
    self_backward = _sums(backward_path, work.us)
    inclusive_backward = _inclusive(self_backward, all_paths)
    split = optimizer_split(trace.cpu_ops, trace.annotations, optimizer_params)
    optimizer_path = _optimizer_paths(split, work, in_optimizer & (backward_path == ""), all_paths)
    self_optimizer = _sums(optimizer_path, work.us)
    inclusive_optimizer = _inclusive(self_optimizer, all_paths)
    rows = []
    names = _names(all_paths, module_names or {})
    for path in _tree_order(all_paths, inclusive_basis):
        parent, _, module = path.rpartition("/")
        rows.append(
            {
                "path": path,
                "module": module,
                "name": names.get(module, module),
                "depth": path.count("/"),
                "parent": parent,
                "count": int(counts.get(path, 0)),
                "inclusive_us": inclusive_basis.get(path, 0.0),
                "self_us": self_basis.get(path, 0.0),
                "cpu_op_us": inclusive_cpu.get(path, 0.0),
                "cpu_op_self_us": self_cpu.get(path, 0.0),
                "kernel_us": inclusive_gpu.get(path, 0.0),
                "kernel_self_us": self_gpu.get(path, 0.0),
                "wall_us": float(walls.get(path, 0.0)),
                "backward_us": inclusive_backward.get(path, 0.0),
                "backward_self_us": self_backward.get(path, 0.0),
                "optimizer_us": inclusive_optimizer.get(path, 0.0),
                "optimizer_self_us": self_optimizer.get(path, 0.0),
            }
        )
    table = _with_shares(pd.DataFrame(rows), work)
    table["backward_pct"] = 100.0 * table["backward_us"] / work.total_us if work.total_us > 0 else 0.0
    table = table[MODULE_COLUMNS]
    items = _items(basis_path, work.names, work.us, top, inclusive=True)
    outside_rows = basis_path == ""
    outside = float(work.us[outside_rows].sum())
    return ModuleBreakdown(
        table,
        items,
        work.basis,
        work.total_us,
        outside,
        work.unlinked_us,
        work.calls,
        work.scale,
        "",
        backward_us=float(work.us[outside_rows & (backward_path != "")].sum()),
        optimizer_us=float(work.us[outside_rows & (backward_path == "") & in_optimizer].sum()),
        optimizer_split_us=float(work.us[outside_rows & (optimizer_path != "")].sum()),
        optimizer_not_split=tuple(f"{name}: {why}" for name, why in sorted(split.not_split.items())),
    )


def _optimizer_paths(split: OptimizerSplit, work: _Work, in_optimizer: np.ndarray, paths: set[str]) -> np.ndarray:
    """Per basis item inside an optimizer step: the path of the module whose parameter the step was updating
    when it started ("" elsewhere, and where that module ran in no scope of the trace)."""
    out = np.full(len(in_optimizer), "", dtype=object)
    if not in_optimizer.any() or not len(split.segments) or work.points is None:
        return out
    by_label: dict[str, str] = {}
    for path in sorted(paths, key=lambda p: (p.count("/"), p)):
        by_label.setdefault(path.rpartition("/")[2], path)
    rows = np.flatnonzero(in_optimizer)
    labels = split.module_at(work.points.iloc[rows])
    out[rows] = np.array([by_label.get(str(label), "") for label in labels], dtype=object)
    return out


def _outside_split(
    trace: TraceData, work: _Work, cpu_path: np.ndarray, basis_path: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per basis item outside every module scope: the module whose backward it runs in ("" if none), and
    whether it ran inside an ``Optimizer.step`` (items inside a scope: "" and False)."""
    ops = trace.cpu_ops
    op_backward = backward_module_paths(ops, cpu_path)
    if work.basis == "cpu_op":
        item_backward = op_backward
    else:
        kernels = trace.kernels
        linked = kernels["runtime_index"].to_numpy() >= 0
        op = kernels["op_index"].to_numpy(np.int64)[linked] if "op_index" in kernels else np.full(linked.sum(), -1)
        ok = (op >= 0) & (op < len(op_backward))
        item_backward = np.full(len(op), "", dtype=object)
        item_backward[ok] = op_backward[op[ok]]
    outside = basis_path == ""
    item_backward = np.where(outside, item_backward, "")
    spans = optimizer_step_spans(trace.annotations, ops)
    points = work.points if work.points is not None else pd.DataFrame()
    in_optimizer = in_spans(spans, points) & outside if len(points) == len(outside) else np.zeros(len(outside), bool)
    return item_backward, in_optimizer


def source_breakdown(
    trace: TraceData,
    *,
    basis: str = "auto",
    calls: int | None = None,
    scale: float = 1.0,
    top: int = TOP_ITEMS,
    user_paths: Sequence[str] | None = None,
    cells: Mapping[str, int] | None = None,
    statements: StatementLines | None = None,
) -> SourceBreakdown:
    """Op and kernel time per source location in the user's files (see the module docstring).

    ``user_paths``: file path prefixes or suffixes that are the user's code (``("model.py",
    "mypkg/")``); by default every frame outside torch, the standard library, site-packages and
    a few well-known frameworks is the user's. ``cells``: a notebook's cell files (ipykernel's
    ``ipykernel_<pid>/<id>.py``: the id) -> their execution count, so that a cell's code reads
    ``cell [7], line 3 in f`` rather than ``notebook cell <id>:3 in f`` (a profiled run records
    them: ``ProfileRun.cells``); IPython's own ``<ipython-input-7-…>`` files read so without it.
    ``statements``: what the traced pass recorded of the statements that ran (``RunRecord.statements``):
    each location is then the statement, ``file.py:42 in fn``, not the function's first line; None,
    empty, or not this trace's (``workbench.analysis.statement_lines.on_trace``): first lines."""
    work = _work(trace, basis, calls, scale, top, user_paths)
    has_frames = any(frame is not None for frame in work.stack.frames)
    reason = work.reason or ("" if work.stack.has_user_frames else NO_USER_FRAMES if has_frames else NO_FRAMES)
    if reason:
        return SourceBreakdown(
            _empty(SOURCE_COLUMNS),
            _empty(ITEM_COLUMNS),
            work.basis,
            work.total_us,
            work.total_us,
            work.calls,
            work.scale,
            reason,
        )
    stack = work.stack
    event = work.cpu_event if work.basis == "cpu_op" else work.gpu_event
    innermost = np.where(event >= 0, stack.user[np.clip(event, 0, None)], -1)
    timed = on_trace(statements, trace) if statements is not None else None
    if timed is not None and work.points is not None:
        return _statement_breakdown(work, innermost, timed.at(work.points), timed, cells or {}, top)
    locations = np.where(innermost >= 0, stack.location[np.clip(innermost, 0, None)], "")
    self_us = _sums(locations, work.us)
    inclusive = _source_inclusive(stack, innermost, work.us)
    user_events = np.flatnonzero(stack.user == np.arange(len(stack.user)))
    counts = pd.Series(stack.location[user_events]).value_counts().to_dict()
    first = {}
    for event in user_events[::-1]:
        first[stack.location[event]] = int(event)
    rows = []
    for location, count in counts.items():
        frame = stack.frames[first[location]]
        assert frame is not None
        rows.append(
            {
                "location": cell_location(location, cells or {}),
                "file": frame.file,
                "line": frame.line,
                "def_line": frame.line,
                "function": frame.function,
                "count": int(count),
                "self_us": self_us.get(location, 0.0),
                "inclusive_us": inclusive.get(location, 0.0),
            }
        )
    return _source_result(rows, locations, work, top, cells or {})


MAX_FRAME_WALK = 64  # recorded frames searched, from the innermost out, for the trace's frame


def _statement_breakdown(
    work: _Work,
    innermost: np.ndarray,
    point: np.ndarray,
    timed: TimedStatements,
    cells: Mapping[str, int],
    top: int,
) -> SourceBreakdown:
    """``source_breakdown`` with the statements on the trace's timeline: each item's user stack (the
    trace's frames, innermost first) read at the statement each frame was running when the item
    started (``point``: the change point in effect then, per item); a frame the recording does not
    hold keeps its first line."""
    stack = work.stack
    user_parent = (
        np.where(stack.parent >= 0, stack.user[np.clip(stack.parent, 0, None)], -1)
        if len(stack.parent)
        else stack.parent
    )
    span = len(timed.ts_us) + 1
    inside = innermost >= 0
    pair_keys, inverse = np.unique(innermost[inside] * span + (point[inside] + 1), return_inverse=True)
    pair_us = np.bincount(inverse, weights=work.us[inside], minlength=len(pair_keys))
    rows_of: dict[str, tuple[str, int, int, str]] = {}  # location -> file, line, def_line, function
    executions: dict[str, set[int]] = defaultdict(set)
    inclusive: dict[str, float] = defaultdict(float)
    own: list[str] = []
    for key, us in zip(pair_keys.tolist(), pair_us.tolist()):
        event, at = divmod(int(key), span)
        chain = _statement_chain(stack, user_parent, timed, event, at - 1)
        own.append(chain[0][0])
        seen: set[str] = set()
        for location, change, row in chain:
            rows_of.setdefault(location, row)
            if change >= 0:
                executions[location].add(change)
            if location not in seen:
                seen.add(location)
                inclusive[location] += float(us)
    locations = np.full(len(work.us), "", dtype=object)
    if len(own):
        locations[inside] = np.array(own, dtype=object)[inverse]
    self_us = _sums(locations, work.us)
    user_events = np.flatnonzero(stack.user == np.arange(len(stack.user)))
    calls = pd.Series(stack.location[user_events]).value_counts().to_dict()
    rows = [
        {
            "location": cell_location(location, cells),
            "file": file,
            "line": line,
            "def_line": def_line,
            "function": function,
            "count": len(executions[location]) if location in executions else int(calls.get(location, 0)),
            "self_us": self_us.get(location, 0.0),
            "inclusive_us": inclusive.get(location, 0.0),
        }
        for location, (file, line, def_line, function) in rows_of.items()
    ]
    return _source_result(rows, locations, work, top, cells)


def _source_result(
    rows: list[dict], locations: np.ndarray, work: _Work, top: int, cells: Mapping[str, int]
) -> SourceBreakdown:
    """The breakdown from its rows (one per location) and each item's location ("" outside your files)."""
    table = _with_shares(pd.DataFrame(rows, columns=SOURCE_COLUMNS[:8]), work)
    table = table[table["inclusive_us"] > 0]  # frames that ran no op or kernel are not shown
    table = table.sort_values(
        ["self_us", "inclusive_us", "location"], ascending=[False, False, True], ignore_index=True
    )[SOURCE_COLUMNS]
    items = _items(locations, work.names, work.us, top, inclusive=False)
    items["key"] = [cell_location(str(key), cells) for key in items["key"]]
    outside = float(work.us[locations == ""].sum())
    return SourceBreakdown(table, items, work.basis, work.total_us, outside, work.calls, work.scale, "")


def _statement_chain(
    stack: PythonStack, user_parent: np.ndarray, timed: TimedStatements, event: int, change: int
) -> list[tuple[str, int, tuple[str, int, int, str]]]:
    """The user frames of ``event`` outwards, each as (location, the change point it was read from
    or -1, (file, line, def_line, function)): the frame at the statement the recording holds for it
    (the recorded frames searched from ``change`` outwards for the same function), else at its first line."""
    out: list[tuple[str, int, tuple[str, int, int, str]]] = []
    current = event
    while current >= 0:
        frame = stack.frames[current]
        assert frame is not None  # a user event is a parsed frame
        found, walk, steps = -1, change, 0
        while walk >= 0 and steps < MAX_FRAME_WALK:
            if _same_code(timed, walk, frame):
                found = walk
                break
            walk, steps = int(timed.parent[walk]), steps + 1
        if found >= 0:
            line = int(timed.line[found])
            statement = Frame(frame.file, line, frame.function)
            out.append((statement.location, found, (frame.file, line, frame.line, frame.function)))
            change = int(timed.parent[found])
        else:
            out.append((str(stack.location[current]), -1, (frame.file, frame.line, frame.line, frame.function)))
        current = int(user_parent[current])
    return out


def _same_code(timed: TimedStatements, point: int, frame: Frame) -> bool:
    """Whether change point ``point`` is in the code the trace's ``frame`` names: the same file and first
    line, or the same file's top level (the profiler names a module's or an exec'd cell's code at line 0,
    its code object starts at line 1)."""
    file, first, function = timed.codes[int(timed.code[point])]
    if file != frame.file:
        return False
    return first == frame.line or (function == frame.function == "<module>" and frame.line <= 0)


_CELL_LOCATION = re.compile(
    r"^(?:notebook cell (?P<id>\d+)|<ipython-input-(?P<count>\d+)-[0-9a-f]+>)(?::(?P<line>\d+))?"
)


def cell_location(location: str, cells: Mapping[str, int]) -> str:
    """``notebook cell <id>:3 in f`` -> ``cell [7], line 3 in f`` where ``cells`` knows the id (its
    execution count), and IPython's ``<ipython-input-7-…>:3 in f`` likewise; any other location as it is."""
    found = _CELL_LOCATION.match(location)
    if found is None:
        return location
    count = found["count"] if found["count"] is not None else cells.get(found["id"] or "")
    if count is None:
        return location
    where = f"cell [{count}]" + (f", line {found['line']}" if found["line"] is not None else "")
    return where + location[found.end() :]


def attribution(
    trace: TraceData,
    *,
    basis: str = "auto",
    calls: int | None = None,
    scale: float = 1.0,
    top: int = TOP_ITEMS,
    user_paths: Sequence[str] | None = None,
    module_names: Mapping[str, str] | None = None,
    cells: Mapping[str, int] | None = None,
    statements: StatementLines | None = None,
    optimizer_params: Sequence[OptimizerStepParams] = (),
) -> Attribution:
    """Both breakdowns, from one nesting of the trace's Python events (``module_names`` and
    ``optimizer_params``: as ``module_breakdown``'s, ``cells`` and ``statements`` as ``source_breakdown``'s)."""
    return Attribution(
        module_breakdown(
            trace,
            basis=basis,
            calls=calls,
            scale=scale,
            top=top,
            module_names=module_names,
            optimizer_params=optimizer_params,
        ),
        source_breakdown(
            trace,
            basis=basis,
            calls=calls,
            scale=scale,
            top=top,
            user_paths=user_paths,
            cells=cells,
            statements=statements,
        ),
    )


# --- the work to attribute ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Work:
    stack: PythonStack
    basis: str
    calls: int
    scale: float
    total_us: float
    unlinked_us: float
    us: np.ndarray  # basis time per item
    names: np.ndarray  # basis item names (op or kernel)
    cpu_event: np.ndarray  # per CPU op: the Python event open when it started
    cpu_us: np.ndarray
    gpu_event: np.ndarray  # per linked GPU event: the Python event open when its launch started
    gpu_us: np.ndarray
    reason: str
    points: pd.DataFrame | None = None  # per basis item: where it started (rank, pid, tid, ts_us, end_us)


def _check(basis: str, calls: int | None, scale: float, top: int) -> None:
    if basis not in BASES:
        raise InvalidArgumentError(f"basis must be one of {BASES}; got {basis!r}")
    if calls is not None and (isinstance(calls, bool) or not isinstance(calls, (int, np.integer)) or calls < 1):
        raise InvalidArgumentError(
            f"calls must be an integer >= 1 (the profiled calls the trace covers); got {calls!r}"
        )
    if not isinstance(scale, (int, float)) or not scale > 0 or scale != scale or scale == float("inf"):
        raise InvalidArgumentError(f"scale must be a finite number > 0 (clean / traced time); got {scale!r}")
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise InvalidArgumentError(f"top must be an integer >= 1 (ops or kernels kept per row); got {top!r}")


def _work(
    trace: TraceData, basis: str, calls: int | None, scale: float, top: int, user_paths: Sequence[str] | None = None
) -> _Work:
    _check(basis, calls, scale, top)
    for table in ("python_calls", "cpu_ops", "kernels", "runtime", "annotations"):
        if not hasattr(trace, table):
            raise InvalidArgumentError(
                f"attribution needs a Trace (from workbench.load_trace); got {type(trace).__name__} without .{table}"
            )
    kernels, ops = trace.kernels, trace.cpu_ops
    chosen = ("kernel" if len(kernels) else "cpu_op") if basis == "auto" else basis
    n_calls = int(calls) if calls is not None else _steps(trace.annotations)
    events = _stack_events(trace.python_calls, trace.annotations)
    stack = python_stack(events, user_paths)
    cpu_us = ops["self_us"].to_numpy(np.float64) if len(ops) else np.zeros(0)
    linked = kernels["runtime_index"].to_numpy() >= 0 if len(kernels) else np.zeros(0, dtype=bool)
    gpu_us = kernels["dur_us"].to_numpy(np.float64)[linked] if len(kernels) else np.zeros(0)
    unlinked_us = float(kernels["dur_us"].to_numpy(np.float64)[~linked].sum()) if len(kernels) else 0.0
    reason = ""
    if not len(events):
        reason = NO_PYTHON_EVENTS
    elif chosen == "kernel" and not len(kernels):
        reason = "the trace has no GPU kernels to attribute (basis=kernel); use basis=cpu_op or auto"
    elif not len(ops) and not len(kernels):
        reason = NO_WORK
    total_us = float(kernels["dur_us"].sum()) if chosen == "kernel" else float(cpu_us.sum())
    if reason:
        empty = np.zeros(0, dtype=np.int64)
        return _Work(
            stack,
            chosen,
            n_calls,
            float(scale),
            total_us,
            unlinked_us,
            np.zeros(0),
            np.zeros(0, dtype=object),
            empty,
            np.zeros(0),
            empty,
            np.zeros(0),
            reason,
        )
    cpu_points = _points(ops)
    cpu_event = stack.enclosing(cpu_points)
    gpu_event = np.zeros(0, dtype=np.int64)
    gpu_points = cpu_points.iloc[:0]
    if linked.any():  # kernel time per module is reported whatever the basis
        launches = trace.runtime.iloc[kernels["runtime_index"].to_numpy()[linked]]
        gpu_points = _points(launches)
        gpu_event = stack.enclosing(gpu_points)
    else:
        gpu_us = np.zeros(0)
    if chosen == "kernel":
        us, names = gpu_us, kernels["name"].astype(str).to_numpy(dtype=object)[linked]
    else:
        us, names = cpu_us, ops["name"].astype(str).to_numpy(dtype=object)
    return _Work(
        stack,
        chosen,
        n_calls,
        float(scale),
        total_us,
        unlinked_us if chosen == "kernel" else 0.0,
        us,
        names,
        cpu_event,
        cpu_us,
        gpu_event,
        gpu_us,
        "",
        cpu_points if chosen == "cpu_op" else gpu_points,
    )


def _stack_events(python_calls: pd.DataFrame, annotations: pd.DataFrame) -> pd.DataFrame:
    """The Python events, plus module scopes recorded as annotations (forward hooks, where the
    profiler ran without the Python tracer: ``workbench.capture.module_scopes``)."""
    if not len(annotations):
        return python_calls
    scopes = annotations[annotations["name"].astype(str).str.startswith(MODULE_PREFIX)]
    if not len(scopes):
        return python_calls
    columns = ["rank", "pid", "tid", "name", "ts_us", "end_us"]
    text = {"pid": str, "tid": str, "name": str}
    return pd.concat([python_calls[columns].astype(text), scopes[columns].astype(text)], ignore_index=True)


def _points(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[["rank", "pid", "tid", "ts_us", "end_us"]].reset_index(drop=True)


def _steps(annotations: pd.DataFrame) -> int:
    """Calls the trace covers by default: its ``ProfilerStep#`` annotations (all ranks), else 1."""
    if not len(annotations):
        return 1
    return max(1, int((annotations["kind"].astype(str) == "step").sum()))


# --- aggregation -------------------------------------------------------------------------------


def _paths(stack: PythonStack, event: np.ndarray) -> np.ndarray:
    """The module path of each item, from the Python event open when it started ("" outside any module)."""
    if not len(event) or not len(stack.module):
        return np.full(len(event), "", dtype=object)
    module = np.where(event >= 0, stack.module[np.clip(event, 0, None)], -1)
    return np.where(module >= 0, stack.module_path[np.clip(module, 0, None)], "")


def _sums(keys: np.ndarray, us: np.ndarray) -> dict[str, float]:
    if not len(keys):
        return {}
    sums = pd.Series(us).groupby(keys).sum()
    return {str(k): float(v) for k, v in sums.items() if k != ""}


def _names(paths: set[str], module_names: Mapping[str, str]) -> dict[str, str]:
    """The labels of ``paths``' scopes mapped to their modules' names, where every scope of every
    path has one and each name lies under its parent scope's (``blocks.1.mlp`` under ``blocks.1``,
    anything under the outermost module's own name): else {} (the labels stand), so that a
    numbering the recorded names do not match never puts a wrong name on a module."""
    if not module_names:
        return {}
    for path in paths:
        chain = path.split("/")
        if any(label not in module_names for label in chain):
            return {}
        for depth in range(1, len(chain)):
            parent, child = module_names[chain[depth - 1]], module_names[chain[depth]]
            top = depth == 1 and "." not in parent  # the model itself: its children's names start afresh
            if not (child.startswith(parent + ".") or top):
                return {}
    return {label: module_names[label] for path in paths for label in path.split("/")}


def _prefixes(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _inclusive(self_us: dict[str, float], paths: set[str]) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for path, us in self_us.items():
        for prefix in _prefixes(path):
            out[prefix] += us
    for path in paths:
        out.setdefault(path, 0.0)
    return dict(out)


def _tree_order(paths: set[str], inclusive: dict[str, float]) -> list[str]:
    """Depth first; siblings by inclusive time, then name. Every prefix of a path is a module too
    (its scope encloses it), so the walk reaches every path."""
    children: dict[str, list[str]] = defaultdict(list)
    for path in paths | {p for path in paths for p in _prefixes(path)}:
        children[path.rpartition("/")[0]].append(path)
    order: list[str] = []
    pending = sorted(children[""], key=lambda p: (-inclusive.get(p, 0.0), p), reverse=True)
    while pending:
        path = pending.pop()
        order.append(path)
        pending.extend(sorted(children.get(path, []), key=lambda p: (-inclusive.get(p, 0.0), p), reverse=True))
    return order


def _source_inclusive(stack: PythonStack, innermost: np.ndarray, us: np.ndarray) -> dict[str, float]:
    """Time per location with the location anywhere on the item's user stack (once per item)."""
    user_parent = (
        np.where(stack.parent >= 0, stack.user[np.clip(stack.parent, 0, None)], -1)
        if len(stack.parent)
        else stack.parent
    )
    per_event = pd.Series(us[innermost >= 0]).groupby(innermost[innermost >= 0]).sum()
    out: dict[str, float] = defaultdict(float)
    for event, event_us in per_event.items():
        seen: set[str] = set()
        current = int(event)
        while current >= 0:
            location = stack.location[current]
            if location not in seen:
                seen.add(location)
                out[location] += float(event_us)
            current = int(user_parent[current])
    return dict(out)


def _with_shares(table: pd.DataFrame, work: _Work) -> pd.DataFrame:
    total = work.total_us
    per_call = work.scale / work.calls / 1e3
    for stem in ("inclusive", "self"):
        table[f"{stem}_pct"] = 100.0 * table[f"{stem}_us"] / total if total > 0 else 0.0
        table[f"{stem}_ms_per_call"] = table[f"{stem}_us"] * per_call
    return table


def _items(keys: np.ndarray, names: np.ndarray, us: np.ndarray, top: int, inclusive: bool) -> pd.DataFrame:
    """The ``top`` op or kernel names per key by time (under a module path inclusive of its children)."""
    inside = keys != ""
    if not inside.any():
        return _empty(ITEM_COLUMNS)
    grouped = (
        pd.DataFrame({"key": keys[inside], "name": names[inside], "us": us[inside]})
        .groupby(["key", "name"], sort=False)["us"]
        .sum()
    )
    sums: dict[tuple[str, str], float] = defaultdict(float)
    for (key, name), value in grouped.items():
        for prefix in _prefixes(str(key)) if inclusive else [str(key)]:
            sums[(prefix, str(name))] += float(value)
    frame = pd.DataFrame([(k, n, v) for (k, n), v in sums.items()], columns=["key", "name", "us"])
    key_total = frame.groupby("key")["us"].transform("sum")
    frame["pct_of_key"] = np.where(key_total > 0, 100.0 * frame["us"] / key_total, 0.0)
    frame = frame.sort_values(["key", "us", "name"], ascending=[True, False, True], kind="stable")
    return frame.groupby("key", sort=False).head(top).reset_index(drop=True)[ITEM_COLUMNS]
