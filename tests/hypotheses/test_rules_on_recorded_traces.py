"""Rules that the shared GPU traces never trigger, on CPU traces the code itself records.

These profile live, but judge only the trace's structure, which load does not change: which ops
follow which (a convolution with a bias before a batch norm; a loop body repeating), with stakes from
the ops' shapes (the bias pass at the ceiling's bandwidth) or from gaps inside the repeats, which a
busy machine only lengthens. Only the trace rules are run (``diagnose(run.trace)``): no timing caveat
can outrank them. Checked passing with two CPU hogs beside them (load average 6-8 on 2 cores)."""

import numpy as np
import pytest
import torch

import workbench as wb
from workbench.hypotheses import diagnose
from workbench.hypotheses.rules.sequences import best_sequence, primitive_period

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _rules(run):
    return {h.rule: h for h in diagnose(run.trace).hypotheses}


def test_conv_with_bias_before_batch_norm_is_found_and_not_without_bias():
    x = torch.randn(2, 3, 32, 32)
    found = {}
    for bias in (True, False):
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, bias=bias), torch.nn.BatchNorm2d(16)).eval()
        with torch.no_grad():
            found[bias] = _rules(wb.profile(model, x, warmup=1, repeat=3))
    assert "conv_bias_before_batch_norm" in found[True]
    assert "conv_bias_before_batch_norm" not in found[False]


def test_a_loop_body_repeating_is_reported_as_the_body_with_all_its_repeats():
    def loop(t):
        for _ in range(30):
            t = torch.relu(t * 1.01 + 0.1)
        return t

    h = _rules(wb.profile(loop, torch.randn(64), warmup=1, repeat=3))["frequent_sequences"]
    assert h.title.startswith("A sequence of 3 ops repeats")
    repeats = int(h.title.split("repeats ")[1].split()[0])
    assert repeats >= 30 and repeats % 30 == 0  # every iteration of every profiled call
    assert "aten::mul -> aten::add -> aten::relu" in h.observed


def test_primitive_period_and_the_body_of_a_repeated_pattern():
    assert primitive_period(np.array([1, 2, 3, 1, 2, 3])) == 3
    assert primitive_period(np.array([1, 2, 1, 3])) == 4
    names = np.array(["a", "b", "c"] * 20 + ["x", "y"])
    starts, n = best_sequence(names, 3, 10, 5)
    assert n == 3 and len(starts) == 20 and list(starts[:2]) == [0, 3]
