"""``wb.compare(..., memory_budget=BYTES)``: each variant's peak memory beside its time; a faster variant over
the budget is ``keep_guarded`` with the reason."""

from __future__ import annotations

import torch

import workbench as wb

N = 1 << 18  # floats: 1 MiB


def many_small_ops(x):
    y = x.clone()
    for _ in range(60):
        y.add_(1.0)
    return y


def one_op_and_a_copy(x):
    y = x + 60.0
    z = torch.empty_like(x)  # a second buffer live with y: the peak doubles
    z.copy_(y)
    return z


def test_a_faster_variant_that_doubles_the_peak_is_guarded_under_a_budget():
    cmp = wb.compare(
        {"eager": many_small_ops, "fused": one_op_and_a_copy},
        inputs=lambda: (torch.randn(N),),
        checks=2,
        budget_s=0.5,
        min_rounds=8,
        max_rounds=40,
        memory_budget=int(1.5 * 4 * N),
    )
    table = cmp.table.set_index("variant")
    import pytest

    assert table.loc["eager", "peak_memory_bytes"] == pytest.approx(4 * N, rel=1e-3)  # + a few scalars
    assert table.loc["fused", "peak_memory_bytes"] == pytest.approx(8 * N, rel=1e-3)
    assert table.loc["fused", "peak_memory_ratio"] == pytest.approx(2.0, rel=1e-3)
    fused = cmp["fused"]
    if fused.speedup is not None and fused.speedup.faster:
        assert fused.decision == "keep_guarded"
        assert "memory budget" in fused.decision_reason and "2.00x" in fused.decision_reason
        if cmp.decision.variant == "fused":
            assert cmp.decision.decision == "keep_guarded" and "peak memory" in cmp.decision.guard


def test_memory_budget_must_be_bytes():
    import pytest

    with pytest.raises(wb.errors.InvalidArgumentError, match="memory_budget"):
        wb.compare({"eager": many_small_ops}, inputs=lambda: (torch.randn(8),), memory_budget=-1)
