"""Time by nn.Module and by the user's source line (workbench.analysis.attribution), its facade
methods and its renderings: exact numbers on a small hand-written trace (CPU ops, then GPU kernels
through their launches), the real H100 trace's Python events, and a trace recorded without them."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

import workbench as wb
import workbench.render.attribution as render_attribution
from tests.analysis.hand_traces import breakdown_row as _row
from tests.analysis.hand_traces import event as _x
from tests.analysis.hand_traces import load_events as _load
from tests.analysis.hand_traces import python_event as _py
from workbench.analysis.attribution import (
    NO_PYTHON_EVENTS,
    Attribution,
    ModuleBreakdown,
    SourceBreakdown,
    attribution,
    module_breakdown,
    source_breakdown,
)
from workbench.analysis.python_stack import is_user_file, parse_frame
from workbench.errors import InvalidArgumentError

DATA = Path(__file__).resolve().parents[1] / "data"
HOSTILE = "<script>alert(1)</script>"


def _events(gpu: bool = False, module_class: str = "LnGelu") -> list[dict]:
    """Model_0 > (model.py:5 forward) > Block_0 > (torch's _call_impl) > (model.py:20 forward) >
    [aten::mm 100 µs, LnGelu_0 > (model.py:40 forward) > [aten::tanh 50, aten::pow 40]];
    aten::add 30 in Model's forward; aten::copy_ 20 after every module."""
    events = [
        _x("user_annotation", "ProfilerStep#0", 0, 1000),
        _py("nn.Module: Model_0", 10, 900),
        _py("model.py(5): forward", 12, 880),
        _py("nn.Module: Block_0", 20, 500),
        _py("torch/nn/modules/module.py(1782): _call_impl", 21, 498),
        _py("model.py(20): forward", 22, 496),
        _x("cpu_op", "aten::mm", 30, 100),
        _py(f"nn.Module: {module_class}_0", 200, 300),
        _py("model.py(40): forward", 201, 298),
        _x("cpu_op", "aten::tanh", 210, 50),
        _x("cpu_op", "aten::pow", 300, 40),
        _x("cpu_op", "aten::add", 600, 30),
        _x("cpu_op", "aten::copy_", 950, 20),
    ]
    if gpu:
        events += [
            _x("cuda_runtime", "cudaLaunchKernel", 40, 5, correlation=1),  # in aten::mm (Block_0)
            _x("cuda_runtime", "cudaLaunchKernel", 220, 5, correlation=2),  # in aten::tanh (LnGelu_0)
            _x("cuda_runtime", "cudaLaunchKernel", 610, 5, correlation=3),  # in aten::add (Model_0)
            {
                "ph": "X",
                "cat": "kernel",
                "name": "gemm_kernel",
                "pid": 0,
                "tid": 7,
                "ts": 1100,
                "dur": 60,
                "args": {"correlation": 1, "device": 0, "stream": 7},
            },
            {
                "ph": "X",
                "cat": "kernel",
                "name": "tanh_kernel",
                "pid": 0,
                "tid": 7,
                "ts": 1200,
                "dur": 77,
                "args": {"correlation": 2, "device": 0, "stream": 7},
            },
            {
                "ph": "X",
                "cat": "kernel",
                "name": "add_kernel",
                "pid": 0,
                "tid": 7,
                "ts": 1300,
                "dur": 10,
                "args": {"correlation": 3, "device": 0, "stream": 7},
            },
            {
                "ph": "X",
                "cat": "kernel",
                "name": "orphan_kernel",
                "pid": 0,
                "tid": 7,
                "ts": 1400,
                "dur": 3,
                "args": {"correlation": 99, "device": 0, "stream": 7},
            },
        ]
    return events


# --- CPU ops -----------------------------------------------------------------------------------


def test_module_breakdown_attributes_cpu_op_self_time_inclusive_and_self(tmp_path):
    result = _load(tmp_path, _events()).module_breakdown()
    assert result.recorded and result.basis == "cpu_op"
    assert result.total_us == pytest.approx(240.0) and result.outside_us == pytest.approx(20.0)
    assert list(result.table["path"]) == ["Model_0", "Model_0/Block_0", "Model_0/Block_0/LnGelu_0"]
    model, block, chain = (_row(result, p) for p in result.table["path"])
    assert (model["inclusive_us"], model["self_us"]) == pytest.approx((220.0, 30.0))
    assert (block["inclusive_us"], block["self_us"]) == pytest.approx((190.0, 100.0))
    assert (chain["inclusive_us"], chain["self_us"]) == pytest.approx((90.0, 90.0))
    assert [r["depth"] for r in (model, block, chain)] == [0, 1, 2]
    assert chain["parent"] == "Model_0/Block_0" and chain["module"] == "LnGelu_0"
    assert chain["wall_us"] == pytest.approx(300.0) and chain["count"] == 1
    assert model["inclusive_pct"] == pytest.approx(100 * 220 / 240)
    assert result.attributed_us + result.outside_us == pytest.approx(result.total_us)
    # one ProfilerStep# in the trace: per call = the totals; scale multiplies
    assert chain["inclusive_ms_per_call"] == pytest.approx(0.090)
    scaled = _load(tmp_path, _events(), "again.json.gz").module_breakdown(calls=3, scale=0.5)
    assert _row(scaled, "Model_0/Block_0/LnGelu_0")["self_ms_per_call"] == pytest.approx(0.090 / 3 * 0.5)


def test_module_items_are_the_top_ops_under_each_module(tmp_path):
    result = _load(tmp_path, _events()).module_breakdown(top=2)
    chain = result.top_items("Model_0/Block_0/LnGelu_0")
    assert list(chain["name"]) == ["aten::tanh", "aten::pow"]
    assert chain["pct_of_key"].sum() == pytest.approx(100.0)
    model = result.top_items("Model_0")  # inclusive: its children's ops are under it
    assert list(model["name"]) == ["aten::mm", "aten::tanh"]
    assert model["us"].tolist() == pytest.approx([100.0, 50.0])


def test_source_breakdown_gives_the_innermost_user_frame_and_skips_torch_frames(tmp_path):
    result = _load(tmp_path, _events()).source_breakdown()
    assert result.recorded
    assert list(result.table["location"]) == [
        "model.py:20 in forward",
        "model.py:40 in forward",
        "model.py:5 in forward",
    ]
    inner = _row(result, "model.py:40 in forward")
    assert (inner["file"], inner["line"], inner["function"]) == ("model.py", 40, "forward")
    assert (inner["self_us"], inner["inclusive_us"]) == pytest.approx((90.0, 90.0))
    block = _row(result, "model.py:20 in forward")  # torch's _call_impl above it is not the user's
    assert (block["self_us"], block["inclusive_us"]) == pytest.approx((100.0, 190.0))
    outer = _row(result, "model.py:5 in forward")
    assert (outer["self_us"], outer["inclusive_us"]) == pytest.approx((30.0, 220.0))
    assert result.outside_us == pytest.approx(20.0)
    assert result.table["self_us"].sum() + result.outside_us == pytest.approx(result.total_us)
    assert not result.table["location"].str.contains("torch/").any()


def test_user_paths_override_the_guess(tmp_path):
    result = _load(tmp_path, _events()).source_breakdown(user_paths=["torch/nn/modules/module.py"])
    assert list(result.table["location"]) == ["torch/nn/modules/module.py:1782 in _call_impl"]
    assert result.table["self_us"].iloc[0] == pytest.approx(190.0)


# --- GPU kernels through their launches --------------------------------------------------------


def test_gpu_trace_attributes_kernel_time_through_the_launch(tmp_path):
    trace = _load(tmp_path, _events(gpu=True))
    modules = trace.module_breakdown()
    assert modules.basis == "kernel"
    assert modules.total_us == pytest.approx(150.0) and modules.unlinked_us == pytest.approx(3.0)
    chain = _row(modules, "Model_0/Block_0/LnGelu_0")
    assert chain["kernel_us"] == pytest.approx(77.0) and chain["inclusive_us"] == pytest.approx(77.0)
    assert chain["cpu_op_us"] == pytest.approx(90.0)  # both bases are reported
    block = _row(modules, "Model_0/Block_0")
    assert (block["inclusive_us"], block["self_us"]) == pytest.approx((137.0, 60.0))
    model = _row(modules, "Model_0")
    assert (model["inclusive_us"], model["self_us"]) == pytest.approx((147.0, 10.0))
    assert modules.top_items("Model_0/Block_0/LnGelu_0")["name"].tolist() == ["tanh_kernel"]
    cpu = trace.module_breakdown(basis="cpu_op")
    assert cpu.basis == "cpu_op" and cpu.unlinked_us == 0.0
    cpu_chain = _row(cpu, "Model_0/Block_0/LnGelu_0")
    assert (cpu_chain["inclusive_us"], cpu_chain["kernel_us"]) == pytest.approx((90.0, 77.0))
    assert "no GPU kernels" in _load(tmp_path, _events(), "cpu.json.gz").module_breakdown(basis="kernel").not_recorded
    sources = trace.source_breakdown()
    assert _row(sources, "model.py:40 in forward")["self_us"] == pytest.approx(77.0)


def test_real_h100_trace_gives_module_time_from_kernels():
    trace = wb.load_trace(DATA / "gpu" / "h100_bert_small.json.gz")
    result = trace.module_breakdown()
    assert result.recorded and result.basis == "kernel"
    kernel_total = float(trace.kernels["dur_us"].sum())
    assert result.total_us == pytest.approx(kernel_total)
    assert result.attributed_us + result.outside_us + result.unlinked_us == pytest.approx(kernel_total)
    top = result.table.iloc[0]
    assert top["path"] == "BertLMHeadModel_0" and top["inclusive_pct"] > 90
    table = result.table
    assert (table["inclusive_us"] >= table["self_us"] - 1e-9).all()
    # a module's inclusive time is its self time plus its children's inclusive time
    children = table.groupby("parent")["inclusive_us"].sum()
    for row in table.itertuples():
        assert row.inclusive_us == pytest.approx(row.self_us + children.get(row.path, 0.0), abs=1e-6)
    layers = table[table["module"].str.startswith("BertLayer_")]
    assert len(layers) == 4 and (layers["parent"] == "BertLMHeadModel_0/BertModel_0/BertEncoder_0").all()
    assert table.loc[table["depth"] == 0, "inclusive_pct"].sum() <= 100 + 1e-9
    assert table["self_pct"].sum() <= 100 + 1e-9
    # every kernel under a module was launched while that module's scope was open
    linear = table[table["module"] == "Linear_25"].iloc[0]
    assert linear["kernel_us"] > 0 and linear["cpu_op_us"] > 0 and linear["wall_us"] > 0


def test_trace_without_python_events_says_not_recorded():
    trace = wb.load_trace(DATA / "cpu" / "cpu_mlp_plain.json.gz")
    assert not len(trace.python_calls)
    both = attribution(trace)
    for part in (both.modules, both.sources):
        assert not part.recorded and part.not_recorded == NO_PYTHON_EVENTS
        assert "with_stack=True" in part.not_recorded and len(part.table) == 0
    assert not both.recorded
    assert "not recorded: " in render_attribution.text(both)
    assert "not recorded: " in render_attribution.html(both)
    assert "not recorded: " in render_attribution.markdown(both)


def test_python_events_without_modules_or_user_frames_say_why(tmp_path):
    events = [e for e in _events() if not e["name"].startswith(("nn.Module", "model.py"))]
    trace = _load(tmp_path, events)
    assert "no nn.Module scope" in trace.module_breakdown().not_recorded
    assert "in your files" in trace.source_breakdown().not_recorded


# --- bad input, persistence, frames --------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs", [{"basis": "gpu"}, {"calls": 0}, {"calls": 1.5}, {"scale": 0.0}, {"scale": float("nan")}, {"top": 0}]
)
def test_bad_arguments_raise_a_clear_error(tmp_path, kwargs):
    trace = _load(tmp_path, _events())
    with pytest.raises(InvalidArgumentError):
        module_breakdown(trace, **kwargs)


