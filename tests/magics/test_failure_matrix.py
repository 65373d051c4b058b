"""The magic failure matrix: whatever the cell does (raise, a syntax error, sys.exit, a
KeyboardInterrupt mid-repeats, its own torch profiler, a nested magic, changed torch settings,
a replaced sys.stdout, a huge output; the same for %%gpuvariant), the shell is left as it was:
sys.stdout / sys.stderr / the display publisher are the originals, no profiler runs, torch's
threads and grad mode are back, the namespace is intact, and the next magic works.

The cells run in a real IPython shell in a child process (tests/magics/_matrix_worker.py), so a
segmentation fault or a hang fails this test instead of ending the session.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.magics._matrix_worker import CASES

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 400


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    out = tmp_path_factory.mktemp("matrix") / "matrix.json"
    env = {
        **os.environ,
        "OMP_WAIT_POLICY": "PASSIVE",
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
    }
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "tests.magics._matrix_worker", str(out)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the failure matrix hung for {TIMEOUT_S} s; its output ended with:\n{str(exc.stdout)[-3000:]}")
    assert proc.returncode == 0, (
        f"the matrix process ended with {proc.returncode} (-11: segfault)\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    return json.loads(out.read_text())


@pytest.mark.parametrize("case", list(CASES))
def test_the_shell_is_left_as_it_was(matrix, case):
    s = matrix[case]
    assert s["stdout_restored"] and s["stderr_restored"], s
    assert s["display_pub_restored"], s
    assert s["profiler_stopped"], s
    assert s["threads"] == 1 and s["grad_enabled"], s
    assert not s["names_kept"] and s["sentinel_kept"], s
    assert s["failed_run_kept_previous"], s
    if s["expect_success"] is not None:
        assert s["success"] == s["expect_success"], s
    assert s["expected_text_shown"], s
    assert s["next_magic_works"] and s["streams_after_next"], s
