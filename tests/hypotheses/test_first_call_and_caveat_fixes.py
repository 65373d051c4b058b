"""Logic fixes found by an independent set of planted workloads: compiles of the first call are not
recompiles, and measurement caveats qualify findings instead of outranking them."""
from __future__ import annotations

from tests.hypotheses.builders import fires, run
from workbench.capture.compile_diag import CompileDiagnostics, GraphBreak, Recompile

_RESUME = Recompile("torch_dynamo_resume_in_part_at_8", "w.py:8",
                    ("tensor '___stack1' size mismatch at index 0. expected 1239, actual 1281",),
                    on_first_call=True)


def _broken(recompiles, steady_frames, steady_compile_ms, marked=True):
    return CompileDiagnostics(dynamo_loaded=True, graph_count=3, frames_compiled=6,
                              graph_breaks=(GraphBreak("data-dependent shape", "w.py:8", 4, ""),),
                              recompiles=recompiles, compile_time_ms=300.0, first_call_marked=marked,
                              steady_frames_compiled=steady_frames, steady_compile_time_ms=steady_compile_ms)


def test_a_resume_function_recompiled_inside_the_first_call_is_not_recompilation():
    """Frame counters of such a function read 6 after 4 calls and after 24: every compile was on the
    first call. Before the fix the rule counted the one logged recompile as steady-state, at high
    confidence."""
    diag = _broken((_RESUME,), steady_frames=0, steady_compile_ms=0.0)
    assert diag.recompile_count == 1 and diag.steady_recompile_count == 0
    assert fires("recompiles", run([1.0] * 20, cold=400.0, compile=diag)) == []
    assert fires("graph_breaks", run([1.0] * 20, cold=400.0, compile=diag))   # the breaks are the finding


def test_recompiles_after_the_first_call_still_fire_and_name_the_first_calls_apart():
    steady = Recompile("f", "w.py:2", ("tensor 'x' size mismatch at index 0. expected 8, actual 16",))
    diag = _broken((_RESUME, steady, steady), steady_frames=2, steady_compile_ms=40.0)
    h = fires("recompiles", run([1.0] * 20, cold=400.0, compile=diag))[0]
    assert h.evidence[0].value == 2 and h.confidence == "high"
    assert "1 more inside the first call" in h.observed
    assert all("resume_in_part" not in row["reason"] for row in h.evidence[0].rows)
    # their compile time is the steady state's own: 40 ms over the 21 calls profiled
    assert abs(h.time_at_stake_ms - 40.0 / 21) < 1e-9


def test_compiles_after_the_first_call_without_a_log_record_count():
    """Frames converted after the first call are compiles in the steady state even where dynamo's log
    records were not captured; without a reason the finding is of medium confidence."""
    diag = _broken((), steady_frames=3, steady_compile_ms=30.0)
    h = fires("recompiles", run([1.0] * 20, cold=400.0, compile=diag))[0]
    assert h.evidence[0].value == 3 and h.confidence == "medium"


def test_diagnostics_without_the_split_count_every_recompile():
    """Older saved runs and hand-written dicts did not mark the first call: every recompile counts."""
    diag = _broken((Recompile("f", "w.py:2", ("size mismatch",)),), steady_frames=None,
                   steady_compile_ms=None, marked=False)
    assert fires("recompiles", run([1.0] * 20, compile=diag))[0].evidence[0].value == 1
    as_dict = {"graph_count": 2, "recompile_count": 2, "compile_time_ms": 10.0}
    assert fires("recompiles", run([1.0] * 20, compile=as_dict))[0].evidence[0].value == 2
