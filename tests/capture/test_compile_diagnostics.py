"""torch.compile diagnostics recorded while profiling (backend="eager": dynamo without inductor)."""
from __future__ import annotations

import logging

import pytest
import torch

import workbench as wb
from workbench.capture.compile_diag import (
    CompileDiagnostics, CompileWatcher, parse_graph_break, parse_recompile,
)


def _breaking(x):
    y = x * 2
    print("side effect")          # dynamo cannot trace print: a graph break
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
    assert any("print" in b.reason and b.location.endswith(".py:" + str(_breaking.__code__.co_firstlineno + 2))
               for b in diag.graph_breaks), diag.graph_breaks
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
        assert not any(isinstance(f, DropArtifacts) for h in logging.getLogger(name).handlers
                       for f in h.filters)


def test_parsers_read_dynamo_messages():
    reason, where = parse_graph_break(
        "Graph break in user code at /a/b.py:13\nGraph Break Reason: Encountered graph break\n\n"
        "Failed to trace builtin operator\n  Explanation: Dynamo does not know how to trace `print`\n")
    assert (reason, where) == ("Dynamo does not know how to trace `print`", "/a/b.py:13")
    rec = parse_recompile("Recompiling function f in /a/b.py:11\n    triggered by the following guard "
                          "failure(s):\n    - 0/0: tensor 'x' size mismatch at index 0. expected 8, actual 16")
    assert rec.function == "f" and rec.location == "/a/b.py:11"
    assert rec.guard_failures == ("tensor 'x' size mismatch at index 0. expected 8, actual 16",)


def test_diagnostics_round_trip():
    diag = CompileDiagnostics(True, 2, 3, (), (), 12.5, True, "limit")
    assert CompileDiagnostics.from_dict(diag.to_dict()) == diag
