"""Name patterns: kernel types (beyond HTA's nccl*Kernel), copies, runtime calls, event kinds."""

from __future__ import annotations

import pandas as pd
import pytest

import workbench.trace.classify as classify


@pytest.mark.parametrize(
    "name",
    [
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
        "rcclGenericKernel<1, false>",
        "void deep_ep::intranode::dispatch<8, 768>(int4*, float*)",
        "void deep_ep::internode::combine<true>(...)",
        "multimem_all_reduce_kernel<bf16>",
        "void c10d::symmetric_memory::one_shot_all_reduce_kernel<float, 8>(...)",
        "two_shot_all_reduce_kernel_inplace",
        "void vllm::cross_device_reduce_1stage<half, 8>(...)",
        "void sglang::custom_all_reduce<float>(...)",
        "all_to_all_kernel",
    ],
)
def test_communication_kernels(name):
    ours, hta = classify.kernel_types(pd.Categorical([name]), pd.Categorical([""]))
    assert ours[0] == "communication"


def test_hta_only_knows_nccl_kernel_names():
    ours, hta = classify.kernel_types(
        pd.Categorical(["multimem_all_reduce_kernel", "ncclKernel_x", "Memcpy DtoD (Device -> Device)"]),
        pd.Categorical(["", "", ""]),
    )
    assert list(hta) == ["computation", "communication", "memory"]
    assert list(ours) == ["communication", "communication", "memory"]


def test_kernel_launched_by_a_collective_op_is_communication():
    ours, _ = classify.kernel_types(
        pd.Categorical(["my_reduce_kernel", "my_reduce_kernel"]), pd.Categorical(["c10d::allreduce_", "aten::add"])
    )
    assert list(ours) == ["communication", "computation"]


@pytest.mark.parametrize("name", ["void gemm_kernel<float>", "elementwise_kernel", "Memset (Device)"])
def test_not_communication(name):
    ours, _ = classify.kernel_types(pd.Categorical([name]), pd.Categorical([""]))
    assert ours[0] != "communication"


def test_copy_parts_and_kinds():
    assert classify.copy_parts("Memcpy HtoD (Pageable -> Device)") == ("HtoD", "Pageable", "Device")
    assert classify.copy_parts("Memcpy DtoH (Device -> Pinned)") == ("DtoH", "Device", "Pinned")
    assert classify.copy_parts("Memset (Device)") == ("", "", "")
    assert [classify.kernel_kind(n) for n in ("Memcpy DtoD", "Memset (Device)", "sgemm")] == [
        "memcpy",
        "memset",
        "kernel",
    ]


def test_runtime_names():
    assert {"cudaGraphLaunch", "cuLaunchKernel", "hipExtModuleLaunchKernel"} <= classify.LAUNCH_CALLS
    assert "cudaGraphLaunch" not in classify.HTA_LAUNCH_CALLS
    assert {"cudaStreamSynchronize", "hipDeviceSynchronize", "cudaEventSynchronize"} <= classify.SYNC_CALLS
    assert [classify.runtime_api(n) for n in ("hipLaunchKernel", "cudaLaunchKernel", "cuLaunchKernel")] == [
        "hip",
        "cuda_runtime",
        "cuda_driver",
    ]


def test_event_kinds_old_and_new():
    assert classify.event_kind("X", "Operator", "aten::mm") == classify.CPU_OP
    assert classify.event_kind("X", "Operator", "ProfilerStep#3") == classify.ANNOTATION
    assert classify.event_kind("X", "Runtime", "cudaLaunchKernel") == classify.RUNTIME
    assert classify.event_kind("i", "cpu_instant_event", "[memory]") == classify.MEMORY
    assert classify.event_kind("s", "ac2g", "ac2g") == classify.FLOW
    assert classify.step_number("ProfilerStep#12") == 12 and classify.step_number("train") == -1
