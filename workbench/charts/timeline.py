"""Timeline: one lane per rank and stream / thread; kernels, ops, copies, syncs, annotations.

Level of detail: with more than ``detail_threshold`` events, events shorter than a time bin are
aggregated per lane into bins (count, busy time, dominant kind, longest event), and only longer
events are drawn one by one, so a million events draw as a few thousand marks. The bins come as a
small pyramid of resolutions (``timeline_lod``): the page carries the first finer levels over the
whole span and the deepest ones for its busiest parts (within a row budget), and a filter on the
zoom param draws, for the current x extent, the finest level whose visible marks stay within
budget, so zooming refines the bins with no Python behind the page. The rows travel as columns
with each text once (``timeline_data``). For full detail anywhere pass ``start_us`` / ``end_us``
(the pyramid is then computed for that window only), or use ``live_timeline`` in a notebook.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from workbench.charts.common import MAX_CHART_ROWS, TraceTables, message_chart
from workbench.charts.timeline_data import ROW_FIELDS, calculate_fields, compact_data
from workbench.charts.timeline_lod import (
    LOD_COLUMNS,
    LOD_FACTOR,
    LevelInfo,
    TimelineLevels,
    build_levels,
    lod_filter_expr,
)
from workbench.errors import InvalidArgumentError

if TYPE_CHECKING:
    import altair

EVENT_COLUMNS = ["lane", "kind", "name", "ts_us", "dur_us", "shapes"]
KIND_ORDER = ["kernel", "memcpy", "memset", "op", "sync", "annotation"]
KIND_COLORS = ["#4c78a8", "#f58518", "#e45756", "#72b7b2", "#b279a2", "#9d9da0"]
SYNC_PATTERN = r"Synchronize|DeviceSynchronize"
ROWS_PER_MARK = 10  # rows the page may carry (all levels) per mark it draws at once


def _lanes(frame: pd.DataFrame, key: str, label: str) -> pd.Series:
    """``rank R · <label> K`` per row, formatted once per distinct (rank, key)."""
    rank = frame["rank"] if "rank" in frame.columns else pd.Series(0, index=frame.index)
    rank_codes, ranks = pd.factorize(rank.fillna(-1))
    key_codes, keys = pd.factorize(frame[key].fillna(-1))
    pair_codes, pairs = pd.factorize(rank_codes.astype(np.int64) * max(len(keys), 1) + key_codes)
    ranks, keys = np.asarray(ranks), np.asarray(keys)
    names = np.array(
        [f"rank {_fmt(ranks[p // max(len(keys), 1)])} · {label} {_fmt(keys[p % max(len(keys), 1)])}" for p in pairs],
        dtype=object,
    )
    return pd.Series(names[pair_codes], index=frame.index)


def _op_lanes(ops: pd.DataFrame) -> pd.Series:
    """A thread's lane for its top-level ops; ``… · depth D`` for ops nested D calls deep (a nested op
    runs inside its parent: in the parent's lane it would hide behind it)."""
    lanes = _lanes(ops, "tid", "thread")
    if "depth" not in ops.columns:
        return lanes
    depth = ops["depth"].fillna(0).astype(np.int64)
    nested = depth > 0
    if not nested.any():
        return lanes
    return lanes.where(~nested, lanes + " · depth " + depth.astype(str))


def _fmt(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _part(frame: pd.DataFrame, lane: pd.Series, kind: Any, shapes: str | None) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "lane": lane,
            "kind": kind,
            "name": frame["name"],
            "ts_us": frame["ts_us"].astype("float64"),
            "dur_us": frame["dur_us"].astype("float64"),
            "shapes": frame[shapes] if shapes and shapes in frame.columns else None,
        }
    )


def timeline_events(trace: TraceTables, *, op_max_depth: int = 0) -> pd.DataFrame:
    """One row per drawable event of a Trace: GPU activity, CPU ops (up to ``op_max_depth``),
    synchronize calls and annotations, with columns ``lane, kind, name, ts_us, dur_us, shapes``."""
    parts = []
    kernels = trace.kernels
    if kernels is not None and len(kernels):
        kind = kernels["kind"] if "kind" in kernels.columns else "kernel"
        parts.append(_part(kernels, _lanes(kernels, "stream", "stream"), kind, None))
    ops = trace.cpu_ops
    if ops is not None and len(ops):
        if "depth" in ops.columns:
            ops = ops[ops["depth"].fillna(0) <= op_max_depth]
        parts.append(_part(ops, _op_lanes(ops), "op", "input_dims"))
    runtime = trace.runtime
    if runtime is not None and len(runtime):
        syncs = runtime[runtime["name"].astype(str).str.contains(SYNC_PATTERN, regex=True)]
        if len(syncs):
            parts.append(_part(syncs, _lanes(syncs, "tid", "thread"), "sync", None))
    notes = trace.annotations
    if notes is not None and len(notes):
        rank = notes["rank"] if "rank" in notes.columns else pd.Series(0, index=notes.index)
        lane = "rank " + rank.fillna(0).astype(int).astype(str) + " · annotations"
        parts.append(_part(notes, lane, "annotation", None))
    parts = [p for p in parts if len(p)]
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype="float64" if c.endswith("_us") else object) for c in EVENT_COLUMNS})
    return pd.concat(parts, ignore_index=True)


