"""The Python call stack a trace recorded (``python_function`` events, torch.profiler's
``with_stack=True``): which frames are the user's, which are ``nn.Module`` scopes, and which
Python event encloses a given CPU op or runtime call.

Kineto names a Python event ``"<file>(<line>): <function>"`` (the file relative to the
``sys.path`` entry it was found under, the line the function's first line), ``"nn.Module:
<Class>_<k>"`` for a module's call (``k`` numbers the instances of that class), or
``"<built-in ...>"`` for a C function. Events of one thread nest by time, as a call stack does;
their nesting is computed the way CPU ops nest (``workbench.trace.nesting``).

A frame is the user's unless its file is the standard library's, a third-party package's
(``site-packages``, ``dist-packages``, or a well-known framework's top-level package), torch's
or workbench's own, or a ``<...>`` pseudo-file other than an IPython cell (an absolute path, a file found outside
``sys.path``, is the user's unless a folder on it is such a package). The innermost user
frame of an op is what ``group_by_stack_n`` grouped by; ``user_paths`` overrides the guess. The rules
are ``workbench.trace.user_files``' (shared with the traced pass's statement recorder).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from workbench.trace.nesting import nest
from workbench.trace.user_files import CELL_FILE_PREFIXES, LIBRARY_PACKAGES, is_user_file

MODULE_PREFIX = "nn.Module: "
__all__ = [
    "CELL_FILE_PREFIXES",
    "LIBRARY_PACKAGES",
    "MODULE_PREFIX",
    "Frame",
    "PythonStack",
    "is_user_file",
    "parse_frame",
    "python_stack",
]
_FRAME = re.compile(r"^(?P<file>.+)\((?P<line>\d+)\): (?P<function>.+)$")
_IPYKERNEL_CELL = re.compile(r"(?:^|[/\\])ipykernel_\d+[/\\](\d+)\.py$")  # a Jupyter cell's code file


@dataclass(frozen=True)
class Frame:
    """A parsed ``"<file>(<line>): <function>"`` event name."""

    file: str
    line: int
    function: str

    @property
    def location(self) -> str:
        """``file.py:123 in fn``, as tracebacks and profilers print a frame; a notebook cell's
        code (ipykernel's ``/tmp/ipykernel_<pid>/<n>.py``) reads ``notebook cell <n>``, and code
        at a cell's or file's top level ``(top level)`` rather than ``:0 in <module>``."""
        cell = _IPYKERNEL_CELL.search(self.file)
        where = f"notebook cell {cell.group(1)}" if cell else self.file
        if self.function == "<module>":
            return f"{where} (top level)" if self.line <= 0 else f"{where}:{self.line} (top level)"
        return f"{where}:{self.line} in {self.function}"


def parse_frame(name: str) -> Frame | None:
    """The file, line and function of a Python event name; None for a module scope or a builtin."""
    found = _FRAME.match(name)
    if found is None or name.startswith(MODULE_PREFIX):
        return None
    return Frame(found["file"], int(found["line"]), found["function"])


@dataclass(frozen=True)
class PythonStack:
    """The Python events of a trace with their nesting.

    Arrays are per row of ``events`` (the trace's ``python_calls`` table): ``parent`` (the
    enclosing Python event, -1 at the top), ``module`` (the nearest ``nn.Module`` event at or
    above, -1 if none), ``user`` (the nearest frame in the user's files at or above, -1 if none),
    ``module_path`` (per module event: ``Block_0/LnGelu_0``, "" for other events) and
    ``location`` (per user frame: ``file.py:123 in fn``, "" for other events).
    """

    events: pd.DataFrame
    parent: np.ndarray
    module: np.ndarray
    user: np.ndarray
    module_path: np.ndarray
    location: np.ndarray
    frames: tuple[Frame | None, ...]

    @property
    def has_modules(self) -> bool:
        return bool((self.module >= 0).any())

    @property
    def has_user_frames(self) -> bool:
        return bool((self.user >= 0).any())

    def enclosing(self, points: pd.DataFrame) -> np.ndarray:
        """For each row of ``points`` (rank, pid, tid, ts_us, end_us: CPU ops or runtime calls),
        the innermost Python event on its thread that is open when it starts; -1 if none."""
        if not len(points) or not len(self.events):
            return np.full(len(points), -1, dtype=np.int64)
        return nest(self.events, points)[3]


def python_stack(python_calls: pd.DataFrame, user_paths: Sequence[str] | None = None) -> PythonStack:
    """Nest the trace's Python events and mark modules and user frames."""
    events = python_calls[["rank", "pid", "tid", "name", "ts_us", "end_us"]].reset_index(drop=True)
    n = len(events)
    parent = nest(events, events.iloc[:0])[0] if n else np.zeros(0, dtype=np.int64)
    names = events["name"].astype(str).to_numpy(dtype=object)
    codes, distinct = pd.factorize(names)
    distinct_frames = [parse_frame(str(name)) for name in distinct]
    frames = tuple(distinct_frames[c] for c in codes)
    is_module = (
        np.array([str(name).startswith(MODULE_PREFIX) for name in distinct], dtype=bool)[codes]
        if n
        else np.zeros(0, dtype=bool)
    )
    user_of_name = np.array([f is not None and is_user_file(f.file, user_paths) for f in distinct_frames], dtype=bool)
    is_user = user_of_name[codes] if n else np.zeros(0, dtype=bool)
    module = _nearest(is_module, parent)
    user = _nearest(is_user, parent)
    module_path = _module_paths(names, is_module, module, parent)
    location = np.array([f.location if (f is not None and u) else "" for f, u in zip(frames, is_user)], dtype=object)
    return PythonStack(events, parent, module, user, module_path, location, frames)


def _nearest(flag: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Per event: itself if ``flag``, else its nearest flagged ancestor, else -1 (pointer walk)."""
    out = np.where(flag, np.arange(len(flag)), parent)
    while True:
        need = out >= 0
        need[need] = ~flag[out[need]]
        if not need.any():
            return out
        out[need] = parent[out[need]]


def _module_paths(names: np.ndarray, is_module: np.ndarray, module: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """``Outer_0/Inner_0`` per module event: the chain of enclosing module scopes."""
    paths = np.full(len(names), "", dtype=object)
    rows = np.flatnonzero(is_module)
    enclosing_module = np.where(parent >= 0, module[np.clip(parent, 0, None)], -1) if len(parent) else parent
    depth = np.zeros(len(names), dtype=np.int64)
    current = enclosing_module.copy()
    while True:
        live = current >= 0
        if not live.any():
            break
        depth[live] += 1
        current[live] = enclosing_module[current[live]]
    for row in rows[np.argsort(depth[rows], kind="stable")]:
        label = str(names[row])[len(MODULE_PREFIX) :]
        up = enclosing_module[row]
        paths[row] = f"{paths[up]}/{label}" if up >= 0 else label
    return paths
