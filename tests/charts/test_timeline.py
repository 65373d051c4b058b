"""Timeline: lanes, kinds, tooltips, zoom, and the level of detail that bounds the marks."""

import json
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from workbench import charts
from workbench.charts.timeline_data import chart_rows
from workbench.errors import InvalidArgumentError


def _rows(spec):
    """The rows the timeline spec carries, decoded as the page decodes them."""
    return chart_rows(spec)


def _trace(n_kernels=10, kernel_dur=5.0, names=None, seed=0):
    rng = np.random.default_rng(seed)
    ts = np.sort(rng.uniform(0, 1e6, n_kernels))
    names = names or ["gemm", "elementwise"]
    kernels = pd.DataFrame(
        {
            "rank": 0,
            "stream": np.where(np.arange(n_kernels) % 3 == 0, 13, 7),
            "name": [names[i % len(names)] for i in range(n_kernels)],
            "kind": ["memcpy" if i % 5 == 4 else "kernel" for i in range(n_kernels)],
            "ts_us": ts,
            "dur_us": np.full(n_kernels, kernel_dur),
        }
    )
    ops = pd.DataFrame(
        {
            "rank": 0,
            "tid": [11, 11, 11],
            "name": ["aten::mm", "aten::add", "aten::addmm"],
            "ts_us": [0.0, 100.0, 50.0],
            "dur_us": [90.0, 5.0, 10.0],
            "depth": [0, 0, 1],
            "input_dims": ["[[8, 16], [16, 4]]", "[[8]]", "[]"],
        }
    )
    runtime = pd.DataFrame(
        {
            "rank": 0,
            "tid": [11, 11],
            "name": ["cudaLaunchKernel", "cudaDeviceSynchronize"],
            "ts_us": [1.0, 200.0],
            "dur_us": [2.0, 40.0],
        }
    )
    notes = pd.DataFrame({"rank": 0, "name": ["ProfilerStep#1"], "ts_us": [0.0], "dur_us": [1e6], "kind": ["step"]})
    return SimpleNamespace(kernels=kernels, cpu_ops=ops, runtime=runtime, annotations=notes)


def test_small_trace_draws_every_event_in_lanes_by_kind():
    spec = charts.timeline_chart(_trace()).to_dict()
    rows = _rows(spec)
    assert len(rows) == 10 + 2 + 1 + 1  # kernels, depth-0 ops, the sync, the step
    lanes = {r["lane"] for r in rows}
    assert lanes == {"rank 0 · stream 7", "rank 0 · stream 13", "rank 0 · thread 11", "rank 0 · annotations"}
    assert {r["kind"] for r in rows} == {"kernel", "memcpy", "op", "sync", "annotation"}
    mm = [r for r in rows if r["name"] == "aten::mm"][0]
    assert mm["shapes"] == "[[8, 16], [16, 4]]" and mm["end_us"] == 90.0
    tooltip_fields = {t["field"] for t in spec["encoding"]["tooltip"]}
    assert {"name", "dur_us", "shapes", "kind"} <= tooltip_fields
    zoom = spec["params"][0]
    assert zoom["bind"] == "scales" and zoom["select"]["encodings"] == ["x"]


def test_million_events_become_a_few_thousand_marks_with_time_conserved():
    n = 1_000_000
    trace = _trace(n_kernels=n, kernel_dur=0.5)
    rows, info = charts.timeline_table(trace, max_marks=4000)
    assert info["aggregated"] and info["events"] == n + 4
    assert len(rows) <= 4000
    kernel_rows = rows[rows["lane"].str.contains("stream")]
    assert kernel_rows["count"].sum() == n
    assert kernel_rows["dur_us"].sum() == pytest.approx(0.5 * n)
    levels, _ = charts.timeline.timeline_levels(trace, max_marks=4000)
    assert len(levels.levels) >= 3
    for k in range(len(levels.levels)):  # every zoom level conserves time too
        kernels_k = levels.view(k)[lambda t: t["lane"].str.contains("stream")]
        assert kernels_k["count"].sum() == n and kernels_k["dur_us"].sum() == pytest.approx(0.5 * n)
    spec = charts.timeline_chart(trace).to_dict()
    assert "summed into" in spec["title"]["subtitle"] and "zoom refines" in spec["title"]["subtitle"]


