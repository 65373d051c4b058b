"""Picklable rank functions for wb.profile_distributed (spawned ranks import them from here)."""

from __future__ import annotations

import os
import time

STRAGGLER_RANK = 1
EXTRA_WORK_S = 0.030  # Python work the straggler does before each all-reduce: large against the noise
STEPS = 6


def busy(seconds: float) -> None:
    """Pure Python work (no PyTorch op): the rank reaches its collective late."""
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1


def straggler_job(steps: int = STEPS, slow_rank: int = STRAGGLER_RANK, extra_s: float = EXTRA_WORK_S) -> None:
    import torch
    import torch.distributed as dist

    import workbench.api.distributed as wd

    t = torch.ones(256)
    for _ in range(steps):
        if dist.get_rank() == slow_rank:
            busy(extra_s)
        t.add_(1.0)
        dist.all_reduce(t)
        wd.step()


def crash_on_rank_1() -> None:
    import torch
    import torch.distributed as dist

    t = torch.ones(4)
    dist.all_reduce(t)
    if dist.get_rank() == 1:
        raise RuntimeError("planted failure on rank 1")
    t.add_(1.0)


def hang_on_rank_1() -> None:
    import torch
    import torch.distributed as dist

    t = torch.ones(4)
    dist.all_reduce(t)
    if dist.get_rank() == 1:
        time.sleep(3600)
    t.add_(1.0)


def pid() -> int:
    return os.getpid()
