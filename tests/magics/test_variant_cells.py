"""What a cell computes, as ``%%gpuvariant`` compares it: its last value and every name it binds at
top level (``loss = step()`` compares ``loss``); the objects its code refers to are handed to the
comparison (``__workbench_reach__``); the names the cells bind get their values back afterwards.
Driven through a real IPython shell (tests/magics/conftest.py)."""

from __future__ import annotations

import ast

import pytest
from IPython.core.error import UsageError

from workbench.magics.cell import CellCallable, bound_names, compile_cell, referenced_names

torch = pytest.importorskip("torch")

FAST = "-b 0.3 -c 1"


def _bound(code: str) -> tuple[str, ...]:
    return bound_names(ast.parse(code))


def test_the_names_a_cell_binds_at_top_level():
    assert _bound("loss = step()") == ("loss",)
    assert _bound("a, (b, *c) = f()\nd += 1\ne: int = 3\nf: int") == ("a", "b", "c", "d", "e")
    assert _bound("for i, row in enumerate(rows):\n    total = row\nwith open(p) as fh:\n    text = fh.read()") == (
        "i",
        "row",
        "total",
        "fh",
        "text",
    )
    assert _bound("if ok:\n    y = 1\nelse:\n    z = 2\ntry:\n    w = 3\nexcept E as err:\n    pass") == (
        "y",
        "z",
        "w",
        "err",
    )
    assert _bound("import torch\nfrom math import pi\ndef g():\n    inner = 1\nclass C:\n    attr = 2") == ()
    assert _bound("_ = f()\nobj.attr = 1\nd['k'] = 2\nprint((n := 3))\n[q for q in range(3)]") == ("n",)


def test_the_names_a_cell_refers_to():
    code = "def g():\n    return model(x)\nloss = g() + bias\nloss += 1"
    assert referenced_names(ast.parse(code)) == ("model", "x", "g", "bias", "loss")


def test_a_cell_returns_what_it_binds_and_hands_over_what_it_reaches(ip):
    ip.run_cell(
        "import torch\nw = torch.nn.Parameter(torch.ones(3))\ndef step():\n    return (w * 2).sum()",
        store_history=False,
    ).raise_error()
    compiled = compile_cell(ip, "loss = step()\nalias = w\nopt = torch.optim.SGD([w], lr=0.1)\nloss * 3")
    assert compiled.bound == ("loss", "alias", "opt")
    cell = CellCallable(ip, compiled, result_names=("loss", "alias", "opt"), with_last=True)
    out = cell()
    assert set(out) == {"loss", "alias", "opt", "last value"}
    assert out["loss"] is ip.user_ns["loss"] and float(out["last value"]) == 18.0
    assert out["alias"] is not ip.user_ns["w"] and torch.equal(out["alias"], ip.user_ns["w"].detach())  # a copy
    assert out["opt"] == "<SGD>" and cell.not_data == {"opt": "SGD"}
    (reach,) = cell.__workbench_reach__()  # the names the cell refers to, by name (a tensor it reads is an input)
    assert reach["step"] is ip.user_ns["step"] and reach["w"] is ip.user_ns["w"]
    assert not any(type(r).__name__ == "module" for r in reach.values())  # torch itself is not searched
    plain = CellCallable(ip, compiled)  # %%gpuprofile's: the last value
    assert float(plain()) == 18.0


def _cmp(ip):
    return ip.user_ns["_gpuvariant"]


@pytest.fixture
def profiled_step(ip):
    ip.run_cell(
        "import torch\ntorch.manual_seed(0)\nlin = torch.nn.Linear(8, 4)\n"
        "opt = torch.optim.SGD(lin.parameters(), lr=0.1)\ndata = torch.randn(16, 8)\n"
        "def step():\n    opt.zero_grad()\n    loss = lin(data).pow(2).mean()\n    loss.backward()\n"
        "    opt.step()\n    return loss.detach()\n"
        "def step2():\n    opt.zero_grad()\n    loss = lin(data).pow(2).mean()\n    loss.backward()\n"
        "    opt.step()\n    return loss.detach()",
        store_history=False,
    ).raise_error()
    ip.run_cell("%%gpuprofile -T -w 1 -r 3 -q\nloss = step()", store_history=True).raise_error()
    return ip


