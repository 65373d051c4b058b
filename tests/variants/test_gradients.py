"""Training paths: gradients of every input and parameter are checked as well as the outputs, a
forward-only variant is never kept, and the DecisionRecord carries the mode. Timing runs on a
seeded fake clock (the verdicts here rest on correctness, not on speed)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import workbench as wb  # noqa: E402
from workbench.errors import InvalidArgumentError  # noqa: E402
from workbench.variants.clock import FakeTimer  # noqa: E402
from workbench.variants.tolerances import GRADIENT_TOLERANCES  # noqa: E402

FAST = dict(checks=2, profile=False, budget_s=0.5, min_rounds=10)


def _timer(**ms):
    # every candidate 2x faster than the baseline: only correctness can stop a keep
    return FakeTimer({"step": 2.0, **ms}, default_ms=1.0, noise=0.02, seed=0, call=False)


def step(x, w):
    return torch.tanh(x @ w)


def step_copy(x, w):
    return torch.tanh(x @ w)


def wrong_gradient(x, w):
    """The same forward, bit for bit, with a gradient 2 % too large (y + 0.02 * (y - y))."""
    y = torch.tanh(x @ w)
    return y.detach() + (y - y.detach()) * 1.02


def forward_only(x, w):
    with torch.no_grad():
        return torch.tanh(x @ w)


def make_inputs():
    return (torch.randn(32, 16, requires_grad=True), torch.randn(16, 8, requires_grad=True))


def test_a_variant_whose_forward_matches_but_gradient_is_wrong_is_rejected_with_the_gradient_error():
    cmp = wb.compare(
        {"step": step, "copy": step_copy, "wrong_grad": wrong_gradient},
        inputs=make_inputs,
        baseline="step",
        timer=_timer(),
        **FAST,
    )
    rows = {r.name: r for r in cmp.results}
    assert rows["copy"].decision == "keep", rows["copy"].decision_reason
    wrong = rows["wrong_grad"]
    assert wrong.status == "incorrect" and wrong.decision == "reject"
    assert "grad arg[0]" in wrong.reason and "grad arg[1]" in wrong.reason and "outside tolerance" in wrong.reason
    bad = [o for o in wrong.correctness.outputs if not o.passed]
    assert {o.path for o in bad} == {"grad arg[0]", "grad arg[1]"}
    assert all(o.max_rel_err > 0.01 for o in bad)  # the 2 % error, measured
    out_check = next(o for o in wrong.correctness.outputs if o.path == "out")
    assert out_check.passed and out_check.max_abs_err < 1e-6  # the forward was right
    record = cmp.decision
    assert record.variant == "copy" and record.mode == "training"
    assert any(line.startswith("wrong_grad: reject") and "grad arg" in line for line in record.rejected_alternatives)
    assert record.settings["gradient_tolerances"]["float32"] == {
        "rtol": GRADIENT_TOLERANCES["float32"][0],
        "atol": GRADIENT_TOLERANCES["float32"][1],
    }
    assert "2 input gradients match the baseline's too" in record.why_safe  # counted, never "every"
    assert cmp["copy"].compared["input_gradients"] == 2 and cmp["copy"].max_grad_rel_err < 1e-5
    assert "**Mode:** training" in wb.render.markdown(record)
    again = type(record).from_dict(record.to_dict())
    assert again.mode == "training"


def test_a_forward_only_speedup_is_never_a_keep_on_a_training_path():
    cmp = wb.compare(
        {"step": step, "fast_forward": forward_only},
        inputs=make_inputs,
        baseline="step",
        timer=_timer(fast_forward=0.2),
        **FAST,
    )
    row = cmp["fast_forward"]
    assert row.decision == "reject" and row.status == "incorrect"
    assert "no gradient reached it" in row.reason
    assert cmp.decision.mode == "training"


def test_parameter_gradients_of_a_wrapping_module_are_matched_by_identity():
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 8)

    class SkewedWeightGrad(torch.nn.Module):
        """The same parameters (shared, under other names) and forward; the weight's gradient 5 % too large."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            w = self.inner.weight
            return torch.nn.functional.linear(x, w.detach() + (w - w.detach()) * 1.05, self.inner.bias)

    def inputs():
        return (torch.randn(32, 16),)  # no input requires grad: the parameters do

    cmp = wb.compare(
        {"step": model, "skewed": SkewedWeightGrad(model)}, inputs=inputs, baseline="step", timer=_timer(), **FAST
    )
    row = cmp["skewed"]
    assert cmp.settings["mode"] == "training"  # decided from the output, which requires grad
    assert row.decision == "reject" and "grad weight" in row.reason and "grad bias" not in row.reason
    assert model.weight.grad is None  # the checks left no gradient behind