def test_not_a_trace_raises():
    with pytest.raises(InvalidArgumentError, match="needs a Trace"):
        source_breakdown(object())


def test_results_round_trip(tmp_path):
    both = attribution(_load(tmp_path, _events(gpu=True)))
    again = Attribution.from_dict(json.loads(json.dumps(both.to_dict())))
    assert again == both
    assert ModuleBreakdown.from_dict(both.modules.to_dict()) == both.modules
    with pytest.raises(InvalidArgumentError):
        Attribution.from_dict(both.modules.to_dict())


def test_frames_and_user_files():
    frame = parse_frame("my model/net.py(123): forward")
    assert frame is not None and frame.location == "my model/net.py:123 in forward"
    assert parse_frame("nn.Module: Linear_0") is None
    assert parse_frame("<built-in method add of type object at 0x7f>") is None
    assert is_user_file("model.py") and is_user_file("tests/capture/test_x.py")
    assert is_user_file("/tmp/ipykernel_77/3301.py") and is_user_file("<ipython-input-4-abc>")
    assert parse_frame("/tmp/ipykernel_77/3301.py(12): chain").location == "notebook cell 3301:12 in chain"
    assert parse_frame("/tmp/ipykernel_77/3301.py(0): <module>").location == "notebook cell 3301 (top level)"
    assert parse_frame("train.py(4): <module>").location == "train.py:4 (top level)"
    for library in (
        "torch/nn/modules/module.py",
        "threading.py",
        "multiprocessing/spawn.py",
        "/usr/lib/python3.11/site-packages/foo/bar.py",
        "/work/main/workbench/capture/timing.py",
        "<string>",
        "transformers/models/bert/modeling_bert.py",
    ):
        assert not is_user_file(library), library


