"""The facts run rules read, typed once (workbench.hypotheses.fact_types): torch.compile's record read the same
from the capture's object, from its saved dict and from an older or hand-written dict; the clean timing through
the ``Timing`` protocol."""

from __future__ import annotations

from workbench.capture.compile_diag import CompileDiagnostics, GraphBreak, Recompile
from workbench.hypotheses.fact_types import BreakFact, RecompileFact, compile_facts
from workbench.hypotheses.run_facts import RunFacts
from workbench.measurement import Measurement

DIAG = CompileDiagnostics(
    dynamo_loaded=True,
    graph_count=3,
    frames_compiled=3,
    graph_breaks=(GraphBreak("Tensor.item() call", "model.py:12", 2, "x"),),
    recompiles=(Recompile("f", "model.py:3", ("size mismatch at index 0",), on_first_call=True),),
    compile_time_ms=120.0,
    first_call_marked=True,
    steady_frames_compiled=0,
    steady_compile_time_ms=5.0,
    graphs_per_call=3.0,
    structure_source="trace",
)


def test_the_record_and_its_saved_dict_read_alike_except_the_counts_a_dict_does_not_hold():
    live, saved = compile_facts(DIAG), compile_facts(DIAG.to_dict())
    assert live.graph_breaks == saved.graph_breaks == (BreakFact("Tensor.item() call", "model.py:12", 2, "profile"),)
    assert live.recompiles == saved.recompiles == (RecompileFact("f", ("size mismatch at index 0",), True),)
    assert (live.graph_break_count, live.recompile_count, live.steady_recompile_count) == (2, 1, 0)
    assert (live.compile_time_ms, live.steady_compile_time_ms, live.graphs_per_call) == (120.0, 5.0, 3.0)
    assert (saved.graph_count, saved.structure_source) == (3, "trace")


def test_an_older_record_reads_as_not_recorded_where_it_lacks_a_field():
    old = compile_facts({"graph_break_count": 3, "break_reasons": ["print( call"], "recompiles": ["f: x changed"]})
    assert old.graph_break_count == 3 and old.break_reasons == ("print( call",)
    assert old.recompiles == (RecompileFact("", (), False, "f: x changed"),)  # a plain text entry kept whole
    assert old.steady_recompile_count is None and old.steady_compile_time_ms is None and old.graphs_per_call is None


def test_run_facts_hand_rules_the_typed_record_and_the_timing():
    class Run:
        timing = Measurement((1.0, 1.2, 1.1))
        cold_ms = 30
        compile = DIAG

    facts = RunFacts(Run())
    assert facts.require_compile() == compile_facts(DIAG)
    assert facts.require_timing().median_ms == 1.1 and facts.cold_ms == 30.0
