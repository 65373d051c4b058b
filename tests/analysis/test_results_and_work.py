"""Round trips of every result, the work formulas, and where we are right and HTA is not."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import workbench.analysis as analysis
from tests.analysis.conftest import load_set
from workbench.analysis.intervals import coverage_by_mask, union_length, union_length_by
from workbench.analysis.work import op_work

FUNCS = [
    "op_breakdown",
    "kernel_breakdown",
    "temporal_breakdown",
    "idle_breakdown",
    "launch_stats",
    "comm_overlap",
    "copy_stats",
    "sync_audit",
    "stragglers",
    "step_breakdown",
    "analytic_work",
]


def test_union_merges_overlaps_and_groups():
    assert union_length(np.array([0, 5, 1, 20.0]), np.array([2, 10, 3, 25.0])) == 3 + 5 + 5
    assert union_length_by(np.array([1, 1, 2]), np.array([0, 1, 0.0]), np.array([2, 3, 1.0])) == {1: 3.0, 2: 1.0}
    cover = coverage_by_mask([(np.array([0.0]), np.array([10.0])), (np.array([5.0]), np.array([15.0]))])
    assert cover == {1: 5.0, 3: 5.0, 2: 5.0}


@pytest.mark.parametrize("func", FUNCS)
def test_results_round_trip_through_json(func):
    trace = load_set("param_v100_dlrm_8rank")
    result = getattr(analysis, func)(trace)
    again = type(result).from_dict(json.loads(json.dumps(result.to_dict())))
    assert again == result
    assert len(result.table) > 0


def test_hip_launches_are_counted_where_hta_has_none():
    # HTA's cuda_kernel_launch_stats.csv for this MI300X trace is empty (header only)
    stats = analysis.launch_stats(load_set("tracelens_mi300x_sglang_prefilldecode"))
    assert {"hipLaunchKernel", "hipExtModuleLaunchKernel"} <= set(stats.by_api["api"])
    assert stats.n_launches > 500
    assert len(analysis.launch_stats(load_set("tracelens_mi300x_sglang_prefilldecode"), "hta").table) == 0


def test_graph_launches_carry_all_their_kernels():
    # HTA leaves out cudaGraphLaunch; one graph launch here runs many kernels under one correlation
    t = analysis.launch_stats(load_set("hta_a100_torchrec_cudagraph_16rank_r0")).table
    graphs = t[t["api"] == "cudaGraphLaunch"]
    assert len(graphs) == 70 and graphs["n_gpu_events"].max() > 1 and graphs["gpu_us"].gt(0).all()


def test_work_formulas():
    assert op_work("aten::mm", "[[64, 32], [32, 16]]", '["float", "float"]')[:2] == (
        2 * 64 * 32 * 16,
        4 * (64 * 32 + 32 * 16 + 64 * 16),
    )
    f, b, r = op_work("aten::linear", [[8, 32], [16, 32], [16]], ["c10::BFloat16"] * 3)
    assert f == 2 * 8 * 32 * 16 + 8 * 16 and r == ""
    f, _, _ = op_work("aten::add", [[4, 1], [1, 5]], ["float", "float"])
    assert f == 20
    f, b, r = op_work("aten::conv2d", [[1, 3, 8, 8], [4, 3, 3, 3]], ["float", "float"])
    assert math.isnan(f) and "stride" in r
    f, _, r = op_work("aten::frobnicate", [[2]], ["float"])
    assert math.isnan(f) and "no work formula" in r


def test_fills_in_place_and_out_ops_count_what_they_move():
    # a fill writes its tensor once and reads nothing: no FLOPs, one pass of bytes
    assert op_work("aten::fill_", [[1024], []], ["float", "Scalar"])[:2] == (0.0, 4 * 1024)
    assert op_work("aten::zero_", [[1024]], ["float"])[:2] == (0.0, 4 * 1024)
    # in place: reads self and other, writes self back
    assert op_work("aten::add_", [[256], [256]], ["float", "float"])[:2] == (256.0, 4 * 3 * 256)
    # an out= buffer past the op's arity is written, not read
    assert op_work("aten::add", [[256], [256], [], [256]], ["float", "float", "Scalar", "float"])[:2] == (
        256.0,
        4 * 3 * 256,
    )
    assert op_work("aten::relu", [[64], [64]], ["float", "float"])[:2] == (64.0, 4 * 2 * 64)
    # a ternary op reads its three tensors
    assert op_work("aten::addcmul", [[8], [8], [8]], ["float"] * 3)[:2] == (8.0, 4 * 4 * 8)


def test_analysis_does_not_import_torch_ipython_or_altair():
    code = "import sys, workbench.analysis; print([m for m in ('torch', 'IPython', 'altair') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
