"""The health check counts the minor page faults of the clean calls: a call that maps fresh memory
every time is told so, with what to do (its time depends on the allocator's state)."""

from __future__ import annotations

import mmap

import numpy as np
import pytest

import workbench as wb
from workbench.capture.health import FRESH_PAGES_WARN_FAULTS, PAGE_BYTES, _fresh_pages, read_minor_faults

pytestmark = pytest.mark.skipif(read_minor_faults() is None, reason="not applicable: no getrusage here")

FRESH_PAGES = 4096  # 16 MiB of 4 KiB pages, mapped and touched on every call


def fresh_buffer() -> int:
    """Map fresh anonymous memory (no huge pages) and touch each 4 KiB page: one fault a page."""
    buf = mmap.mmap(-1, FRESH_PAGES * PAGE_BYTES)
    if hasattr(mmap, "MADV_NOHUGEPAGE"):
        buf.madvise(mmap.MADV_NOHUGEPAGE)
    view = memoryview(buf)
    for page in range(FRESH_PAGES):
        view[page * PAGE_BYTES] = 1
    total = sum(view[:: PAGE_BYTES * 512])
    view.release()
    buf.close()
    return total


def small_op(x=np.arange(1024, dtype=np.float32)) -> float:
    return float((x * 2).sum())


def _check(run):
    found = [c for c in run.health.checks if c.name == "fresh_pages"]
    assert len(found) == 1, [c.name for c in run.health.checks]
    return found[0]


def test_a_call_that_maps_fresh_memory_each_time_is_warned_about():
    check = _check(wb.profile(fresh_buffer, warmup=1, repeat=5, trace=False, history=False))
    assert check.level == "warn", check
    assert check.value >= FRESH_PAGES * 0.9  # about one fault per 4 KiB page
    assert "reuse buffers" in check.advice and "minor page faults" in check.observed


def test_a_call_on_warm_memory_is_ok_and_the_check_round_trips(tmp_path):
    run = wb.profile(small_op, warmup=2, repeat=10, trace=False, history=False)
    check = _check(run)
    assert check.level == "ok" and check.value < FRESH_PAGES_WARN_FAULTS, check
    again = wb.load_run(run.save(tmp_path / "run"))
    assert _check(again).value == pytest.approx(check.value)


def test_levels_and_an_unreadable_count():
    assert _fresh_pages(None).level == "unknown"
    assert _fresh_pages(FRESH_PAGES_WARN_FAULTS - 1).level == "ok"
    assert _fresh_pages(FRESH_PAGES_WARN_FAULTS).level == "warn"
