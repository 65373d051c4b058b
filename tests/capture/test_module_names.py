"""Modules named as the user's model names them (``blocks.1.mlp.fc``), not by the profiler's label
(``Linear_6``): the traced pass numbers module instances as the Python tracer does and looks each up in
its model's ``named_modules()`` (``workbench.capture.module_scopes.ModuleNames``)."""

from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import workbench as wb  # noqa: E402
from workbench.analysis.attribution import _names  # noqa: E402
from workbench.capture.module_scopes import ModuleNames  # noqa: E402


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc, self.proj = nn.Linear(16, 32), nn.Linear(32, 16)

    def forward(self, x):
        return self.proj(torch.relu(self.fc(x)))


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln, self.mlp, self.head = nn.LayerNorm(16), MLP(), nn.Linear(16, 16)

    def forward(self, x):
        return self.head(x) + self.mlp(self.ln(x))  # head runs before the MLP's Linears


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(3)])
        self.out = nn.Linear(16, 4)

    def forward(self, x):
        for block in reversed(self.blocks):  # the last block runs first: numbering is by first call
            x = block(x)
        return self.out(x)


def test_labels_are_numbered_by_first_call_and_named_from_the_outermost_module():
    model, x = Net(), torch.randn(2, 16)
    with ModuleNames(torch) as names:
        model(x)
    paths = names.paths()
    assert paths["Net_0"] == "Net"
    assert paths["Block_0"] == "blocks.2" and paths["Block_2"] == "blocks.0"
    assert paths["Linear_0"] == "blocks.2.head" and paths["Linear_1"] == "blocks.2.mlp.fc"
    assert paths["Linear_9"] == "out" and len(paths) == 1 + 3 * 6 + 1  # Net, 3 x (Block, ln, mlp, fc, proj, head), out


def test_two_models_in_one_call_have_their_names_under_their_own_label():
    a, b, x = Net(), MLP(), torch.randn(2, 16)
    with ModuleNames(torch) as names:
        b(a(x) @ torch.zeros(4, 16))
    paths = names.paths()
    assert paths["Net_0"] == "Net" and paths["MLP_3"] == "MLP"  # the Net's three MLPs ran first
    assert paths["Linear_1"] == "Net.blocks.2.mlp.fc" and paths["Linear_10"] == "MLP.fc"


def test_names_that_do_not_nest_as_the_scopes_do_are_not_used():
    scopes = {"Net_0", "Net_0/Block_0", "Net_0/Block_0/Linear_0"}
    good = {"Net_0": "Net", "Block_0": "blocks.2", "Linear_0": "blocks.2.head"}
    assert _names(scopes, good) == good
    assert _names(scopes, {**good, "Linear_0": "blocks.1.head"}) == {}  # not under its block: numbering off
    assert _names(scopes, {"Net_0": "Net", "Block_0": "blocks.2"}) == {}  # a scope without a name


def test_a_profiled_training_step_names_its_modules_as_the_model_does(tmp_path):
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 16), torch.randn(64, 4)

    def step():
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    run = wb.profile(step, warmup=1, repeat=3, history=False)
    table = run.attribution.modules.table
    named = dict(zip(table["module"], table["name"]))
    assert named["Net_0"] == "Net" and "blocks.1.mlp.fc" in named.values()
    for label, name in named.items():  # the tracer's numbering is the hooks': each name is its label's class
        module = model if name == "Net" else model.get_submodule(name)
        assert type(module).__name__ == label.rsplit("_", 1)[0], (label, name)
    text = wb.render.text(run)
    block = re.search(r"^ *(\u00a0+)blocks\.\d ", text, re.M)  # indented under Net (no-break spaces: HTML keeps them)
    assert re.search(r"^ *Net ", text, re.M) and block, text
    assert "Block_" not in text and "Linear_" not in text
    again = wb.load_run(run.save(tmp_path / "run"))
    assert again.record.module_names == run.record.module_names
    assert list(again.attribution.modules.table["name"]) == list(table["name"])
