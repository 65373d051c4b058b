"""A study of a training path: the baseline's output requires grad, so every round checks the
gradients of each input as well as the outputs; a variant whose forward matches but whose
gradient is wrong is rejected with the gradient error in its record, which carries the mode."""

from __future__ import annotations

import torch

from tests.study.conftest import hypothesis
from workbench.study import Study
from workbench.variants.clock import FakeTimer

FAKE = dict(checks=1, profile=False, budget_s=0.5, min_rounds=10)


def step(x, w):
    return torch.tanh(x @ w)


def wrong_gradient(x, w):
    y = torch.tanh(x @ w)
    return y.detach() + (y - y.detach()) * 1.02  # the same forward; the gradient 2 % too large


def forward_only(x, w):
    with torch.no_grad():
        return torch.tanh(x @ w)


def make_inputs():
    return (torch.randn(32, 16, requires_grad=True), torch.randn(16, 8, requires_grad=True))


def test_a_training_step_whose_gradient_is_wrong_is_rejected_with_the_gradient_error_in_the_record(lab, tmp_path):
    lab.hypotheses["step"] = [hypothesis("memory_bound", suggested=("fused",))]
    study = Study("train", folder=tmp_path / "train")
    base = study.set_baseline(step, make_inputs)
    assert base.mode == "training"
    timer = FakeTimer({"baseline": 2.0}, default_ms=1.0, noise=0.02, seed=0, call=False)
    rnd = study.run_round({"wrong_grad": wrong_gradient, "fast_forward": forward_only}, timer=timer, **FAKE)
    wrong = rnd.decisions["wrong_grad"]
    assert wrong.decision == "reject" and wrong.mode == "training"
    assert "grad arg[0]" in wrong.reason and "outside tolerance" in wrong.reason
    assert "grad arg" in " ".join(wrong.evidence + (wrong.reason, wrong.why_safe))
    fast = rnd.decisions["fast_forward"]
    assert fast.decision == "reject" and "no gradient reached it" in fast.reason  # never a keep
    # the mode survives a reopen, with the records
    again = Study.open(study.folder)
    assert again.baseline.mode == "training"
    assert again.rounds[-1].decisions["wrong_grad"].mode == "training"
    # the same code as an inference path is another baseline
    inference = study.set_baseline(step, make_inputs, mode="inference")
    assert inference.baseline_id != base.baseline_id and inference.mode == "inference"
