"""Every name pattern the reader relies on, in one module (testable on its own).

- which table an event goes to (by phase ``ph`` and category ``cat``, 2021 names included);
- kernel type: communication / memory / computation, ours and Holistic Trace Analysis's; on a trace
  with no GPU, the same split of CPU work (gloo collectives are communication);
- copy direction and pageable/pinned memory from "Memcpy HtoD (Pageable -> Device)";
- runtime calls that launch GPU work and that synchronise the host with the device.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

# --- event kinds -------------------------------------------------------------------------
CPU_OP, PYTHON, ANNOTATION, GPU_ANNOTATION, RUNTIME, GPU, GPU_SYNC, MEMORY, FLOW, META, OTHER = range(11)

_CATEGORY_KIND = {
    ("X", "cpu_op"): CPU_OP,
    ("X", "Operator"): CPU_OP,
    ("X", "operator"): CPU_OP,
    ("X", "python_function"): PYTHON,
    ("X", "user_annotation"): ANNOTATION,
    ("X", "gpu_user_annotation"): GPU_ANNOTATION,
    ("X", "cuda_runtime"): RUNTIME,
    ("X", "cuda_driver"): RUNTIME,
    ("X", "Runtime"): RUNTIME,
    ("X", "hip_runtime"): RUNTIME,
    ("X", "kernel"): GPU,
    ("X", "Kernel"): GPU,
    ("X", "gpu_memcpy"): GPU,
    ("X", "Memcpy"): GPU,
    ("X", "gpu_memset"): GPU,
    ("X", "Memset"): GPU,
    ("X", "cuda_sync"): GPU_SYNC,
}
_FLOW_PHASES = {"s", "f", "t"}
_FLOW_CATS = {"ac2g", "async", "async_cpu_to_gpu", "fwdbwd"}


def event_kind(ph: str, cat: str, name: str) -> int:
    """Which table an event belongs to."""
    kind = _CATEGORY_KIND.get((ph, cat))
    if kind is not None:
        if kind in (CPU_OP, ANNOTATION) and name.startswith("ProfilerStep#"):
            return ANNOTATION
        return kind
    if ph in ("i", "I") and name == "[memory]":
        return MEMORY
    if ph in _FLOW_PHASES and cat in _FLOW_CATS:
        return FLOW
    if ph == "M":
        return META
    return OTHER


def step_number(name: str) -> int:
    """N of "ProfilerStep#N", else -1."""
    if name.startswith("ProfilerStep#"):
        tail = name[len("ProfilerStep#") :]
        return int(tail) if tail.isdigit() else -1
    return -1


# --- kernel types ------------------------------------------------------------------------
# Collectives that are not named nccl*Kernel (Holistic Trace Analysis counts them as computation).
COMMUNICATION_KERNEL = re.compile(
    r"nccl|rccl|ncclDevKernel"
    r"|deep_ep|deepep|internode::|intranode::|all_?to_?all"
    r"|multimem_all_reduce|one_shot_all_reduce|two_shot_all_reduce|multimem_all_gather"
    r"|cross_device_reduce|custom_all_reduce|allreduce_kernel|all_reduce_kernel"
    r"|reduce_scatter_kernel|all_gather_kernel",
    re.IGNORECASE,
)
# A launching CPU op or annotation that is a collective: the c10d dispatcher ops (``c10d::allreduce_``),
# the backends' record_function annotations (``nccl:all_reduce``, ``gloo:all_reduce``, which gloo records on
# its worker threads for the whole exchange, waits included), ProcessGroup methods, and the functional
# collectives of torch.compile / DTensor.
COLLECTIVE_OP = re.compile(
    r"^(?:c10d::|nccl:|gloo:|mpi:|ucc:|record_param_comms|c10d_functional::|_c10d_functional::"
    r"|ProcessGroup(?:Gloo|NCCL|MPI|UCC|Wrapper)?::)"
)
MEMORY_KERNEL = re.compile(r"^(?:Memcpy|Memset|dma)", re.IGNORECASE)
HTA_COMMUNICATION = re.compile(r"^nccl.*Kernel")
HTA_MEMORY = re.compile(r"^(?:Memcpy|Memset|dma)")


def kernel_kind(name: str) -> str:
    if name.startswith("Memcpy") or name.startswith("dma"):
        return "memcpy"
    if name.startswith("Memset"):
        return "memset"
    return "kernel"


def kernel_types(names: pd.Categorical, launching_ops: pd.Categorical) -> tuple[np.ndarray, np.ndarray]:
    """(ours, Holistic Trace Analysis's) kernel_type per row, as string arrays."""
    ours = _per_category(names, _ours_by_name)
    collective = _per_category(launching_ops, lambda s: "yes" if COLLECTIVE_OP.search(s) else "")
    ours = np.where((ours == "computation") & (collective == "yes"), "communication", ours)
    hta = _per_category(names, _hta_by_name)
    return ours, hta


def is_collective(name: str) -> bool:
    """A CPU op or annotation name that is a collective (``c10d::allreduce_``, ``gloo:all_reduce``)."""
    return bool(COLLECTIVE_OP.search(name))


def host_activity_types(names: pd.Categorical) -> np.ndarray:
    """Type of CPU-side work on a trace with no GPU: a collective op or annotation is "communication"
    (on gloo the exchange runs on the CPU and its worker thread's ``gloo:*`` span includes the wait for the
    peers), any other op "computation". The CPU counterpart of ``kernel_types`` for CPU-only jobs."""
    return _per_category(names, lambda s: "communication" if COLLECTIVE_OP.search(s) else "computation")


def _ours_by_name(name: str) -> str:
    if MEMORY_KERNEL.search(name):
        return "memory"
    if COMMUNICATION_KERNEL.search(name):
        return "communication"
    return "computation"


def _hta_by_name(name: str) -> str:
    if HTA_COMMUNICATION.search(name):
        return "communication"
    if HTA_MEMORY.search(name):
        return "memory"
    return "computation"


def _per_category(values: pd.Categorical, fn) -> np.ndarray:
    """Apply ``fn`` once per distinct value, not once per row."""
    values = pd.Categorical(values)
    mapped = np.array([fn(str(c)) for c in values.categories] + [fn("")], dtype=object)
    codes = values.codes.copy()
    codes[codes < 0] = len(values.categories)
    return mapped[codes].astype(str)


# --- copies --------------------------------------------------------------------------------
_COPY = re.compile(r"^Memcpy\s+(\w+)(?:\s*\((\w+)\s*->\s*(\w+)\))?")
_COPY_KINDS = {"HtoD", "DtoH", "DtoD", "HtoH", "PtoP", "DtoA", "AtoD", "AtoH", "HtoA", "AtoA"}


def copy_parts(name: str) -> tuple[str, str, str]:
    """("HtoD", "Pageable", "Device") from "Memcpy HtoD (Pageable -> Device)"; "" where unknown."""
    match = _COPY.match(name)
    if not match:
        return "", "", ""
    kind = match.group(1)
    return (kind if kind in _COPY_KINDS else kind), match.group(2) or "", match.group(3) or ""


# --- runtime calls -------------------------------------------------------------------------
LAUNCH_CALLS = frozenset(
    {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaLaunchCooperativeKernel",
        "cudaLaunchCooperativeKernelMultiDevice",
        "cudaMemcpyAsync",
        "cudaMemsetAsync",
        "cudaMemcpy",
        "cudaMemset",
        "cudaMemcpy2DAsync",
        "cudaMemcpyPeerAsync",
        "cudaGraphLaunch",
        "cuLaunchKernel",
        "cuLaunchKernelEx",
        "cuLaunchCooperativeKernel",
        "cuGraphLaunch",
        "cuMemcpyAsync",
        "cuMemcpyHtoDAsync_v2",
        "cuMemcpyDtoHAsync_v2",
        "cuMemsetD8Async",
        "cuMemsetD32Async",
        "hipLaunchKernel",
        "hipExtLaunchKernel",
        "hipExtModuleLaunchKernel",
        "hipModuleLaunchKernel",
        "hipLaunchCooperativeKernel",
        "hipMemcpyAsync",
        "hipMemsetAsync",
        "hipMemcpy",
        "hipMemset",
        "hipMemcpyWithStream",
        "hipGraphLaunch",
        "hipMemcpyHtoDAsync",
        "hipMemcpyDtoHAsync",
        "hipMemsetD8Async",
        "hipMemsetD32Async",
    }
)
# Holistic Trace Analysis's launch statistics use only these.
HTA_LAUNCH_CALLS = frozenset({"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync"})
SYNC_CALLS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "cudaStreamWaitEvent",
        "cuCtxSynchronize",
        "cuStreamSynchronize",
        "cuEventSynchronize",
        "cudaMemcpy",
        "hipDeviceSynchronize",
        "hipStreamSynchronize",
        "hipEventSynchronize",
        "hipStreamWaitEvent",
        "hipMemcpy",
    }
)


def runtime_api(name: str) -> str:
    if name.startswith("hip"):
        return "hip"
    if name.startswith("cuda"):
        return "cuda_runtime"
    if name.startswith("cu"):
        return "cuda_driver"
    return "other"
