"""Memory timeline and peak on the shared traces with allocator events, and on small built tables."""

from __future__ import annotations

import glob
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import workbench as wb
from workbench.analysis import memory as mem
from workbench.errors import InvalidArgumentError
from workbench.trace.schema import frame

SHARED = Path(__file__).resolve().parents[3] / "shared" / "traces"
WITH_TOTALS = ("tracelens_h100_owlv2", "tracelens_h100_bert_small")


def _shared(name: str) -> str:
    files = glob.glob(str(SHARED / name / "*.json.gz"))
    if not files:
        pytest.skip(f"shared trace {name} not found under {SHARED}")
    return files[0]


@pytest.mark.parametrize("name", WITH_TOTALS)
def test_peak_equals_the_largest_recorded_total_per_device(name):
    trace = wb.load_trace(_shared(name))
    timeline = trace.memory_timeline()
    recorded = trace.memory.groupby(["device_type", "device_id"])["total_allocated"].max()
    for (dtype, did), largest in recorded.items():
        row = timeline.devices[timeline.devices["device"] == mem.device_label(dtype, did)].iloc[0]
        assert row["peak_bytes"] == largest and row["source"] == mem.RECORDED
    peak = trace.memory_peak()
    assert peak.device == "cuda:0" and peak.peak_bytes == int(recorded.max())
    top = peak.top(3)
    assert len(top) and (top["module"] != "").all() and (top["op_name"] != "").all()
    # what the live blocks hold plus what was allocated before the trace is the peak
    assert peak.live_bytes + peak.unattributed_bytes == peak.peak_bytes


def test_owlv2_peak_is_held_by_attention_scores():
    peak = wb.load_trace(_shared("tracelens_h100_owlv2")).memory_peak()
    assert peak.peak_bytes == 2707847680
    top = peak.top(2)
    assert set(top["op_name"]) == {"aten::bmm", "aten::_softmax"} and top["module"].str.contains("Attention").all()


def test_a_trace_with_sizes_only_says_its_peak_is_relative():
    trace = wb.load_trace(_shared("kineto_v100_resnet50_2021"))
    peak = trace.memory_peak()
    assert set(peak.devices["source"]) == {mem.FROM_SIZES}
    assert any("sizes only" in n for n in peak.notes) and any("no addresses" in n for n in peak.notes)
    assert len(peak.table) == 0 and peak.peak_bytes > 0  # no blocks without addresses; never a made-up table


@pytest.mark.parametrize("name", WITH_TOTALS + ("kineto_v100_resnet50_2021",))
def test_memory_chart_draws_offline(name, tmp_path):
    from workbench.charts.memory import memory_chart
    from workbench.charts.offline import to_offline_html

    html = to_offline_html(memory_chart(wb.load_trace(_shared(name))))
    assert "vegaEmbed" in html and "cdn.jsdelivr" not in html


def _table(ts, nbytes, addr, totals=None):
    n = len(ts)
    return frame(
        "memory",
        {
            "rank": [0] * n,
            "tid": ["1"] * n,
            "ts_us": np.asarray(ts, float),
            "bytes": nbytes,
            "addr": addr,
            "device_type": [0] * n,
            "total_allocated": totals if totals is not None else [-1] * n,
        },
    )


class _T:
    def __init__(self, memory):
        self.memory = memory


def test_frees_without_allocations_are_blocks_from_before_the_trace():
    t = _T(_table([1, 2, 3], [-100, 50, -50], [7, 8, 8]))
    timeline = mem.memory_timeline(t)
    assert timeline.devices.iloc[0]["baseline_bytes"] == 100  # raised so it never goes negative
    peak = mem.memory_peak(t)
    assert peak.peak_bytes == 100 and peak.table.iloc[0]["preexisting"]
    assert any("before the trace began" in n for n in peak.notes)


def test_events_without_sizes_or_totals_are_refused():
    with pytest.raises(InvalidArgumentError, match="neither sizes"):
        mem.memory_timeline(_T(_table([1, 2], [-1, -1], [1, 2])))


def test_a_huge_memory_table_gives_the_peak_and_says_blocks_were_not_paired(monkeypatch):
    monkeypatch.setattr(mem, "MAX_PAIRED_EVENTS", 10)
    n = 40
    sizes = np.tile([64, -64], n // 2)
    peak = mem.memory_peak(_T(_table(np.arange(n), sizes, np.repeat(np.arange(n // 2), 2))))
    assert peak.peak_bytes == 64 and len(peak.table) == 0 and any("not paired" in x for x in peak.notes)


def test_results_round_trip():
    t = _T(_table([1, 2, 3], [10, 20, -10], [1, 2, 1], totals=[10, 30, 20]))
    for result in (mem.memory_timeline(t), mem.memory_peak(t)):
        assert type(result).from_dict(result.to_dict()) == result


def test_trace_report_memory_section():
    from workbench.report import trace_report as tr

    html = tr.memory_html(wb.load_trace(_shared("tracelens_h100_bert_small")))
    assert "<h4>Memory</h4>" in html and "peak on cuda:0" in html and "vegaEmbed" in html


def test_a_folder_of_rank_files_gives_each_rank_its_own_peak(tmp_path):
    import gzip
    import json

    doc = json.loads(gzip.open(_shared("tracelens_h100_bert_small")).read())
    folder = tmp_path / "ranks"
    folder.mkdir()
    for rank in (0, 1):
        doc["distributedInfo"] = {"rank": rank, "world_size": 2, "backend": "nccl"}
        (folder / f"rank{rank}.json").write_text(json.dumps(doc))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = wb.load_trace(str(folder), cache=False, workers=1)
    devices = trace.memory_timeline().devices
    gpu = devices[devices["device"] == "cuda:0"]
    assert sorted(gpu["rank"]) == [0, 1] and set(gpu["peak_bytes"]) == {101305344}