def test_long_events_stay_individual_when_aggregating():
    trace = _trace(n_kernels=5000, kernel_dur=1.0)
    rows, info = charts.timeline_table(trace, detail_threshold=100)
    step = rows[rows["kind"] == "annotation"]
    assert info["aggregated"] and len(step) == 1 and step["count"].iloc[0] == 1
    assert step["dur_us"].iloc[0] == 1e6


def test_window_limits_events_and_gives_detail():
    trace = _trace(n_kernels=20000, kernel_dur=1.0)
    rows, info = charts.timeline_table(trace, start_us=0.0, end_us=1000.0, detail_threshold=3000)
    assert not info["aggregated"]
    assert rows["ts_us"].max() <= 1000.0
    with pytest.raises(InvalidArgumentError, match="window is empty"):
        charts.timeline_table(trace, start_us=5.0, end_us=5.0)


def _overlapping(events, lo, hi):
    return int(((events["ts_us"] + events["dur_us"] >= lo) & (events["ts_us"] <= hi)).sum())


def test_window_subtitle_counts_the_events_in_the_window_of_the_whole_trace():
    trace = _trace(n_kernels=20000, kernel_dur=1.0)
    events = charts.timeline_events(trace)
    whole = charts.timeline_chart(trace).to_dict()["title"]["subtitle"]
    assert whole.startswith(f"{len(events):,} events; short events summed") and " events in " not in whole
    narrow = charts.timeline_chart(trace, start_us=10.0, end_us=250.0).to_dict()["title"]["subtitle"]
    n_narrow = _overlapping(events, 10.0, 250.0)
    assert 0 < n_narrow < len(events)
    assert narrow.startswith(f"{n_narrow:,} of {len(events):,} events in 10.0–250.0 µs. ")
    wide = charts.timeline_chart(trace, start_us=100_000.0, end_us=900_000.0).to_dict()["title"]["subtitle"]
    n_wide = _overlapping(events, 100_000.0, 900_000.0)
    assert n_wide > 3000, "wide enough to be aggregated"
    assert wide.startswith(f"{n_wide:,} of {len(events):,} events in 100,000.0–900,000.0 µs; short events summed")
    tail = charts.timeline_chart(trace, start_us=990_000.0).to_dict()["title"]["subtitle"]
    n_tail = _overlapping(events, 990_000.0, math.inf)
    assert tail.startswith(f"{n_tail:,} of {len(events):,} events from 990,000.0 µs")


def test_nan_durations_are_left_out_and_said():
    trace = _trace()
    trace.kernels.loc[0, "dur_us"] = math.nan
    spec = charts.timeline_chart(trace).to_dict()
    assert len(_rows(spec)) == 13
    assert "1 without a finite time left out" in spec["title"]["subtitle"]


def test_empty_trace_says_there_is_nothing():
    empty = SimpleNamespace(
        kernels=None,
        cpu_ops=pd.DataFrame(columns=["rank", "tid", "name", "ts_us", "dur_us"]),
        runtime=None,
        annotations=None,
    )
    spec = charts.timeline_chart(empty).to_dict()
    assert spec["usermeta"]["workbench_empty"] == "no timeline to draw: the trace has no events"


def test_one_event_and_hostile_names_draw():
    name = "</script><script>alert(1)</script> ∑ kernel\u2028名"
    trace = SimpleNamespace(
        kernels=pd.DataFrame(
            {"rank": [0], "stream": [7], "name": [name], "kind": ["kernel"], "ts_us": [0.0], "dur_us": [3.0]}
        ),
        cpu_ops=None,
        runtime=None,
        annotations=None,
    )
    rows = _rows(charts.timeline_chart(trace).to_dict())
    assert len(rows) == 1 and rows[0]["name"] == name


