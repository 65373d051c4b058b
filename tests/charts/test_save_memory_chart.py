"""save_charts writes the memory chart (the notebook's memory section's chart) for a run or trace with
allocator events, after the other charts, which stay as they were; a trace without them writes none."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from workbench import charts
from workbench.api.trace import load_trace
from workbench.charts.export import MEMORY_CHART

CPU = Path(__file__).resolve().parents[1] / "data" / "cpu"
WITH_MEMORY = CPU / "cpu_mlp_steps_memory.json.gz"  # a CPU MLP with [memory] allocator events
WITHOUT_MEMORY = CPU / "cpu_mlp_plain.json.gz"


@pytest.fixture(scope="module")
def trace():
    t = load_trace(WITH_MEMORY, cache=False)
    assert len(t.memory)
    return t


def _run(trace):
    from workbench.api.run import ProfileRun
    from workbench.capture.run import CompileDiagnostics, RunRecord
    from workbench.measurement import Measurement

    samples = tuple(float(x) for x in np.linspace(1.0, 1.2, 10))
    return ProfileRun(
        RunRecord(
            name="mlp",
            timing=Measurement(samples_ms=samples, label="mlp"),
            cold_ms=5.0,
            warmup=2,
            repeat=10,
            device="cpu",
            compile=CompileDiagnostics(),
            environment={},
            settings={},
            memory={},
            profiler_warmup="warmed",
            created_at="2026-01-01T00:00:00+00:00",
            trace_path=str(WITH_MEMORY),
            trace_note="",
            trace=trace,
            trace_repeat=1,
        )
    )


def _memory_files(paths):
    return [p for p in paths if p.stem.endswith(f"-{MEMORY_CHART}")]


def test_a_trace_with_memory_events_writes_the_memory_chart(trace, tmp_path):
    paths = charts.save_charts(trace, tmp_path, formats=("svg", "json"), timeline=False)
    shown = charts.result_charts(trace, timeline=False)
    assert len(paths) == 2 * (len(shown) + 1)  # every chart shown, then the memory chart
    svg, js = _memory_files(paths)
    assert svg.name == f"{len(shown) + 1:02d}-memory.svg" and js.name == f"{len(shown) + 1:02d}-memory.json"
    assert paths[-2:] == [svg, js]  # after the others: their names and numbers are unchanged
    assert b"<svg" in svg.read_bytes()[:200]
    spec = json.loads(js.read_text())
    assert spec["usermeta"]["workbench_chart"] == "memory"
    titles = [c.get("title") for c in spec["vconcat"]]
    assert any(str(t).startswith("Allocated memory (") for t in titles)
    assert "largest blocks live at the peak" in titles
    peak = trace.memory_peak()
    assert f"peak {peak.peak_bytes / (1 << 20):,.1f} MiB" in str(titles[0])


def test_a_run_writes_its_traces_memory_chart(trace, tmp_path):
    run = _run(trace)
    paths = charts.save_charts(run, tmp_path, formats="json", timeline=False)
    (js,) = _memory_files(paths)
    assert paths[-1] == js and len(paths) == len(charts.result_charts(run, timeline=False)) + 1
    assert json.loads(js.read_text())["usermeta"]["workbench_chart"] == "memory"


def test_no_memory_events_no_memory_file(tmp_path):
    plain = load_trace(WITHOUT_MEMORY, cache=False)
    assert not len(plain.memory)
    paths = charts.save_charts(plain, tmp_path, formats=("svg", "json"), timeline=False)
    assert not _memory_files(paths) and len(paths) == 2 * len(charts.result_charts(plain, timeline=False))
    run = _run(plain)
    assert not _memory_files(charts.save_charts(run, tmp_path / "run", formats="json", timeline=False))
    assert not _memory_files(
        charts.save_charts([charts.message_chart("x", title="Note")], tmp_path / "list", formats="json")
    )