def test_parameter_gradient_error_is_named_in_the_record():
    torch.manual_seed(0)
    base = torch.nn.Linear(16, 8)

    class Skewed(torch.nn.Linear):
        def forward(self, x):
            w = self.weight
            return torch.nn.functional.linear(x, w.detach() + (w - w.detach()) * 1.05, self.bias)

    skewed = Skewed(16, 8)
    skewed.load_state_dict(base.state_dict())
    cmp = wb.compare(
        {"step": base, "skewed": skewed}, inputs=lambda: (torch.randn(32, 16),), baseline="step", timer=_timer(), **FAST
    )
    row = cmp["skewed"]
    assert row.decision == "reject" and "grad weight" in row.reason and "grad bias" not in row.reason
    assert cmp.decision.mode == "training"
    assert base.weight.grad is None and skewed.weight.grad is None


def test_inference_mode_checks_outputs_only_and_says_so():
    cmp = wb.compare(
        {"step": step, "wrong_grad": wrong_gradient},
        inputs=make_inputs,
        baseline="step",
        timer=_timer(),
        mode="inference",
        **FAST,
    )
    assert cmp["wrong_grad"].decision == "keep"  # its forward is right; gradients were not asked for
    assert cmp.decision.mode == "inference"
    plain = wb.compare(
        {"f": lambda x: x * 2, "g": lambda x: x + x},
        inputs=lambda: (torch.randn(64),),
        baseline="f",
        timer=FakeTimer({"f": 2.0}, default_ms=1.0, seed=0, call=False),
        **FAST,
    )
    assert plain.decision.mode == "inference" and "gradient_tolerances" not in plain.decision.settings
    with pytest.raises(InvalidArgumentError, match="mode must be"):
        wb.compare({"f": step, "g": step_copy}, inputs=make_inputs, mode="train", timer=_timer(), **FAST)


def test_a_training_path_is_timed_forward_and_backward():
    calls = {"backward": 0}

    class Counted(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            calls["backward"] += 1
            return g * 2

    def counted(x):
        return Counted.apply(x)

    def inputs():
        return (torch.randn(64, requires_grad=True),)

    cmp = wb.compare(
        {"step": counted, "copy": lambda x: x * 2},
        inputs=inputs,
        baseline="step",
        checks=1,
        profile=False,
        budget_s=0.05,
        min_rounds=3,
        max_rounds=5,
    )
    timed_calls = cmp["step"].timing.n
    assert cmp.settings["mode"] == "training"
    assert calls["backward"] >= timed_calls  # every timed call ran its backward too


def test_mode_training_on_plain_inputs_checks_the_gradient_of_every_floating_input():
    plain = lambda: (torch.randn(32, 16), torch.randn(16, 8))  # noqa: E731 - no input requires grad
    cmp = wb.compare(
        {"step": step, "wrong_grad": wrong_gradient},
        inputs=plain,
        baseline="step",
        timer=_timer(),
        mode="training",
        **FAST,
    )
    row = cmp["wrong_grad"]
    assert row.decision == "reject" and "grad arg[0]" in row.reason and "grad arg[1]" in row.reason
    assert cmp.decision.mode == "training"
