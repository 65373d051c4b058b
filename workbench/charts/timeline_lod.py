"""Level-of-detail pyramid for the timeline: bins that refine on zoom in a static page.

Level ``k`` cuts the span into ``factor**k`` tiles of ``bins_per_tile`` bins each (bin width
``span / (bins_per_tile * factor**k)``). At level ``k`` an event shorter than a bin is summed into
its (lane, bin); an event at least one bin long is drawn by itself from the first level whose bin
it fills (``lvl`` = that level, ``ind`` = 1), so long events stay individual at every finer level
and no event is counted twice. Level 0 covers the whole span; a finer level is stored only for
tiles whose parent tile is stored, busiest tiles first, until the level's mark budget is spent:
at least ``marks_per_level``, plus what a total of ``max_rows`` leaves after the coarser levels
(so the first zoom steps refine everywhere and the deepest ones where the events are densest).

The page picks a level from the zoom: with a window of width ``W`` the level is
``floor(log_factor(span / W))`` (clamped), so the window never shows more than about
``bins_per_tile`` bins per lane. A row is drawn when ``lvl <= level`` and, for a bin whose region
has finer data (``fine`` = 1), only at exactly its level: see :func:`lod_filter_expr`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from workbench.charts.common import shorten

LOD_FACTOR = 4
LOD_COLUMNS = [
    "lane",
    "kind",
    "name",
    "ts_us",
    "dur_us",
    "end_us",
    "count",
    "opacity",
    "shapes",
    "lvl",
    "ind",
    "fine",
    "longest",
]


@dataclass(frozen=True)
class LevelInfo:
    """One level of the pyramid: its bin width, how much of the span it covers, its marks."""

    level: int
    bin_us: float
    tiles_stored: int
    tiles_total: int
    marks: int

    @property
    def coverage(self) -> float:
        return self.tiles_stored / self.tiles_total if self.tiles_total else 0.0


@dataclass(frozen=True)
class TimelineLevels:
    """Every row of every level (``table``, columns ``LOD_COLUMNS``) and how the levels were cut."""

    table: pd.DataFrame
    start_us: float
    span_us: float
    bins_per_tile: int
    factor: int
    levels: tuple[LevelInfo, ...] = field(default_factory=tuple)

    def view(self, level: int) -> pd.DataFrame:
        """The rows a page draws at ``level`` where that level is stored (coarser elsewhere)."""
        t = self.table
        return t[(t["lvl"] <= level) & ((t["fine"] == 0) | (t["lvl"] == level))]

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": {c: self.table[c].tolist() for c in self.table.columns},
            "start_us": self.start_us,
            "span_us": self.span_us,
            "bins_per_tile": self.bins_per_tile,
            "factor": self.factor,
            "levels": [vars(info).copy() for info in self.levels],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TimelineLevels":
        return cls(
            table=pd.DataFrame(data["table"], columns=list(data["table"]) or LOD_COLUMNS),
            start_us=float(data["start_us"]),
            span_us=float(data["span_us"]),
            bins_per_tile=int(data["bins_per_tile"]),
            factor=int(data["factor"]),
            levels=tuple(LevelInfo(**info) for info in data["levels"]),
        )


def lod_level_expr(levels: TimelineLevels, zoom: str, field_name: str = "ts_us") -> str:
    """Vega expression: the level to draw for the zoom param's current x extent."""
    top = max(len(levels.levels) - 1, 0)
    ext = f"{zoom}[{field_name!r}]"
    width = f"max({ext}[1] - {ext}[0], 1e-9)"
    return (
        f"(isObject({zoom}) && isArray({ext}) ? clamp(floor(log({levels.span_us!r} / {width})"
        f" / log({levels.factor}) + 1e-9), 0, {top}) : 0)"
    )


def lod_filter_expr(levels: TimelineLevels, zoom: str, field_name: str = "ts_us") -> str:
    """Vega filter: rows of the finest stored level whose visible marks stay within budget,
    and (once zoomed) only those that overlap the zoom param's x extent."""
    level = lod_level_expr(levels, zoom, field_name)
    ext = f"{zoom}[{field_name!r}]"
    visible = f"(!(isObject({zoom}) && isArray({ext})) || (datum.end_us >= {ext}[0] && datum.ts_us <= {ext}[1]))"
    return f"datum.lvl <= {level} && (datum.fine == 0 || datum.lvl == {level}) && {visible}"


NAME_CHARS = 120


def bin_label(count: int, longest: str) -> str:
    """A bin's name: how many events it sums and its longest one (the page builds the same text
    from ``count`` and ``longest``, see ``timeline_data``)."""
    return f"{count:,} events; longest: {shorten(str(longest), NAME_CHARS)}"


