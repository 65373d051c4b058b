"""Breakdown charts: top ops / kernels by time, kernel types, idle split, per rank.

Builders take result objects (anything with a ``.table`` DataFrame) or DataFrames and return
altair charts; they compute nothing beyond sorting, top-N and reshaping for drawing.
"""
from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

from workbench.charts.common import (
    as_table, finite_rows, first_present, message_chart, require_columns, shorten,
)
from workbench.errors import InvalidArgumentError

TOOLTIP_CANDIDATES = (
    "count", "self_us", "total_us", "dur_us", "mean_us", "pct", "kernel_type",
    "input_dims", "top_input_dims", "input_shapes", "shapes",
)
TIME_COLUMNS = ("self_us", "total_us", "dur_us", "sum_us", "time_us")
IDLE_PARTS = ("host_wait", "kernel_wait", "other")


def _top_bars(table: pd.DataFrame, value: str, n: int, title: str, color: str | None) -> Any:
    import altair as alt

    rows, dropped = finite_rows(table, [value])
    rows = rows.sort_values(value, ascending=False).head(n).copy()
    if rows.empty:
        why = f"{dropped} rows without a finite {value}" if dropped else "the table is empty"
        return message_chart(f"nothing to draw: {why}", title=title)
    rows["label"] = [shorten(v) for v in rows["name"]]
    tips = [alt.Tooltip("name:N", title="name")]
    tips += [alt.Tooltip(f"{c}:{'Q' if pd.api.types.is_numeric_dtype(rows[c]) else 'N'}")
             for c in TOOLTIP_CANDIDATES if c in rows.columns and c != value]
    rows = rows[[c for c in rows.columns if c in {"name", "label", value, color} or
                 c in TOOLTIP_CANDIDATES]]
    enc = dict(
        x=alt.X(f"{value}:Q", title=value.replace("_us", " (µs)")),
        y=alt.Y("label:N", sort="-x", title=None),
        tooltip=[alt.Tooltip(f"{value}:Q", format=",.1f")] + tips,
    )
    if color and color in rows.columns:
        enc["color"] = alt.Color(f"{color}:N")
    subtitle = f"{dropped} rows without a finite {value} left out" if dropped else None
    chart_title = alt.TitleParams(title, subtitle=subtitle) if subtitle else title
    return alt.Chart(rows, title=chart_title).mark_bar().encode(**enc).properties(width=420)


def top_ops_chart(op_breakdown: Any, *, n: int = 15, value: str = "self_us") -> Any:
    """The ``n`` CPU ops with the most ``value`` (self time by default), as horizontal bars."""
    table = as_table(op_breakdown, "top_ops_chart")
    require_columns(table, ["name", value], "top_ops_chart")
    return _top_bars(table, value, n, f"Top {n} ops by {value.replace('_us', ' time')}", None)


def top_kernels_chart(kernel_breakdown: Any, *, n: int = 15, value: str | None = None) -> Any:
    """The ``n`` kernels with the most total time, coloured by kernel type when known."""
    table = as_table(kernel_breakdown, "top_kernels_chart")
    require_columns(table, ["name"], "top_kernels_chart")
    value = value or first_present(table, TIME_COLUMNS, "top_kernels_chart")
    return _top_bars(table, value, n, f"Top {n} kernels by {value.replace('_us', ' time')}",
                     "kernel_type")


def kernel_types_chart(table_or_result: Any, *, value: str | None = None) -> Any:
    """Time per kernel type (computation / communication / memory), one bar each."""
    import altair as alt

    table = as_table(table_or_result, "kernel_types_chart")
    type_col = first_present(table, ("kernel_type", "type"), "kernel_types_chart")
    value = value or first_present(table, TIME_COLUMNS, "kernel_types_chart")
    rows, _ = finite_rows(table, [value])
    per_type = rows.groupby(type_col, as_index=False)[value].sum()
    if per_type.empty or per_type[value].sum() <= 0:
        return message_chart("nothing to draw: no kernel time in this trace",
                             title="Kernel types")
    per_type["pct"] = 100.0 * per_type[value] / per_type[value].sum()
    return alt.Chart(per_type, title="Kernel time by type").mark_bar().encode(
        x=alt.X(f"{value}:Q", title="time (µs)"),
        y=alt.Y(f"{type_col}:N", sort="-x", title=None),
        color=alt.Color(f"{type_col}:N", legend=None),
        tooltip=[f"{type_col}:N", alt.Tooltip(f"{value}:Q", format=",.1f"),
                 alt.Tooltip("pct:Q", format=".1f")],
    ).properties(width=420)


def _long_parts(table: pd.DataFrame, parts: Sequence[str], keys: list[str]) -> pd.DataFrame:
    cols = {p: f"{p}_us" for p in parts if f"{p}_us" in table.columns}
    if not cols:
        raise InvalidArgumentError(
            f"expected columns {[p + '_us' for p in parts]}; the table has {list(table.columns)}"
        )
    long = table[keys + list(cols.values())].melt(id_vars=keys, var_name="part", value_name="time_us")
    long["part"] = long["part"].str.removesuffix("_us")
    return long


def idle_chart(idle_breakdown: Any) -> Any:
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
    return alt.Chart(long[["lane", "part", "time_us"]], title="Idle time by cause").mark_bar().encode(
        x=alt.X("sum(time_us):Q", title="idle (µs)"),
        y=alt.Y("lane:N", title=None),
        color=alt.Color("part:N", title="cause", sort=list(IDLE_PARTS)),
        tooltip=["lane:N", "part:N", alt.Tooltip("sum(time_us):Q", format=",.1f")],
    ).properties(width=420)


def per_rank_chart(table_or_result: Any, *, parts: Sequence[str] | None = None,
                   title: str = "Time per rank") -> Any:
    """Stacked bars, one per rank, of the ``*_us`` columns (e.g. compute / non_compute / idle)."""
    import altair as alt

    table = as_table(table_or_result, "per_rank_chart")
    require_columns(table, ["rank"], "per_rank_chart")
    if parts is None:
        parts = [c.removesuffix("_us") for c in table.columns
                 if c.endswith("_us") and c != "kernel_time_us"
                 and pd.api.types.is_numeric_dtype(table[c])]
    long, _ = finite_rows(_long_parts(table, parts, ["rank"]), ["time_us"])
    if long.empty:
        return message_chart("nothing to draw: no per-rank time", title=title)
    return alt.Chart(long, title=title).mark_bar().encode(
        x=alt.X("rank:O"), y=alt.Y("time_us:Q", title="time (µs)", stack="zero"),
        color=alt.Color("part:N"), tooltip=["rank:O", "part:N", alt.Tooltip("time_us:Q", format=",.1f")],
    ).properties(width=max(120, 40 * long["rank"].nunique()))
