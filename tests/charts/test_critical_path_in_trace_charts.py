"""A GPU trace's charts include its critical path: the bound-by bar and the path on its timeline (offline
altair specs, read through ``to_dict()``)."""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("altair")

import workbench as wb  # noqa: E402
from workbench.charts.run import trace_charts  # noqa: E402

GPU = os.path.join(os.path.dirname(__file__), "..", "data", "gpu")


def _titles(charts):
    out = []
    for chart in charts:
        spec = json.dumps(chart.to_dict())
        out.append(spec)
    return out


def test_a_gpu_trace_shows_what_its_step_is_bound_by():
    name = next(n for n in sorted(os.listdir(GPU)) if n.endswith((".json", ".json.gz")))
    trace = wb.load_trace(os.path.join(GPU, name), cache=False)
    assert trace.has_gpu
    specs = _titles(trace_charts(trace, timeline=False, roofline=False))
    assert any("critical path bound by" in s for s in specs), name
    assert any("critical path of" in s or "cannot draw the critical path" in s for s in specs)
