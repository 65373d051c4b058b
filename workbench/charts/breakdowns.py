"""Breakdown charts: top ops / kernels by time, kernel types, idle split, per rank.

Builders take result objects (anything with a ``.table`` DataFrame) or DataFrames and return
altair charts; they compute nothing beyond sorting, top-N and reshaping for drawing.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Sequence

import pandas as pd

from workbench.analysis.labels import unique_labels
from workbench.charts.common import (
    TableLike,
    as_table,
    finite_rows,
    first_present,
    message_chart,
    require_columns,
)
from workbench.errors import InvalidArgumentError
from workbench.units import time_column_kind

if TYPE_CHECKING:
    import altair

TOOLTIP_CANDIDATES = (
    "count",
    "self_us",
    "total_us",
    "dur_us",
    "mean_us",
    "pct",
    "kernel_type",
    "input_dims",
    "top_input_dims",
    "input_shapes",
    "shapes",
    "calls_per_call",
    "total_ms_per_call",
)
TIME_COLUMNS = ("self_us", "total_us", "dur_us", "sum_us", "time_us", "sum_ms_per_call", "self_ms_per_call")
IDLE_PARTS = ("host_wait", "kernel_wait", "other")
IDLE_TICKS = 5


def _per_call_base(value: str) -> str:
    base = value.removesuffix("_ms_per_call")
    return "" if base == "sum" else base.replace("_", " ") + " "


def value_title(value: str) -> str:
    """An axis title that says the unit and whether a time is per call or a total over the trace:
    ``self_ms_per_call`` -> ``self time per call (ms)``, ``sum_us`` -> ``sum (µs, total over the trace)``."""
    if value.endswith("_ms_per_call"):
        return f"{_per_call_base(value)}time per call (ms)"
    if value.endswith("_us"):
        base = {"sum_us": "time", "total_us": "inclusive"}.get(value, value.removesuffix("_us").replace("_", " "))
        kind = time_column_kind(value)
        return {"total": f"{base} (µs, total over the trace)", "per call": f"{base} (µs per call)"}.get(
            kind or "", f"{base} (µs)"
        )
    return value.replace("_", " ")


def _what(value: str) -> str:
    """What a chart is ranked by, for its title: ``self time per call``, ``self time (total)``."""
    if value.endswith("_ms_per_call"):
        return f"{_per_call_base(value)}time per call"
    if value == "sum_us":
        return "total time"
    total = " (total)" if time_column_kind(value) == "total" else ""
    return {"total_us": "inclusive time"}.get(value, value.replace("_us", " time")) + total


def _top_bars(table: pd.DataFrame, value: str, n: int, title: str, color: str | None) -> altair.Chart:
    import altair as alt

    rows, dropped = finite_rows(table, [value])
    rows = rows.sort_values(value, ascending=False).head(n).copy()
    if rows.empty:
        why = f"{dropped} rows without a finite {value}" if dropped else "the table is empty"
        return message_chart(f"nothing to draw: {why}", title=title)
    rows["label"] = unique_labels(rows["name"])  # the function name; the full name in the tooltip
    tips = [alt.Tooltip("name:N", title="name")]
    tips += [
        alt.Tooltip(f"{c}:{'Q' if pd.api.types.is_numeric_dtype(rows[c]) else 'N'}")
        for c in TOOLTIP_CANDIDATES
        if c in rows.columns and c != value
    ]
    rows = rows[[c for c in rows.columns if c in {"name", "label", value, color} or c in TOOLTIP_CANDIDATES]]
    enc = dict(
        x=alt.X(f"{value}:Q", title=value_title(value)),
        y=alt.Y("label:N", sort="-x", title=None, axis=alt.Axis(labelLimit=LABEL_LIMIT_PX)),
        tooltip=[alt.Tooltip(f"{value}:Q", format=",.4g")] + tips,
    )
    if color and color in rows.columns:
        enc["color"] = alt.Color(f"{color}:N")
    subtitle = f"{dropped} rows without a finite {value} left out" if dropped else None
    chart_title = alt.TitleParams(title, subtitle=subtitle) if subtitle else title
    return alt.Chart(rows, title=chart_title).mark_bar().encode(**enc).properties(width=420)


def top_ops_chart(op_breakdown: TableLike, *, n: int = 15, value: str = "self_us") -> altair.Chart:
    """The ``n`` CPU ops with the most ``value`` (self time by default), as horizontal bars."""
    table = as_table(op_breakdown, "top_ops_chart")
    require_columns(table, ["name", value], "top_ops_chart")
    return _top_bars(table, value, n, f"Top {n} ops by {_what(value)}", None)


COMMUNICATION = "communication"
COMMUNICATION_SHOWN = 3  # communication kernels drawn apart, beside the top compute kernels
FACET_COLUMNS = 2
LABEL_LIMIT_PX = 340  # a label's width on the axis (vega's default, 180 px, cuts function names)


def _per_rank_top(rows: pd.DataFrame, value: str, limit: int) -> pd.DataFrame:
    ordered = rows.sort_values(value, ascending=False, kind="stable")
    return ordered.groupby("rank", sort=False).head(limit) if "rank" in rows.columns else ordered.head(limit)


def _kernel_bars(alt: ModuleType, rows: pd.DataFrame, value: str, *, width: int) -> altair.Chart:
    keep = ["name", "label", value, "kernel_type"] + [
        c for c in ("rank", "count", "mean_us", "pct") if c in rows.columns and c != value
    ]
    tips = [alt.Tooltip("name:N", title="name"), alt.Tooltip(f"{value}:Q", format=",.4g"), "kernel_type:N"]
    tips += ["rank:O" if c == "rank" else alt.Tooltip(f"{c}:Q", format=",.4g") for c in keep[4:]]
    return (
        alt.Chart(rows[keep])
        .mark_bar()
        .encode(
            x=alt.X(f"{value}:Q", title=value_title(value)),
            y=alt.Y("label:N", sort="-x", title=None, axis=alt.Axis(labelLimit=LABEL_LIMIT_PX)),
            color=alt.Color("kernel_type:N", title="kernel type"),
            tooltip=tips,
        )
        .properties(width=width)
    )


def top_kernels_chart(
    kernel_breakdown: TableLike, *, n: int = 15, value: str | None = None
) -> altair.Chart | altair.VConcatChart:
    """The ``n`` compute kernels (computation and memory) with the most total time, coloured by kernel
    type; communication kernels (NCCL: they run as long as the step and would hide every compute
    kernel) in a chart of their own below, up to COMMUNICATION_SHOWN per rank. On a trace of several
    ranks one panel per rank, each with its own top ``n``. Labels are the kernels' function names
    (unique); the full name is in the tooltip."""
    import altair as alt

    table = as_table(kernel_breakdown, "top_kernels_chart")
    require_columns(table, ["name"], "top_kernels_chart")
    value = value or first_present(table, TIME_COLUMNS, "top_kernels_chart")
    many_ranks = "rank" in table.columns and table["rank"].nunique() > 1
    what = _what(value)
    if not many_ranks and "kernel_type" not in table.columns:
        return _top_bars(table, value, n, f"Top {n} kernels by {what}", None)
    rows, dropped = finite_rows(table, [value])
    rows = rows.copy()
    if "kernel_type" not in rows.columns:
        rows["kernel_type"] = ""
    comm = rows["kernel_type"].astype(str) == COMMUNICATION
    compute = _per_rank_top(rows[~comm], value, n)
    communication = _per_rank_top(rows[comm], value, COMMUNICATION_SHOWN)
    title = f"Top {n} compute kernels by {what}" + (" per rank" if many_ranks else "")
    if compute.empty and communication.empty:
        why = f"{dropped} rows without a finite {value}" if dropped else "the table is empty"
        return message_chart(f"nothing to draw: {why}", title=title)
    labels = dict(
        zip(pd.concat([compute, communication])["name"], unique_labels(pd.concat([compute, communication])["name"]))
    )
    compute = compute.assign(label=compute["name"].map(labels))
    communication = communication.assign(label=communication["name"].map(labels))
    subtitle = [
        s
        for s in (
            f"communication kernels apart, below (top {COMMUNICATION_SHOWN}{' per rank' if many_ranks else ''})"
            if len(communication)
            else "",
            "no compute kernel in this trace" if compute.empty else "",
            f"{dropped} rows without a finite {value} left out" if dropped else "",
        )
        if s
    ]
    chart_title = alt.TitleParams(title, subtitle=subtitle) if subtitle else title
    parts = []
    if not compute.empty:
        bars = _kernel_bars(alt, compute, value, width=360 if many_ranks else 420)
        parts.append(
            bars.facet(facet=alt.Facet("rank:O", title="rank"), columns=FACET_COLUMNS).resolve_scale(y="independent")
            if many_ranks
            else bars
        )
    if not communication.empty:
        comm_bars = _kernel_bars(alt, communication, value, width=420).properties(
            title=f"Communication kernels{' per rank' if many_ranks else ''}"
        )
        if many_ranks:
            comm_bars = comm_bars.encode(
                y=alt.Y("label:N", title=None, axis=alt.Axis(labelLimit=LABEL_LIMIT_PX)),
                yOffset="rank:O",
                color=alt.Color("rank:O", title="rank"),
            )
        parts.append(comm_bars)
    if len(parts) == 1:
        return parts[0].properties(title=chart_title)
    return alt.vconcat(*parts, title=chart_title).resolve_scale(x="independent")


def kernel_types_chart(table_or_result: TableLike, *, value: str | None = None) -> altair.Chart:
    """Time per kernel type (computation / communication / memory), one bar each."""
    import altair as alt

    table = as_table(table_or_result, "kernel_types_chart")
    type_col = first_present(table, ("kernel_type", "type"), "kernel_types_chart")
    value = value or first_present(table, TIME_COLUMNS, "kernel_types_chart")
    rows, _ = finite_rows(table, [value])
    per_type = rows.groupby(type_col, as_index=False)[value].sum()
    if per_type.empty or per_type[value].sum() <= 0:
        return message_chart("nothing to draw: no kernel time in this trace", title="Kernel types")
    per_type["pct"] = 100.0 * per_type[value] / per_type[value].sum()
    return (
        alt.Chart(per_type, title="Kernel time by type")
        .mark_bar()
        .encode(
            x=alt.X(f"{value}:Q", title="time (µs)"),
            y=alt.Y(f"{type_col}:N", sort="-x", title=None),
            color=alt.Color(f"{type_col}:N", legend=None),
            tooltip=[f"{type_col}:N", alt.Tooltip(f"{value}:Q", format=",.1f"), alt.Tooltip("pct:Q", format=".1f")],
        )
        .properties(width=420)
    )


def _long_parts(table: pd.DataFrame, parts: Sequence[str], keys: list[str]) -> pd.DataFrame:
    cols = {p: f"{p}_us" for p in parts if f"{p}_us" in table.columns}
    if not cols:
        raise InvalidArgumentError(
            f"expected columns {[p + '_us' for p in parts]}; the table has {list(table.columns)}"
        )
    long = table[keys + list(cols.values())].melt(id_vars=keys, var_name="part", value_name="time_us")
    long["part"] = long["part"].str.removesuffix("_us")
    return long


def idle_chart(idle_breakdown: TableLike) -> altair.Chart:
    """Idle time split into host wait, kernel wait and other, per rank and stream when given."""
    import altair as alt

    table = as_table(idle_breakdown, "idle_chart")
    keys = [k for k in ("rank", "stream") if k in table.columns]
    if {"idle_category", "idle_us"} <= set(table.columns):
        long = table.rename(columns={"idle_category": "part", "idle_us": "time_us"})
    else:
        long = _long_parts(table, IDLE_PARTS, keys)
    long, _ = finite_rows(long, ["time_us"])
    if long.empty or long["time_us"].sum() <= 0:
        return message_chart("nothing to draw: no idle time between kernels", title="Idle time")
    long = long.copy()
    long["lane"] = long.apply(lambda r: " ".join(f"{k} {r[k]}" for k in keys) or "all", axis=1)
    # the axis in ms once a lane's idle time runs past 10 ms (no six-digit µs labels), few ticks that skip
    # rather than collide
    in_ms = long.groupby("lane")["time_us"].sum().max() >= 1e4
    long["time"] = long["time_us"] / 1e3 if in_ms else long["time_us"]
    unit = "ms" if in_ms else "µs"
    return (
        alt.Chart(long[["lane", "part", "time_us", "time"]], title="Idle time by cause")
        .mark_bar()
        .encode(
            x=alt.X(
                "sum(time):Q",
                title=f"idle ({unit})",
                axis=alt.Axis(tickCount=IDLE_TICKS, format="~s", labelOverlap="greedy", labelAngle=0, labelFlush=True),
            ),
            y=alt.Y("lane:N", title=None, axis=alt.Axis(labelLimit=LABEL_LIMIT_PX)),
            color=alt.Color("part:N", title="cause", sort=list(IDLE_PARTS)),
            tooltip=["lane:N", "part:N", alt.Tooltip("sum(time_us):Q", title="idle (µs)", format=",.1f")],
        )
        .properties(width=420)
    )


def per_rank_chart(
    table_or_result: TableLike, *, parts: Sequence[str] | None = None, title: str = "Time per rank"
) -> altair.Chart:
    """Stacked bars, one per rank, of the ``*_us`` columns (e.g. compute / non_compute / idle)."""
    import altair as alt

    table = as_table(table_or_result, "per_rank_chart")
    require_columns(table, ["rank"], "per_rank_chart")
    if parts is None:
        parts = [
            c.removesuffix("_us")
            for c in table.columns
            if c.endswith("_us") and c != "kernel_time_us" and pd.api.types.is_numeric_dtype(table[c])
        ]
    long, _ = finite_rows(_long_parts(table, parts, ["rank"]), ["time_us"])
    if long.empty:
        return message_chart("nothing to draw: no per-rank time", title=title)
    return (
        alt.Chart(long, title=title)
        .mark_bar()
        .encode(
            x=alt.X("rank:O"),
            y=alt.Y("time_us:Q", title="time (µs)", stack="zero"),
            color=alt.Color("part:N"),
            tooltip=["rank:O", "part:N", alt.Tooltip("time_us:Q", format=",.1f")],
        )
        .properties(width=max(120, 40 * long["rank"].nunique()))
    )
