"""``wb.fixes.apply``: a kept fix made to the user's own model and optimizer, in place (the comparison checked
it on copies). The model keeps its parameter objects, so the optimizer built over them keeps stepping them
with its state; a fix with no in-place form, or a swap that would replace the model, changes nothing."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

import workbench as wb  # noqa: E402
import workbench.fixes  # noqa: E402, F401
from tests.fixes.gpt_model import GPT, B, T, V  # noqa: E402
from workbench.errors import InvalidArgumentError  # noqa: E402
from workbench.fixes.fix import Fix, Site  # noqa: E402
from workbench.fixes.rebind import swap_variant  # noqa: E402


def _training(seed=0):
    torch.manual_seed(seed)
    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    idx, tgt = torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T))

    def step():
        opt.zero_grad()
        logits = model(idx)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), tgt.view(-1))
        loss.backward()
        opt.step()
        return loss.detach()

    step()  # the cell ran once: the optimizer has state
    return model, opt, idx, step


def test_sdpa_applied_in_place_keeps_the_parameters_and_the_training_on_course():
    model, opt, idx, step = _training()
    twin, twin_opt, _, twin_step = _training()  # the same model and data, left as written
    params = [id(p) for p in model.parameters()]
    state = {id(p): s["exp_avg"] for p, s in opt.state.items()}
    applied = wb.fixes.apply("sdpa_attention", step)
    assert [c.split(" ")[0] for c in applied.changed] == ["blocks.0.attn", "blocks.1.attn"]
    assert "sdpa_attention applied in place" in str(applied)
    assert "forward" in vars(model.blocks[0].attn) and "forward" not in vars(twin.blocks[0].attn)
    assert [id(p) for p in model.parameters()] == params  # the same objects: the optimizer steps them
    assert all(opt.state[p]["exp_avg"] is state[id(p)] for p in model.parameters())
    with torch.no_grad():
        torch.testing.assert_close(model(idx), twin(idx), rtol=1e-4, atol=1e-5)
    for _ in range(3):  # trained on, the fixed model follows the written one
        torch.testing.assert_close(step(), twin_step(), rtol=1e-4, atol=1e-5)


def test_the_fused_optimizer_applied_in_place_switches_its_groups_and_keeps_its_state():
    model, opt, _, step = _training()
    twin, _, _, twin_step = _training()
    before = {id(p): s["step"].clone() for p, s in opt.state.items()}
    applied = wb.fixes.apply("fused_optimizer", step)
    assert applied.changed[0].startswith("optimizer[0] AdamW -> ")
    group = opt.param_groups[0]
    assert group.get("fused") or group.get("foreach")
    assert all(torch.equal(opt.state[p]["step"], before[id(p)]) for p in model.parameters())
    torch.testing.assert_close(step(), twin_step(), rtol=1e-5, atol=1e-6)


def test_a_fix_without_an_in_place_form_or_not_applicable_here_changes_nothing():
    model, opt, _, step = _training()
    with pytest.raises(InvalidArgumentError, match=r"no in-place form.*wb\.variants\.build\('compiled'"):
        wb.fixes.apply("compiled", step)
    with pytest.raises(InvalidArgumentError, match="cannot be applied to this code"):
        wb.fixes.apply("channels_last", step)  # no conv in this model
    assert "forward" not in vars(model.blocks[0].attn) and opt.param_groups[0]["foreach"] is False


def test_a_swap_that_replaces_the_model_or_its_parameters_is_refused_and_put_back():
    model, opt, idx, step = _training()
    with torch.no_grad():
        before = model(idx).clone()
    params = [id(p) for p in model.parameters()]

    def new_params(m):  # a bad swap: each attention projection loses its bias (other parameters than it had)
        for block in m.blocks:
            block.attn.proj = torch.nn.Linear(block.attn.proj.in_features, block.attn.proj.out_features, bias=False)
        return [Site("blocks.0.attn.proj", "module", "replaced")]

    def whole(m):
        return torch.nn.Sequential(m), [Site("", "module", "wrapped")]

    for name, change in (("test_new_params", new_params), ("test_whole", whole)):
        wb.fixes.register(
            Fix(
                name,
                "a test swap",
                "module_swap",
                "exact",
                lambda fn, ctx, n, change=change: swap_variant(fn, ctx, n, change, description="x", in_place=True),
                recognise=lambda ctx, name=name: wb.fixes.applies(name, "always", [Site("blocks", "module")]),
            )
        )
        try:
            with pytest.raises(InvalidArgumentError, match="other parameters|as a whole"):
                wb.fixes.apply(name, step)
        finally:
            wb.fixes.unregister(name)
        assert [id(p) for p in model.parameters()] == params
        with torch.no_grad():
            torch.testing.assert_close(model(idx), before, rtol=0, atol=0)


def test_the_panels_winner_code_for_an_in_place_fix_applies_it_to_the_users_model():
    pytest.importorskip("ipywidgets")
    from workbench.variants.clock import FakeTimer
    from workbench.widgets import VariantPanel

    model, opt, idx, step = _training()
    timer = FakeTimer({"eager": 2.0, "sdpa_attention": 1.0}, seed=0, call=False)
    panel = VariantPanel(
        step,
        None,
        fixes=wb.fixes.for_callable(step),
        compare_options=dict(checks=1, budget_s=0.2, min_rounds=5, timer=timer, profile=False),
    )
    panel.select(["sdpa_attention"])
    panel.run_button.click()
    assert panel.winner() == "sdpa_attention", panel.rows
    code = panel.winner_code()
    assert "wb.fixes.apply('sdpa_attention', step)" in code and "wb.variants.build" in code
    exec(code, {"wb": wb, "step": step})  # the inserted winner cell runs: your own model now uses SDPA
    assert "forward" in vars(model.blocks[0].attn) and "forward" in vars(model.blocks[1].attn)
    step()
