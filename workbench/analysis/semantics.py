"""Counting rules: workbench's own, and Holistic Trace Analysis's where a parity check needs them.

``Semantics`` names each place where HTA 0.5 counts differently (see the README of the shared traces):
its sub-microsecond rounding, its dropping of the last ProfilerStep, its narrow kernel classification
and its short list of launch APIs. ``"workbench"`` is right by default; ``"hta"`` and ``"hta_noround"``
reproduce HTA's numbers on the same trace.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from workbench.errors import InvalidArgumentError

# HTA's classification (hta.utils.utils.get_kernel_type)
HTA_COMM_PATTERN = re.compile(r"^nccl.*Kernel")
HTA_MEMORY_PATTERN = re.compile(r"^Memcpy|^Memset|^dma")

# Collectives HTA misses: RCCL, DeepEP dispatch/combine, symmetric-memory and custom all-reduce kernels,
# MSCCL/NVSHMEM collectives. Matched anywhere in the (demangled) kernel name, case-insensitively.
COMM_PATTERN = re.compile(
    r"^(nccl|rccl)|ncclDevKernel|ncclKernel|deep_ep::|\bmultimem_|all_?reduce|all_?gather|reduce_?scatter"
    r"|all_?to_?all|cross_device_reduce|msccl|nvshmem|\bp2p_(send|recv)",
    re.IGNORECASE,
)
MEMORY_PATTERN = HTA_MEMORY_PATTERN

# Launch APIs HTA joins to GPU work (everything else is missing from its launch statistics)
HTA_LAUNCH_APIS = frozenset({"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync"})


@dataclass(frozen=True)
class Semantics:
    name: str = "workbench"
    round_sub_us: bool = False  # ts = ceil(ts), end = floor(ts + dur), on absolute timestamps
    drop_last_step: bool = False  # keep CPU work starting before the last ProfilerStep, GPU work it launched
    hta_kernel_types: bool = False  # communication only if named ^nccl.*Kernel
    hta_launch_apis: bool = False  # launch statistics only for HTA_LAUNCH_APIS
    hta_idle_gaps: bool = False  # gap to the previous kernel's end (not the furthest end), negatives kept
    hta_int_segments: bool = False  # kernel-type segment lengths truncated to whole µs (HTA's astype(int))
    hta_float_times: bool = False  # absolute timestamps held as float64 µs (~0.25 µs apart at 1.7e15)
    hta_merge: bool = False  # temporal unions by HTA's merge (a lone negative-length event counts)


WORKBENCH = Semantics()
HTA = Semantics("hta", True, True, True, True, True, True, True, True)
HTA_NOROUND = Semantics("hta_noround", False, True, True, True, True, True, True, True)
_NAMED = {s.name: s for s in (WORKBENCH, HTA, HTA_NOROUND)}


def resolve(semantics: "Semantics | str") -> Semantics:
    if isinstance(semantics, Semantics):
        return semantics
    try:
        return _NAMED[semantics]
    except KeyError:
        raise InvalidArgumentError(
            f"unknown semantics {semantics!r}; use one of {sorted(_NAMED)} or a Semantics(...) instance"
        ) from None


def kernel_type_of(name: str, kind: str, semantics: Semantics) -> str:
    """``computation`` / ``communication`` / ``memory`` for one GPU activity name."""
    if kind in ("memcpy", "memset") or MEMORY_PATTERN.search(name):
        return "memory"
    pattern = HTA_COMM_PATTERN if semantics.hta_kernel_types else COMM_PATTERN
    return "communication" if pattern.search(name) else "computation"
