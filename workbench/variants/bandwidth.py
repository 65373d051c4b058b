"""The machine's measured copy bandwidth: the memory roof that variants are held against.

A copy of N bytes reads N and writes N, counted like a variant's compulsory traffic (inputs read
once + outputs written once).  ``copy_gbps(total_bytes)`` copies a tensor sized so that the copy
moves ``total_bytes``: the same working set as the variant, so the same cache level serves both
(the fair roof for a variant's bandwidth share).  ``machine_copy_gbps()`` copies a large tensor
(256 MB moved): the roof for data that does not fit in the caches (on CPUs with a last-level
cache of hundreds of MB, even this copy is partly served from it).  Both are measured with the
caller's torch thread count, and cached per thread count.
"""
from __future__ import annotations

import time
from functools import lru_cache

import numpy as np

_ns = time.perf_counter_ns
LARGE_COPY_BYTES = 256 * 2 ** 20


@lru_cache(maxsize=64)
def _copy_gbps_cached(bucket_bytes: int, device: str, repeats: int, threads: int) -> float:
    import torch

    n = max(1024, bucket_bytes // 2 // 4)        # float32 elements per side
    src = torch.ones(n, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    dst.copy_(src)
    sync()
    reps = max(1, min(200, int(2e8 // (8 * n))))   # each sample moves ~200 MB or 1 copy
    samples = []
    for _ in range(repeats):
        start = _ns()
        for _ in range(reps):
            dst.copy_(src)
        sync()
        samples.append((_ns() - start) / reps)
    return 2 * n * 4 / (float(np.median(samples)) * 1e-9) / 1e9


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
