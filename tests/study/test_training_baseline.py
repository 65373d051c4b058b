"""A training-mode baseline is profiled and timed exactly as its rounds are (forward + backward,
through the same training-step wrapper ``wb.compare`` times), so its hypotheses see the backward
pass and the drift check compares like with like: an A/A study (the baseline as its own variant)
reports no baseline drift, round after round."""

from __future__ import annotations

import time

import pytest

torch = pytest.importorskip("torch")

from workbench.study import Study, measure  # noqa: E402


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.Tanh(), torch.nn.Linear(256, 64))


def test_the_profiled_callable_of_a_training_baseline_runs_the_backward_pass(tmp_path, monkeypatch):
    model = _model()
    backward_calls = []
    model[0].weight.register_hook(lambda grad: backward_calls.append(1))
    profiled = []
    real = measure.profile_callable

    def spy(fn, args, options):
        profiled.append(fn)
        return real(fn, args, {**options, "trace": False})

    monkeypatch.setattr(measure, "profile_callable", spy)
    study = Study("train", folder=tmp_path / "t")
    base = study.set_baseline(model, lambda: (torch.randn(32, 64),), mode="training", warmup=1, repeat=3)
    assert base.mode == "training"
    assert backward_calls, "the training baseline's profile never ran a backward pass"
    assert getattr(profiled[-1], "__wrapped__", None) is model  # the user's callable under the step
    before = len(backward_calls)
    study.set_baseline(model, lambda: (torch.randn(32, 64),), mode="inference", warmup=1, repeat=3)
    assert len(backward_calls) == before  # an inference path is forward only


class _SlowBackward(torch.autograd.Function):
    """A step whose time is set by sleeps (voluntary waits, kept in every timer's samples), so the
    test sees the forward/backward split, not the neighbours' load: forward 2 ms, backward 6 ms."""

    @staticmethod
    def forward(ctx, x):
        time.sleep(0.002)
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        time.sleep(0.006)
        return grad * 2


class _Step(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(8))

    def forward(self, x):
        return _SlowBackward.apply(x * self.weight)


def test_a_training_study_a_a_over_three_rounds_reports_no_baseline_drift(tmp_path):
    step = _Step()
    study = Study("aa", folder=tmp_path / "aa")
    base = study.set_baseline(step, lambda: (torch.randn(4, 8),), mode="training", warmup=2, repeat=15, trace=False)
    assert base.median_ms > 7, base.median_ms  # forward + backward: a forward-only profile is ~2 ms
    checks = []
    for _ in range(3):
        rnd = study.run_round({"same": step}, checks=1, budget_s=0.5, profile=False)
        assert rnd.decisions["same"].mode == "training"
        checks.append(rnd.summary.baseline_checks[0])
    assert all(c["status"] == "ok" for c in checks), [c["text"] for c in checks]
    assert all(0.85 < c["drift"] < 1.15 for c in checks), (base.median_ms, [c["drift"] for c in checks])
