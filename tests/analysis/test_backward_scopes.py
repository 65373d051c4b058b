"""Backward and the optimizer step split out of "outside any module" (workbench.analysis.backward_scopes):
exact numbers on a hand-written training step (forward ops under module scopes with autograd sequence
numbers, the engine's gradient functions with the same numbers, AccumulateGrad, an Optimizer.step
annotation), on CPU ops and on kernels through their launches; ambiguous numbers are dropped, not
guessed; and a live AdamW step attributes each Linear's backward to it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import workbench as wb
import workbench.render.attribution as render_attribution
from tests.analysis.hand_traces import breakdown_row as _row
from tests.analysis.hand_traces import event as _x
from tests.analysis.hand_traces import load_events as _load
from workbench.analysis.backward_scopes import backward_module_paths

BW = "autograd::engine::evaluate_function: "


def _op(name: str, ts: float, dur: float, seq: int | None = None, tid: int = 1, **args: object) -> dict:
    if seq is not None:
        args["Sequence number"] = seq
    return _x("cpu_op", name, ts, dur, tid, **args)


def _step(gpu: bool = False, backward_tid: int = 1) -> list[dict]:
    """Forward: Model_0 > [Fc_0 > aten::addmm (seq 5, 100 µs), Act_0 > aten::relu (seq 6, 40 µs)];
    aten::mse_loss (seq 7, 10 µs) outside any module. Backward (outside every scope): ReluBackward0
    (seq 6: 30 µs under it), AddmmBackward0 (seq 5: aten::mm 50 + aten::mm 20), MseLossBackward0
    (seq 7: 8 µs, its forward op in no module), AccumulateGrad (no number: 6 µs). Optimizer.step: 25 µs."""
    t = backward_tid
    events = [
        _x("user_annotation", "ProfilerStep#0", 0, 2000),
        _x("python_function", "nn.Module: Model_0", 10, 400),
        _x("python_function", "nn.Module: Fc_0", 20, 150),
        _op("aten::addmm", 30, 100, seq=5),
        _x("python_function", "nn.Module: Act_0", 200, 100),
        _op("aten::relu", 210, 40, seq=6),
        _op("aten::mse_loss", 450, 10, seq=7),
        _op(BW + "ReluBackward0", 500, 40, seq=6, tid=t),
        _op("ReluBackward0", 501, 38, seq=6, tid=t),
        _op("aten::threshold_backward", 505, 30, tid=t),
        _op(BW + "AddmmBackward0", 600, 100, seq=5, tid=t),
        _op("AddmmBackward0", 601, 98, seq=5, tid=t),
        _op("aten::mm", 610, 50, tid=t),
        _op("aten::mm", 670, 20, tid=t),
        _op(BW + "MseLossBackward0", 480, 10, seq=7, tid=t),
        _op("aten::mse_loss_backward", 481, 8, tid=t),
        _op(BW + "torch::autograd::AccumulateGrad", 720, 8, tid=t),
        _op("aten::add_", 721, 6, tid=t),
        _x("user_annotation", "Optimizer.step#AdamW.step", 800, 100),
        _op("aten::_foreach_add_", 810, 25),
    ]
    if gpu:
        events += [
            _x("cuda_runtime", "cudaLaunchKernel", 40, 5, correlation=1),  # in the forward addmm
            _x("cuda_runtime", "cudaLaunchKernel", 615, 5, tid=t, correlation=2),  # in the backward mm
            _x("cuda_runtime", "cudaLaunchKernel", 815, 5, correlation=3),  # in the optimizer step
        ]
        for corr, (name, dur) in enumerate((("gemm", 60.0), ("gemm_bw", 90.0), ("adam", 12.0)), start=1):
            events.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": name,
                    "pid": 0,
                    "tid": 7,
                    "ts": 1000 + 200 * corr,
                    "dur": dur,
                    "args": {"correlation": corr, "device": 0, "stream": 7},
                }
            )
    return events


def test_backward_is_attributed_to_the_module_of_its_forward_op(tmp_path):
    modules = _load(tmp_path, _step()).module_breakdown()
    # CPU op self time: forward 100 + 40 in scopes; mse 10, backward 30+50+20+8 (+2+2+2+2+2 self of
    # the gradient functions' own frames), AccumulateGrad 8, optimizer 25 outside
    fc, act, model = _row(modules, "Model_0/Fc_0"), _row(modules, "Model_0/Act_0"), _row(modules, "Model_0")
    assert fc["inclusive_us"] == pytest.approx(100.0) and act["inclusive_us"] == pytest.approx(40.0)
    # AddmmBackward0's whole subtree: evaluate_function 2 + AddmmBackward0 28 + mm 50 + mm 20
    assert fc["backward_us"] == pytest.approx(100.0) and fc["backward_self_us"] == pytest.approx(100.0)
    assert act["backward_us"] == pytest.approx(40.0)  # 2 + 8 + 30
    assert model["backward_us"] == pytest.approx(140.0) and model["backward_self_us"] == pytest.approx(0.0)
    assert modules.backward_us == pytest.approx(140.0)
    assert modules.optimizer_us == pytest.approx(25.0)  # the ops in the step: _foreach_add_ 25
    # outside: mse 10 + its backward 10 (its forward op is in no module) + AccumulateGrad 8 + 140 + 25
    assert modules.outside_us == pytest.approx(10 + 10 + 8 + 140 + 25)
    assert modules.other_outside_us == pytest.approx(28.0)
    assert modules.attributed_us + modules.outside_us == pytest.approx(modules.total_us)


def test_kernels_follow_their_launch_into_backward_and_the_optimizer(tmp_path):
    modules = _load(tmp_path, _step(gpu=True)).module_breakdown()
    assert modules.basis == "kernel"
    fc = _row(modules, "Model_0/Fc_0")
    assert fc["inclusive_us"] == pytest.approx(60.0) and fc["backward_us"] == pytest.approx(90.0)
    assert modules.backward_us == pytest.approx(90.0) and modules.optimizer_us == pytest.approx(12.0)
    assert modules.outside_us == pytest.approx(102.0) and modules.other_outside_us == pytest.approx(0.0)


def test_backward_on_its_own_thread_is_linked_by_sequence_number(tmp_path):
    # autograd's engine runs CUDA backward on a thread of its own: the number links across threads
    modules = _load(tmp_path, _step(backward_tid=9)).module_breakdown()
    assert _row(modules, "Model_0/Fc_0")["backward_us"] == pytest.approx(100.0)
    assert modules.backward_us == pytest.approx(140.0)


def test_a_number_used_by_two_unnested_modules_is_dropped_not_guessed():
    ops = pd.DataFrame(
        {
            "rank": [0, 0, 0, 0],
            "name": ["aten::addmm", "aten::relu", BW + "AddmmBackward0", "aten::mm"],
            "sequence_number": [5, 5, 5, -1],
            "parent": [-1, -1, -1, 2],
        }
    )
    forward = np.array(["A_0/Fc_0", "B_0/Act_0", "", ""], dtype=object)
    assert list(backward_module_paths(ops, forward)) == ["", "", "", ""]
    nested = np.array(["A_0", "A_0/Fc_0", "", ""], dtype=object)  # one op inside the other's module
    assert list(backward_module_paths(ops, nested)) == ["", "", "A_0/Fc_0", "A_0/Fc_0"]


def test_a_trace_without_sequence_numbers_splits_nothing(tmp_path):
    events = [e for e in _step() if e["cat"] != "cpu_op" or not e["name"].startswith(BW)]
    for e in events:
        e.get("args", {}).pop("Sequence number", None)
    modules = _load(tmp_path, events).module_breakdown()
    assert modules.backward_us == 0.0 and (modules.table["backward_us"] == 0).all()
    assert modules.optimizer_us == pytest.approx(25.0)


def test_the_renderings_show_the_backward_column_and_the_split(tmp_path):
    modules = _load(tmp_path, _step()).module_breakdown()
    shown = render_attribution.text(modules)
    assert "backward per call" in shown
    assert "the modules' backward" in shown and "the optimizer step" in shown and "other" in shown
    assert "backward per call" in render_attribution.html(modules)
    # a result saved before backward was linked (no columns, no fields) renders as before
    old = modules.to_dict()
    old.pop("backward_us"), old.pop("optimizer_us")
    restored = type(modules).from_dict(old)
    assert restored.backward_us == 0.0
    no_columns = type(modules)(
        restored.table.drop(columns=["backward_us", "backward_self_us", "backward_pct"]),
        *(getattr(restored, f) for f in ("items", "basis", "total_us", "outside_us", "unlinked_us")),
        restored.calls,
        restored.scale,
        "",
    )
    text = render_attribution.text(no_columns)
    assert "backward per call" not in text and "outside any module:" in text


def test_a_live_adamw_step_attributes_each_linear_its_backward():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
    opt = torch.optim.AdamW(model.parameters(), foreach=False)
    x, y = torch.randn(32, 64), torch.randn(32, 8)

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    run = wb.profile(step, warmup=1, repeat=3, threads=1)
    modules = run.attribution.modules
    rows = modules.table.set_index("name")
    for name in ("0", "2"):  # both Linears' backward (AddmmBackward0's mm) is theirs
        assert rows.loc[name, "backward_us"] > 0, modules.table[["name", "backward_us"]]
    assert modules.backward_us == pytest.approx(float(rows.loc[rows["depth"] == 0, "backward_us"].sum()))
    assert modules.optimizer_us > 0  # the per-parameter AdamW loop ran inside Optimizer.step
    assert modules.backward_us + modules.optimizer_us <= modules.outside_us + 1e-6