def test_cells_ending_in_an_assignment_are_compared_on_the_name_they_bind(profiled_step):
    ip = profiled_step
    ip.user_ns["loss_before"] = loss_before = ip.user_ns["loss"]
    shown = []
    import IPython.display

    real = IPython.display.display
    IPython.display.display = lambda *objs, **kw: shown.extend(objs)
    try:
        ok = ip.run_cell(f"%%gpuvariant same {FAST}\nloss = step2()", store_history=True)
        ok.raise_error()
        cmp = _cmp(ip)
        assert len(shown) == 1 and shown[0] is cmp  # the comparison once, its record inside
        assert cmp["same"].decision != "reject", cmp["same"]
        assert cmp.decision.mode == "training"  # the step trains: decided by the engine
        assert any("compared on `loss`" in n for n in cmp.settings["notes"])
        assert cmp.decision.settings.get("inputs") == "none"
        assert ip.user_ns["loss"] is loss_before  # the namespace got its value back
        wrong = ip.run_cell(f"%%gpuvariant doubled {FAST}\nloss = step2() * 2", store_history=True)
        wrong.raise_error()
        row = _cmp(ip)["doubled"]
        assert row.decision == "reject" and "loss" in row.decision_reason, row
        assert ip.user_ns["loss"] is loss_before
    finally:
        IPython.display.display = real


def test_a_training_step_with_the_loss_as_last_value_is_checked_once_per_call(profiled_step):
    ip = profiled_step
    res = ip.run_cell(f"%%gpuvariant train --training {FAST}\nloss = step2()\nloss", store_history=True)
    res.raise_error()
    cmp = _cmp(ip)
    assert cmp.decision.mode == "training" and cmp["train"].decision != "reject", cmp["train"]
    assert any("only this cell ends in an expression" in n for n in cmp.settings["notes"])


def test_names_only_one_cell_binds_are_reported(profiled_step):
    ip = profiled_step
    res = ip.run_cell(f"%%gpuvariant renamed {FAST}\nloss = step2()\nextra = loss + 1", store_history=True)
    res.raise_error()
    notes = " ".join(_cmp(ip).settings["notes"])
    assert "this cell binds `extra`, which the profiled cell does not" in notes
    assert "extra" not in ip.user_ns  # a name new to the namespace is removed
    assert any("binds `extra`" in e for e in _cmp(ip).decision.evidence)


def test_a_cell_with_nothing_to_compare_is_refused_in_one_line(profiled_step):
    from workbench.magics.variant import GpuVariantMagics

    magic = GpuVariantMagics(shell=profiled_step)
    with pytest.raises(UsageError, match="^nothing to compare") as caught:
        magic.gpuvariant("nothing -b 0.3 -c 1", "for _ in range(1):\n    step2()")
    assert "\n" not in str(caught.value)
    with pytest.raises(UsageError, match="exclude each other"):
        magic.gpuvariant("both --training --inference", "loss = step2()")


def test_cells_whose_values_are_all_none_are_refused_not_matched(ip):
    ip.run_cell("def noop():\n    return None", store_history=False).raise_error()
    ip.run_cell("%%gpuprofile -T -w 0 -r 2 -q\nr = noop()", store_history=True).raise_error()
    from workbench.magics.variant import GpuVariantMagics

    magic = GpuVariantMagics(shell=ip)
    with pytest.raises(UsageError, match="^nothing to compare") as caught:
        magic.gpuvariant("none -b 0.3 -c 1", "r = noop()")
    assert "\n" not in str(caught.value)
    with pytest.raises(UsageError, match="^nothing to compare"):
        magic.gpuvariant("none -b 0.3 -c 1", "r = noop()\nnoop()")
