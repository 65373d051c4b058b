"""Module swaps on a training step written the ordinary way: a GPT-style model with hand-written causal
attention (softmax of q @ k^T with a tril mask), LayerNorm, a GELU MLP in an nn.Sequential, an LM head,
cross-entropy, a per-tensor AdamW (foreach=False), the globals ``model`` and ``opt``, and
``step()`` = zero_grad, loss, backward, step.

``wb.fixes.for_callable(step)`` (and ``wb.profile(step).fixes``) list ``sdpa_attention`` at the attention
modules and ``fused_optimizer`` at the optimizer; ``wb.compare`` checks both as training steps (gradients,
parameter updates, optimizer state) and finds them correct, on copies: the user's model and optimizer are
as they were. A deliberately wrong fix registered by hand is rejected by its changed gradients and
parameters; a model whose attention has data-dependent control flow, and one that cannot be deep-copied,
get their reasons in their rows and leave the rest of the list intact.

The qkv projection has a bias, as nn.Linear does by default: the key bias's gradient is zero in exact
arithmetic (softmax is shift-invariant), so its float32 value is rounding noise that Adam's first step
normalises to a full step of ``lr`` either way, and any reordering of the attention flips those elements;
the comparison judges those parameter steps as noise (``state._noise_steps_as_expected``) and still
compares the gradients themselves, so the reordered attention is correct.
"""

from __future__ import annotations

import hashlib
import math
import threading

import pytest

torch = pytest.importorskip("torch")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import workbench as wb  # noqa: E402
import workbench.fixes  # noqa: E402, F401  (wb.fixes)
from tests.fixes import gpt_model  # noqa: E402
from tests.fixes.gpt_model import GPT, Attention, B, Block, D, H, L, T, V  # noqa: E402, F401
from workbench.fixes.fix import Fix, Site  # noqa: E402
from workbench.kernels import registry as kernels  # noqa: E402
from workbench.variants.clock import FakeTimer  # noqa: E402

FAST = dict(checks=2, profile=False, budget_s=0.3, min_rounds=4, max_rounds=8)


def fake_timer():
    return FakeTimer({"eager": 2.0}, default_ms=1.0, noise=0.02, seed=0, call=True)


torch.manual_seed(0)
model = GPT()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
idx = torch.randint(0, V, (B, T))
tgt = torch.randint(0, V, (B, T))


def loss_fn():
    logits = model(idx)
    return F.cross_entropy(logits.view(-1, logits.size(-1)), tgt.view(-1))


def step():
    opt.zero_grad()
    loss = loss_fn()
    loss.backward()
    opt.step()
    return loss.detach()


ATTENTION_LINE = next(i for i, ln in enumerate(open(gpt_model.__file__), 1) if ln.rstrip().endswith("# ATTENTION LINE"))
N_PARAMS = len(list(model.parameters()))


