"""The trend of a cell's (or callable's) history: each run's median with its interquartile range,
and the change points (computed in ``workbench.study.history``) marked where a shift begins.

    history_chart(run.history)      # an altair.Chart; .save("history.html") draws offline
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from workbench.errors import InvalidArgumentError

if TYPE_CHECKING:
    import altair

    from workbench.study.history import History

MAX_POINTS = 5000  # altair's row limit: a longer history shows its latest runs


def history_table(history: "History") -> pd.DataFrame:
    """One row per run: run (0-based), time, median_ms, q1_ms/q3_ms (median -/+ IQR/2), name,
    change (True where a change point begins), segment (the level it belongs to)."""
    entries = getattr(history, "entries", None)
    if entries is None:
        raise InvalidArgumentError(
            f"history_chart needs a History (run.history, load_history(...)); got {type(history).__name__}"
        )
    starts = set(history.change_points)
    rows, segment = [], 0
    for i, e in enumerate(entries):
        if i in starts:
            segment += 1
        rows.append(
            {
                "run": i,
                "time": e.time,
                "median_ms": e.median_ms,
                "q1_ms": e.median_ms - e.spread_ms / 2,
                "q3_ms": e.median_ms + e.spread_ms / 2,
                "name": e.name or e.notebook,
                "change": i in starts,
                "segment": segment,
            }
        )
    table = pd.DataFrame(rows, columns=["run", "time", "median_ms", "q1_ms", "q3_ms", "name", "change", "segment"])
    return table.tail(MAX_POINTS)


def history_chart(history: "History", *, title: str | None = None) -> altair.TopLevelMixin:
    """A trend line of the runs' medians (IQR as a band of error bars), each segment's level as a
    step, and a rule at every change point, labelled with its run number."""
    import altair as alt

    table = history_table(history)
    if table.empty:
        raise InvalidArgumentError("the history has no runs yet: profile the cell (or callable) first")
    levels = table.groupby("segment")["median_ms"].transform("median")
    table = table.assign(level_ms=levels)
    base = alt.Chart(table).encode(x=alt.X("run:Q", title="run", axis=alt.Axis(tickMinStep=1)))
    spread = base.mark_errorbar(ticks=True).encode(y=alt.Y("q1_ms:Q", title="median per call (ms)"), y2="q3_ms:Q")
    line = base.mark_line(point=True).encode(
        y="median_ms:Q", tooltip=["run:Q", "time:N", alt.Tooltip("median_ms:Q", format=".4g"), "name:N"]
    )
    level = base.mark_line(strokeDash=[4, 3], color="gray", interpolate="step-after").encode(y="level_ms:Q")
    layers = [spread, line, level]
    changes = table[table["change"]]
    if not changes.empty:
        rule = alt.Chart(changes).mark_rule(color="firebrick", strokeWidth=2).encode(x="run:Q")
        label = (
            alt.Chart(changes)
            .mark_text(align="left", dx=4, dy=-6, color="firebrick")
            .encode(x="run:Q", y=alt.value(8), text=alt.Text("run:Q", format="d"))
        )
        layers += [rule, label]
    shown = title or (
        f"history: {len(table)} runs, change at run {', '.join(str(i) for i in history.change_points)}"
        if history.change_points
        else f"history: {len(table)} runs, no change point"
    )
    return alt.layer(*layers).properties(title=shown, width=480, height=220)
