"""Environment fingerprint: what a timing depends on, as a plain JSON-able dict.

Device (CPU model, GPU names, count, memory), driver/CUDA/ROCm versions, torch and Python
versions, math-mode settings (TF32, matmul precision, determinism, cudnn benchmark), thread
counts and seeds. torch is imported lazily; without it the torch section says so.
"""

from __future__ import annotations

import os
import platform
import sys
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType
from typing import Any

_THREAD_ENV = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OMP_WAIT_POLICY",
    "CUDA_VISIBLE_DEVICES",
    "CUBLAS_WORKSPACE_CONFIG",
    "PYTORCH_CUDA_ALLOC_CONF",
)


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, ``platform`` elsewhere)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown"


def host_section() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_model": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "env": {k: os.environ[k] for k in _THREAD_ENV if k in os.environ},
    }


def nvidia_driver_version() -> str | None:
    """The NVIDIA kernel driver version from ``/proc`` (no subprocess), or None."""
    path = Path("/proc/driver/nvidia/version")
    if not path.exists():
        return None
    first = path.read_text(errors="replace").splitlines()[:1]
    for token in first[0].split() if first else []:
        if token.count(".") >= 1 and token.replace(".", "").isdigit():
            return token
    return None


def math_mode(torch: ModuleType) -> dict[str, Any]:
    """Settings that change what a matmul or convolution computes and how fast."""
    return {
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cuda_matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        "cuda_matmul_allow_fp16_reduced_precision_reduction": bool(
            torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
        ),
        "cuda_matmul_allow_bf16_reduced_precision_reduction": bool(
            torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
        ),
        "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
        "deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
        "default_dtype": str(torch.get_default_dtype()).replace("torch.", ""),
        "grad_enabled": bool(torch.is_grad_enabled()),
    }


def gpu_section(torch: ModuleType) -> dict[str, Any]:
    """GPUs torch sees; ``available: False`` with the reason where there are none."""
    if not torch.cuda.is_available():
        return {
            "available": False,
            "reason": "torch.cuda.is_available() is False "
            f"(torch built with CUDA {torch.version.cuda}, HIP {getattr(torch.version, 'hip', None)})",
        }
    devices = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        devices.append(
            {
                "index": index,
                "name": props.name,
                "total_memory_bytes": int(props.total_memory),
                "compute_capability": f"{props.major}.{props.minor}",
                "multi_processor_count": int(props.multi_processor_count),
            }
        )
    return {
        "available": True,
        "count": len(devices),
        "devices": devices,
        "current_device": torch.cuda.current_device(),
        "driver_version": nvidia_driver_version(),
    }


def torch_section() -> dict[str, Any]:
    try:
        import torch
    except ImportError as exc:  # the trace/analysis layers work without torch
        return {"available": False, "reason": f"torch not importable: {exc}"}
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {
        "available": True,
        "version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "hip_version": getattr(torch.version, "hip", None),
        "cudnn_version": cudnn,
        "debug_build": bool(torch.version.debug),
        "num_threads": torch.get_num_threads(),
        "num_interop_threads": torch.get_num_interop_threads(),
        "initial_seed": int(torch.initial_seed()),
        "math_mode": math_mode(torch),
        "gpu": gpu_section(torch),
    }


def environment_fingerprint() -> dict[str, Any]:
    """Everything a timing depends on that can be read without running anything."""
    from workbench import __version__

    return {
        "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "workbench_version": __version__,
        "host": host_section(),
        "torch": torch_section(),
        "argv0": sys.argv[0] if sys.argv else "",
    }


def device_name(env: dict[str, Any]) -> str:
    """Short device description from a fingerprint: GPU name(s) or the CPU model."""
    gpu = env.get("torch", {}).get("gpu", {})
    if gpu.get("available"):
        names = sorted({d["name"] for d in gpu["devices"]})
        return f"{gpu['count']}x {', '.join(names)}"
    return env.get("host", {}).get("cpu_model", "unknown CPU")
