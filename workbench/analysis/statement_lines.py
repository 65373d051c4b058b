"""The statements a traced pass recorded (``workbench.trace.statements.StatementLines``) on a
trace's timeline: which statement of the user's code was running when an op or a launch started.

``on_trace(statements, trace)`` puts the change points on the trace's µs (``ts_us``, relative to
the rank's origin): the recorded times are on the clock of the trace's own timestamps before
Kineto's base time is taken off, so ``ts_us = (ts_ns - base_time_ns - origin_ns) / 1000``. It then
checks that against the trace itself: each recorded call into a user function has the profiler's
own event for that call (``python_function``, the same name) within about a microsecond (calls of
a function the profiler recorded no event of, code run by ``exec``, are not judged). Where the
recorded calls sit off those events by more than ``REALIGN_US`` (a torch that writes another
base, a clock stepped while recording), the change points are shifted by the median offset; where
fewer than ``MIN_MATCHED`` of the calls then find their event within ``MATCH_US``, the statements
are not this trace's and are not used (None: attribution names functions by their first line, as
without statements).

``TimedStatements.at(points)`` gives, per op or runtime call, the change point in effect on its
thread when it started (-1: none, outside the recording or on another thread); ``parent`` walks
from a change point to the one holding the enclosing user frame's state at that time, so that an
op's whole user stack (each frame at the statement it was running) can be read back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from workbench.trace.statements import StatementLines

if TYPE_CHECKING:
    from workbench.trace import TraceData

REALIGN_US = 20.0  # recorded calls further than this from the profiler's events (median): shifted
MATCH_US = 50.0  # a recorded call and the profiler's event for it: at most this far apart
MIN_MATCHED = 0.5  # share of the recorded calls that must find their event, else not this trace's
_ROUNDS = 3  # re-alignment rounds (each on the nearest events after the previous shift)


@dataclass(frozen=True)
class TimedStatements:
    """Change points on the trace's timeline (arrays per change point, as ``StatementLines``)."""

    rank: int
    pid: str
    tid: str
    ts_us: np.ndarray  # float64, the trace's µs
    end_us: float  # recording stopped here: nothing is known after it
    code: np.ndarray
    line: np.ndarray
    depth: np.ndarray
    parent: np.ndarray  # the change point holding the enclosing user frame's state then, -1 at the top
    codes: tuple[tuple[str, int, str], ...]
    shift_us: float  # the re-alignment applied (0.0: the clocks agreed)

    def key(self, point: int) -> tuple[str, int]:
        """(file, first line) of the function at change point ``point``: what the trace's frame names."""
        file, line, _ = self.codes[int(self.code[point])]
        return file, line

    def at(self, points: pd.DataFrame) -> np.ndarray:
        """Per row of ``points`` (rank, pid, tid, ts_us): the change point in effect on its thread when
        it started, -1 where none is (another thread, before or after the recording, no user frame)."""
        out = np.full(len(points), -1, dtype=np.int64)
        if not len(points) or not len(self.ts_us):
            return out
        mine = (
            (points["rank"].to_numpy() == self.rank)
            & (points["pid"].astype(str).to_numpy() == self.pid)
            & (points["tid"].astype(str).to_numpy() == self.tid)
        )
        ts = points["ts_us"].to_numpy(np.float64)
        index = np.searchsorted(self.ts_us, ts, side="right") - 1
        ok = mine & (index >= 0) & (ts < self.end_us)
        ok[ok] &= self.depth[index[ok]] > 0
        out[ok] = index[ok]
        return out


