"""Convolution FLOPs and bytes from shapes, counted by hand: the backward from its input shapes alone
(grad_output carries the output size), the forward where the op's stride/padding/dilation/groups were
recorded; and what a real CPU trace records for them."""

from __future__ import annotations

import json
import math

import pytest

from workbench.analysis import op_work

FWD_TYPES = ["float", "float", "float", "ScalarList", "ScalarList", "ScalarList", "Scalar"]
BWD_TYPES = ["float"] * 3 + ["ScalarList"] * 4 + ["Scalar", "ScalarList", "Scalar", "ScalarList"]
# input [2, 3, 16, 16], weight [8, 3, 3, 3], bias [8], stride 2, padding 1: output [2, 8, 8, 8]
# multiply-adds: 2 * 8 * (8 * 8) outputs x (3 * 3 * 3) products each = 27,648
MACS = 2 * 8 * 64 * 27
OUT = 2 * 8 * 8 * 8


def test_conv2d_forward_from_shapes_and_recorded_arguments():
    dims = [[2, 3, 16, 16], [8, 3, 3, 3], [8], [], [], [], []]
    flops, nbytes, reason = op_work("aten::conv2d", dims, FWD_TYPES, ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "1"])
    assert reason == ""
    assert flops == 2 * MACS + OUT  # products, sums, the bias add
    assert nbytes == 4 * (2 * 3 * 16 * 16 + 8 * 3 * 3 * 3 + 8 + OUT)  # input, weight, bias read; output written
    # mkldnn_convolution records padding before stride: the same call, the same count
    mkldnn = op_work("aten::mkldnn_convolution", dims, FWD_TYPES, ["", "", "", "[1, 1]", "[2, 2]", "[1, 1]", "1"])
    assert mkldnn == (flops, nbytes, "")
    # without the scalar arguments the output size is unknown: nothing is guessed
    f, b, r = op_work("aten::conv2d", dims, FWD_TYPES)
    assert math.isnan(f) and math.isnan(b) and "stride" in r


def test_grouped_dilated_1d_and_transposed_forward():
    # depthwise conv1d: input [4, 6, 100], weight [6, 1, 5], groups 6, dilation 2, no padding: out 100 - 8 = 92
    f, _, r = op_work(
        "aten::conv1d", [[4, 6, 100], [6, 1, 5], [], [], [], [], []], FWD_TYPES, ["", "", "", "[1]", "[0]", "[2]", "6"]
    )
    assert r == "" and f == 2 * 4 * 6 * 92 * 5
    # transposed (convolution): input [1, 4, 5, 5], weight [4, 2, 3, 3] (C_in, C_out/groups, k), stride 2:
    # out (5 - 1) * 2 + 3 = 11; each input element meets C_out x 9 weights
    f, b, r = op_work(
        "aten::convolution",
        [[1, 4, 5, 5], [4, 2, 3, 3], [], [], [], [], [], [], []],
        ["float"] * 2 + ["", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"],
        ["", "", "", "[2, 2]", "[0, 0]", "[1, 1]", "True", "[0, 0]", "1"],
    )
    assert r == "" and f == 2 * 1 * 4 * 25 * 2 * 9
    assert b == 4 * (4 * 25 + 4 * 2 * 9 + 2 * 11 * 11)
    # padding="same" keeps the spatial size
    f, _, _ = op_work(
        "aten::conv2d",
        [[1, 2, 7, 7], [3, 2, 3, 3], [], [], [], [], []],
        FWD_TYPES,
        ["", "", "", "[1, 1]", "same", "[1, 1]", "1"],
    )
    assert f == 2 * 3 * 49 * 2 * 9


def test_convolution_backward_from_shapes_is_twice_the_forward():
    dims = [[2, 8, 8, 8], [2, 3, 16, 16], [8, 3, 3, 3], [], [], [], [], [], [], [], []]
    flops, nbytes, reason = op_work("aten::convolution_backward", dims, BWD_TYPES)
    # grad_input and grad_weight each cost the forward's multiply-adds; output_mask not recorded
    assert flops == 2 * 2 * MACS and "output_mask not recorded" in reason
    grads = 2 * 3 * 16 * 16 + 8 * 3 * 3 * 3
    assert nbytes == 4 * (OUT + grads + grads)  # grad_output, input, weight read; two gradients written
    recorded = ["", "", "", "[8]", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"]
    full = op_work("aten::convolution_backward", dims, BWD_TYPES, recorded + ["[True, True, True]"])
    assert full[0] == 2 * 2 * MACS + OUT and full[2] == ""  # plus the bias gradient's sums
    first_layer = op_work("aten::convolution_backward", dims, BWD_TYPES, recorded + ["[False, True, True]"])
    assert first_layer[0] == 2 * MACS + OUT  # the input needed no gradient
    bad = op_work("aten::convolution_backward", [[2, 5, 8, 8], [2, 3, 16, 16], [8, 3, 3, 3]], BWD_TYPES)
    assert math.isnan(bad[0]) and "do not fit" in bad[2]


def test_a_real_cpu_trace_records_the_shapes_the_backward_formula_reads(tmp_path):
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    import workbench as wb

    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
    x = torch.randn(2, 3, 16, 16, requires_grad=True)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        conv(x).sum().backward()
    path = tmp_path / "conv.json"
    prof.export_chrome_trace(str(path))
    ops = wb.load_trace(path, cache=False).cpu_ops
    names = set(ops["name"].astype(str))
    assert {"aten::conv2d", "aten::mkldnn_convolution", "aten::convolution_backward"} <= names
    row = ops[ops["name"].astype(str) == "aten::convolution_backward"].iloc[0]
    assert json.loads(row["input_dims"])[:3] == [[2, 8, 8, 8], [2, 3, 16, 16], [8, 3, 3, 3]]
    flops, _, _ = op_work("aten::convolution_backward", row["input_dims"], row["input_types"])
    assert flops == 2 * 2 * MACS
