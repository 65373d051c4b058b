"""`workbench report` times every process in one allocator mode (workbench.capture.allocator).

Run as a command of its own (a child process), as a user runs it: the report's process pins its
malloc for the rest of its life, which the suite's own process must not do.
"""

import json
import os
import subprocess
import sys

import pytest

import workbench.capture.allocator as allocator

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(allocator._glibc() is None, reason="not applicable: the C library is not glibc"),
]


def _report(tmp_path, *extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in allocator.steady_env() and k != allocator.ENV_VAR}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "workbench.cli",
            "report",
            "--out",
            str(tmp_path / "r"),
            "--repeat",
            "5",
            "--warmup",
            "1",
            "--processes",
            "2",
            "--no-experiments",
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((tmp_path / "r" / "summary.json").read_text())


def test_the_report_its_workers_and_its_health_check_name_the_steady_mode(tmp_path):
    summary = _report(tmp_path)  # no flag, no environment variable: steady
    assert summary["allocator"]["name"] == "steady" and summary["allocator"]["applied"]
    assert summary["allocator"]["source"] == "mallopt"
    assert summary["samples"]["environment"]["allocator"] == "steady"  # the workers, from their environment
    check = {c["name"]: c for c in summary["timing"]["health"]["checks"]}["allocator"]
    assert check["level"] == "note" and "steady mode (glibc thresholds pinned" in check["observed"]
    html = (tmp_path / "r" / "report.html").read_text(encoding="utf-8")
    assert "timed with malloc in steady mode" in html
