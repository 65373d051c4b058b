"""The built-in demo workload on the CUDA device: ``workbench report --workload cuda_demo:workload``
(with this folder on ``PYTHONPATH``), used by the ``report`` section of ``benchmarks/gpu/run.sh``."""

from __future__ import annotations

import os
from typing import Any

from workbench.workloads import demo
from workbench.workloads.demo import workload  # noqa: F401 - the report's workload

__all__ = ["make_inputs", "workload"]


def make_inputs(seed: int = demo.SEED) -> tuple[Any, Any]:
    # WB_GPU_DEMO_DEVICE=cpu: the CPU rehearsal of benchmarks/gpu/sections.py (WB_GPU_REHEARSE=1)
    return demo.make_inputs(device=os.environ.get("WB_GPU_DEMO_DEVICE", "cuda"), seed=seed)
