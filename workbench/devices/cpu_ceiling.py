"""Measured CPU ceilings: copy bandwidth and fp32 matmul throughput of the machine you are on.

Opt-in because it takes seconds: ``measure_cpu_ceiling()`` runs the microbenchmarks and caches
the result on disk (``$XDG_CACHE_HOME/workbench`` or ``~/.cache/workbench``), keyed by CPU model,
thread count and torch version; ``cached_cpu_ceiling()`` reads the cache and never measures.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType
from typing import Any

from workbench.devices.copy_bandwidth import copy_seconds_samples, gbps
from workbench.devices.fingerprint import cpu_model
from workbench.errors import InvalidArgumentError

CACHE_FILE_NAME = "cpu_ceiling.json"
CACHE_FORMAT_VERSION = 1


@dataclass(frozen=True)
class CpuCeiling:
    """Best-of-N measured rates; ``copy_gbps`` counts bytes read plus bytes written."""

    cpu_model: str
    threads: int
    torch_version: str
    copy_gbps: float
    matmul_fp32_gflops: float
    copy_bytes: int
    matmul_n: int
    repeats: int
    measured_at: str

    @property
    def ridge_flops_per_byte(self) -> float:
        return self.matmul_fp32_gflops / self.copy_gbps

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CpuCeiling":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__})


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "workbench"


def _cache_key(torch: ModuleType, threads: int | None = None) -> str:
    return f"{cpu_model()}|threads={threads or torch.get_num_threads()}|torch={torch.__version__}"


def _best_seconds(fn, repeats: int) -> float:
    fn()  # warm: page faults, lazy init
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter_ns()
        fn()
        best = min(best, (time.perf_counter_ns() - start) / 1e9)
    return best


def _measure(torch: ModuleType, copy_bytes: int, matmul_n: int, repeats: int) -> tuple[float, float]:
    moved_bytes = 2 * (copy_bytes // 4) * 4  # a copy of copy_bytes reads them and writes them
    copy_gbps = gbps(moved_bytes, min(copy_seconds_samples(moved_bytes, repeats=repeats)))
    a = torch.randn(matmul_n, matmul_n, dtype=torch.float32)
    b = torch.randn(matmul_n, matmul_n, dtype=torch.float32)
    mm_s = _best_seconds(lambda: torch.mm(a, b), repeats)
    matmul_gflops = 2 * matmul_n**3 / mm_s / 1e9
    return copy_gbps, matmul_gflops


def measure_cpu_ceiling(
    *,
    copy_bytes: int = 256 * 2**20,
    matmul_n: int = 1024,
    repeats: int = 5,
    use_cache: bool = True,
    cache_path: Path | None = None,
) -> CpuCeiling:
    """Measure (or read from the cache) this CPU's copy bandwidth and fp32 matmul rate."""
    if copy_bytes < 4096 or matmul_n < 16 or repeats < 1:
        raise InvalidArgumentError(
            f"measure_cpu_ceiling needs copy_bytes >= 4096, matmul_n >= 16, repeats >= 1; got "
            f"copy_bytes={copy_bytes}, matmul_n={matmul_n}, repeats={repeats}"
        )
    import torch

    path = cache_path or cache_dir() / CACHE_FILE_NAME
    if use_cache:
        cached = cached_cpu_ceiling(cache_path=path)
        if cached is not None and (cached.copy_bytes, cached.matmul_n) == (copy_bytes, matmul_n):
            return cached
    copy_gbps, gflops = _measure(torch, copy_bytes, matmul_n, repeats)
    ceiling = CpuCeiling(
        cpu_model(),
        torch.get_num_threads(),
        torch.__version__,
        copy_gbps,
        gflops,
        copy_bytes,
        matmul_n,
        repeats,
        datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
    _write_cache(path, _cache_key(torch), ceiling)
    return ceiling


def cached_cpu_ceiling(*, threads: int | None = None, cache_path: Path | None = None) -> CpuCeiling | None:
    """The cached ceiling for this CPU, thread count (``threads``, default torch's current one) and
    torch version; None if never measured."""
    import torch

    path = cache_path or cache_dir() / CACHE_FILE_NAME
    entry = _read_cache(path).get(_cache_key(torch, threads))
    return CpuCeiling.from_dict(entry) if entry else None


def _read_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}  # no cache yet, or unreadable: it is only a cache, measure again
    if data.get("format_version") != CACHE_FORMAT_VERSION:
        return {}
    return data.get("entries", {})


def _write_cache(path: Path, key: str, ceiling: CpuCeiling) -> None:
    entries = _read_cache(path)
    entries[key] = ceiling.to_dict()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"format_version": CACHE_FORMAT_VERSION, "entries": entries}, indent=1))
    tmp.replace(path)
