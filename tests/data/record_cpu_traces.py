"""Record the CPU-only fixture traces with torch.profiler (run again to refresh them).

.venv/bin/python tests/data/record_cpu_traces.py
"""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

HERE = Path(__file__).resolve().parent / "cpu"


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 16))


def record_steps(path: Path) -> None:
    """Three ProfilerStep# steps of a small MLP, with shapes and memory events."""
    model, x = _model(), torch.randn(32, 64)
    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        profile_memory=True,
        schedule=schedule(wait=0, warmup=1, active=3, repeat=1),
        on_trace_ready=lambda p: _export(p, path),
    ) as prof:
        for _ in range(4):
            with record_function("train_step"):
                loss = model(x).square().mean()
                loss.backward()
            prof.step()


def record_plain(path: Path) -> None:
    """No schedule, no steps: one user range around two forward passes."""
    model, x = _model(), torch.randn(8, 64)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        with record_function("forward_twice"):
            model(x)
            model(x)
    _export(prof, path)


def _export(prof, path: Path) -> None:
    raw = path.with_suffix("")
    prof.export_chrome_trace(str(raw))
    with open(raw, "rb") as src, gzip.open(path, "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    os.remove(raw)


if __name__ == "__main__":
    torch.set_num_threads(1)
    HERE.mkdir(exist_ok=True)
    record_steps(HERE / "cpu_mlp_steps_memory.json.gz")
    record_plain(HERE / "cpu_mlp_plain.json.gz")
