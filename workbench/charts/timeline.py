"""Timeline: one lane per rank and stream / thread; kernels, ops, copies, syncs, annotations.

Level of detail: with more than ``detail_threshold`` events, events shorter than a time bin are
aggregated per lane into bins (count, busy time, dominant kind, longest event), and only longer
events are drawn one by one, so a million events draw as a few thousand marks. Zoom and pan are
an interval selection bound to the x scale; for full detail in a window pass ``start_us`` /
``end_us`` (the level of detail is then computed for that window only).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from workbench.charts.common import MAX_CHART_ROWS, message_chart, shorten
from workbench.errors import InvalidArgumentError

EVENT_COLUMNS = ["lane", "kind", "name", "ts_us", "dur_us", "shapes"]
KIND_ORDER = ["kernel", "memcpy", "memset", "op", "sync", "annotation"]
KIND_COLORS = ["#4c78a8", "#f58518", "#e45756", "#72b7b2", "#b279a2", "#9d9da0"]
SYNC_PATTERN = r"Synchronize|DeviceSynchronize"


def _lanes(frame: pd.DataFrame, key: str, label: str) -> pd.Series:
    """``rank R · <label> K`` per row, formatted once per distinct (rank, key)."""
    rank = frame["rank"] if "rank" in frame.columns else pd.Series(0, index=frame.index)
    rank_codes, ranks = pd.factorize(rank.fillna(-1))
    key_codes, keys = pd.factorize(frame[key].fillna(-1))
    pair_codes, pairs = pd.factorize(rank_codes.astype(np.int64) * max(len(keys), 1) + key_codes)
    ranks, keys = np.asarray(ranks), np.asarray(keys)
    names = np.array([f"rank {_fmt(ranks[p // max(len(keys), 1)])} · {label} "
                      f"{_fmt(keys[p % max(len(keys), 1)])}" for p in pairs], dtype=object)
    return pd.Series(names[pair_codes], index=frame.index)


def _fmt(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _part(frame: pd.DataFrame, lane: pd.Series, kind: Any, shapes: str | None) -> pd.DataFrame:
    return pd.DataFrame({
        "lane": lane, "kind": kind, "name": frame["name"],
        "ts_us": frame["ts_us"].astype("float64"), "dur_us": frame["dur_us"].astype("float64"),
        "shapes": frame[shapes] if shapes and shapes in frame.columns else None,
    })


def timeline_events(trace: Any, *, op_max_depth: int = 0) -> pd.DataFrame:
    """One row per drawable event of a Trace: GPU activity, CPU ops (up to ``op_max_depth``),
    synchronize calls and annotations, with columns ``lane, kind, name, ts_us, dur_us, shapes``."""
    parts = []
    kernels = getattr(trace, "kernels", None)
    if kernels is not None and len(kernels):
        kind = kernels["kind"] if "kind" in kernels.columns else "kernel"
        parts.append(_part(kernels, _lanes(kernels, "stream", "stream"), kind, None))
    ops = getattr(trace, "cpu_ops", None)
    if ops is not None and len(ops):
        if "depth" in ops.columns:
            ops = ops[ops["depth"].fillna(0) <= op_max_depth]
        parts.append(_part(ops, _lanes(ops, "tid", "thread"), "op", "input_dims"))
    runtime = getattr(trace, "runtime", None)
    if runtime is not None and len(runtime):
        syncs = runtime[runtime["name"].astype(str).str.contains(SYNC_PATTERN, regex=True)]
        if len(syncs):
            parts.append(_part(syncs, _lanes(syncs, "tid", "thread"), "sync", None))
    notes = getattr(trace, "annotations", None)
    if notes is not None and len(notes):
        rank = notes["rank"] if "rank" in notes.columns else pd.Series(0, index=notes.index)
        lane = "rank " + rank.fillna(0).astype(int).astype(str) + " · annotations"
        parts.append(_part(notes, lane, "annotation", None))
    parts = [p for p in parts if len(p)]
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype="float64" if c.endswith("_us") else object)
                             for c in EVENT_COLUMNS})
    return pd.concat(parts, ignore_index=True)


def _individual(events: pd.DataFrame) -> pd.DataFrame:
    out = events.copy()
    out["count"] = 1
    out["opacity"] = 1.0
    return out


def _bin_names(short: pd.DataFrame, key: np.ndarray, counts: np.ndarray) -> list[str]:
    """Per used bin (ascending key): "<n> events; longest: <name>"."""
    longest = pd.Series(short["dur_us"].to_numpy()).groupby(key, sort=True).idxmax()
    top = short["name"].to_numpy()[longest.to_numpy()]
    return [f"{c} events; longest: {shorten(n)}" for c, n in zip(counts[longest.index], top)]


def aggregate_lanes(events: pd.DataFrame, *, bins_per_lane: int, start_us: float,
                    end_us: float) -> pd.DataFrame:
    """Events shorter than a bin, summed per (lane, bin); longer events kept as they are.

    A binned row's ``dur_us`` is the busy time summed over its events, ``count`` their number,
    ``kind`` the kind with the most time, ``opacity`` the busy fraction of the bin.
    """
    bin_us = max((end_us - start_us) / bins_per_lane, 1e-9)
    long_mask = events["dur_us"].to_numpy() >= bin_us
    short = events.loc[~long_mask]
    lane_codes, lane_names = pd.factorize(short["lane"])
    kind_codes, kind_names = pd.factorize(short["kind"])
    bins = np.clip(((short["ts_us"].to_numpy() - start_us) // bin_us).astype(np.int64),
                   0, bins_per_lane - 1)
    key = lane_codes.astype(np.int64) * bins_per_lane + bins
    n_keys, n_kinds = len(lane_names) * bins_per_lane, max(len(kind_names), 1)
    per_kind = np.bincount(key * n_kinds + kind_codes, weights=short["dur_us"].to_numpy(),
                           minlength=n_keys * n_kinds).reshape(n_keys, n_kinds)
    counts = np.bincount(key, minlength=n_keys)
    used = np.flatnonzero(counts)
    busy = per_kind[used].sum(axis=1)
    binned = pd.DataFrame({
        "lane": np.asarray(lane_names, dtype=object)[used // bins_per_lane],
        "kind": np.asarray(kind_names, dtype=object)[per_kind[used].argmax(axis=1)],
        "ts_us": start_us + (used % bins_per_lane) * bin_us,
        "dur_us": busy, "count": counts[used],
        "opacity": np.clip(busy / bin_us, 0.2, 1.0),
    })
    binned["name"] = _bin_names(short, key, counts) if len(short) else []
    binned["end_us"] = binned["ts_us"] + bin_us
    binned["shapes"] = None
    kept = _individual(events.loc[long_mask])
    kept["end_us"] = kept["ts_us"] + kept["dur_us"]
    return pd.concat([kept, binned], ignore_index=True)


def _window(events: pd.DataFrame, start_us: float | None, end_us: float | None) -> pd.DataFrame:
    if start_us is None and end_us is None:
        return events
    lo = -np.inf if start_us is None else start_us
    hi = np.inf if end_us is None else end_us
    if hi <= lo:
        raise InvalidArgumentError(f"timeline window is empty: start_us={start_us} >= end_us={end_us}")
    ends = events["ts_us"] + events["dur_us"]
    return events[(ends >= lo) & (events["ts_us"] <= hi)]


def timeline_table(trace_or_events: Any, *, detail_threshold: int = 3000, max_marks: int = 4000,
                   start_us: float | None = None, end_us: float | None = None
                   ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The rows the timeline draws, and what was done to get them (dropped, aggregated)."""
    events = (trace_or_events if isinstance(trace_or_events, pd.DataFrame)
              else timeline_events(trace_or_events))
    finite = np.isfinite(events["ts_us"].to_numpy(float)) & np.isfinite(events["dur_us"].to_numpy(float))
    info = {"events": int(len(events)), "dropped_non_finite": int((~finite).sum()), "aggregated": False}
    events = _window(events.loc[finite], start_us, end_us)
    events = events.assign(dur_us=events["dur_us"].clip(lower=0.0))
    if len(events) <= detail_threshold:
        rows = _individual(events)
        rows["end_us"] = rows["ts_us"] + rows["dur_us"]
        return rows, info
    lo = float(events["ts_us"].min()) if start_us is None else float(start_us)
    hi = float((events["ts_us"] + events["dur_us"]).max()) if end_us is None else float(end_us)
    n_lanes = max(events["lane"].nunique(), 1)
    bins_per_lane = max(20, max_marks // (2 * n_lanes))
    rows = aggregate_lanes(events, bins_per_lane=bins_per_lane, start_us=lo, end_us=max(hi, lo + 1e-3))
    info.update(aggregated=True, bins_per_lane=bins_per_lane, bin_us=(hi - lo) / bins_per_lane)
    if len(rows) > MAX_CHART_ROWS:  # many long events: keep the longest, say so
        info["dropped_for_size"] = int(len(rows) - MAX_CHART_ROWS)
        rows = rows.nlargest(MAX_CHART_ROWS, "dur_us")
    return rows, info


def _subtitle(info: dict[str, Any]) -> str:
    parts = [f"{info['events']:,} events"]
    if info.get("aggregated"):
        parts.append(f"short events summed into {info['bin_us']:,.1f} µs bins per lane "
                     "(opacity = busy fraction)")
    if info["dropped_non_finite"]:
        parts.append(f"{info['dropped_non_finite']} without a finite time left out")
    if info.get("dropped_for_size"):
        parts.append(f"{info['dropped_for_size']} shortest marks left out to stay drawable")
    return "; ".join(parts) + ". Drag to pan, scroll to zoom."


def timeline_chart(trace_or_events: Any, *, detail_threshold: int = 3000, max_marks: int = 4000,
                   start_us: float | None = None, end_us: float | None = None,
                   width: int = 900, title: str = "Timeline") -> Any:
    """Lanes per rank and stream / thread, coloured by kind; tooltips name, duration, shapes."""
    import altair as alt

    rows, info = timeline_table(trace_or_events, detail_threshold=detail_threshold,
                                max_marks=max_marks, start_us=start_us, end_us=end_us)
    if rows.empty:
        why = ("every event lacks a finite time" if info["dropped_non_finite"]
               else "the trace has no events")
        return message_chart(f"no timeline to draw: {why}", title=title)
    rows = rows.assign(name=[shorten(n, 120) for n in rows["name"]],
                       shapes=[shorten(s, 120) if s is not None else "" for s in rows["shapes"]])
    rows = rows[["lane", "kind", "name", "ts_us", "end_us", "dur_us", "count", "opacity", "shapes"]]
    zoom = alt.selection_interval(bind="scales", encodings=["x"])
    n_lanes = rows["lane"].nunique()
    return alt.Chart(rows, title=alt.TitleParams(title, subtitle=_subtitle(info))).mark_bar(
        height={"band": 0.8}).encode(
        x=alt.X("ts_us:Q", title="time (µs)"), x2="end_us:Q",
        y=alt.Y("lane:N", title=None, sort="ascending"),
        color=alt.Color("kind:N", scale=alt.Scale(domain=KIND_ORDER, range=KIND_COLORS)),
        opacity=alt.Opacity("opacity:Q", legend=None, scale=None),
        tooltip=["name:N", "kind:N", alt.Tooltip("dur_us:Q", title="duration (µs)", format=",.2f"),
                 "count:Q", "shapes:N", "lane:N"],
    ).properties(width=width, height=max(60, 22 * n_lanes)).add_params(zoom)
