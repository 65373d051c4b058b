"""Suite-wide guard: one test's leaked global state must not cascade into the next.

Tests that check restoration (variants, magics) assert it themselves; this fixture only
contains the damage when such a test fails, so that one failure stays one failure (a timer
left patched would otherwise hang every later timing loop until its timeout).
"""

from __future__ import annotations

import os
import sys
import time

import pytest

# A report made in-process (module fixtures included) would pin this process's malloc for good
# (workbench.capture.allocator): the suite keeps a plain process's allocator, in every process it
# starts too; the pin itself is tested in child processes (tests/capture/test_allocator.py).
os.environ["WORKBENCH_ALLOCATOR"] = "default"

_TIMER_NAMES = (
    "perf_counter",
    "perf_counter_ns",
    "monotonic",
    "monotonic_ns",
    "time",
    "time_ns",
    "process_time",
    "process_time_ns",
)


def _torch_state(torch):
    b = torch.backends
    return {
        "default_dtype": (torch.get_default_dtype(), torch.set_default_dtype),
        "grad": (torch.is_grad_enabled(), torch.set_grad_enabled),
        "threads": (torch.get_num_threads(), torch.set_num_threads),
        "matmul_precision": (torch.get_float32_matmul_precision(), torch.set_float32_matmul_precision),
        "deterministic": (torch.are_deterministic_algorithms_enabled(), torch.use_deterministic_algorithms),
        "cuda_tf32": (b.cuda.matmul.allow_tf32, lambda v: setattr(b.cuda.matmul, "allow_tf32", v)),
        "cudnn_tf32": (b.cudnn.allow_tf32, lambda v: setattr(b.cudnn, "allow_tf32", v)),
    }


@pytest.fixture(autouse=True)
def _contain_global_state():
    timers = {name: getattr(time, name) for name in _TIMER_NAMES}
    torch = sys.modules.get("torch")
    saved = _torch_state(torch) if torch is not None else {}
    yield
    leaked = [name for name, fn in timers.items() if getattr(time, name) is not fn]
    for name, fn in timers.items():
        setattr(time, name, fn)
    for key, (value, setter) in saved.items():
        if _torch_state(torch)[key][0] != value:
            leaked.append(f"torch {key}")
            setter(value)
    if leaked:
        sys.stderr.write(f"\n[conftest] restored global state a test left changed: {', '.join(leaked)}\n")


@pytest.fixture(autouse=True)
def _trace_cache_in_tmp(tmp_path_factory, monkeypatch):
    """No test writes to the user's real trace cache (~/.cache/workbench): each test gets its own."""
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path_factory.mktemp("trace-cache")))
    # nor to a history file in the repository (a profiled run records its history by default)
    monkeypatch.setenv("WORKBENCH_HISTORY", str(tmp_path_factory.mktemp("history") / "history.jsonl"))


@pytest.fixture
def one_torch_thread():
    """Timing on a shared 2-core VM: one OpenMP thread avoids spin-wait contention."""
    import torch

    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)