def on_trace(statements: StatementLines | None, trace: TraceData) -> TimedStatements | None:
    """The statements on ``trace``'s timeline, or None where there are none or they are not its own
    (see the module docstring)."""
    if statements is None or not len(statements):
        return None
    pid, tid = str(statements.pid), str(statements.tid)
    calls = trace.python_calls
    if not len(calls):
        return None
    thread = (calls["pid"].astype(str).to_numpy() == pid) & (calls["tid"].astype(str).to_numpy() == tid)
    ranks = np.unique(calls["rank"].to_numpy()[thread])
    if len(ranks) != 1:
        return None
    rank = int(ranks[0])
    origin = trace.meta.origins_ns.get(rank)
    if origin is None:
        return None
    base = trace.meta.base_time_ns.get(rank, 0)
    ts_us = (statements.ts_ns - np.int64(base) - np.int64(origin)).astype(np.float64) / 1000.0
    end_us = (statements.end_ns - base - origin) / 1000.0
    mine = calls[thread]
    shift = _alignment(statements, ts_us, mine["name"].astype(str).to_numpy(), mine["ts_us"].to_numpy(np.float64))
    if shift is None:
        return None
    return TimedStatements(
        rank=rank,
        pid=pid,
        tid=tid,
        ts_us=ts_us + shift,
        end_us=end_us + shift,
        code=statements.code,
        line=statements.line,
        depth=statements.depth,
        parent=_parents(statements.depth),
        codes=statements.codes,
        shift_us=shift,
    )


def _alignment(statements: StatementLines, ts_us: np.ndarray, names: np.ndarray, starts: np.ndarray) -> float | None:
    """The shift (µs) that puts the recorded calls on the profiler's events for them; None where too
    few of them find their event (the statements are not this trace's)."""
    depth = statements.depth
    entered = np.flatnonzero(depth > np.concatenate([[0], depth[:-1]]))  # the recorded calls
    if not len(entered) or not len(starts):
        return None
    lo, hi = float(starts.min()), float(starts.max())
    label = np.array([f"{f}({line}): {fn}" for f, line, fn in statements.codes], dtype=object)
    wanted = label[statements.code[entered]]
    by_name: dict[str, np.ndarray] = {}
    order = np.argsort(starts, kind="stable")
    for name, group in pd.Series(order).groupby(names[order], sort=False):
        by_name[str(name)] = starts[group.to_numpy()]
    shift = 0.0
    for round_ in range(_ROUNDS + 1):
        placed = ts_us[entered] + shift
        inside = (placed >= lo - MATCH_US) & (placed <= hi + MATCH_US)
        if not inside.any():  # far off: match what there is, then look again
            inside = np.ones(len(placed), dtype=bool)
        gaps = _nearest_gaps(placed[inside], wanted[inside], by_name)
        found = np.isfinite(gaps)
        if not found.any():
            return None
        median = float(np.median(gaps[found]))
        if abs(median) <= REALIGN_US or round_ == _ROUNDS:  # agreed (a call precedes its event: kept so)
            # judged on the calls the profiler recorded events of that name for (it records no
            # event for code run by exec, a notebook cell's body, say)
            matched = float((np.abs(gaps[found]) <= MATCH_US).mean())
            return shift if matched >= MIN_MATCHED else None
        shift += median
    return None


def _nearest_gaps(placed: np.ndarray, wanted: np.ndarray, by_name: dict[str, np.ndarray]) -> np.ndarray:
    """Per recorded call: the profiler's nearest event of the same name less the call's time (inf: none)."""
    gaps = np.full(len(placed), np.inf)
    for name in np.unique(wanted):
        events = by_name.get(str(name))
        if events is None or not len(events):
            continue
        rows = np.flatnonzero(wanted == name)
        at = placed[rows]
        right = np.clip(np.searchsorted(events, at), 0, len(events) - 1)
        left = np.clip(right - 1, 0, len(events) - 1)
        to_right, to_left = events[right] - at, events[left] - at
        gaps[rows] = np.where(np.abs(to_right) <= np.abs(to_left), to_right, to_left)
    return gaps


def _parents(depth: np.ndarray) -> np.ndarray:
    """Per change point i at depth d >= 2: the last j < i at depth d - 1 (the enclosing frame's state
    then: its last line, call or return of a callee); -1 at depth <= 1."""
    n = len(depth)
    out = np.full(n, -1, dtype=np.int64)
    if not n:
        return out
    index = np.arange(n, dtype=np.int64)
    d = depth.astype(np.int64)
    keys = d * (n + 1) + index  # sorted by depth, then time
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    want = np.flatnonzero(d >= 2)
    query = (d[want] - 1) * (n + 1) + want  # (depth - 1, before i)
    pos = np.searchsorted(sorted_keys, query, side="left") - 1
    ok = pos >= 0
    ok[ok] &= sorted_keys[pos[ok]] >= (d[want][ok] - 1) * (n + 1)  # still at depth - 1
    out[want[ok]] = order[pos[ok]]
    return out
