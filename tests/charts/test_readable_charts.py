"""Charts that read well (issue 12's smaller cuts): kernel names as Nsight shows them and never two
kernels under one label; per-rank kernel charts that show compute; roofline ridge labels away from
the legend; idle ticks that do not collide; a live timeline that clips and shows nested ops."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from workbench import charts
from workbench.analysis import labels
from workbench.analysis.labels import short_name, unique_labels
from workbench.charts.timeline_data import rows_frame

DATA = Path(__file__).resolve().parents[1] / "data"
GELU = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
    "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >"
    "(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}, "
    "std::array<char*, 2ul>)"
)
ADD = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
    "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)"
)
CUTLASS = (
    "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8>"
    "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8::Params)"
)
LAYER_NORM = (
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, "
    "c10::BFloat16 const*, float*)"
)
MANGLED_ADD = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15CUDAFunctor_addIfEESt5arrayIPcLm3EEEEviT0_T1_"


def _values(spec):
    return [row for rows in spec.get("datasets", {}).values() for row in rows]


@pytest.mark.parametrize(
    "name, expected",
    [
        (LAYER_NORM, "vectorized_layer_norm_kernel"),
        (ADD, "vectorized_elementwise_kernel<CUDAFunctor_add>"),
        (GELU, "vectorized_elementwise_kernel<GeluCUDAKernelImpl>"),
        (CUTLASS, "cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x…"),
        (
            "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128>, false>(pytorch_flash::Flash_fwd_params)",
            "flash_fwd_kernel",
        ),
        ("_Z16my_kernel_launchPfi", "my_kernel_launch"),
        (MANGLED_ADD, "vectorized_elementwise_kernel<CUDAFunctor_add>"),
        ("aten::mm", "aten::mm"),
        ("Memcpy DtoH (Device -> Pinned)", "Memcpy DtoH (Device -> Pinned)"),
        ("triton_poi_fused_add_gelu_0", "triton_poi_fused_add_gelu_0"),
        ("", ""),
        (None, ""),
    ],
)
def test_short_names_are_the_function_name(name, expected):
    assert short_name(name) == expected


def test_mangled_names_shorten_without_the_runtimes_demangler(monkeypatch):
    monkeypatch.setattr(labels, "_system_demangle", lambda name: None)
    labels.short_name.cache_clear()
    try:
        assert short_name(MANGLED_ADD) == "vectorized_elementwise_kernel<CUDAFunctor_add>"
        assert (
            short_name("_ZN2at6native12_GLOBAL__N_116softmax_warp_fwdIfffLi8ELb0EEEvPT0_PKT_iii") == "softmax_warp_fwd"
        )
        assert short_name("_ZN7cutlass7Kernel2I9gemm_64x6EEvNT_6ParamsE") == "gemm_64x6"
    finally:
        labels.short_name.cache_clear()


def test_two_different_kernels_never_share_a_label_and_a_name_keeps_its_label():
    twin = ADD.replace("3ul", "4ul")  # another kernel that shortens alike
    long_a, long_b = "k" * 60 + "_a", "k" * 60 + "_b"  # cut to the same prefix
    names = [ADD, twin, long_a, long_b, ADD, "vectorized_elementwise_kernel<CUDAFunctor_add> [2]"]
    got = unique_labels(names)
    assert len(set(got[:4])) == 4 and got[4] == got[0] and got[5] not in got[:4]
    assert got[1] == "vectorized_elementwise_kernel<CUDAFunctor_add> [2]"
    assert all(len(label) <= labels.MAX_LABEL_CHARS for label in got)


def test_the_kernel_chart_labels_are_unique_with_the_full_name_in_the_tooltip():
    table = pd.DataFrame(
        {"name": [ADD, ADD.replace("3ul", "4ul"), GELU], "kernel_type": "computation", "sum_us": [30.0, 20.0, 10.0]}
    )
    spec = charts.top_kernels_chart(table).to_dict()
    rows = _values(spec)
    assert len({r["label"] for r in rows}) == 3 and {r["name"] for r in rows} == set(table["name"])
    assert spec["encoding"]["tooltip"][0]["field"] == "name"
    assert spec["encoding"]["y"]["axis"]["labelLimit"] >= 300


@pytest.fixture(scope="module")
def eight_ranks():
    import workbench as wb

    return wb.load_trace(str(DATA / "gpu" / "dlrm_8rank"))


def test_top_kernels_of_many_ranks_show_compute_per_rank_and_communication_apart(eight_ranks):
    table = eight_ranks.kernel_breakdown().table
    assert table.sort_values("sum_us").iloc[-1]["kernel_type"] == "communication"  # NCCL dominates
    spec = charts.top_kernels_chart(table, n=5).to_dict()
    compute, communication = spec["vconcat"]
    assert compute["facet"]["field"] == "rank" and compute["resolve"]["scale"]["y"] == "independent"
    rows = pd.DataFrame(_values(spec))
    drawn_compute = rows[rows["kernel_type"] != "communication"]
    assert drawn_compute.groupby("rank").size().to_dict() == {r: 5 for r in range(8)}
    for rank, part in table[table["kernel_type"] != "communication"].groupby("rank"):
        top = set(part.nlargest(5, "sum_us")["name"])
        assert set(drawn_compute.loc[drawn_compute["rank"] == rank, "name"]) == top
    comm = rows[rows["kernel_type"] == "communication"]
    assert len(comm) and comm.groupby("rank").size().max() <= 3
    assert communication["encoding"]["yOffset"]["field"] == "rank"
    assert "compute kernels" in spec["title"]["text"] and "apart" in spec["title"]["subtitle"][0]


def test_roofline_ridge_labels_sit_inside_the_plot_and_legends_below():
    points = pd.DataFrame(
        {"name": ["aten::mm", "aten::add"], "flops": [2e9, 1e6], "bytes": [1e7, 1.2e7], "dur_us": [500.0, 40.0]}
    )
    spec = charts.roofline_chart(points, memory_gbps=900.0, peak_flops={"fp32": 19.5e12, "bf16": 312e12}).to_dict()
    layers = spec["layer"]
    text = next(layer for layer in layers if (layer.get("mark") or {}).get("type") == "text")
    assert text["mark"]["align"] == "right" and text["mark"]["dx"] < 0
    legends = [
        enc["legend"]["orient"]
        for layer in layers
        for enc in layer.get("encoding", {}).values()
        if isinstance(enc, dict) and isinstance(enc.get("legend"), dict)
    ]
    assert legends and set(legends) == {"bottom"}
    dots = next(layer for layer in layers if (layer.get("mark") or {}).get("type") == "circle")
    assert any(t.get("field") == "name" for t in dots["encoding"]["tooltip"])


def test_idle_axis_has_few_ticks_that_skip_rather_than_collide():
    table = pd.DataFrame(
        {
            "rank": [0, 0, 1],
            "stream": [7, 7, 7],
            "idle_category": ["host_wait", "other", "other"],
            "idle_us": [250_000.0, 1_700_000.0, 30.0],
        }
    )
    spec = charts.idle_chart(table).to_dict()
    x = spec["encoding"]["x"]
    assert x["title"] == "idle (ms)" and x["axis"]["tickCount"] <= 5 and x["axis"]["labelOverlap"]
    assert {r["time"] for r in _values(spec)} >= {250.0, 1700.0}
    small = charts.idle_chart(table.assign(idle_us=[5.0, 7.0, 1.0])).to_dict()
    assert small["encoding"]["x"]["title"] == "idle (µs)"


def _nested_trace(n_kernels=400):
    rng = np.random.default_rng(3)
    ts = np.sort(rng.uniform(0, 100_000, n_kernels))
    kernels = pd.DataFrame({"rank": 0, "stream": 7, "name": "gemm", "kind": "kernel", "ts_us": ts, "dur_us": 2.0})
    ops = pd.DataFrame(
        {
            "rank": 0,
            "tid": 11,
            "name": ["aten::linear", "aten::addmm", "aten::copy_", "aten::linear", "aten::addmm"],
            "ts_us": [1_000.0, 1_010.0, 1_020.0, 50_000.0, 50_010.0],
            "dur_us": [500.0, 400.0, 100.0, 500.0, 400.0],
            "depth": [0, 1, 2, 0, 1],
            "input_dims": None,
        }
    )
    return SimpleNamespace(kernels=kernels, cpu_ops=ops, runtime=None, annotations=None)


def test_live_timeline_shows_nested_ops_where_a_zoom_has_room_and_clips_its_bars():
    pytest.importorskip("anywidget")
    widget = charts.live_timeline(_nested_trace(), offline=False, detail_threshold=100, max_marks=200)
    assert widget.spec["mark"]["clip"] is True  # bars never paint over the lane labels
    lanes = set(rows_frame(widget.spec)["lane"])
    assert not any("depth" in lane for lane in lanes)  # the whole trace: top-level ops only
    assert widget.timeline.show_window(900.0, 1_700.0)
    rows = rows_frame(widget.spec)
    nested = rows[rows["lane"].str.contains("depth")]
    assert set(nested["name"]) == {"aten::addmm", "aten::copy_"} and widget.timeline.op_depth == 2
    assert {"rank 0 · thread 11 · depth 1", "rank 0 · thread 11 · depth 2"} <= set(rows["lane"])
    assert widget.spec["mark"]["clip"] is True
    events = widget.timeline.events
    top_level = int(((events["ts_us"] + events["dur_us"] >= 950.0) & (events["ts_us"] <= 1_650.0)).sum())
    widget.timeline.chart_options["detail_threshold"] = top_level + 1  # room for one more: depth 1 only
    assert widget.timeline.show_window(950.0, 1_650.0) and widget.timeline.op_depth == 1
    assert set(rows_frame(widget.spec).query("lane.str.contains('depth')")["name"]) == {"aten::addmm"}
    widget.timeline.show_all()
    assert widget.timeline.op_depth == 0
    assert not any("depth" in lane for lane in rows_frame(widget.spec)["lane"])


def test_a_runs_top_ops_chart_is_per_clean_call_and_says_so():
    torch = pytest.importorskip("torch")
    import workbench as wb

    run = wb.profile(lambda x: (x @ x).relu().sum(), torch.ones(64, 64), warmup=1, repeat=3)
    per_call = run.per_call_ops(top=None).set_index("name")["self_ms_per_call"]
    spec = next(
        c.to_dict()
        for c in charts.run_charts(run, timeline=False, roofline=False)
        if "Top" in str(c.to_dict().get("title"))
    )
    assert spec["title"] == "Top 15 ops by self time per call"
    assert spec["encoding"]["x"]["field"] == "self_ms_per_call"
    assert spec["encoding"]["x"]["title"] == "self time per call (ms)"
    drawn = {r["name"]: r["self_ms_per_call"] for r in _values(spec)}
    assert drawn and all(drawn[name] == pytest.approx(per_call[name]) for name in drawn)
    totals = run.trace.op_breakdown().table.set_index("name")["self_us"]
    mm = next(name for name in drawn if "mm" in name)
    assert drawn[mm] != pytest.approx(totals[mm] / 1e3)  # not the total over the traced calls


def test_a_traces_top_ops_chart_says_its_times_are_totals():
    table = pd.DataFrame({"name": ["aten::mm", "aten::add"], "self_us": [30.0, 20.0]})
    spec = charts.top_ops_chart(table).to_dict()
    assert "total" in spec["title"] and spec["encoding"]["x"]["title"] == "self (µs, total over the trace)"
