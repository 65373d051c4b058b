import pytest
import torch

import workbench as wb
from tests.variants.variant_workloads import FAST, chain
from workbench.errors import InvalidArgumentError


def _twice(x):  # the baseline does the work three times: the candidate is faster
    chain(x)
    chain(x)
    return chain(x)


def _wrong_when_small(x):  # fast, but wrong below 32 elements
    y = chain(x)
    return y + 1 if x.shape[0] < 32 else y


def test_sweep_shapes_cover_small_target_large_and_awkward():
    shapes = wb.variants.sweep_shapes(4096)
    assert (1,) in shapes and (17,) in shapes and (4096,) in shapes and (4097,) in shapes
    assert (16384,) in shapes and (1000,) in shapes
    assert wb.variants.sweep_shapes((300, 64))[0] == (1, 64)
    with pytest.raises(InvalidArgumentError):
        wb.variants.sweep_shapes(0)


def test_failing_shapes_become_the_guard_and_failure_cases():
    sweep = wb.variants.ShapeSweep(
        lambda shape, dtype: (torch.randn(shape, dtype=dtype),), shapes=((1,), (17,), (50_000,)), budget_s=0.3
    )
    cmp = wb.compare(
        {"eager": _twice, "candidate": _wrong_when_small},
        inputs=lambda: torch.randn(50_000),
        sweep=sweep,
        **{**FAST, "min_rounds": 15, "budget_s": 1.0},
    )
    row = cmp["candidate"]
    assert [e["case"] for e in row.sweep] == ["(1,) float32", "(17,) float32", "(50000,) float32"]
    assert [e["ok"] for e in row.sweep] == [False, False, True]
    assert len(row.failure_cases) == 2 and "outside tolerance" in row.failure_cases[0]
    assert row.decision == "keep_guarded"
    rec = cmp.decision
    assert rec.decision == "keep_guarded" and rec.failure_cases == row.failure_cases
    assert "(50000,) float32" in rec.guard
    md = wb.render.markdown(rec)
    assert "#### Failure cases" in md and "(1,) float32" in md


def test_sweep_needs_a_shape_sweep():
    with pytest.raises(InvalidArgumentError, match="ShapeSweep"):
        wb.compare(
            {"eager": chain, "b": lambda x: chain(x)}, inputs=lambda: torch.randn(64), sweep={"shapes": [1]}, **FAST
        )