def fingerprint(*objs) -> str:
    h = hashlib.sha256()
    for obj in objs:
        if isinstance(obj, torch.optim.Optimizer):
            tensors = [v for st in obj.state.values() for v in st.values() if isinstance(v, torch.Tensor)]
        else:
            tensors = list(obj.parameters())
        for t in tensors:
            h.update(t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def fixes():
    step()  # the notebook ran the cell once: gradients and optimizer state exist
    return wb.fixes.for_callable(step)


def test_sdpa_and_the_fused_optimizer_are_listed_with_where_they_apply(fixes):
    sdpa = fixes.row("sdpa_attention")
    assert sdpa.applies, sdpa.reason
    assert [s.where for s in sdpa.sites] == ["blocks.0.attn", "blocks.1.attn"]
    for s in sdpa.sites:
        assert s.kind == "module" and f"gpt_model.py:{ATTENTION_LINE}" in s.detail, s.detail
        assert "is_causal=True" in s.detail and "scale" in s.detail
    fused = fixes.row("fused_optimizer")
    assert fused.applies, fused.reason
    (site,) = fused.sites
    assert site.where == "optimizer[0] AdamW" and site.kind == "optimizer"
    assert f"{N_PARAMS} tensors, foreach=False" in site.detail and "fused=True" in site.detail
    assert {"sdpa_attention", "fused_optimizer"} <= set(fixes.names)
    reason = kernels.missing_reason()
    for name in ("fused_layer_norm", "fused_bias_gelu", "fused_cross_entropy", "fused_linear_cross_entropy"):
        row = fixes.row(name)
        if reason not in (None, kernels.CPU_ONLY):  # no GPU and no interpreter: the registry's reason
            assert not row.applies and row.reason == reason, (name, row.reason)
        else:
            assert row.applies, (name, row.reason)
    assert "fused_rms_norm" not in fixes and "fused_softmax" not in fixes  # no such module here
    assert fixes.elapsed_s < 2.0


def test_the_profiled_run_lists_them_too_with_the_optimizer_rule():
    run = wb.profile(step, warmup=1, repeat=3, trace_repeat=2, history=False)
    listed = run.fixes
    assert {"sdpa_attention", "fused_optimizer"} <= set(listed.names), listed.to_text()
    assert [s.where for s in listed.row("sdpa_attention").sites] == ["blocks.0.attn", "blocks.1.attn"]
    rules = {getattr(h, "rule", "") for h in run.hypotheses}
    row = listed.row("fused_optimizer")
    if "single_tensor_optimizer" in rules:  # the rule it tests puts the optimizer's time at stake
        assert row.hypotheses and row.stake_ms > 0, row


def test_compare_checks_both_as_training_steps_on_copies_and_finds_them_correct(fixes):
    before = fingerprint(model, opt)
    variants = fixes.variants(["sdpa_attention", "fused_optimizer"])
    sdpa, fused = variants["sdpa_attention"], variants["fused_optimizer"]
    assert [c.split(" ")[0] for c in sdpa.options["changed"]] == ["blocks.0.attn", "blocks.1.attn"]
    assert sdpa.options["fix"] == "sdpa_attention" and sdpa.numerical_class == "reordered"
    assert fused.options["changed"] == [
        f"optimizer[0] AdamW -> {fixes.row('fused_optimizer').sites[0].detail.split('-> ')[1]}"
    ]
    assert sdpa.fn.__globals__["model"] is not model and fused.fn.__globals__["model"] is model  # a copy / shared
    cmp = wb.compare(variants, timer=fake_timer(), **FAST)
    assert fingerprint(model, opt) == before  # the user's model and optimizer state as they were
    assert cmp.settings["mode"] == "training"
    for name in ("sdpa_attention", "fused_optimizer"):
        row = cmp[name]
        assert row.status == "ok" and row.decision != "reject", (name, row.decision_reason)
        assert row.compared["parameter_gradients"] == N_PARAMS and row.compared["parameter_values"] == N_PARAMS
        assert row.compared["optimizer_states"] == 3 * N_PARAMS  # step, exp_avg, exp_avg_sq
        assert row.max_grad_rel_err is not None and row.max_grad_rel_err < 1e-4


def _scale_one_weight(copy):
    with torch.no_grad():
        copy.blocks[0].mlp[2].weight.mul_(1.05)
    return [Site("blocks.0.mlp.2", "module", "weight scaled by 1.05 (deliberately wrong)")]


def _wrong_transform(fn, context, name):
    from workbench.fixes.rebind import swap_variant

    return swap_variant(fn, context, name, _scale_one_weight, description="scales one weight of its copy")


def test_a_wrong_fix_registered_by_hand_is_rejected_by_its_gradients_and_parameters():
    wrong = Fix("scaled_weight", "scales one weight in its copy", "user", "reordered", _wrong_transform)
    wb.fixes.register(wrong)
    try:
        before = fingerprint(model, opt)
        cmp = wb.compare({"eager": step, "wrong": "scaled_weight"}, timer=fake_timer(), **FAST)
    finally:
        wb.fixes.unregister("scaled_weight")
    assert fingerprint(model, opt) == before
    row = cmp["wrong"]
    assert row.decision == "reject" and row.status == "incorrect", row.decision_reason
    bad = {o.path for o in row.correctness.outputs if not o.passed}
    assert "value blocks.0.mlp.2.weight" in bad and any(p.startswith("grad ") for p in bad), bad


# -- bad inputs: each row says why, the rest of the list is intact ------------------------------------------------
class BranchyAttention(Attention):
    def forward(self, x):
        if x.abs().max() > 1e6:  # data-dependent control flow
            x = x / 2
        return super().forward(x)


CELL = """
model = GPT(attention=attention)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)


def step():
    opt.zero_grad()
    loss = F.cross_entropy(model(idx).view(-1, V), tgt.view(-1))
    loss.backward()
    opt.step()
    return loss.detach()
"""


def notebook(attention=Attention, seed=1):
    """Another notebook's namespace running the same cell with its own model, optimizer and step."""
    torch.manual_seed(seed)
    ns = {"GPT": GPT, "attention": attention, "torch": torch, "F": F, "V": V, "idx": idx, "tgt": tgt}
    exec(compile(CELL, "<notebook cell>", "exec"), ns)
    return ns


def test_attention_with_data_dependent_control_flow_says_it_cannot_be_traced():
    listed = wb.fixes.for_callable(notebook(BranchyAttention)["step"])
    row = listed.row("sdpa_attention")
    assert row.status == "not_applicable", row
    assert row.reason.startswith("not applicable: blocks.0.attn cannot be traced: "), row.reason
    assert "blocks.1.attn cannot be traced" in row.reason
    assert listed.row("fused_optimizer").applies


def test_a_model_that_cannot_be_deep_copied_gets_a_clear_reason_and_the_optimizer_fix_still_applies():
    ns = notebook(seed=2)
    ns["model"].blocks[1].attn.lock = threading.Lock()
    fn = ns["step"]
    listed = wb.fixes.for_callable(fn)
    row = listed.row("sdpa_attention")
    assert row.status == "not_applicable" and [s.where for s in row.sites] == ["blocks.0.attn", "blocks.1.attn"]
    assert "cannot be deep-copied" in row.reason and "blocks.1.attn.lock" in row.reason, row.reason
    assert listed.row("fused_optimizer").applies
    built = wb.fixes.get("sdpa_attention").variant(fn)  # named by hand all the same: not applicable, said why
    assert "blocks.1.attn.lock" in (built.applicability() or "")


# -- pad_to_multiple_of_8: listed only where alignment is at stake; exact results on CPU ----------------------------
class _Flag:
    rule, category, title, time_at_stake_ms, suggested_variants = (
        "half_matmul_unaligned",
        "precision",
        "3 half-precision matrix kernels ran unaligned",
        1.5,
        (),
    )


def test_pad_to_multiple_of_8_needs_the_alignment_rule_on_cpu_and_keeps_results():
    from workbench.fixes.context import FixContext
    from workbench.fixes.pad_to_multiple_of_8 import padded_linear_class

    torch.manual_seed(3)
    lin = nn.Linear(37, 13)

    def call():
        return lin(torch.ones(2, 37))

    plain = wb.fixes.get("pad_to_multiple_of_8").applicability(FixContext.from_callable(call))
    assert plain.status == "absent" and "no tensor cores at stake" in plain.reason
    flagged = wb.fixes.get("pad_to_multiple_of_8").applicability(FixContext(fn=call, hypotheses=(_Flag(),)))
    assert flagged.applies and flagged.stake_ms == 1.5 and "(40, 16)" in flagged.sites[0].detail
    padded = nn.Linear(37, 13)
    padded.load_state_dict(lin.state_dict())
    padded.__class__ = padded_linear_class()
    x = torch.randn(5, 37)
    assert torch.allclose(padded(x), lin(x), rtol=1e-6, atol=1e-6)
    assert [n for n, _ in padded.named_parameters()] == ["weight", "bias"]
