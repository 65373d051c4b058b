"""A direct ``wb.profile`` of code that runs under, or starts, its own torch profiler is timed only,
with the reason, and never crashes the process (two kineto profilers at once segfault).

Each case runs in a child interpreter, so a segmentation fault fails the test instead of pytest."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

CASES = {
    "inside_a_running_profiler": """
        with torch.profiler.profile():
            run = wb.profile(work, warmup=1, repeat=3, history=False)
    """,
    "code_that_opens_its_own_profiler": """
        def own():
            with torch.profiler.profile():
                return work()
        run = wb.profile(own, warmup=1, repeat=3, history=False)
    """,
}

PRELUDE = """
import torch
import workbench as wb
x = torch.randn(64, 64)
def work(t=x):
    return (t @ t).relu()
"""

CHECK = """
assert run.trace is None, "a trace was taken under another profiler"
assert "no trace" in run.trace_note and "two profilers" in run.trace_note, run.trace_note
assert run.timing.n == 3 and run.timing.median_ms > 0
assert not torch.autograd._profiler_enabled(), "a profiler was left running"
again = wb.profile(work, warmup=1, repeat=3, history=False)   # the next profile traces as usual
assert again.trace is not None, again.trace_note
print("survived")
"""


@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", sorted(CASES))
def test_profile_under_or_around_another_profiler_times_only_and_survives(case):
    code = PRELUDE + textwrap.dedent(CASES[case]) + CHECK
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"
    assert "survived" in proc.stdout