def _window(events: pd.DataFrame, start_us: float | None, end_us: float | None) -> pd.DataFrame:
    if start_us is None and end_us is None:
        return events
    lo = -np.inf if start_us is None else start_us
    hi = np.inf if end_us is None else end_us
    if hi <= lo:
        raise InvalidArgumentError(f"timeline window is empty: start_us={start_us} >= end_us={end_us}")
    ends = events["ts_us"] + events["dur_us"]
    return events[(ends >= lo) & (events["ts_us"] <= hi)]


def _events_in_view(
    trace_or_events: TraceTables | pd.DataFrame, start_us: float | None, end_us: float | None
) -> tuple[pd.DataFrame, dict[str, Any]]:
    events = trace_or_events if isinstance(trace_or_events, pd.DataFrame) else timeline_events(trace_or_events)
    finite = np.isfinite(events["ts_us"].to_numpy(float)) & np.isfinite(events["dur_us"].to_numpy(float))
    info: dict[str, Any] = {"events": int(len(events)), "dropped_non_finite": int((~finite).sum()), "aggregated": False}
    events = _window(events.loc[finite], start_us, end_us)
    if start_us is not None or end_us is not None:
        info.update(window_us=(start_us, end_us), events_in_window=int(len(events)))
    return events.assign(dur_us=events["dur_us"].clip(lower=0.0)), info


def _all_individual(events: pd.DataFrame, start_us: float, end_us: float) -> TimelineLevels:
    table = events.assign(
        end_us=events["ts_us"] + events["dur_us"], count=1, opacity=1.0, lvl=0, ind=1, fine=0, longest=events["name"]
    )
    if "shapes" not in table.columns:
        table["shapes"] = None
    info = LevelInfo(0, 0.0, 1, 1, len(table))
    return TimelineLevels(
        table[LOD_COLUMNS].reset_index(drop=True), start_us, max(end_us - start_us, 1e-3), 1, LOD_FACTOR, (info,)
    )


def _cap_level0(levels: TimelineLevels, info: dict[str, Any]) -> TimelineLevels:
    """Many long events: keep the longest level-0 marks drawable, say how many were left out."""
    excess = len(levels.view(0)) - MAX_CHART_ROWS
    if excess <= 0:
        return levels
    t = levels.table
    long0 = t[(t["lvl"] == 0) & (t["ind"] == 1)]
    drop = long0.nsmallest(min(excess, len(long0)), "dur_us").index
    info["dropped_for_size"] = int(len(drop))
    return TimelineLevels(
        t.drop(index=drop).reset_index(drop=True),
        levels.start_us,
        levels.span_us,
        levels.bins_per_tile,
        levels.factor,
        levels.levels,
    )


