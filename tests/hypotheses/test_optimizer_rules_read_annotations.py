"""The optimizer rules read the step and zero_grad spans as torch records them: user annotations
(``Optimizer.step#AdamW.step``), in a live profile and in the shared DLRM trace alike, not only as CPU ops;
the finding names the optimizer class and the parameter tensors it walks."""

from __future__ import annotations

import os

import numpy as np
import pytest

from tests.hypotheses.builders import facts
from workbench.hypotheses.catalog import get_rule
from workbench.trace.schema import frame

DLRM = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "traces", "param_v100_dlrm_8rank")


def _annotated(outer: str, inner: list[str]) -> object:
    """An ``outer`` user annotation on thread 1 enclosing the ``inner`` CPU ops (as torch records an optimizer)."""
    n = len(inner)
    ts = 1.0 + np.arange(n) * 10.0
    ops = frame(
        "cpu_ops",
        {
            "rank": [0] * n,
            "tid": ["1"] * n,
            "name": inner,
            "ts_us": ts,
            "dur_us": np.full(n, 8.0),
            "end_us": ts + 8.0,
            "depth": [0] * n,
            "parent": [-1] * n,
        },
    )
    ann = frame(
        "annotations",
        {
            "rank": [0],
            "pid": [1],
            "tid": ["1"],
            "name": [outer],
            "kind": ["user"],
            "ts_us": [0.0],
            "dur_us": [n * 10.0 + 2.0],
            "end_us": [n * 10.0 + 2.0],
        },
    )
    return facts(cpu_ops=ops, annotations=ann)


def test_a_per_tensor_adamw_recorded_as_an_annotation_is_named_with_its_parameters():
    inner = ["aten::lerp_", "aten::mul_", "aten::addcmul_", "aten::sqrt", "aten::addcdiv_"] * 20  # 20 parameters
    found = get_rule("single_tensor_optimizer")(_annotated("Optimizer.step#AdamW.step", inner))
    assert found, "the annotated optimizer step was not judged"
    h = found[0]
    assert "AdamW" in h.title and "about 20 parameter tensors" in h.title and "100 ops per step" in h.title
    assert "foreach=True" in h.predicted_effect


def test_a_foreach_step_recorded_as_an_annotation_is_quiet():
    inner = ["aten::_foreach_lerp_", "aten::_foreach_mul_"] + ["aten::add"] * 60
    assert not get_rule("single_tensor_optimizer")(_annotated("Optimizer.step#AdamW.step", inner))


def test_zero_grad_recorded_as_an_annotation_is_judged():
    found = get_rule("zero_grad_not_none")(_annotated("Optimizer.zero_grad#SGD.zero_grad", ["aten::zero_"] * 12))
    assert found and "12 times" in found[0].title and "SGD.zero_grad" in found[0].observed


@pytest.mark.skipif(not os.path.isdir(DLRM), reason="not applicable: ../shared/traces/param_v100_dlrm_8rank absent")
def test_the_shared_dlrm_optimizer_annotation_is_judged():
    import workbench as wb

    diagnosis = wb.load_trace(DLRM, workers=1).diagnosis()
    assert "single_tensor_optimizer" not in {n.rule for n in diagnosis.not_judged}
    found = [h for h in diagnosis.hypotheses if h.rule == "single_tensor_optimizer"]
    assert found and "Adagrad" in found[0].title


def test_a_live_adamw_foreach_false_step_names_the_optimizer_loop():
    """Counts ops, not time: what the machine's load changes (the stake) is not asserted."""
    torch = pytest.importorskip("torch")
    import workbench as wb

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(6)])  # 12 parameter tensors
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    x = torch.randn(4, 16)

    def step():
        opt.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        return loss.detach()

    run = wb.profile(step, warmup=1, repeat=5, threads=1)
    found = [h for h in run.trace.hypotheses() if h.rule == "single_tensor_optimizer"]
    assert found, [n.rule + ": " + n.reason for n in run.trace.diagnosis().not_judged]
    assert "AdamW" in found[0].title and "about 12 parameter tensors" in found[0].title
