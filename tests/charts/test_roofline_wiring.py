"""The roofline wired to traces: points from analytic work, ceilings from specs or measurement,
variant arrows, and bad input (no shapes, hostile names, NaN) drawn or explained in words."""

import json
import math
from pathlib import Path

import pandas as pd
import pytest

import workbench as wb
from workbench import charts
from workbench.charts.roofline_data import (
    RooflineCeilings,
    ceilings_for,
    cpu_ceilings,
    gpu_ceilings,
    op_roofline_points,
)
from workbench.errors import InvalidArgumentError, NotApplicableError

DATA = Path(__file__).resolve().parents[1] / "data"
HOSTILE = "<script>alert(1)</script> ∑ 名\u2028"


def _values(spec):
    return [row for rows in spec.get("datasets", {}).values() for row in rows]


@pytest.fixture(scope="module")
def cpu_trace():
    return wb.load_trace(DATA / "cpu" / "cpu_mlp_plain.json.gz")


@pytest.fixture(scope="module")
def gpu_trace():
    return wb.load_trace(DATA / "gpu" / "h100_bert_small.json.gz")


def _write_trace(path, events):
    path.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}), encoding="utf-8")
    return wb.load_trace(path)


def _op(name, ts, dur, dims=None, types=None):
    args = {"External id": int(ts) + 1}
    if dims is not None:
        args.update({"Input Dims": dims, "Input type": types})
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}


def test_cpu_points_take_the_time_that_did_the_work_and_skip_callers_of_known_work(cpu_trace):
    points, info = op_roofline_points(cpu_trace)
    assert "aten::linear" not in set(points["name"])  # its work is its aten::addmm's
    ops = cpu_trace.cpu_ops
    addmm = ops[(ops["name"] == "aten::addmm") & (ops["input_dims"].astype(str) == "[[128],[8,64],[64,128],[],[]]")]
    row = points[(points["name"] == "aten::addmm") & (points["shapes"] == "[[128],[8,64],[64,128],[],[]]")].iloc[0]
    # inclusive time: a kept op's callees have no work formula, so the time they carry is the op's work
    assert row["count"] == len(addmm) and row["time_us"] == pytest.approx(addmm["dur_us"].sum())
    assert row["flops"] == 2 * 8 * 64 * 128 + 8 * 128 and row["dur_us"] == pytest.approx(row["time_us"] / row["count"])
    assert info["ops"] == len(ops) and info["left_out"] == 0


def test_gpu_points_take_the_kernel_time_the_op_launched(gpu_trace):
    points, _ = op_roofline_points(gpu_trace)
    ops, kernels = gpu_trace.cpu_ops, gpu_trace.kernels
    big = ops.index[(ops["name"] == "aten::addmm") & ops["input_dims"].astype(str).str.startswith("[[30522]")]
    assert len(big) == 1
    expected = kernels.loc[kernels["op_index"] == big[0], "dur_us"].sum()
    row = points[points["shapes"].str.startswith("[[30522]")].iloc[0]
    assert expected > 0 and row["time_us"] == pytest.approx(expected)
    assert points["time_us"].sum() <= kernels["dur_us"].sum() + 1e-6


def test_max_points_keeps_the_slowest_and_says_how_many_left_out(gpu_trace):
    points, info = op_roofline_points(gpu_trace, max_points=2)
    everything, _ = op_roofline_points(gpu_trace, max_points=1000)
    assert list(points["time_us"]) == list(everything["time_us"].head(2))
    assert info["left_out"] == len(everything) - 2 and 0 < info["time_shown_pct"] < 100
    with pytest.raises(InvalidArgumentError, match="max_points"):
        op_roofline_points(gpu_trace, max_points=0)


def test_gpu_ceilings_come_from_the_spec_table(gpu_trace):
    c = ceilings_for(gpu_trace)
    assert c.memory_gbps == 3350 and c.measured and "H100" in c.device
    assert c.peak_flops["fp32"] == pytest.approx(67e12)
    assert c.peak_flops["fp16_tensor/bf16_tensor"] == pytest.approx(989.5e12)  # equal peaks: one roof
    assert RooflineCeilings.from_dict(c.to_dict()) == c
    assert gpu_ceilings([{"name": "Imaginary GPU 9000"}]) is None


def test_unknown_gpu_is_not_applicable_and_the_chart_says_so(gpu_trace, monkeypatch):
    monkeypatch.setattr(type(gpu_trace), "device_properties", property(lambda self: {0: ({"name": "Mystery X1"},)}))
    with pytest.raises(NotApplicableError, match="Mystery X1"):
        ceilings_for(gpu_trace)
    chart = charts.run.trace_charts(gpu_trace, timeline=False)[-1]
    assert "not applicable" in chart.to_dict()["usermeta"]["workbench_empty"]