DATA = __import__("pathlib").Path(__file__).resolve().parents[1] / "data"


def test_real_gpu_trace_draws_streams_threads_and_kind_colours():
    import workbench as wb

    trace = wb.load_trace(DATA / "gpu" / "a100_alexnet.json.gz")
    events = charts.timeline_events(trace)
    assert (
        len(events)
        == len(trace.kernels)
        + (trace.cpu_ops["depth"] == 0).sum()
        + len(trace.annotations)
        + (events["kind"] == "sync").sum()
    )
    assert {"kernel", "memcpy", "op"} <= set(events["kind"])
    assert events["lane"].str.contains("stream").any() and events["lane"].str.contains("thread").any()
    rows = _rows(charts.timeline_chart(trace).to_dict())
    assert sum(r["count"] for r in rows) == len(events)


def test_run_charts_for_a_gpu_trace_include_kernels_and_idle():
    import workbench as wb

    trace = wb.load_trace(DATA / "gpu" / "a100_alexnet.json.gz")
    specs = [c.to_dict() for c in charts.trace_charts(trace)]
    titles = [str(s.get("title", "")) for s in specs]
    assert any("Top 15 compute kernels" in t for t in titles) and any("Idle" in t for t in titles)
    assert any("Timeline" in t for t in titles)


# --- level of detail that refines on zoom (a static page: the spec filters rows by zoom level) ---

from workbench.charts.timeline_lod import TimelineLevels  # noqa: E402


def _drawn_at(rows, level):
    """Rows the page draws at ``level`` over the whole span (the filter without the window)."""
    return [r for r in rows if r["lvl"] <= level and (r["fine"] == 0 or r["lvl"] == level)]


@pytest.fixture(scope="module")
def busy_spec():
    trace = _trace(n_kernels=200_000, kernel_dur=0.5, seed=3)
    return trace, charts.timeline_chart(trace, max_marks=2000).to_dict()


def test_spec_carries_several_levels_that_each_conserve_busy_time_per_lane(busy_spec):
    trace, spec = busy_spec
    rows = _rows(spec)
    levels = spec["usermeta"]["workbench_lod"]["levels"]
    assert len(levels) >= 4 and {r["lvl"] for r in rows} == set(range(len(levels)))
    bins = [lv["bin_us"] for lv in levels]
    assert all(a / b == pytest.approx(4.0) for a, b in zip(bins, bins[1:]))  # each level 4x finer
    events = charts.timeline_events(trace)
    want_us = events.groupby("lane")["dur_us"].sum()
    want_n = events.groupby("lane").size()
    for level in range(len(levels)):
        drawn = pd.DataFrame(_drawn_at(rows, level))
        got = drawn.groupby("lane")[["dur_us", "count"]].sum()
        assert got["dur_us"].to_dict() == pytest.approx(want_us.to_dict(), rel=1e-6), level
        assert got["count"].to_dict() == want_n.to_dict(), level


def test_level_filter_reads_the_zoom_param_extent(busy_spec):
    _, spec = busy_spec
    zoom = spec["params"][0]
    assert zoom["name"] == "zoom" and zoom["bind"] == "scales"
    assert "flatten" in spec["transform"][0] and "calculate" in spec["transform"][-1]
    expr = spec["transform"][1]["filter"]
    assert "zoom['ts_us'][1] - zoom['ts_us'][0]" in expr and "datum.lvl" in expr and "datum.fine" in expr
    assert spec["mark"]["clip"] is True


def test_marks_per_level_are_bounded_and_finer_levels_cover_less(busy_spec):
    _, spec = busy_spec
    rows = _rows(spec)
    levels = spec["usermeta"]["workbench_lod"]["levels"]
    per_level = pd.Series([r["lvl"] for r in rows]).value_counts()
    assert per_level[0] <= 2000
    # max_marks=2000: finer levels share 10 x 2000 rows, coarse first, each keeps >= 1000 of its own
    assert len(rows) <= 10 * 2000 + per_level[0]
    assert [lv["marks"] for lv in levels] == [per_level[k] for k in range(len(levels))]
    coverage = [lv["tiles_stored"] / lv["tiles_total"] for lv in levels]
    assert coverage[0] == coverage[1] == 1.0 and coverage[-1] < 0.5  # first zoom refines everywhere
    assert all(a >= b for a, b in zip(coverage, coverage[1:]))


