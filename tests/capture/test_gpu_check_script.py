"""``benchmarks/gpu_check.py`` on a machine without CUDA: a loud, quick refusal, never a pass."""

import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.py"


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present: the script runs for real there")
def test_gpu_check_refuses_without_cuda_in_seconds(tmp_path):
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(SCRIPT)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"OUT": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 2
    assert "not applicable: no CUDA device" in done.stderr and done.stdout == ""
    assert not (tmp_path / "gpu_check.json").exists()
    assert time.perf_counter() - start < 30