# --- renderings ----------------------------------------------------------------------------------


def test_renderings_show_the_tree_per_call_times_and_source_lines(tmp_path):
    both = attribution(_load(tmp_path, _events()))
    out = render_attribution.text(both)
    assert "LnGelu_0" in out and "model.py:40 in forward" in out
    assert "90 µs" in out  # format_ms of the chain's per-call time
    lines = out.splitlines()
    model_line = next(line for line in lines if "Model_0" in line)
    chain_line = next(line for line in lines if "LnGelu_0" in line)
    indent = lambda line: len(line) - len(line.lstrip(" \u00a0"))  # noqa: E731
    assert indent(chain_line) > indent(model_line)  # nested modules are indented
    md = render_attribution.markdown(both)
    assert "| module |" in md and "model.py:40 in forward" in md
    html = render_attribution.html(both)
    assert "<table" in html and "LnGelu\\_0" not in html and "LnGelu_0" in html
    assert render_attribution.text(both.modules).startswith("Time by nn.Module")
    with pytest.raises(InvalidArgumentError):
        render_attribution.html("not a result")  # type: ignore[arg-type]


def test_hostile_names_are_escaped_in_every_rendering(tmp_path):
    events = _events(module_class=HOSTILE)
    for event in events:
        if event["name"] == "aten::tanh":
            event["name"] = f"aten::{HOSTILE}"
    both = attribution(_load(tmp_path, events))
    assert any(HOSTILE in p for p in both.modules.table["path"])
    html = render_attribution.html(both)
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<script>" not in render_attribution.markdown(both)


