"""The machine's measured copy bandwidth: the memory roof that variants are held against.

A copy of N bytes reads N and writes N, counted like a variant's compulsory traffic (inputs read
once + outputs written once).  ``copy_gbps(total_bytes)`` copies a tensor sized so that the copy
moves ``total_bytes``: the same working set as the variant, so the same cache level serves both
(the fair roof for a variant's bandwidth share).  ``machine_copy_gbps()`` copies a large tensor
(256 MB moved): the roof for data that does not fit in the caches (on CPUs with a last-level
cache of hundreds of MB, even this copy is partly served from it).  Both are measured with the
caller's torch thread count, and cached per thread count.  On CPU the copy is timed like the
variants (``timing.CpuTimer``, run-queue wait taken out); on a GPU by ``devices.copy_bandwidth``
(the roofline's CPU ceiling uses that too, taking the best sample).
"""
from __future__ import annotations

import time
from functools import lru_cache

import numpy as np

from workbench.devices.copy_bandwidth import copy_seconds_samples, gbps

LARGE_COPY_BYTES = 256 * 2 ** 20


@lru_cache(maxsize=64)
def _copy_gbps_cached(bucket_bytes: int, device: str, repeats: int, threads: int) -> float:
    if device == "cpu":
        samples = _cpu_copy_seconds(bucket_bytes, repeats)
    else:
        samples = copy_seconds_samples(bucket_bytes, device=device, repeats=repeats)
    return gbps(bucket_bytes, float(np.median(samples)))


def _cpu_copy_seconds(moved_bytes: int, repeats: int) -> list[float]:
    """Seconds per copy, timed like the variants (``timing.CpuTimer``: run-queue wait taken
    out), so that on a loaded machine the roof and the variants are measured alike."""
    import torch

    from workbench.variants.timing import CpuTimer, Timed, calibrate

    n_floats = max(1024, moved_bytes // 2 // 4)
    src = torch.ones(n_floats, dtype=torch.float32)
    dst = torch.empty_like(src)
    timer = CpuTimer()
    item = Timed("copy", lambda: dst.copy_(src), ())
    dst.copy_(src)
    start = time.perf_counter()
    dst.copy_(src)
    calibrate(item, timer, (time.perf_counter() - start) * 1e3)    # the first guess: one copy's time
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

    return torch.get_num_threads()   # part of the cache key: the copy runs with the caller's threads