def timeline_levels(
    trace_or_events: TraceTables | pd.DataFrame,
    *,
    detail_threshold: int = 3000,
    max_marks: int = 4000,
    start_us: float | None = None,
    end_us: float | None = None,
    max_levels: int = 6,
    marks_per_level: int | None = None,
    max_rows: int | None = None,
) -> tuple[TimelineLevels, dict[str, Any]]:
    """Every level of detail the timeline carries (see ``timeline_lod``), and what was done.

    Level 0 holds about ``max_marks / 2`` bins over the whole span; each finer level (``factor``
    times finer) at least ``marks_per_level`` marks (default ``max_marks / 2``) and what is left
    of ``max_rows`` (default ``ROWS_PER_MARK * max_marks``, about 70 bytes a row in the page),
    coarse levels first; the page draws about ``max_marks / 2`` rows at any zoom.
    Where the pyramid would hold as many rows as there are events (and they are at most
    ``MAX_CHART_ROWS``), the events are drawn one by one instead: full detail, a smaller page.
    """
    events, info = _events_in_view(trace_or_events, start_us, end_us)
    lo = float(events["ts_us"].min()) if start_us is None else float(start_us)
    hi = float((events["ts_us"] + events["dur_us"]).max()) if end_us is None else float(end_us)
    if not len(events):
        lo, hi = 0.0, 1.0
    if len(events) <= detail_threshold:
        return _all_individual(events, lo, hi), info
    n_lanes = max(events["lane"].nunique(), 1)
    levels = build_levels(
        events,
        start_us=lo,
        end_us=max(hi, lo + 1e-3),
        bins_per_tile=max(20, max_marks // (2 * n_lanes)),
        marks_per_level=marks_per_level or max_marks // 2,
        max_levels=max_levels,
        max_rows=max_rows or ROWS_PER_MARK * max_marks,
    )
    if len(levels.table) >= len(events) and len(events) <= MAX_CHART_ROWS:
        return _all_individual(events, lo, hi), info  # fewer rows than the pyramid, full detail
    info.update(
        aggregated=True,
        bins_per_lane=levels.bins_per_tile,
        bin_us=levels.levels[0].bin_us,
        levels=[vars(level).copy() for level in levels.levels],
    )
    return _cap_level0(levels, info), info


def timeline_table(
    trace_or_events: TraceTables | pd.DataFrame,
    *,
    detail_threshold: int = 3000,
    max_marks: int = 4000,
    start_us: float | None = None,
    end_us: float | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The rows the timeline draws before any zoom (level 0), and what was done to get them."""
    levels, info = timeline_levels(
        trace_or_events, detail_threshold=detail_threshold, max_marks=max_marks, start_us=start_us, end_us=end_us
    )
    return levels.view(0).reset_index(drop=True), info


def _event_count(info: dict[str, Any]) -> str:
    """``N events`` for the whole trace; ``n of N events in a–b µs`` for a window."""
    if "window_us" not in info:
        return f"{info['events']:,} events"
    start_us, end_us = info["window_us"]
    if start_us is None:
        where = f"up to {end_us:,.1f} µs"
    elif end_us is None:
        where = f"from {start_us:,.1f} µs"
    else:
        where = f"in {start_us:,.1f}–{end_us:,.1f} µs"
    return f"{info['events_in_window']:,} of {info['events']:,} events {where}"


def _subtitle(info: dict[str, Any]) -> str:
    parts = [_event_count(info)]
    if info.get("aggregated"):
        parts.append(f"short events summed into {info['bin_us']:,.1f} µs bins per lane (opacity = busy fraction)")
        finer = info["levels"][1:]
        if finer:
            last = finer[-1]
            parts.append(
                f"zoom refines them down to {last['bin_us']:,.3g} µs bins "
                f"({len(finer)} finer levels, the finest kept for "
                f"{100 * last['tiles_stored'] / last['tiles_total']:.0f}% of the span)"
            )
    if info["dropped_non_finite"]:
        parts.append(f"{info['dropped_non_finite']} without a finite time left out")
    if info.get("dropped_for_size"):
        parts.append(f"{info['dropped_for_size']} shortest marks left out to stay drawable")
    return "; ".join(parts) + ". Drag to pan, scroll to zoom."


def timeline_chart(
    trace_or_events: TraceTables | pd.DataFrame,
    *,
    detail_threshold: int = 3000,
    max_marks: int = 4000,
    start_us: float | None = None,
    end_us: float | None = None,
    width: int = 900,
    title: str = "Timeline",
    zoom_name: str = "zoom",
) -> altair.Chart:
    """Lanes per rank and stream / thread, coloured by kind; tooltips name, duration, shapes.

    Zoom (scroll) and pan (drag) refine aggregated bins: the page filters rows by level with an
    expression on the ``zoom_name`` param's x extent (see ``timeline_lod.lod_filter_expr``).
    """
    import altair as alt

    levels, info = timeline_levels(
        trace_or_events, detail_threshold=detail_threshold, max_marks=max_marks, start_us=start_us, end_us=end_us
    )
    if levels.table.empty:
        why = "every event lacks a finite time" if info["dropped_non_finite"] else "the trace has no events"
        return message_chart(f"no timeline to draw: {why}", title=title)
    zoom = alt.selection_interval(name=zoom_name, bind="scales", encodings=["x"])
    n_lanes = levels.table["lane"].nunique()
    domain = [round(levels.start_us, 3), round(levels.start_us + levels.span_us, 3)]
    # one datum of columns (timeline_data): flattened into rows in the page, filtered by level,
    # then given its texts back; a plain dict, so altair neither validates it row by row nor
    # applies its 5,000-row limit (the level filter bounds what is drawn)
    return (
        alt.Chart({"values": [compact_data(levels.table)]}, title=alt.TitleParams(title, subtitle=_subtitle(info)))
        .transform_flatten([*ROW_FIELDS])
        .transform_filter(lod_filter_expr(levels, zoom_name))
        .transform_calculate(**calculate_fields())
        .mark_bar(height={"band": 0.8}, clip=True)
        .encode(
            x=alt.X("ts_us:Q", title="time (µs)", scale=alt.Scale(domain=domain, zero=False)),
            x2="end_us:Q",
            y=alt.Y("lane:N", title=None, sort="ascending"),
            color=alt.Color("kind:N", scale=alt.Scale(domain=KIND_ORDER, range=KIND_COLORS)),
            opacity=alt.Opacity("opacity:Q", legend=None, scale=None),
            tooltip=[
                "name:N",
                "kind:N",
                alt.Tooltip("dur_us:Q", title="duration (µs)", format=",.2f"),
                "count:Q",
                "shapes:N",
                "lane:N",
            ],
        )
        .properties(
            width=width,
            height=max(60, 22 * n_lanes),
            usermeta={
                "workbench_lod": {
                    "factor": levels.factor,
                    "bins_per_tile": levels.bins_per_tile,
                    "span_us": levels.span_us,
                    "levels": info.get("levels", []),
                }
            },
        )
        .add_params(zoom)
    )
