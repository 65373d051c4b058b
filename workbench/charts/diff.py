"""The waterfall of a trace diff (``workbench.analysis.diff.TraceDiff``): the first trace's total per step,
one bar per kernel family (or op) that moved it, the second trace's total. Drawing only: the bars are
the diff's ``groups`` rows, stacked in order."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from workbench.charts.common import message_chart, shorten

if TYPE_CHECKING:
    import altair

COLORS = {"total": "#5b6b7a", "more time": "#d1495b", "less time": "#2e8b57"}


def waterfall_table(diff: Any) -> pd.DataFrame:
    """The bars: label, start_ms, end_ms, delta_ms, what ("total" / "more time" / "less time"), order."""
    rows = [
        {
            "label": f"{diff.label_a} (total)",
            "start_ms": 0.0,
            "end_ms": diff.total_a_us / 1000,
            "delta_ms": diff.total_a_us / 1000,
            "what": "total",
        }
    ]
    level = diff.total_a_us / 1000
    for group, delta in zip(diff.groups["group"], diff.groups["delta_us"]):
        d = float(delta) / 1000
        rows.append(
            {
                "label": shorten(str(group), 40),
                "start_ms": level,
                "end_ms": level + d,
                "delta_ms": d,
                "what": "more time" if d > 0 else "less time",
            }
        )
        level += d
    rows.append(
        {
            "label": f"{diff.label_b} (total)",
            "start_ms": 0.0,
            "end_ms": diff.total_b_us / 1000,
            "delta_ms": diff.total_b_us / 1000,
            "what": "total",
        }
    )
    table = pd.DataFrame(rows)
    table["order"] = range(len(table))
    # labels must be unique for the ordinal axis
    seen: dict[str, int] = {}
    labels = []
    for label in table["label"]:
        seen[label] = seen.get(label, 0) + 1
        labels.append(label if seen[label] == 1 else f"{label} [{seen[label]}]")
    table["label"] = labels
    return table


def diff_waterfall_chart(diff: Any, *, width: int = 560, height: int = 280) -> altair.TopLevelMixin:
    """A waterfall of the change from ``diff.label_a`` to ``diff.label_b`` by kernel family / op."""
    import altair as alt

    unit = "kernel" if diff.unit == "kernel" else "op self"
    if diff.total_a_us <= 0 and diff.total_b_us <= 0:
        return message_chart(f"no {unit} time in either trace: nothing to draw", title="What changed")
    table = waterfall_table(diff)
    order = table["label"].tolist()
    base = alt.Chart(table).encode(
        x=alt.X("label:N", sort=order, title=None, axis=alt.Axis(labelAngle=-35, labelLimit=160))
    )
    bars = base.mark_bar().encode(
        y=alt.Y("start_ms:Q", title=f"{unit} time {diff.basis} (ms)"),
        y2="end_ms:Q",
        color=alt.Color(
            "what:N",
            scale=alt.Scale(domain=list(COLORS), range=list(COLORS.values())),
            legend=alt.Legend(title=None, orient="top"),
        ),
        tooltip=[
            alt.Tooltip("label:N", title="group"),
            alt.Tooltip("delta_ms:Q", title="change (ms)", format="+.3f"),
            alt.Tooltip("end_ms:Q", title="running total (ms)", format=".3f"),
        ],
    )
    title = f"What changed, {diff.label_a} -> {diff.label_b} ({unit} time {diff.basis})"
    return bars.properties(width=width, height=height, title=title)