def test_facade_methods_delegate(tmp_path):
    trace = _load(tmp_path, _events())
    assert trace.module_breakdown() == module_breakdown(trace)
    assert trace.source_breakdown(top=1) == source_breakdown(trace, top=1)
    assert isinstance(trace.module_breakdown().table["inclusive_us"].to_numpy(), np.ndarray)


def test_a_line_that_only_calls_is_shown_with_its_callees_time(tmp_path):
    # step() runs nothing itself; the loss function it calls runs the matmul: the calling line is the
    # way from the step to its parts, so it is listed (after the lines that run) with its callees' time
    events = [
        _x("user_annotation", "ProfilerStep#0", 0, 1000),
        _py("train.py(40): <module>", 5, 990),  # the line that started the profile: all the time, not shown
        _py("train.py(10): step", 10, 900),
        _py("train.py(20): loss_fn", 20, 500),
        _x("cpu_op", "aten::mm", 30, 400),
        _x("cpu_op", "aten::add", 600, 2),  # in step itself: 0.5 % of the time, below the share shown
        _x("cpu_op", "aten::relu", 950, 100),  # at the top level, after step
    ]
    sources = _load(tmp_path, events).source_breakdown()
    shown = render_attribution.text(sources)
    lines = [line for line in shown.splitlines() if "train.py" in line]
    assert [line.split()[0] for line in lines] == ["train.py:20", "train.py:40", "train.py:10"], shown
    assert "1 other line(s) not shown" not in shown and "with callees" in shown
    entry = [
        _x("user_annotation", "ProfilerStep#0", 0, 1000),
        _py("train.py(40): <module>", 5, 990),
        _py("train.py(10): step", 10, 900),
        _x("cpu_op", "aten::mm", 30, 400),
    ]
    shown = render_attribution.text(_load(tmp_path, entry, "entry.json.gz").source_breakdown())
    assert "train.py:10" in shown and "train.py:40" not in shown and "1 other line(s) not shown" in shown
