"""Native stderr (fd 2) held back during the traced pass; shown only when something failed."""

from __future__ import annotations

import os

import pytest

from workbench.capture.quiet import CapturedStderr


def test_native_writes_are_held_back_and_kept(capfd):
    with CapturedStderr() as held:
        os.write(2, b"USDT: profiler_start\n")
        os.write(2, b"CPUAllocator: Memory block of unknown size\n")
    assert held.text == "USDT: profiler_start\nCPUAllocator: Memory block of unknown size\n"
    assert "USDT" not in capfd.readouterr().err
    os.write(2, b"after\n")  # fd 2 is restored
    assert capfd.readouterr().err == "after\n"


def test_on_failure_the_held_text_is_shown_and_the_error_propagates(capfd):
    with pytest.raises(ValueError, match="bad batch"):
        with CapturedStderr() as held:
            os.write(2, b"kineto: something went wrong\n")
            raise ValueError("bad batch")
    err = capfd.readouterr().err
    assert "kineto: something went wrong" in err and "native output" in err
    assert held.text == "kineto: something went wrong\n"


def test_profiling_keeps_the_profiler_chatter_off_the_screen(capfd):
    import workbench as wb

    run = wb.profile(lambda: None, warmup=0, repeat=2, trace_repeat=1)
    err = capfd.readouterr().err
    assert "USDT" not in err and "profiler_start" not in err
    assert isinstance(run.profiler_stderr, str)
