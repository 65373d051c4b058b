"""The critical path drawn: the step's timeline with the path's edges highlighted, and a bound-by bar.

``critical_path_chart(cp, trace=None)``: one lane per CPU thread and GPU stream; the path's edges as bars
coloured by kind (host, launch, kernel, memory, communication, GPU idle), over the window's other events in
grey when the trace is given (the longest ones, within the row budget). ``bound_by_chart(cp)``: one stacked
bar of the path's shares per kind, for the summary card and the report. Both draw offline (no CDN: the
spec carries its data) and never analyse: they read a ``CriticalPath`` result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from workbench.charts.common import MAX_CHART_ROWS, message_chart, shorten

if TYPE_CHECKING:
    import altair

KIND_ORDER = ["host", "launch", "kernel", "memory", "communication", "gpu_idle"]
KIND_COLORS = ["#72b7b2", "#eeca3b", "#4c78a8", "#f58518", "#54a24b", "#e45756"]
BACKGROUND = "#d9d9d9"


def _lane(kind: pd.Series, tid: pd.Series, stream: pd.Series) -> pd.Series:
    gpu = kind.isin(["launch", "kernel", "memory", "communication", "gpu_idle"]).to_numpy()
    host = "thread " + tid.astype(str)
    device = "stream " + stream.astype(str)
    return pd.Series(np.where(gpu, device, host), index=kind.index)


def path_rows(cp: Any, max_rows: int = MAX_CHART_ROWS) -> tuple[pd.DataFrame, int]:
    """The path's edges with time, as chart rows (lane, kind, name, ts_us, end_us, dur_us); the longest
    ``max_rows``, and how many shorter ones were left out."""
    t = cp.table
    t = t[(t["dur_us"] > 0).to_numpy()]
    dropped = max(0, len(t) - max_rows)
    if dropped:
        t = t.nlargest(max_rows, "dur_us")
    rows = pd.DataFrame(
        {
            "lane": _lane(t["kind"], t["tid"], t["stream"]).to_numpy(),
            "kind": t["kind"].astype(str).to_numpy(),
            "name": [shorten(n) for n in t["name"].astype(str)],
            "ts_us": t["ts_us"].to_numpy(np.float64),
            "end_us": t["end_us"].to_numpy(np.float64),
            "dur_us": t["dur_us"].to_numpy(np.float64),
        }
    )
    return rows, dropped


def _background(trace: Any, cp: Any, budget: int) -> pd.DataFrame:
    """The window's kernels and CPU ops (the longest ``budget``), grey behind the path."""
    if trace is None or budget <= 0:
        return pd.DataFrame(columns=["lane", "name", "ts_us", "end_us", "dur_us"])
    parts = []
    lo, hi = cp.window_start_us, cp.window_end_us
    for table, lane in ((getattr(trace, "kernels", None), "stream"), (getattr(trace, "cpu_ops", None), "tid")):
        if table is None or not len(table):
            continue
        t = table[(table["rank"] == cp.rank).to_numpy()]
        ts = t["ts_us"].to_numpy(np.float64)
        t = t[(ts >= lo) & (ts <= hi)]
        if lane == "tid" and "depth" in t.columns:
            t = t[(t["depth"] == 0).to_numpy()]
        label = ("stream " if lane == "stream" else "thread ") + t[lane].astype(str)
        if lane == "tid":  # the path's lanes name threads as pid/tid
            label = "thread " + t["pid"].astype(str) + "/" + t["tid"].astype(str)
        parts.append(
            pd.DataFrame(
                {
                    "lane": label.to_numpy(),
                    "name": [shorten(n) for n in t["name"].astype(str)],
                    "ts_us": t["ts_us"].to_numpy(np.float64),
                    "end_us": (t["ts_us"] + t["dur_us"]).to_numpy(np.float64),
                    "dur_us": t["dur_us"].to_numpy(np.float64),
                }
            )
        )
    if not parts:
        return pd.DataFrame(columns=["lane", "name", "ts_us", "end_us", "dur_us"])
    bg = pd.concat(parts, ignore_index=True)
    return bg.nlargest(budget, "dur_us") if len(bg) > budget else bg


def critical_path_chart(
    cp: Any, trace: Any = None, *, width: int = 760, max_rows: int = MAX_CHART_ROWS
) -> altair.TopLevelMixin:
    """The step's timeline with the critical path highlighted (see the module doc)."""
    import altair as alt

    rows, dropped = path_rows(cp, max_rows=max_rows // 2 if trace is not None else max_rows)
    if not len(rows):
        return message_chart(f"the critical path of {cp.step} has no edge with time", title="critical path")
    bg = _background(trace, cp, max_rows - len(rows))
    title = (
        f"critical path of {cp.step} (rank {cp.rank}): {cp.length_us / 1e3:.3g} ms of a "
        f"{cp.step_us / 1e3:.3g} ms step, bound by {cp.bound_by}"
    )
    if dropped:
        title += f" ({dropped} shorter edges not drawn)"
    lanes = sorted(set(rows["lane"]) | set(bg["lane"]), key=lambda s: (not s.startswith("thread"), s))
    x = alt.X("ts_us:Q", title="time (µs)")
    y = alt.Y("lane:N", sort=lanes, title=None)
    layers = []
    if len(bg):
        layers.append(
            alt.Chart(bg)
            .mark_bar(color=BACKGROUND, height=10)
            .encode(x=x, x2="end_us:Q", y=y, tooltip=["name:N", alt.Tooltip("dur_us:Q", format=".1f")])
        )
    layers.append(
        alt.Chart(rows)
        .mark_bar(height=14, stroke="black", strokeWidth=0.3)
        .encode(
            x=x,
            x2="end_us:Q",
            y=y,
            color=alt.Color("kind:N", scale=alt.Scale(domain=KIND_ORDER, range=KIND_COLORS), title="on the path"),
            tooltip=["kind:N", "name:N", alt.Tooltip("dur_us:Q", format=".1f", title="µs on the path")],
        )
    )
    return (
        alt.layer(*layers)
        .properties(
            title=title, width=width, height=max(60, 22 * len(lanes)), usermeta={"workbench_chart": "critical_path"}
        )
        .interactive(bind_y=False)
    )


def bound_by_chart(cp: Any, *, width: int = 420) -> altair.Chart:
    """One stacked bar: the share of the critical path per kind of work."""
    import altair as alt

    shares = pd.DataFrame(
        {
            "kind": KIND_ORDER,
            "pct": [float(cp.shares_pct.get(k, 0.0)) for k in KIND_ORDER],
            "ms": [float(cp.by_kind_us.get(k, 0.0)) / 1e3 for k in KIND_ORDER],
        }
    )
    shares = shares[shares["pct"] > 0]
    if not len(shares):
        return message_chart("the critical path has no time on it", title="bound by")
    shares["order"] = [KIND_ORDER.index(k) for k in shares["kind"]]
    return (
        alt.Chart(shares, title=f"critical path bound by {cp.bound_by}")
        .mark_bar(height=18)
        .encode(
            x=alt.X("pct:Q", stack="zero", title="share of the critical path (%)", scale=alt.Scale(domain=[0, 100])),
            color=alt.Color("kind:N", scale=alt.Scale(domain=KIND_ORDER, range=KIND_COLORS), title=None),
            order=alt.Order("order:Q"),
            tooltip=["kind:N", alt.Tooltip("pct:Q", format=".1f"), alt.Tooltip("ms:Q", format=".3f")],
        )
        .properties(width=width, height=24, usermeta={"workbench_chart": "critical_path_bound_by"})
    )
