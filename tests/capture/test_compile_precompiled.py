"""Graphs and graph breaks of a function compiled before the profile (issue 25): found in the traced
pass's compiled regions (or, without a trace, dynamo's cache), not in what compiled during the span.

backend="eager": dynamo without inductor, seconds on a CPU."""

from __future__ import annotations

import torch

import workbench as wb
from workbench.capture.compile_diag import CompileDiagnostics, GraphBreak

W = torch.linspace(-1.0, 1.0, 64).reshape(8, 8)


def _two_breaks(x):
    y = x @ W
    if y.sum() > 0:  # data-dependent branch: a graph break
        y = y + 1
    scale = y.abs().max().item()  # .item() (capture_scalar_outputs=False): a graph break
    return torch.sin(y) / (1.0 + scale)


def _no_break(x):
    return torch.sin(x @ W) * 2 + 1


def _sine(x):
    return torch.sin(x) * 2


def _frames_ok() -> int:
    return int(torch._dynamo.utils.counters["frames"]["ok"])


def _precompiled(fn):
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="eager")
    x = torch.ones(8, 8)
    for _ in range(3):
        compiled(x)
    return compiled, x


def _graph_break_hypotheses(run):
    return [h for h in run.hypotheses if h.rule == "graph_breaks"]


def test_breaks_of_a_function_compiled_before_the_profile_are_found_in_the_trace():
    compiled, x = _precompiled(_two_breaks)
    run = wb.profile(compiled, x, warmup=1, repeat=5, trace_repeat=3)
    diag = run.compile
    assert diag.frames_compiled == 0 and diag.graph_count == 0  # nothing compiled during the profile
    assert diag.structure_source == "trace" and diag.graphs_per_call == 3 and diag.breaks_per_call == 2
    assert diag.graph_break_count == 2 and {b.source for b in diag.graph_breaks} == {"trace"}
    lines = {b.location.rpartition(":")[2] for b in diag.graph_breaks}
    first = _two_breaks.__code__.co_firstlineno
    assert lines == {str(first + 2), str(first + 4)}, diag.graph_breaks
    assert any("item()" in b.reason for b in diag.graph_breaks), diag.graph_breaks
    assert any("data-dependent" in b.reason for b in diag.graph_breaks), diag.graph_breaks
    (h,) = _graph_break_hypotheses(run)
    assert "3 graphs per call" in h.title and "2 graph break(s)" in h.observed
    assert "capture_scalar_outputs" in h.observed and "fullgraph=True" in h.observed
    evidence = {e.metric: e for e in h.evidence}
    assert evidence["graph_break_count"].value == 2 and evidence["graphs_per_call"].value == 3
    assert any("item()" in row["reason"] for row in evidence["graph_break_count"].rows)
    # reading the trace and dynamo's records compiled nothing: the user's function runs as it did
    before = _frames_ok()
    compiled(x)
    assert _frames_ok() == before
    assert CompileDiagnostics.from_dict(diag.to_dict()) == diag


def test_a_function_compiled_before_without_breaks_gets_no_graph_break_finding():
    compiled, x = _precompiled(_no_break)
    run = wb.profile(compiled, x, warmup=1, repeat=5, trace_repeat=3)
    diag = run.compile
    assert diag.structure_source == "trace" and diag.graphs_per_call == 1 and diag.breaks_per_call == 0
    assert not diag.graph_breaks and not _graph_break_hypotheses(run)


def test_breaks_compiled_during_the_profile_are_the_logged_ones():
    torch._dynamo.reset()
    compiled = torch.compile(_two_breaks, backend="eager")
    run = wb.profile(compiled, torch.ones(8, 8), warmup=1, repeat=5, trace_repeat=3)
    diag = run.compile
    assert diag.frames_compiled >= 3 and diag.graphs_per_call == 3
    assert diag.graph_breaks and {b.source for b in diag.graph_breaks} == {"profile"}, diag.graph_breaks
    assert diag.graph_break_count >= 2
    (h,) = _graph_break_hypotheses(run)
    assert "3 graphs per call" in h.title


def test_without_a_trace_dynamos_cache_for_the_function_gives_its_breaks():
    compiled, x = _precompiled(_two_breaks)
    run = wb.profile(lambda: compiled(x), warmup=1, repeat=3, trace=False)
    diag = run.compile
    assert diag.structure_source == "dynamo cache" and diag.breaks_per_call == 2
    assert {b.source for b in diag.graph_breaks} == {"dynamo cache"} and diag.graph_break_count == 2
    (h,) = _graph_break_hypotheses(run)
    assert "dynamo's cache" in h.observed


def test_a_function_never_compiled_gets_nothing_new():
    run = wb.profile(_no_break, torch.ones(8, 8), warmup=1, repeat=3, trace_repeat=3)
    diag = run.compile
    assert diag.graphs_per_call is None and diag.structure_source == "" and not diag.compiled_frames
    assert not diag.graph_breaks


def test_bundles_saved_before_load_without_the_new_fields():
    old = {
        "dynamo_loaded": True,
        "graph_count": 2,
        "frames_compiled": 2,
        "graph_breaks": [{"reason": "print", "location": "f.py:3", "count": 1, "detail": ""}],
    }
    diag = CompileDiagnostics.from_dict(old)
    assert diag.graph_breaks == (GraphBreak("print", "f.py:3", 1, "", "profile"),)
    assert diag.graphs_per_call is None and diag.breaks_per_call is None
    assert diag.structure_source == "" and diag.compiled_frames == ()


def test_two_compiled_functions_called_from_eager_code_are_two_graphs_without_a_break():
    torch._dynamo.reset()
    first, second = torch.compile(_sine, backend="eager"), torch.compile(_no_break, backend="eager")
    x = torch.ones(8, 8)
    for _ in range(2):
        second(first(x))
    run = wb.profile(lambda: second(first(x)), warmup=1, repeat=3, trace_repeat=3)
    diag = run.compile
    assert diag.graphs_per_call == 2 and diag.breaks_per_call == 0 and not diag.graph_breaks
    assert not _graph_break_hypotheses(run)
