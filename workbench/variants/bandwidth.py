"""The machine's measured copy bandwidth: the memory roof that variants are held against.

A copy of N bytes reads N and writes N, counted like a variant's compulsory traffic (inputs read
once + outputs written once).  ``copy_gbps(total_bytes)`` copies a tensor sized so that the copy
moves ``total_bytes``: the same working set as the variant, so the same cache level serves both
(the fair roof for a variant's bandwidth share).  ``machine_copy_gbps()`` copies a large tensor
(256 MB moved): the roof for data that does not fit in the caches (on CPUs with a last-level
cache of hundreds of MB, even this copy is partly served from it).  Both are measured with the
caller's torch thread count, and cached per thread count.  The copy is timed like the variants,
by the variants' own timer (``timing.pick_timer``): on CPU ``CpuTimer`` (run-queue wait taken
out), on a GPU ``CudaTimer`` (CUDA events after an L2 flush), so that the roof and the variants
are measured alike. (The roofline's ceilings are the devices layer's own measurement.)
"""

from __future__ import annotations

import time
from functools import lru_cache

import numpy as np

LARGE_COPY_BYTES = 256 * 2**20
BYTES_PER_GB = 1e9
MIN_COPY_BYTES = 2 * 1024 * 4  # the copied tensor is at least 1024 floats, read and written


def gbps(moved_bytes: int, seconds: float) -> float:
    """GB/s (10^9 bytes per second) of ``moved_bytes`` in ``seconds``; tiny requests are counted at
    the size actually copied (``MIN_COPY_BYTES``)."""
    return max(moved_bytes, MIN_COPY_BYTES) / seconds / BYTES_PER_GB if seconds > 0 else float("inf")


@lru_cache(maxsize=64)
def _copy_gbps_cached(bucket_bytes: int, device: str, repeats: int, threads: int) -> float:
    return gbps(bucket_bytes, float(np.median(_copy_seconds(bucket_bytes, repeats, device))))


def _copy_seconds(moved_bytes: int, repeats: int, device: str) -> list[float]:
    """Seconds per copy of a float32 tensor moving ``moved_bytes`` (read + write) on ``device``,
    timed like the variants (``timing.pick_timer``: calibrated calls per sample on CPU)."""
    import torch

    from workbench.variants.timing import Timed, calibrate, pick_timer

    on_cuda = str(device).startswith("cuda")
    n_floats = max(1024, moved_bytes // 2 // 4)
    src = torch.ones(n_floats, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    timer = pick_timer(on_cuda)
    item = Timed("copy", lambda: dst.copy_(src), ())
    dst.copy_(src)
    if on_cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    dst.copy_(src)
    if on_cuda:
        torch.cuda.synchronize()
    calibrate(item, timer, (time.perf_counter() - start) * 1e3)  # the first guess: one copy's time
    return [timer.sample_ms(item) / 1e3 for _ in range(repeats)]


def copy_gbps(total_bytes: int, device: str = "cpu", repeats: int = 7) -> float:
    """Measured GB/s of a copy moving ``total_bytes`` (rounded up to a power of two, cached)."""
    bucket = 1 << max(12, int(total_bytes - 1).bit_length())
    return _copy_gbps_cached(bucket, device, repeats, _threads())


def machine_copy_gbps(device: str = "cpu") -> float:
    """Measured GB/s of a large copy (256 MB moved): the DRAM bandwidth roof."""
    return _copy_gbps_cached(LARGE_COPY_BYTES, device, 7, _threads())


def _threads() -> int:
    import torch

    return torch.get_num_threads()  # part of the cache key: the copy runs with the caller's threads
