"""The one roofline placement: memory/compute only away from the ridge, above-the-roof points flagged as
anomalies, where the work came from, a frozen result that round-trips."""

from __future__ import annotations

import pandas as pd
import pytest

from workbench.analysis.roofline import FORMULA, RIDGE_BAND, RooflinePlacement, bound_of, place
from workbench.devices.ceilings import Ceiling

CEIL = Ceiling(10.0, {"fp32": 100e9}, "test CPU", "given in the test", True, kind="measured")  # ridge 10 FLOP/B


def test_bound_is_claimed_only_away_from_the_ridge():
    ridge = CEIL.ridge()
    flops = [ridge / RIDGE_BAND / 2 * 100, ridge * 100, ridge * RIDGE_BAND * 2 * 100, 1.0]
    out = bound_of(flops, [100.0, 100.0, 100.0, float("nan")], CEIL)
    assert list(out) == ["memory", "uncertain", "compute", "unknown"]


def test_a_point_above_the_roof_is_an_anomaly_not_a_win():
    # 1 MB in 50 µs is 20 GB/s against a 10 GB/s roof; 1 MB in 200 µs is under it
    pts = pd.DataFrame({"name": ["fast", "fine"], "flops": [1e5, 1e5], "bytes": [1e6, 1e6], "time_us": [50.0, 200.0]})
    p = place(pts, CEIL)
    assert list(p.table["above_roof"]) == [True, False] and p.n_above_roof == 1
    assert list(p.anomalies["name"]) == ["fast"]
    assert p.table.loc[1, "roof_us"] == pytest.approx(100.0) and p.table.loc[1, "roof_fraction"] == pytest.approx(0.5)
    assert set(p.table["work_source"]) == {FORMULA}
    again = RooflinePlacement.from_dict(p.to_dict())
    assert again.ceiling == CEIL.to_dict() and again.table.equals(p.table)


def test_per_point_dtype_picks_its_peak():
    gpu = Ceiling(1000.0, {"fp32": 50e12, "fp16_tensor/bf16_tensor": 500e12}, "GPU", "vendor peak: test", True)
    assert gpu.kind == "datasheet" and gpu.primary == "fp32"
    pts = pd.DataFrame(
        {"flops": [2e9, 2e9], "bytes": [1e7, 1e7], "time_us": [100.0, 100.0], "dtype": ["fp32", "bf16_tensor"]}
    )
    p = place(pts, gpu, dtype_column="dtype").table
    # intensity 200: compute-bound against fp32's ridge (50), memory-bound against bf16's (500: below the band 250..1000)
    assert list(p["bound"]) == ["compute", "memory"]
    assert list(p["above_roof"]) == [False, False]
