"""Breakdown, roofline and comparison builders, checked through the vega-lite spec."""

import math

import pandas as pd
import pytest

from workbench import charts
from workbench.errors import InvalidArgumentError


def _values(spec):
    """All inline data rows of a spec (altair puts them under top-level datasets)."""
    return [row for rows in spec.get("datasets", {}).values() for row in rows]


def _ops_table(n=30):
    return pd.DataFrame(
        {
            "name": [f"aten::op{i}" for i in range(n)],
            "count": list(range(1, n + 1)),
            "self_us": [float(i * 10) for i in range(n)],
            "total_us": [float(i * 20) for i in range(n)],
        }
    )


def test_top_ops_keeps_the_n_largest_by_self_time():
    spec = charts.top_ops_chart(_ops_table(), n=5).to_dict()
    names = sorted(r["name"] for r in _values(spec))
    assert names == sorted(f"aten::op{i}" for i in range(25, 30))
    assert spec["encoding"]["x"]["field"] == "self_us"


def test_top_ops_reports_nan_rows_it_left_out():
    table = _ops_table(4)
    table.loc[3, "self_us"] = math.nan
    spec = charts.top_ops_chart(table).to_dict()
    assert len(_values(spec)) == 3
    assert "1 rows without a finite self_us" in spec["title"]["subtitle"]


def test_top_ops_on_empty_table_says_why():
    spec = charts.top_ops_chart(_ops_table(0)).to_dict()
    assert "nothing to draw" in spec["usermeta"]["workbench_empty"]


def test_top_ops_missing_column_is_a_clear_error():
    with pytest.raises(InvalidArgumentError, match="self_us"):
        charts.top_ops_chart(pd.DataFrame({"name": ["a"]}))


def test_kernel_charts_use_sum_us_and_kernel_type():
    table = pd.DataFrame(
        {
            "name": ["gemm", "nccl", "memcpy"],
            "kernel_type": ["computation", "communication", "memory"],
            "sum_us": [50.0, 30.0, 20.0],
        }
    )
    spec = charts.top_kernels_chart(table).to_dict()
    compute, communication = spec["vconcat"]  # communication kernels apart, below
    assert compute["encoding"]["color"]["field"] == "kernel_type"
    assert compute["encoding"]["x"]["field"] == "sum_us"
    assert {r["name"] for r in _values(spec) if r["kernel_type"] == "communication"} == {"nccl"}
    types = charts.kernel_types_chart(table).to_dict()
    pct = {r["kernel_type"]: r["pct"] for r in _values(types)}
    assert pct == pytest.approx({"computation": 50.0, "communication": 30.0, "memory": 20.0})


def test_idle_chart_accepts_long_and_wide_tables():
    long = pd.DataFrame(
        {"rank": [0, 0], "stream": [7, 7], "idle_category": ["host_wait", "other"], "idle_us": [5.0, 7.0]}
    )
    wide = pd.DataFrame({"rank": [0], "stream": [7], "host_wait_us": [5.0], "kernel_wait_us": [0.0], "other_us": [7.0]})
    for table in (long, wide):
        rows = _values(charts.idle_chart(table).to_dict())
        assert {r["part"]: r["time_us"] for r in rows if r["time_us"]} == {"host_wait": 5.0, "other": 7.0}
        assert {r["lane"] for r in rows} == {"rank 0 stream 7"}


def test_per_rank_chart_stacks_every_us_column():
    table = pd.DataFrame({"rank": [0, 1], "compute_us": [10.0, 12.0], "idle_us": [3.0, 1.0]})
    rows = _values(charts.per_rank_chart(table).to_dict())
    assert len(rows) == 4 and {r["part"] for r in rows} == {"compute", "idle"}


def test_roofline_places_points_and_marks_the_ridge():
    points = pd.DataFrame(
        {
            "name": ["mm", "add", "mm"],
            "flops": [2e9, 1e6, 2e9],
            "bytes": [1e7, 1.2e7, 1e7],
            "dur_us": [100.0, 10.0, 50.0],
            "variant": ["baseline", "baseline", "compiled"],
        }
    )
    spec = charts.roofline_chart(points, memory_gbps=1000.0, peak_flops={"fp32": 20e12, "bf16": 300e12}).to_dict()
    rows = _values(spec)
    ridges = {r["dtype"]: r["intensity"] for r in rows if "text" in r}
    assert ridges == pytest.approx({"fp32": 20.0, "bf16": 300.0})
    ceilings = [r for r in rows if "ceiling_flops" in r and "text" not in r]
    assert max(r["ceiling_flops"] for r in ceilings) == pytest.approx(300e12)
    assert all(r["ceiling_flops"] <= 1e12 * r["intensity"] + 1e-3 for r in ceilings)  # under the memory roof
    mm = [r for r in rows if r.get("label") == "mm" and r["variant"] == "baseline"][0]
    assert mm["achieved_flops"] == pytest.approx(2e13) and mm["intensity"] == pytest.approx(200.0)
    arrows = [r for r in rows if "x2" in r]
    assert len(arrows) == 1 and arrows[0]["y2"] == pytest.approx(4e13)


def test_roofline_without_usable_points_says_why():
    points = [{"name": "x", "flops": 0, "bytes": 10, "dur_us": 1.0}]
    spec = charts.roofline_chart(points, memory_gbps=100.0, peak_flops={"fp32": 1e12}).to_dict()
    assert "no roofline point" in spec["usermeta"]["workbench_empty"]


def test_comparison_speedup_interval_brackets_the_ratio():
    samples = {"eager": [10.0, 10.5, 9.8, 10.2, 10.1] * 4, "compiled": [5.0, 5.2, 4.9, 5.1, 5.05] * 4}
    table = charts.speedup_table(samples, "eager").set_index("variant")
    assert table.loc["eager", "speedup"] == pytest.approx(1.0)
    assert table.loc["compiled", "ci_low"] <= table.loc["compiled", "speedup"] <= table.loc["compiled", "ci_high"]
    assert 1.8 < table.loc["compiled", "speedup"] < 2.2
    spec = charts.comparison_chart(samples).to_dict()
    assert len(spec["hconcat"]) == 2
    assert sum(1 for r in _values(spec) if "sample_ms" in r) == 40


def test_comparison_unknown_baseline_is_an_error():
    with pytest.raises(InvalidArgumentError, match="baseline 'x'"):
        charts.speedup_table({"a": [1.0]}, "x")


def test_comparison_with_only_nan_samples_says_why():
    spec = charts.comparison_chart({"a": [math.nan]}).to_dict()
    assert "no finite samples" in spec["usermeta"]["workbench_empty"]
