"""A kernel's precision and alignment read from its own name (types, accumulator, tensor cores), and from
the dtype of the op that launched it when the name states none."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from workbench.analysis.kernel_precision import (
    BF16,
    FP16,
    FP32,
    TF32,
    kernel_alignment,
    kernel_precision,
    kernel_precisions,
    op_dtype,
)
from workbench.trace.schema import frame

NAMES = {
    # real names from the shared traces (H100 bert, A100 alexnet / DDP / torchrec, V100 resnet)
    "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, "
    "cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false>"
    "(pytorch_flash::Flash_fwd_params)": (BF16, None),
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas": (
        BF16,
        FP32,
    ),
    "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>"
    "(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8::Params)": (BF16, FP32),
    "ampere_sgemm_32x32_sliced1x4_tn": (FP32, FP32),
    "cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1": (FP32, FP32),
    "void cutlass::Kernel<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>": (FP32, FP32),
    "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_warpsize2x2x1_"
    "g1_tensor16x8x8_alignc4_execute_kernel_cudnn": (TF32, FP32),
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nt_align4>": (TF32, FP32),
    "void cutlass_cudnn_infer::Kernel<cutlass_tensorop_s1688dgrad_optimized_tf32_64x256_32x4_nhwc_align4>": (
        TF32,
        FP32,
    ),
    "sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x32": (FP16, FP32),
    "volta_h884gemm_64x64_nn": (FP16, None),
    "void at::native::vectorized_layer_norm_kernel<c10::BFloat16, float>(int)": (BF16, None),
}


@pytest.mark.parametrize("name", sorted(NAMES))
def test_precision_from_the_kernel_name(name):
    inputs, acc = NAMES[name]
    p = kernel_precision(name)
    assert p.inputs == inputs
    if acc:
        assert p.accumulator == acc


def test_f32_after_a_lower_input_type_is_the_accumulator_not_the_precision():
    p = kernel_precision("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64")
    assert (p.inputs, p.accumulator, p.tensor_cores) == (BF16, FP32, True)
    assert kernel_precision("cutlass::bfloat16_t kernel").inputs == BF16  # "bfloat16" is not "float"


def test_names_that_state_no_type_say_none():
    for name in ("void elementwise_kernel", "nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NNN", "Cijk_Alik_Bljk_MT128x128x64"):
        assert kernel_precision(name).inputs is None


def test_alignment_from_the_name():
    assert kernel_alignment("cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_64x3_tn_align2") == 2
    assert kernel_alignment("cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8") == 8
    assert kernel_alignment("ampere_sgemm_128x64_nn") is None


def test_op_dtype():
    assert op_dtype('["c10::BFloat16","c10::BFloat16","Scalar"]') == BF16
    assert op_dtype('["float","float"]') == FP32
    assert op_dtype('["Scalar","",""]') is None


def test_kernel_precisions_fall_back_to_the_launching_op_then_to_unknown():
    ops = frame(
        "cpu_ops",
        {
            "rank": [0, 0, 0],
            "tid": ["1"] * 3,
            "name": ["aten::linear", "aten::addmm", "aten::mm"],
            "ts_us": [0.0, 1.0, 10.0],
            "dur_us": [9.0, 5.0, 5.0],
            "end_us": [9.0, 6.0, 15.0],
            "depth": [0, 1, 0],
            "parent": [-1, 0, -1],
            "input_types": ['["c10::Half","c10::Half"]', '["Scalar"]', "[]"],
        },
    )
    k = frame(
        "kernels",
        {
            "rank": [0, 0, 0],
            "stream": [7] * 3,
            "kind": ["kernel"] * 3,
            "kernel_type": ["computation"] * 3,
            "name": ["nvjet_kernel_a", "ampere_sgemm_64x64_nn", "nvjet_kernel_b"],
            "ts_us": [2.0, 4.0, 11.0],
            "dur_us": [1.0] * 3,
            "end_us": [3.0, 5.0, 12.0],
            "correlation": [1, 2, 3],
            "op_index": [1, 1, 2],
        },
    )
    out = kernel_precisions(k, ops)
    assert list(out["precision"]) == [FP16, FP32, ""]
    assert list(out["precision_from"]) == ["op dtype", "kernel name", ""]
