"""Memory charts: allocated bytes over time per device (an area each, the peak marked) above the op timeline
on the same time axis, and the largest blocks live at the peak as bars labelled with their module and line.

Draw only: the numbers come from ``workbench.analysis.memory`` (``MemoryTimeline``, ``MemoryPeak``). A long
timeline is reduced to at most ``MAX_POINTS`` points per device by keeping each bin's largest value (the peak
always survives), so a ten-million-event table still draws.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from workbench.charts.common import message_chart, shorten

if TYPE_CHECKING:
    import altair

MAX_POINTS = 2000
MAX_OPS = 400
TOP_BLOCKS = 10
MIB = float(1 << 20)


def _reduced(table: pd.DataFrame) -> pd.DataFrame:
    parts = []
    for device, part in table.groupby("device", sort=True):
        if len(part) > MAX_POINTS:
            bins = np.linspace(part["ts_us"].min(), part["ts_us"].max() + 1e-9, MAX_POINTS + 1)
            which = np.clip(np.searchsorted(bins, part["ts_us"].to_numpy(), side="right") - 1, 0, MAX_POINTS - 1)
            part = part.assign(bin=which).sort_values("allocated_bytes").groupby("bin").tail(1).sort_values("ts_us")
        parts.append(part[["device", "ts_us", "allocated_bytes", "reserved_bytes"]])
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["device", "ts_us", "allocated_bytes"])
    return out.assign(allocated_mib=out["allocated_bytes"] / MIB, ts_ms=out["ts_us"] / 1e3)


def memory_chart(
    trace: Any = None, *, timeline: Any = None, peak: Any = None, width: int = 640
) -> altair.TopLevelMixin:
    """The memory timeline (area per device, the peak marked) above the op timeline, and the top live blocks
    at the peak. Give a trace (the analyses run here) or the results themselves."""
    import altair as alt

    from workbench.analysis import memory as mem

    if timeline is None or peak is None:
        if trace is None:
            return message_chart("no trace and no memory results to draw", title="Memory")
        events = mem.memory_events(trace)
        timeline = timeline or mem.memory_timeline(trace, events=events)
        peak = peak or mem.memory_peak(trace, events=events)
    if not len(timeline.table):
        return message_chart(timeline.notes[0] if timeline.notes else "no memory events", title="Memory")
    data = _reduced(timeline.table)
    x = alt.X("ts_ms:Q", title="time (ms, from the trace's start)")
    area = (
        alt.Chart(data)
        .mark_area(opacity=0.5, interpolate="step-after")
        .encode(
            x=x,
            y=alt.Y("allocated_mib:Q", title="allocated (MiB)", stack=None),
            color=alt.Color("device:N", title="device"),
            tooltip=["device:N", alt.Tooltip("ts_ms:Q", format=".3f"), alt.Tooltip("allocated_mib:Q", format=",.1f")],
        )
    )
    marks = timeline.devices.assign(
        ts_ms=timeline.devices["peak_ts_us"] / 1e3, peak_mib=timeline.devices["peak_bytes"] / MIB
    )[["device", "ts_ms", "peak_mib"]]
    rule = (
        alt.Chart(marks)
        .mark_rule(strokeDash=[4, 3], color="#c00")
        .encode(x="ts_ms:Q", tooltip=["device:N", alt.Tooltip("peak_mib:Q", title="peak (MiB)", format=",.1f")])
    )
    label = (
        alt.Chart(marks)
        .mark_text(align="left", dx=4, dy=-6, color="#c00")
        .encode(x="ts_ms:Q", y="peak_mib:Q", text=alt.Text("peak_mib:Q", format=",.1f"))
    )
    top = (area + rule + label).properties(
        width=width, height=180, title=f"Allocated memory ({peak.device} peak {peak.peak_bytes / MIB:,.1f} MiB)"
    )
    charts = [top]
    ops = getattr(trace, "cpu_ops", None) if trace is not None else None
    if ops is not None and len(ops):
        top_level = ops[ops["depth"] == 0]
        top_level = top_level.nlargest(MAX_OPS, "dur_us") if len(top_level) > MAX_OPS else top_level
        lanes = pd.DataFrame(
            {
                "op": [shorten(n, 40) for n in top_level["name"].astype(str)],
                "start": top_level["ts_us"].to_numpy() / 1e3,
                "end": top_level["end_us"].to_numpy() / 1e3,
                "thread": top_level["tid"].astype(str).to_numpy(),
            }
        )
        charts.append(
            alt.Chart(lanes)
            .mark_bar()
            .encode(
                x=alt.X("start:Q", title="time (ms)"),
                x2="end:Q",
                y=alt.Y("thread:N", title="thread"),
                color=alt.Color("op:N", legend=None),
                tooltip=["op:N", "start:Q", "end:Q"],
            )
            .properties(width=width, height=60, title="top-level ops")
        )
    blocks = peak.top(TOP_BLOCKS) if len(peak.table) else peak.table
    if len(blocks):
        where = [
            shorten(" ".join(s for s in (str(m).split("/")[-1] if m else "", str(loc) or str(o)) if s) or str(c), 60)
            for m, loc, o, c in zip(blocks["module"], blocks["location"], blocks["top_op"], blocks["category"])
        ]
        bars = pd.DataFrame(
            {
                "block": [f"{i + 1}. {w}" for i, w in enumerate(where)],
                "mib": blocks["bytes"] / MIB,
                "category": blocks["category"].astype(str),
                "op": blocks["op_name"].astype(str),
            }
        )
        charts.append(
            alt.Chart(bars)
            .mark_bar()
            .encode(
                x=alt.X("mib:Q", title="bytes live at the peak (MiB)"),
                y=alt.Y("block:N", sort=None, title=None),
                color=alt.Color("category:N"),
                tooltip=["block:N", "op:N", "category:N", alt.Tooltip("mib:Q", format=",.2f")],
            )
            .properties(width=width, height=18 * len(bars), title="largest blocks live at the peak")
        )
    else:
        text = shorten("; ".join(peak.notes), 160) or "no blocks live at the peak"
        charts.append(
            alt.Chart(pd.DataFrame({"message": [text]}))
            .mark_text(align="left", color="#555")
            .encode(text="message:N", x=alt.value(4), y=alt.value(12))
            .properties(width=width, height=24, title="largest blocks live at the peak")
        )
    return alt.vconcat(*charts).resolve_scale(color="independent")