def test_a_larger_row_budget_covers_more_of_the_finer_levels():
    trace = _trace(n_kernels=100_000, kernel_dur=0.5, seed=4)
    small, _ = charts.timeline.timeline_levels(trace, max_marks=2000, max_rows=6000)
    large, _ = charts.timeline.timeline_levels(trace, max_marks=2000, max_rows=30000)
    assert len(large.table) > len(small.table)
    cover = [[lv.coverage for lv in lv_set.levels] for lv_set in (small, large)]
    assert all(b >= a for a, b in zip(*cover)) and sum(cover[1]) > sum(cover[0])


def test_the_page_carries_columns_and_each_text_once(busy_spec):
    _, spec = busy_spec
    [datum] = [d for values in spec["datasets"].values() for d in values]
    assert set(datum["wb_kinds"]) <= {"kernel", "memcpy", "op", "sync", "annotation"}
    assert len(datum["wb_lanes"]) == len(set(datum["wb_lanes"])) == 4
    assert len(datum["ts_us"]) == len(datum["li"]) == len(_rows(spec)) > 10_000
    assert len(json.dumps(datum)) / len(datum["ts_us"]) < 120  # bytes per row in the page


def test_long_events_stay_individual_at_every_level(busy_spec):
    _, spec = busy_spec
    rows = _rows(spec)
    step = [r for r in rows if r["kind"] == "annotation"]
    assert len(step) == 1 and step[0]["ind"] == 1 and step[0]["lvl"] == 0 and step[0]["dur_us"] == 1e6
    assert all(step[0] in _drawn_at(rows, k) for k in range(4))


def test_levels_round_trip_through_dict():
    levels, _ = charts.timeline.timeline_levels(_trace(n_kernels=20_000), max_marks=800)
    again = TimelineLevels.from_dict(levels.to_dict())
    assert again.levels == levels.levels and again.span_us == levels.span_us
    pd.testing.assert_frame_equal(again.table, levels.table, check_dtype=False)
    assert len(again.view(1)) == len(levels.view(1)) > len(levels.view(0))


def test_events_drawn_one_by_one_when_the_pyramid_would_be_larger_than_them():
    # 4,000 events spread evenly over many lanes: above the detail threshold, but every bin would
    # hold about one event, so the pyramid carries more rows than the events themselves
    events = pd.DataFrame(
        {
            "lane": [f"rank 0 · stream {i % 40}" for i in range(4000)],
            "kind": "kernel",
            "name": [f"k{i}" for i in range(4000)],
            "ts_us": np.arange(4000) * 10.0,
            "dur_us": 1.0,
            "shapes": None,
        }
    )
    levels, info = charts.timeline.timeline_levels(events)
    assert not info["aggregated"] and len(levels.table) == 4000 and set(levels.table["ind"]) == {1}
    many = pd.concat([events.assign(ts_us=events["ts_us"] + k * 0.01) for k in range(10)], ignore_index=True)
    levels, info = charts.timeline.timeline_levels(many)  # 40,000: binned as before
    assert info["aggregated"] and len(levels.table) < len(many)


def test_the_page_decodes_to_the_names_of_the_level_table():
    from workbench.charts.common import shorten

    trace = _trace(n_kernels=30_000, kernel_dur=0.5, seed=6)
    levels, _ = charts.timeline.timeline_levels(trace, max_marks=1000)
    rows = _rows(charts.timeline_chart(trace, max_marks=1000).to_dict())
    assert sorted(r["name"] for r in rows) == sorted(shorten(str(n), 120) for n in levels.table["name"])
    assert any(r["name"].endswith("events; longest: gemm") for r in rows)
