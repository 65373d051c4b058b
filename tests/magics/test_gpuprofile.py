"""%%gpuprofile driven through a real IPython shell (run_cell), as a notebook would."""

from __future__ import annotations

import sys

import pytest
import torch
from IPython.core.error import UsageError

import workbench.magics as magics
from workbench.errors import ProfileError


def _profiler_off_and_restartable():
    assert not torch.autograd.profiler._is_profiler_enabled
    with torch.profiler.profile():
        torch.ones(2).sum()
    return True


def test_cell_runs_in_user_namespace_and_binds_the_run(ip, run_cell, capsys):
    ip.user_ns["executions"] = 0
    stdout_before = sys.stdout
    result = run_cell(
        "%%gpuprofile -w 2 -r 4 -o first\n"
        "import torch\n"
        "executions += 1\n"
        "w = torch.ones(32, 32) @ torch.ones(32, 32)\n"
        "print('cell output line')\n"
        "4200 + 42\n"
    )
    assert result.success, result.error_in_exec
    run = ip.user_ns["first"]
    # side effects repeat, as documented: cold, warm-up, timed repeats, then the traced pass (made
    # again, up to a few times, when the machine was busy during it)
    traced = ip.user_ns["executions"] - (1 + 2 + 4)
    assert traced >= run.traced_calls >= 1 and traced % run.traced_calls == 0, (traced, run.traced_calls)
    assert ip.user_ns["w"].shape == (32, 32)  # assignments persist
    assert run is ip.user_ns["_gpuprofile"] is magics.last_run()
    assert run.timing.n == 4 and run.warmup == 2
    assert run.trace is not None and (run.trace.cpu_ops["name"] == "aten::mm").sum() == run.traced_calls >= 1
    out = capsys.readouterr().out
    assert out.count("cell output line") == 1  # shown once, repeats captured
    assert out.count("4242") == 1  # the last expression, like Out
    assert sys.stdout is stdout_before  # the repeats' capture was released


def test_options_no_trace_name_threads_and_no_grad(ip, run_cell):
    ip.user_ns["seen"] = []
    result = run_cell(
        "%%gpuprofile -T -n my-cell -r 3 -w 0 -t 2 --no-grad -q\n"
        "seen.append((torch.get_num_threads(), torch.is_grad_enabled()))\n"
    )
    assert result.success, result.error_in_exec
    assert result.result is None  # -q: kept, not displayed
    run = magics.last_run()
    assert run.name == "my-cell" and run.trace is None and run.timing.n == 3
    assert set(ip.user_ns["seen"]) == {(2, False)}
    assert torch.get_num_threads() == 1 and torch.is_grad_enabled()


def test_cell_that_raises_shows_its_error_and_leaves_no_run(ip, run_cell):
    run_cell("%%gpuprofile -T -r 2 -o kept\nx = 1\n")
    kept = magics.last_run()
    result = run_cell("%%gpuprofile -r 3\npartial = 'assigned before the error'\n1 / 0\n")
    assert isinstance(result.error_in_exec, ZeroDivisionError)
    assert ip.user_ns["partial"] == "assigned before the error"
    assert magics.last_run() is kept and ip.user_ns["_gpuprofile"] is kept
    assert _profiler_off_and_restartable()


def test_error_in_a_later_repeat_stops_profiler_and_output_capture(ip, run_cell):
    ip.user_ns["n_calls"] = 0
    kept = magics.last_run()
    stdout_before = sys.stdout
    result = run_cell(
        "%%gpuprofile -w 1 -r 5\nn_calls += 1\nif n_calls == 4:\n    raise RuntimeError('fourth call fails')\n"
    )
    assert isinstance(result.error_in_exec, RuntimeError)
    assert ip.user_ns["n_calls"] == 4 and magics.last_run() is kept
    assert sys.stdout is stdout_before
    assert _profiler_off_and_restartable()


def test_keyboard_interrupt_mid_profiling(ip, run_cell):
    ip.user_ns["k"] = 0
    kept = magics.last_run()
    result = run_cell("%%gpuprofile -w 1 -r 10 -t 2\nk += 1\nif k == 5:\n    raise KeyboardInterrupt\n")
    assert isinstance(result.error_in_exec, KeyboardInterrupt)
    assert magics.last_run() is kept
    assert torch.get_num_threads() == 1
    assert _profiler_off_and_restartable()


def test_sys_exit_in_cell_gives_clear_error(ip, run_cell):
    kept = magics.last_run()
    result = run_cell("%%gpuprofile -r 2\nimport sys\nsys.exit(3)\n")
    assert isinstance(result.error_in_exec, ProfileError)
    assert "sys.exit(3)" in str(result.error_in_exec) and "no run was kept" in str(result.error_in_exec)
    assert magics.last_run() is kept
    assert _profiler_off_and_restartable()


def test_syntax_error_runs_nothing(ip, run_cell):
    ip.user_ns["untouched"] = "yes"
    result = run_cell("%%gpuprofile\nuntouched = 'no'\ny = (\n")
    assert isinstance(result.error_in_exec, UsageError)
    assert "syntax error at line 3" in str(result.error_in_exec)  # the cell's line 3 (under the magic line)
    assert ip.user_ns["untouched"] == "yes"


@pytest.mark.parametrize(
    "line, fragment",
    [
        ("-r 0", "-r/--repeat must be >= 1"),
        ("-w -1", "-w/--warmup must be >= 0"),
        ("-t 0", "-t/--threads must be >= 1"),
        ("-r many", "invalid int value"),
        ("--bogus", "unrecognized arguments: --bogus"),
        ("-o 1x", "-o needs a Python variable name"),
    ],
)
def test_bad_options_are_usage_errors(ip, run_cell, line, fragment):
    ip.user_ns["ran"] = False
    result = run_cell(f"%%gpuprofile {line}\nran = True\n")
    assert isinstance(result.error_in_exec, UsageError), result.error_in_exec
    assert fragment in str(result.error_in_exec)
    assert ip.user_ns["ran"] is False


def test_empty_cell_is_a_usage_error(run_cell):
    result = run_cell("%%gpuprofile -r 2\n\n")
    assert isinstance(result.error_in_exec, UsageError)
    assert "needs code" in str(result.error_in_exec)


def test_registration_list_and_unload(ip):
    assert "workbench.magics.gpuprofile:GpuProfileMagics" in magics.MAGICS
    magics.unload_ipython_extension(ip)
    assert "gpuprofile" not in ip.magics_manager.magics["cell"]
    magics.load_ipython_extension(ip)
    assert "gpuprofile" in ip.magics_manager.magics["cell"]