def test_cpu_ceilings_recorded_cached_or_default(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # nothing cached here
    default = cpu_ceilings({})
    assert not default.measured and "documented default" in default.source
    recorded = {
        "cpu_model": "Test CPU",
        "threads": 1,
        "torch_version": "x",
        "copy_gbps": 12.5,
        "matmul_fp32_gflops": 250.0,
        "copy_bytes": 2**20,
        "matmul_n": 64,
        "repeats": 2,
        "measured_at": "2026-01-01T00:00:00+00:00",
    }
    c = cpu_ceilings({"cpu_ceiling": recorded})
    assert c.measured and c.memory_gbps == 12.5 and c.peak_flops == {"fp32 matmul": 250e9}
    assert "Test CPU" in c.device


def test_cpu_ceilings_measure_once_then_cached(tmp_path, monkeypatch):
    from workbench.devices import cpu_ceiling

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls = []
    real = cpu_ceiling._measure
    monkeypatch.setattr(cpu_ceiling, "_measure", lambda *a: calls.append(a) or real(*a))
    measured = cpu_ceilings(measure=True)
    again = cpu_ceilings(measure=False)
    assert len(calls) == 1 and measured.measured and measured.memory_gbps > 0
    assert again == measured


def test_trace_roofline_chart_marks_ridge_and_names_its_ceiling(cpu_trace):
    ceilings = RooflineCeilings(10.0, {"fp32": 200e9}, "test cpu", "given in the test", True)
    spec = charts.trace_roofline_chart(cpu_trace, ceilings=ceilings).to_dict()
    rows = _values(spec)
    assert [r["intensity"] for r in rows if "text" in r] == [pytest.approx(20.0)]
    assert any(r.get("label", "").startswith("aten::addmm [[128]") for r in rows)
    assert "ceiling: given in the test" in " ".join(spec["title"]["subtitle"])


def test_variant_arrows_join_the_same_op_and_shapes():
    points = pd.DataFrame(
        {
            "name": ["aten::mm", "aten::mm", "aten::mm", "aten::mm", "aten::add"],
            "shapes": ["[[8,8],[8,8]]", "[[64,64],[64,64]]", "[[8,8],[8,8]]", "[[64,64],[64,64]]", "[[8]]"],
            "flops": [1024.0, 524288.0, 1024.0, 524288.0, 8.0],
            "bytes": [768.0, 49152.0, 768.0, 49152.0, 96.0],
            "dur_us": [1.0, 10.0, 0.5, 2.0, 1.0],
            "variant": ["eager", "eager", "fast", "fast", "fast"],
        }
    )
    spec = charts.roofline_chart(points, memory_gbps=100.0, peak_flops={"fp32": 1e12}, baseline="eager").to_dict()
    arrows = sorted((r["y"], r["y2"]) for r in _values(spec) if "x2" in r)
    assert arrows == [pytest.approx((1024e6, 2048e6)), pytest.approx((524288e5, 524288e5 * 5))]


def test_variants_roofline_of_two_traces(cpu_trace):
    ceilings = RooflineCeilings(10.0, {"fp32": 200e9}, "cpu", "test", True)
    spec = charts.variants_roofline_chart({"eager": cpu_trace, "again": cpu_trace}, ceilings=ceilings).to_dict()
    rows = _values(spec)
    n_points = len([r for r in rows if r.get("variant") == "eager" and "achieved_flops" in r])
    assert n_points > 0 and len([r for r in rows if "x2" in r]) == n_points
    missing = charts.variants_roofline_chart(
        {"a": cpu_trace, "b": type("Run", (), {"trace": None})()}, ceilings=ceilings
    ).to_dict()
    assert "have no trace" in missing["usermeta"]["workbench_empty"]


def test_bad_ceilings_are_refused():
    points = [{"name": "a", "flops": 1.0, "bytes": 1.0, "dur_us": 1.0}]
    for gbps, peaks in ((0.0, {"fp32": 1e12}), (math.nan, {"fp32": 1e12}), (10.0, {"fp32": math.nan}), (10.0, {})):
        with pytest.raises(InvalidArgumentError, match="roofline needs"):
            charts.roofline_chart(points, memory_gbps=gbps, peak_flops=peaks)


def test_one_event_without_shapes_says_why(tmp_path):
    trace = _write_trace(tmp_path / "one.json", [_op("aten::add", 0, 5)])
    chart = charts.trace_roofline_chart(trace, ceilings=RooflineCeilings(1.0, {"fp32": 1e9}, "c", "s", True))
    assert "record_shapes=True" in chart.to_dict()["usermeta"]["workbench_empty"]


def test_hostile_names_and_nan_times_draw_escaped(tmp_path):
    points = pd.DataFrame(
        {
            "name": [HOSTILE, "aten::mm", "nan op"],
            "shapes": ["[[2]]", "[[4,4],[4,4]]", "[[1]]"],
            "flops": [2.0, 128.0, 1.0],
            "bytes": [16.0, 192.0, 8.0],
            "dur_us": [1.0, 2.0, math.nan],
        }
    )
    chart = charts.roofline_chart(points, memory_gbps=10.0, peak_flops={"fp32": 1e11})
    labels = {r["label"] for r in _values(chart.to_dict()) if "label" in r}
    assert labels == {f"{HOSTILE} [[2]]", "aten::mm [[4,4],[4,4]]"}  # the NaN row is left out
    html = charts.to_offline_html(chart, include_bundle=False)
    assert "<script>alert" not in html and "\u2028" not in html
    svg = charts.save(chart, tmp_path / "roof.svg").read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(1)" in svg and "<script>alert" not in svg


def test_trace_repr_html_is_escaped_and_draws(tmp_path):
    events = [
        _op(HOSTILE, 0, 10, [[4, 4], [4, 4]], ["float", "float"]),
        _op("aten::mm", 20, 5, [[4, 4], [4, 4]], ["float", "float"]),
    ]
    html = _write_trace(tmp_path / "hostile.json", events)._repr_html_()
    assert "<script>alert" not in html and "Trace: 1 rank(s)" in html
    assert html.count('class="workbench-chart"') >= 3  # top ops, roofline, timeline
    assert "aten::mm" in html


def test_run_charts_include_the_roofline(cpu_trace):
    run = type("Run", (), {"timing": None, "trace": cpu_trace, "environment": {}, "name": "r"})()
    titles = [c.to_dict().get("title") for c in charts.run_charts(run, timeline=False)]
    texts = [t if isinstance(t, str) else (t or {}).get("text") for t in titles]
    assert texts[0].startswith("Top") and texts[-1] == "Roofline"
