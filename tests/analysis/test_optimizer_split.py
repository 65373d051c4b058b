"""The optimizer's step split by the module whose parameters it updates (workbench.analysis.optimizer_split).

Exact stretches on hand-written steps (one repeat of the same ops per parameter, each taking a tensor of its
parameter's shape; a prefix before the loop), the refusals (shapes that do not match, a count that does not
divide, a foreach step, two optimizers of one class), and live: what the traced pass records of an AdamW /
SGD step, the module table's optimizer column, a foreach step left whole with its reason, a bundle round trip.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import workbench as wb
import workbench.render.attribution as render_attribution
from tests.analysis.hand_traces import event as _x
from tests.analysis.hand_traces import load_events as _load
from workbench.analysis.optimizer_split import optimizer_split
from workbench.errors import BundleError
from workbench.trace.optimizer_params import OptimizerStepParams, SteppedParam

ADAMW = OptimizerStepParams(
    "AdamW",
    False,
    None,
    (
        SteppedParam("Linear_0", "fc.weight", (8, 4)),
        SteppedParam("Linear_0", "fc.bias", (8,)),
        SteppedParam("LayerNorm_0", "ln.weight", (8,)),
    ),
)


def _op(name: str, ts: float, dur: float, *dims: list[int]) -> dict:
    return _x("cpu_op", name, ts, dur, **{"Input Dims": [list(d) for d in dims] + [[]]})


def _step(shapes: list[tuple[int, ...]], prefix: int = 0, start: float = 1000.0) -> list[dict]:
    """An Optimizer.step span: ``prefix`` ops, then per shape: aten::mul_ (10 µs) and aten::addcdiv_ (20 µs),
    30 µs apart each, 100 µs per parameter."""
    events = [_x("user_annotation", "Optimizer.step#AdamW.step", start, 100 * len(shapes) + 50 * prefix + 10)]
    t = start + 1
    for _ in range(prefix):
        events.append(_op("aten::zeros", t, 5, []))
        t += 50
    for shape in shapes:
        events.append(_op("aten::mul_", t, 10, shape))
        events.append(_op("aten::addcdiv_", t + 30, 20, shape, shape, shape))
        t += 100
    return events


def test_a_single_tensor_step_is_cut_into_one_stretch_per_parameter(tmp_path):
    trace = _load(tmp_path, _step([(8, 4), (8,), (8,)], prefix=1))
    split = optimizer_split(trace.cpu_ops, trace.annotations, [ADAMW])
    seg = split.segments
    assert split.split_steps == 1 and split.not_split == {}
    assert list(seg["param"]) == ["fc.weight", "fc.bias", "ln.weight"]
    assert list(seg["module"]) == ["Linear_0", "Linear_0", "LayerNorm_0"]
    # each stretch: from its first op to the next one's (the prefix, 1-51 µs, stays with the step); the
    # loaded trace's clock starts at its first event (1000 µs)
    assert seg["ts_us"].tolist() == [51.0, 151.0, 251.0]
    assert seg["end_us"].tolist() == [151.0, 251.0, 360.0]
    points = pd.DataFrame({"rank": 0, "pid": "1", "tid": "1", "ts_us": [10.0, 60.0, 181.0, 300.0], "end_us": 0.0})
    points["end_us"] = points["ts_us"] + 1
    assert list(split.module_at(points)) == ["", "Linear_0", "Linear_0", "LayerNorm_0"]


@pytest.mark.parametrize(
    "shapes, why",
    [
        ([(8, 4), (3,), (8,)], "do not fall into 3 repeats"),  # the second parameter's shape is not in its repeat
        ([(8, 4), (8,)], "do not fall into 3 repeats"),  # fewer repeats than parameters
    ],
)
def test_a_step_whose_ops_do_not_match_the_parameters_is_not_split(tmp_path, shapes, why):
    trace = _load(tmp_path, _step(shapes))
    split = optimizer_split(trace.cpu_ops, trace.annotations, [ADAMW])
    assert split.segments.empty and why in split.not_split["AdamW"]


def test_a_foreach_step_and_two_optimizers_of_one_class_are_not_split(tmp_path):
    events = [
        _x("user_annotation", "Optimizer.step#AdamW.step", 1000, 100),
        _op("aten::_foreach_mul_", 1001, 50, [8, 4]),
    ]
    trace = _load(tmp_path, events)
    split = optimizer_split(trace.cpu_ops, trace.annotations, [ADAMW])
    assert "updates all 3 parameters in each op" in split.not_split["AdamW"] and split.segments.empty
    twice = optimizer_split(trace.cpu_ops, trace.annotations, [ADAMW, ADAMW])
    assert "cannot be told apart" in twice.not_split["AdamW"]
    assert optimizer_split(trace.cpu_ops, trace.annotations, []).not_split == {}  # a trace from a file: nothing


def _model(torch):
    torch.manual_seed(0)

    class Block(torch.nn.Module):
        def __init__(self, width_in):
            super().__init__()
            self.fc = torch.nn.Linear(width_in, 64)
            self.ln = torch.nn.LayerNorm(64)

        def forward(self, x):
            return self.ln(self.fc(x)).relu()

    return torch.nn.Sequential(Block(32), Block(64), torch.nn.Linear(64, 4))


def _profiled(torch, make_opt):
    model = _model(torch)
    opt = make_opt(model.parameters())
    x = torch.randn(16, 32)

    def step():
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    return wb.profile(step, warmup=1, repeat=3, threads=1)


def test_a_live_adamw_step_is_split_by_the_modules_whose_parameters_it_updates():
    torch = pytest.importorskip("torch")
    run = _profiled(torch, lambda p: torch.optim.AdamW(p, foreach=False))
    (record,) = run.record.optimizer_params
    assert (record.optimizer, record.foreach) == ("AdamW", False)
    assert [p.name for p in record.params] == [
        "0.fc.weight",
        "0.fc.bias",
        "0.ln.weight",
        "0.ln.bias",
        "1.fc.weight",
        "1.fc.bias",
        "1.ln.weight",
        "1.ln.bias",
        "2.weight",
        "2.bias",
    ]
    assert record.params[0].shape == (64, 32) and record.params[0].module.startswith("Linear_")
    modules = run.attribution.modules
    rows = modules.table.set_index("name")
    for name in ("0.fc", "0.ln", "1.fc", "1.ln", "2"):
        assert rows.loc[name, "optimizer_self_us"] > 0, modules.table[["name", "optimizer_us"]]
    top = rows[rows["depth"] == 0]
    assert modules.optimizer_split_us == pytest.approx(float(top["optimizer_us"].sum()))
    # everything of the step but what precedes its loop is in some module's stretch
    assert 0.8 * modules.optimizer_us <= modules.optimizer_split_us <= modules.optimizer_us + 1e-6
    text = render_attribution.text(modules)
    assert "optimizer per call" in text and "in 'optimizer per call'" in text
    assert "optimizer per call" in render_attribution.html(modules)


def test_a_live_sgd_momentum_step_is_split_too():
    torch = pytest.importorskip("torch")
    run = _profiled(torch, lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9, foreach=False))
    modules = run.attribution.modules
    assert modules.optimizer_split_us > 0.8 * modules.optimizer_us > 0
    assert modules.optimizer_not_split == ()


def test_a_live_foreach_step_is_left_whole_with_its_reason():
    torch = pytest.importorskip("torch")
    run = _profiled(torch, lambda p: torch.optim.AdamW(p, foreach=True))
    modules = run.attribution.modules
    assert modules.optimizer_us > 0 and modules.optimizer_split_us == 0
    (why,) = modules.optimizer_not_split
    assert why.startswith("AdamW: a foreach step updates all 10 parameters in each op")
    assert (modules.table["optimizer_us"] == 0).all()
    text = render_attribution.text(modules)
    assert "optimizer per call" not in text and "not split by module: AdamW: a foreach step" in text


def test_the_record_survives_a_bundle_and_a_damaged_one_is_named(tmp_path):
    torch = pytest.importorskip("torch")
    run = _profiled(torch, lambda p: torch.optim.AdamW(p, foreach=False))
    folder = run.save(tmp_path / "run")
    back = wb.load_run(folder)
    assert back.record.optimizer_params == run.record.optimizer_params
    assert np.isclose(back.attribution.modules.optimizer_split_us, run.attribution.modules.optimizer_split_us)
    record = folder / "run.json"
    doc = json.loads(record.read_text())
    doc["run"]["optimizer_params"][0]["params"][0]["shape"] = "64x32"
    record.write_text(json.dumps(doc))
    with pytest.raises(BundleError, match="shape must be a list of ints"):
        wb.load_run(folder)
