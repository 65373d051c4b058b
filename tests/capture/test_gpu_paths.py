"""CUDA timing and tracing: real code paths, run only where a GPU is present."""

from __future__ import annotations

import pytest
import torch

import workbench as wb

pytestmark = pytest.mark.gpu
needs_gpu = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="not applicable: no CUDA device (torch.cuda.is_available() is False)"
)


@needs_gpu
def test_cuda_events_time_device_work_and_trace_has_kernels():
    x = torch.randn(2048, 2048, device="cuda")
    run = wb.profile(lambda: x @ x, warmup=2, repeat=5)
    assert run.timing.timer == "cuda_event" and run.device.startswith("cuda:")
    assert run.timing.median_ms > 0
    assert run.memory["peak_allocated_bytes"] >= x.numel() * 4
    assert run.trace is not None and run.trace.has_gpu and len(run.trace.kernels) >= 5


@needs_gpu
def test_cuda_timer_waits_for_queued_work():
    x = torch.randn(4096, 4096, device="cuda")
    host = wb.profile(lambda: x @ x, warmup=1, repeat=3, trace=False, device="cpu")
    dev = wb.profile(lambda: x @ x, warmup=1, repeat=3, trace=False, device="cuda")
    # the host timer sees only the launch; CUDA events see the matmul itself
    assert dev.timing.median_ms > host.timing.median_ms
