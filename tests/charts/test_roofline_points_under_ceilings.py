"""Every roofline point of the shared traces lies under its ceiling or carries the anomaly flag, and a CPU
op whose work is in its callee (aten::relu -> aten::clamp_min) is placed with its inclusive time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import workbench as wb
from workbench.analysis.roofline import place
from workbench.charts.roofline import roofline_points
from workbench.charts.roofline_data import ceilings_for, op_roofline_points

DATA = Path(__file__).resolve().parents[1] / "data"
GPU = ["h100_bert_small.json.gz", "a100_alexnet.json.gz", "v100_resnet50_2021.json.gz", "mi300x_sglang.json.gz"]


@pytest.mark.parametrize("name", GPU)
def test_points_are_under_the_ceiling_or_flagged(name):
    path = DATA / "gpu" / name
    if not path.exists():
        pytest.skip(f"{name} is not in tests/data/gpu")
    trace = wb.load_trace(path)
    ceiling = ceilings_for(trace)
    points, _ = op_roofline_points(trace, max_points=1000)
    if points.empty:
        pytest.skip(f"{name}: no op with known work")
    placed = roofline_points(points, ceiling)
    top = max(ceiling.peak_flops.values())
    over = placed["achieved_flops"] > (placed["intensity"] * ceiling.memory_gbps * 1e9).clip(upper=top) * 1.05
    assert not (over & ~placed["above_roof"]).any()
    # the chart flags exactly what the analysis placement flags (the same function)
    assert list(placed["above_roof"]) == list(
        place(points, ceiling, time_column="dur_us", dtype_column="dtype").table["above_roof"]
    )


def test_relu_point_uses_the_time_its_callee_carries(tmp_path):
    n = 1 << 20

    def op(name, ts, dur, dims=None, types=None):
        args = {"External id": ts + 1}
        if dims is not None:
            args.update({"Input Dims": dims, "Input type": types})
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}

    events = [
        op("aten::relu", 0, 1000, [[n]], ["float"]),
        op("aten::clamp_min", 5, 990, [[n], []], ["float", "Scalar"]),
    ]
    path = tmp_path / "relu.json"
    path.write_text(json.dumps({"traceEvents": events}))
    points, _ = op_roofline_points(wb.load_trace(path))
    relu = points[points["name"] == "aten::relu"]
    if relu.empty:
        pytest.skip("aten::relu has no work formula here")
    assert relu["time_us"].iloc[0] == pytest.approx(1000.0)  # inclusive, not its 10 µs of self time
