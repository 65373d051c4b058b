"""``%%gpuprofile --memory``: the traced pass records memory; --memory with -T is a usage error."""

from __future__ import annotations

import workbench.magics as magics


def test_memory_option_records_allocations(ip, run_cell):
    result = run_cell(
        "%%gpuprofile --memory -w 1 -r 3 --trace-repeat 3 -q\nimport torch\ny = torch.ones(256, 256) * 2\n"
    )
    assert result.success, result.error_in_exec
    run = magics.last_run()
    assert run.memory.recorded and run.memory.peak.peak_bytes >= 256 * 256 * 4


def test_memory_without_a_trace_is_refused(ip, run_cell):
    result = run_cell("%%gpuprofile --memory -T\nx = 1\n")
    assert not result.success and "--memory" in str(result.error_in_exec)