def _first_max(values: np.ndarray, groups: np.ndarray, n_groups: int) -> np.ndarray:
    """Per group, the index of its largest value (the first one on ties)."""
    top = np.full(n_groups, -np.inf)
    np.maximum.at(top, groups, values)
    hits = np.flatnonzero(values == top[groups])
    first = np.empty(n_groups, dtype=np.int64)
    first[groups[hits[::-1]]] = hits[::-1]
    return first


class _Columns:
    """The event table as numpy arrays, factorized once for every level."""

    def __init__(self, events: pd.DataFrame, start_us: float, finest_bin_us: float, n_finest: int):
        rel_us = events["ts_us"].to_numpy(float) - start_us
        # one integer position at the finest level: every level's bin and tile derive from it,
        # so an event never lands in a bin of one tile and the tile next to it
        self.pos = np.clip(rel_us // finest_bin_us, 0, n_finest - 1).astype(np.int64)
        self.ts_us = events["ts_us"].to_numpy(float)
        self.dur_us = events["dur_us"].to_numpy(float)
        self.lane_codes, lanes = pd.factorize(events["lane"])
        self.kind_codes, kinds = pd.factorize(events["kind"])
        self.lanes = np.asarray(lanes, dtype=object)
        self.kinds = np.asarray(kinds, dtype=object)
        self.names = events["name"].to_numpy(object)
        self.shapes = events["shapes"].to_numpy(object) if "shapes" in events else None
        self.events = events


def _bins(cols: _Columns, short: np.ndarray, bin_index: np.ndarray, n_bins: int) -> dict[str, np.ndarray]:
    """(lane, bin) sums of the ``short`` events: key, count, busy, dominant kind, longest event."""
    idx = np.flatnonzero(short)
    b = bin_index[idx]
    key = cols.lane_codes[idx].astype(np.int64) * n_bins + b
    keys, inv = np.unique(key, return_inverse=True)
    n_kinds = max(len(cols.kinds), 1)
    per_kind = np.bincount(
        inv * n_kinds + cols.kind_codes[idx], weights=cols.dur_us[idx], minlength=len(keys) * n_kinds
    ).reshape(len(keys), n_kinds)
    return {
        "key": keys,
        "count": np.bincount(inv, minlength=len(keys)),
        "busy": per_kind.sum(axis=1),
        "kind": per_kind.argmax(axis=1),
        "longest": idx[_first_max(cols.dur_us[idx], inv, len(keys))] if len(keys) else idx[:0],
    }


def _pick_tiles(marks: np.ndarray, weight: np.ndarray, allowed: np.ndarray, budget: float) -> np.ndarray:
    """Allowed tiles, heaviest first, while their marks fit the budget (empty ones are free)."""
    stored = allowed & (marks == 0)
    order = np.flatnonzero(allowed & (marks > 0))
    order = order[np.argsort(-weight[order], kind="stable")]
    fits = order[np.cumsum(marks[order]) <= budget]
    stored[fits] = True
    return stored


def _bin_rows(
    cols: _Columns, bins: dict, keep: np.ndarray, level: int, n_bins: int, bin_us: float, start_us: float
) -> pd.DataFrame:
    key, count, busy = bins["key"][keep], bins["count"][keep], bins["busy"][keep]
    ts_us = start_us + (key % n_bins) * bin_us
    longest = bins["longest"][keep]
    return pd.DataFrame(
        {
            "lane": cols.lanes[key // n_bins],
            "kind": cols.kinds[bins["kind"][keep]],
            "name": [bin_label(c, n) for c, n in zip(count, cols.names[longest])],
            "ts_us": ts_us,
            "dur_us": busy,
            "end_us": ts_us + bin_us,
            "count": count,
            "opacity": np.clip(busy / bin_us, 0.2, 1.0),
            "shapes": None,
            "lvl": level,
            "ind": 0,
            "fine": 0,
            "longest": cols.names[longest],
            "_bin": key % n_bins,
        }
    )


def _individual_rows(cols: _Columns, idx: np.ndarray, level: int) -> pd.DataFrame:
    ts_us, dur_us = cols.ts_us[idx], cols.dur_us[idx]
    return pd.DataFrame(
        {
            "lane": cols.lanes[cols.lane_codes[idx]],
            "kind": cols.kinds[cols.kind_codes[idx]],
            "name": cols.names[idx],
            "ts_us": ts_us,
            "dur_us": dur_us,
            "end_us": ts_us + dur_us,
            "count": 1,
            "opacity": 1.0,
            "shapes": cols.shapes[idx] if cols.shapes is not None else None,
            "lvl": level,
            "ind": 1,
            "fine": 0,
            "longest": cols.names[idx],
            "_bin": -1,
        }
    )


def _level(cols: _Columns, k: int, spec: dict, allowed_parent: np.ndarray | None, budget: float):
    """Rows of level ``k`` for the tiles it can afford, and which tiles those are."""
    n_tiles, bpt, span = spec["factor"] ** k, spec["bins_per_tile"], spec["span_us"]
    bin_us, upper_us = span / (n_tiles * bpt), span / (n_tiles * bpt) * spec["factor"]
    bin_index = cols.pos // spec["factor"] ** (spec["max_levels"] - 1 - k)
    tile = bin_index // bpt
    candidate = np.ones(len(tile), bool) if allowed_parent is None else allowed_parent[tile // spec["factor"]]
    short = candidate & (cols.dur_us < bin_us)
    new = candidate & (cols.dur_us >= bin_us) & ((cols.dur_us < upper_us) if k else True)
    bins = _bins(cols, short, bin_index, n_tiles * bpt)
    bin_tile = (bins["key"] % (n_tiles * bpt)) // bpt
    marks = np.bincount(bin_tile, minlength=n_tiles) + np.bincount(tile[new], minlength=n_tiles)
    allowed = np.ones(n_tiles, bool) if allowed_parent is None else np.repeat(allowed_parent, spec["factor"])
    stored = _pick_tiles(marks, np.bincount(tile[short], minlength=n_tiles), allowed, budget)
    rows = [
        _bin_rows(cols, bins, stored[bin_tile], k, n_tiles * bpt, bin_us, spec["start_us"]),
        _individual_rows(cols, np.flatnonzero(new & stored[tile]), k),
    ]
    info = LevelInfo(k, bin_us, int(stored.sum()), n_tiles, int(sum(len(r) for r in rows)))
    return pd.concat(rows, ignore_index=True), stored, info, bool(short.any())


def _mark_fine(rows: pd.DataFrame, stored_next: np.ndarray, bpt: int, factor: int) -> None:
    """Bins of the previous level whose region has finer data draw only at their own level."""
    binned = rows["_bin"].to_numpy() >= 0
    next_tile = rows["_bin"].to_numpy()[binned] // (bpt // factor)
    fine = rows["fine"].to_numpy().copy()
    fine[np.flatnonzero(binned)] = stored_next[next_tile].astype(int)
    rows["fine"] = fine


def _budget(k: int, spec: dict, rows_so_far: int) -> float:
    """Marks level ``k`` may store: level 0 all; a finer level at least ``marks_per_level``, and
    whatever of ``max_rows`` the coarser levels left, less the minimum of the levels after it
    (so coarse levels are covered first and every level keeps some detail for the busiest parts)."""
    if k == 0:
        return np.inf
    after = spec["max_levels"] - 1 - k
    return max(spec["budget"], spec["max_rows"] - rows_so_far - spec["budget"] * after)


def build_levels(
    events: pd.DataFrame,
    *,
    start_us: float,
    end_us: float,
    bins_per_tile: int,
    marks_per_level: int,
    max_levels: int = 6,
    factor: int = LOD_FACTOR,
    max_rows: int | None = None,
) -> TimelineLevels:
    """The pyramid for ``events`` (columns lane, kind, name, ts_us, dur_us[, shapes]) on a span;
    about ``max_rows`` rows in all (default: ``marks_per_level`` per level)."""
    bins_per_tile = max(factor, bins_per_tile - bins_per_tile % factor)
    spec = {
        "factor": factor,
        "bins_per_tile": bins_per_tile,
        "budget": marks_per_level,
        "span_us": max(end_us - start_us, 1e-3),
        "start_us": start_us,
        "max_levels": max_levels,
        "max_rows": max_rows or 0,
    }
    n_finest = bins_per_tile * factor ** (max_levels - 1)
    cols = _Columns(events, start_us, spec["span_us"] / n_finest, n_finest)
    parts: list[pd.DataFrame] = []
    infos: list[Any] = []
    stored: np.ndarray | None = None
    for k in range(max_levels):
        rows_so_far = sum(len(p) for p in parts)
        rows, now_stored, info, any_short = _level(cols, k, spec, stored, _budget(k, spec, rows_so_far))
        if k and info.marks == 0:
            break
        if parts:
            _mark_fine(parts[-1], now_stored, bins_per_tile, factor)
        parts.append(rows)
        infos.append(info)
        stored = now_stored
        if not any_short:
            break
    table = pd.concat(parts, ignore_index=True).drop(columns="_bin")
    return TimelineLevels(table[LOD_COLUMNS], start_us, spec["span_us"], bins_per_tile, factor, tuple(infos))
