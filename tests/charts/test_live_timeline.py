"""Live timeline: a zoom in the widget re-queries the trace and redraws the window in full detail.

The frontend reports a zoom by setting the widget's ``_vl_selections`` (what altair's JupyterChart
JavaScript sends over the comm); the tests set it the same way, so the path from the comm message
through altair's selection traits to the re-query is the one a live notebook runs.
"""

import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from workbench import charts
from workbench.charts.live import LiveTimeline, zoom_window
from workbench.charts.timeline_data import rows_frame

pytest.importorskip("anywidget")

N_KERNELS = 60_000
KERNEL_DUR_US = 0.5


@pytest.fixture(scope="module")
def trace():
    rng = np.random.default_rng(7)
    ts = np.sort(rng.uniform(0, 1e6, N_KERNELS))
    kernels = pd.DataFrame(
        {
            "rank": 0,
            "stream": np.where(np.arange(N_KERNELS) % 4 == 0, 13, 7),
            "name": ["gemm", "add"] * (N_KERNELS // 2),
            "kind": "kernel",
            "ts_us": ts,
            "dur_us": KERNEL_DUR_US,
        }
    )
    ops = pd.DataFrame(
        {
            "rank": 0,
            "tid": 11,
            "name": ["aten::mm", "aten::add"],
            "ts_us": [10.0, 500_000.0],
            "dur_us": [400_000.0, 20.0],
            "depth": 0,
            "input_dims": ["[[8, 16], [16, 4]]", "[[8]]"],
        }
    )
    return SimpleNamespace(kernels=kernels, cpu_ops=ops, runtime=None, annotations=None)


def _zoom(widget, lo, hi):
    """What the page sends when the user scrolls / drags the x scale to [lo, hi]."""
    widget._vl_selections = {"zoom": {"value": {"ts_us": [lo, hi]}, "store": []}}


def _rows(widget):
    return rows_frame(widget.spec)


def _kernels_in(trace, lo, hi):
    k = trace.kernels
    return k[(k["ts_us"] + k["dur_us"] >= lo) & (k["ts_us"] <= hi)]


@pytest.fixture()
def widget(trace):
    return charts.live_timeline(trace, offline=False, debounce_ms=50)


def test_widget_starts_aggregated_and_observes_the_zoom(widget):
    assert widget.timeline.window_us is None and widget.debounce_wait == 50
    assert "zoom" in widget.selections.trait_names()
    rows = _rows(widget)
    assert (rows["count"] > 1).any(), "a 60k-event trace should start as bins"


def test_zoom_redraws_the_window_with_every_event_and_busy_time_conserved(widget, trace):
    lo, hi = 200_000.0, 230_000.0
    _zoom(widget, lo, hi)
    assert widget.timeline.requeries == 1 and widget.timeline.window_us == (lo, hi)
    assert widget.spec["encoding"]["x"]["scale"]["domain"] == [lo, hi]
    rows = _rows(widget)
    kernels = rows[rows["lane"].str.contains("stream")]
    expected = _kernels_in(trace, lo, hi)
    assert 0 < len(expected) <= 3000
    assert (kernels["count"] == 1).all(), "the window holds few events: each drawn by itself"
    assert len(kernels) == len(expected)
    assert kernels["dur_us"].sum() == pytest.approx(expected["dur_us"].sum())
    assert kernels["end_us"].min() >= lo and kernels["ts_us"].max() <= hi
    assert set(rows.loc[~rows.index.isin(kernels.index), "name"]) == {"aten::mm"}


def test_a_wide_window_refines_the_bins_and_keeps_every_event_counted(widget, trace):
    before = _rows(widget)
    coarse_bin_us = (before.loc[before["count"] > 1, "end_us"] - before.loc[before["count"] > 1, "ts_us"]).max()
    lo, hi = 100_000.0, 400_000.0
    _zoom(widget, lo, hi)
    info = widget.timeline.info
    assert info["aggregated"] and info["bin_us"] < coarse_bin_us / 2
    level0 = _rows(widget).query("lvl == 0 and lane.str.contains('stream')")
    expected = _kernels_in(trace, lo, hi)
    assert level0["count"].sum() == len(expected)
    assert level0["dur_us"].sum() == pytest.approx(expected["dur_us"].sum(), rel=1e-6)


def test_the_observer_survives_the_swap_and_zooming_out_requeries_again(widget, trace):
    _zoom(widget, 200_000.0, 230_000.0)
    _zoom(widget, 0.0, 600_000.0)
    assert widget.timeline.requeries == 2 and widget.timeline.window_us == (0.0, 600_000.0)
    level0 = _rows(widget).query("lvl == 0 and lane.str.contains('stream')")
    assert level0["count"].sum() == len(_kernels_in(trace, 0.0, 600_000.0))
    widget.timeline.show_all()
    assert widget.timeline.window_us is None
    assert _rows(widget).query("lvl == 0")["count"].sum() == N_KERNELS + 2


def test_empty_same_or_eventless_windows_leave_the_chart_alone(widget):
    spec = widget.spec
    widget._vl_selections = {"zoom": {"value": {}, "store": []}}  # reset / not zoomed yet
    widget._vl_selections = {"zoom": {"value": None, "store": []}}
    _zoom(widget, 2_000_000.0, 3_000_000.0)  # panned past the end of the trace
    assert widget.timeline.requeries == 0 and widget.spec is spec
    _zoom(widget, 5_000.0, 6_000.0)
    spec = widget.spec
    _zoom(widget, 5_000.0, 6_000.0 + 1e-6)  # the redrawn page reporting its own domain
    assert widget.timeline.requeries == 1 and widget.spec is spec


@pytest.mark.parametrize(
    "value, expected",
    [
        ({"ts_us": [5.0, 1.0]}, (1.0, 5.0)),
        ({"ts_us": [1.0, 1.0]}, None),
        ({"ts_us": [1.0, float("nan")]}, None),
        ({"ts_us": ["a", 2]}, None),
        ({"other": [1.0, 2.0]}, None),
        ({}, None),
        (None, None),
        ([1.0, 2.0], None),
    ],
)
def test_zoom_window_reads_only_finite_non_empty_intervals(value, expected):
    assert zoom_window(value) == expected
    assert zoom_window(SimpleNamespace(value=value)) == expected


def test_a_trace_without_events_gives_a_message_widget_with_nothing_to_observe():
    empty = SimpleNamespace(kernels=None, cpu_ops=None, runtime=None, annotations=None)
    widget = charts.live_timeline(empty, offline=False)
    assert isinstance(widget.timeline, LiveTimeline)
    assert "no timeline to draw" in str(widget.spec)
    assert "zoom" not in widget.selections.trait_names()


def test_offline_widget_javascript_has_no_cdn_import(trace):
    import altair as alt

    widget = charts.live_timeline(trace.kernels.assign(lane="rank 0 · stream 7", shapes=None), offline=True)
    esm = widget.get_state()["_esm"]  # the module the frontend is sent
    assert alt.JupyterChart._is_offline and len(esm) > 100_000
    assert "esm.sh" not in esm and not re.search(r"(from|import)\s*\(?\s*[\"']https?://", esm)
