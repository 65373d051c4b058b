"""The run card's torch.compile counts: recompiles in the steady state apart from those within the
first call (a graph break's resume functions meeting a new stack shape: one-time)."""

from workbench.capture.compile_diag import CompileDiagnostics, Recompile
from workbench.render.run import _recompiles_item


def _diag(*first_call: bool, marked: bool = True) -> CompileDiagnostics:
    recompiles = tuple(
        Recompile(f"f{i}", "x.py:1", ("size mismatch",), on_first_call=flag) for i, flag in enumerate(first_call)
    )
    return CompileDiagnostics(
        dynamo_loaded=True, graph_count=2, frames_compiled=2, recompiles=recompiles, first_call_marked=marked
    )


def test_first_call_recompiles_are_counted_apart_from_the_steady_state():
    assert _recompiles_item(_diag(True, True)) == "recompiles in the steady state: 0 (and 2 within the first call)"
    assert _recompiles_item(_diag(True, False)) == "recompiles in the steady state: 1 (and 1 within the first call)"
    assert _recompiles_item(_diag()) == "recompiles in the steady state: 0"


def test_an_older_run_without_a_marked_first_call_counts_every_recompile_as_steady():
    assert _recompiles_item(_diag(False, False, marked=False)) == "recompiles in the steady state: 2"
