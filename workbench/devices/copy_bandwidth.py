"""One way to measure copy bandwidth, shared by the roofline's CPU ceiling and the variants' roof.

A copy of a ``float32`` tensor reads and writes it: ``moved_bytes`` counts both. Each sample times
``reps`` back-to-back copies (enough that a sample moves about ``SAMPLE_BYTES``, so small copies
are not lost in the timer's resolution) after one warm copy (page faults, lazy init); a CUDA
device is synchronized before the clock stops. Callers choose the statistic: the best sample for
a peak (``devices.cpu_ceiling``), the median for a typical rate (``variants.bandwidth``).
"""

from __future__ import annotations

import time

from workbench.errors import InvalidArgumentError

SAMPLE_BYTES = 2e8
MAX_REPS = 200


def copy_seconds_samples(moved_bytes: int, *, device: str = "cpu", repeats: int = 7) -> list[float]:
    """Seconds per copy, one value per sample, for a copy moving ``moved_bytes`` (read + write)."""
    if moved_bytes < 8 or repeats < 1:
        raise InvalidArgumentError(
            f"a copy-bandwidth measurement needs moved_bytes >= 8 and repeats >= 1; got "
            f"moved_bytes={moved_bytes}, repeats={repeats}"
        )
    import torch

    n_floats = max(1024, moved_bytes // 2 // 4)
    src = torch.ones(n_floats, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    sync = torch.cuda.synchronize if str(device).startswith("cuda") else (lambda: None)
    dst.copy_(src)
    sync()
    reps = max(1, min(MAX_REPS, int(SAMPLE_BYTES // (8 * n_floats))))
    samples = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        for _ in range(reps):
            dst.copy_(src)
        sync()
        samples.append((time.perf_counter_ns() - start) / reps / 1e9)
    return samples


def gbps(moved_bytes: int, seconds: float) -> float:
    """GB/s (10^9 bytes per second) of ``moved_bytes`` in ``seconds``; the copy's tensor is at
    least 1024 floats, so tiny requests are counted at that size."""
    return max(moved_bytes, 2 * 1024 * 4) / seconds / 1e9
