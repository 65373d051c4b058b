"""torch.compile diagnostics recorded while profiling (backend="eager": dynamo without inductor)."""

from __future__ import annotations

import logging

import pytest
import torch

import workbench as wb
from workbench.capture.compile_diag import (
    CompileDiagnostics,
    CompileWatcher,
    parse_graph_break,
    parse_recompile,
)


def _breaking(x):
    y = x * 2
    print("side effect")  # dynamo cannot trace print: a graph break
    return y + 1


def test_graph_breaks_and_recompiles_are_recorded_with_reasons(capfd, torch_log_output):
    import torch._logging._internal as internal

    torch._dynamo.reset()
    artifacts_before = set(internal.log_state.artifact_names)
    compiled = torch.compile(_breaking, backend="eager")
    sizes = iter([8, 16] + [16] * 10)
    run = wb.profile(lambda: compiled(torch.ones(next(sizes))), warmup=1, repeat=3, trace=False)
    diag = run.compile
    assert diag.dynamo_loaded and diag.graph_count >= 2 and diag.compile_time_ms > 0
    assert diag.graph_break_count >= 1
    assert any(
        "print" in b.reason and b.location.endswith(".py:" + str(_breaking.__code__.co_firstlineno + 2))
        for b in diag.graph_breaks
    ), diag.graph_breaks
    assert diag.recompile_count >= 1
    assert any("size mismatch" in failure for r in diag.recompiles for failure in r.guard_failures)
    page = run._repr_html_()
    assert "Graph breaks:" in page and "Recompiles:" in page
    # logging put back, and dynamo's records were kept out of the cell's output
    assert set(internal.log_state.artifact_names) == artifacts_before
    err = capfd.readouterr().err + torch_log_output.getvalue()
    assert "Graph break" not in err and "Recompiling" not in err


def test_nothing_compiled_gives_empty_diagnostics():
    with CompileWatcher() as watcher:
        torch.ones(3).sum()
    assert watcher.result.graph_count == 0 and not watcher.result.graph_breaks
    assert not watcher.result.compiled_anything


def test_user_enabled_artifacts_stay_enabled_and_visible():
    import torch._logging._internal as internal

    internal.log_state.enable_artifact("recompiles")
    try:
        with CompileWatcher():
            pass
        assert "recompiles" in internal.log_state.artifact_names
    finally:
        internal.log_state.artifact_names.discard("recompiles")


def test_collector_handler_removed_after_exception():
    with pytest.raises(RuntimeError):
        with CompileWatcher():
            raise RuntimeError("x")
    from workbench.capture.compile_logs import DropArtifacts, RecordCollector

    for name in ("torch._dynamo", "torch._inductor"):
        assert not any(isinstance(h, RecordCollector) for h in logging.getLogger(name).handlers)
        assert not any(isinstance(f, DropArtifacts) for h in logging.getLogger(name).handlers for f in h.filters)


def test_parsers_read_dynamo_messages():
    reason, where = parse_graph_break(
        "Graph break in user code at /a/b.py:13\nGraph Break Reason: Encountered graph break\n\n"
        "Failed to trace builtin operator\n  Explanation: Dynamo does not know how to trace `print`\n"
    )
    assert (reason, where) == ("Dynamo does not know how to trace `print`", "/a/b.py:13")
    rec = parse_recompile(
        "Recompiling function f in /a/b.py:11\n    triggered by the following guard "
        "failure(s):\n    - 0/0: tensor 'x' size mismatch at index 0. expected 8, actual 16"
    )
    assert rec.function == "f" and rec.location == "/a/b.py:11"
    assert rec.guard_failures == ("tensor 'x' size mismatch at index 0. expected 8, actual 16",)


def test_diagnostics_round_trip():
    diag = CompileDiagnostics(True, 2, 3, (), (), 12.5, True, "limit")
    assert CompileDiagnostics.from_dict(diag.to_dict()) == diag


def test_a_recompile_inside_the_first_call_is_not_a_steady_state_one():
    """A break on a data-dependent shape inside a helper called three times: the helper's resume
    function compiles on the first call and meets another stack shape within that same call (a guard
    failure, logged as a recompile), then never compiles again. That is one-time work of the cold
    call, so the recompilation rule must not see steady-state recompiles."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    weight = torch.randn(48, 48) * 0.2

    def part(x):
        y = torch.sin(x @ weight)
        return y - y[y < 0.1].sum() * 0.01  # data-dependent shape: a graph break

    @torch.compile(backend="eager")
    def three_parts(x):
        return part(part(part(x)))

    run = wb.profile(three_parts, torch.randn(48, 48), warmup=2, repeat=12, trace=False)
    diag = run.compile
    assert diag.first_call_marked and diag.graph_break_count >= 1
    assert diag.recompile_count >= 1 and all(r.on_first_call for r in diag.recompiles), diag.recompiles
    assert diag.steady_frames_compiled == 0 and diag.steady_recompile_count == 0
    assert diag.steady_compile_time_ms is not None and diag.steady_compile_time_ms < diag.compile_time_ms
    categories = [h.category for h in run.hypotheses]
    assert "recompilation" not in categories and "graph_break" in categories, categories
    assert CompileDiagnostics.from_dict(diag.to_dict()) == diag


def test_recompiles_after_the_first_call_are_steady_state_ones():
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: x * 2 + 1, backend="eager", dynamic=False)
    sizes = iter([8, 16, 24, 16] + [16] * 10)  # new shapes in the warm-up calls
    run = wb.profile(lambda: compiled(torch.ones(next(sizes))), warmup=3, repeat=3, trace=False)
    diag = run.compile
    assert diag.first_call_marked and diag.steady_recompile_count >= 2
    assert not any(r.on_first_call for r in diag.recompiles)
    assert diag.steady_compile_time_ms is not None and diag.steady_compile_time_ms > 0
    assert "recompilation" in [h.category for h in run.hypotheses]


def test_runs_saved_before_the_first_call_split_load_with_every_recompile_counted():
    old = {
        "dynamo_loaded": True,
        "graph_count": 2,
        "frames_compiled": 2,
        "compile_time_ms": 30.0,
        "recompiles": [{"function": "f", "location": "a.py:1", "guard_failures": ["size mismatch"]}],
    }
    diag = CompileDiagnostics.from_dict(old)
    assert not diag.first_call_marked and diag.steady_frames_compiled is None
    assert diag.steady_compile_time_ms is None and not diag.recompiles[0].on_first_call
    assert diag.steady_recompile_count == diag.recompile_count == 1
