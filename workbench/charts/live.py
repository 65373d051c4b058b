"""Live timeline: in a running notebook, the zoom re-queries the trace for the visible window.

The static timeline (``timeline.timeline_chart``) carries a level-of-detail pyramid and refines
bins on zoom with no Python behind the page. ``live_timeline`` wraps the same chart in an
``altair.JupyterChart`` widget: the kernel observes the chart's ``zoom`` selection (the x extent
bound to the scales) and, once the zoom settles, recomputes the pyramid for the visible window
only (``timeline_levels(events, start_us=, end_us=)``) and swaps the widget's chart, so the window
shows full detail: every event once it holds at most ``detail_threshold`` of them, otherwise bins
``span / window`` times finer than before. The widget loads its JavaScript from vl-convert's
bundle (``JupyterChart.enable_offline``), so nothing it draws needs the network.

The whole trace shows top-level ops; a window with room for more (its events, each drawn by itself,
stay within ``detail_threshold``) also shows the ops nested in them, one lane per depth under the
thread's lane, as deep as fits. Bars are clipped to the plot: a zoomed bar that starts before the
window never paints over the lane labels.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from workbench.charts.common import TraceTables
from workbench.charts.timeline import timeline_chart, timeline_events, timeline_levels

ZOOM = "zoom"
X_FIELD = "ts_us"
SAME_WINDOW_FRACTION = 1e-3
MAX_OP_DEPTH = 12  # nested ops are drawn down to this depth where a zoom window has room for them


def zoom_window(selection: Any, field_name: str = X_FIELD) -> tuple[float, float] | None:
    """The ``(start_us, end_us)`` an interval selection spans on ``field_name``, or None when the
    selection is empty (not zoomed yet, or reset) or not a finite, non-empty interval.

    Accepts an ``altair.IntervalSelection`` or its raw ``value`` dict (``{"ts_us": [lo, hi]}``).
    """
    value = getattr(selection, "value", selection)
    if not isinstance(value, dict):
        return None
    extent = value.get(field_name)
    if not isinstance(extent, (list, tuple)) or len(extent) != 2:
        return None
    try:
        lo, hi = sorted(float(v) for v in extent)
    except (TypeError, ValueError):
        return None
    if not (np.isfinite(lo) and np.isfinite(hi)) or hi <= lo:
        return None
    return lo, hi


class LiveTimeline:
    """Keeps a trace's timeline events and the window a ``JupyterChart`` currently shows.

    ``on_zoom`` is the selection observer; ``show_window(start_us, end_us)`` re-queries and swaps
    the chart (it is what a zoom calls, and can be called from a cell). ``window_us`` is the
    window drawn now (None: the whole trace); ``info`` what ``timeline_levels`` did for it;
    ``requeries`` how many times the chart was rebuilt for a window.
    """

    def __init__(
        self, events: pd.DataFrame, widget: Any, chart_options: dict[str, Any], nested: pd.DataFrame | None = None
    ):
        self.events = events
        self.widget = widget
        self.chart_options = chart_options
        self.window_us: tuple[float, float] | None = None
        self.info: dict[str, Any] = {}
        self.requeries = 0
        self.op_depth = 0  # how deep the ops drawn now are nested (0: top-level only)
        self._extent_us = _events_extent(events)
        self._nested = nested if nested is not None else events.iloc[:0]
        ts_us = self._nested["ts_us"].to_numpy(float)
        self._nested_span = (ts_us, ts_us + self._nested["dur_us"].to_numpy(float))
        self._nested_depth = (
            self._nested["lane"]
            .astype(str)
            .str.extract(r"· depth (\d+)$")[0]
            .astype(float)
            .fillna(0)
            .to_numpy(np.int64)
        )

    def attach(self) -> None:
        """Observe the zoom selection of the widget's current chart (a swapped chart brings a new
        ``selections`` object, so this runs after every swap)."""
        if ZOOM in self.widget.selections.trait_names():
            self.widget.selections.observe(self.on_zoom, names=ZOOM)

    def on_zoom(self, change: dict[str, Any]) -> None:
        """Selection observer: re-query for the new zoom window (empty selections are ignored)."""
        window = zoom_window(change["new"])
        if window is not None:
            self.show_window(*window)

    def show_window(self, start_us: float, end_us: float) -> bool:
        """Draw ``[start_us, end_us]`` at the detail its own events allow; False when nothing
        changed (the same window as now, or a window holding no events: the chart is kept)."""
        if self._same_as_current(start_us, end_us) or not self._has_events(start_us, end_us):
            return False
        levels_options = {k: self.chart_options[k] for k in ("detail_threshold", "max_marks")}
        events = self._with_nested_ops(start_us, end_us)
        _, self.info = timeline_levels(events, start_us=start_us, end_us=end_us, **levels_options)
        self.info["op_depth"] = self.op_depth
        self.window_us = (float(start_us), float(end_us))
        self.widget.chart = timeline_chart(events, start_us=start_us, end_us=end_us, **self.chart_options)
        self.requeries += 1
        self.attach()
        return True

    def show_all(self) -> None:
        """Back to the whole trace (the page's own reset, a double click, keeps the window)."""
        self.widget.chart = timeline_chart(self.events, **self.chart_options)
        self.window_us, self.info, self.op_depth = None, {}, 0
        self.attach()

    def _with_nested_ops(self, start_us: float, end_us: float) -> pd.DataFrame:
        """The events, plus the nested ops of the window as deep as they fit: while the window's events
        stay within ``detail_threshold`` (each drawn by itself), the next depth of ops is added, each
        depth in its own lane under its thread's."""
        self.op_depth = 0
        if not len(self._nested):
            return self.events
        ts_us = self.events["ts_us"].to_numpy(float)
        ends_us = ts_us + self.events["dur_us"].to_numpy(float)
        shown = int(((ends_us >= start_us) & (ts_us <= end_us)).sum())
        starts, ends = self._nested_span
        in_window = (ends >= start_us) & (starts <= end_us)
        per_depth = np.bincount(self._nested_depth[in_window], minlength=MAX_OP_DEPTH + 1)
        budget = self.chart_options["detail_threshold"]
        for depth in range(1, min(len(per_depth) - 1, MAX_OP_DEPTH) + 1):
            if shown + per_depth[depth] > budget:
                break
            shown += int(per_depth[depth])
            if per_depth[depth]:
                self.op_depth = depth
        if self.op_depth == 0:
            return self.events
        keep = in_window & (self._nested_depth <= self.op_depth)
        return pd.concat([self.events, self._nested.loc[keep]], ignore_index=True)

    def _same_as_current(self, start_us: float, end_us: float) -> bool:
        current = self.window_us or self._extent_us
        tolerance = SAME_WINDOW_FRACTION * max(end_us - start_us, 1e-9)
        return abs(start_us - current[0]) <= tolerance and abs(end_us - current[1]) <= tolerance

    def _has_events(self, start_us: float, end_us: float) -> bool:
        ts_us = self.events["ts_us"].to_numpy(float)
        ends_us = ts_us + self.events["dur_us"].to_numpy(float)
        return bool(((ends_us >= start_us) & (ts_us <= end_us)).any())


def _events_extent(events: pd.DataFrame) -> tuple[float, float]:
    ts_us = events["ts_us"].to_numpy(float)
    ends_us = ts_us + events["dur_us"].to_numpy(float)
    finite = np.isfinite(ts_us) & np.isfinite(ends_us)
    if not finite.any():
        return 0.0, 1.0
    return float(ts_us[finite].min()), float(ends_us[finite].max())


def live_timeline(
    trace_or_events: TraceTables | pd.DataFrame,
    *,
    detail_threshold: int = 3000,
    max_marks: int = 4000,
    width: int = 900,
    title: str = "Timeline",
    debounce_ms: int = 250,
    offline: bool = True,
) -> Any:
    """The timeline as an ``altair.JupyterChart`` whose zoom re-queries the trace's tables.

    Scroll to zoom, drag to pan; ``debounce_ms`` after the zoom settles the kernel recomputes the
    visible window and the widget redraws it in full detail. The controller is
    ``widget.timeline`` (a ``LiveTimeline``). ``offline=True`` (default) loads the widget's
    JavaScript from vl-convert's bundle instead of a CDN (needs ``vl-convert-python`` and,
    in the notebook, ``anywidget``).
    """
    import altair as alt

    if offline:
        alt.JupyterChart.enable_offline()
    nested = None
    if isinstance(trace_or_events, pd.DataFrame):
        events = trace_or_events
    else:
        events = timeline_events(trace_or_events)
        deep = timeline_events(trace_or_events, op_max_depth=MAX_OP_DEPTH)
        nested = deep[(deep["kind"] == "op") & deep["lane"].astype(str).str.contains("· depth ", regex=False)]
    options: dict[str, Any] = {
        "detail_threshold": detail_threshold,
        "max_marks": max_marks,
        "width": width,
        "title": title,
        "zoom_name": ZOOM,
    }
    widget = alt.JupyterChart(timeline_chart(events, **options), debounce_wait=debounce_ms, max_wait=False)
    widget.timeline = LiveTimeline(events, widget, options, nested)
    widget.timeline.attach()
    return widget
