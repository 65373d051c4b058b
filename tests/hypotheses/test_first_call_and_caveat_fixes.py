"""Logic fixes found by an independent set of planted workloads: compiles of the first call are not
recompiles, and convolutions are compute work (their backward counted from shapes). The ranking fix
(caveats after findings) is tested in tests/capture/test_ranking.py."""

from __future__ import annotations

from tests.hypotheses.builders import fires, run
from workbench.capture.compile_diag import CompileDiagnostics, GraphBreak, Recompile

_RESUME = Recompile(
    "torch_dynamo_resume_in_part_at_8",
    "w.py:8",
    ("tensor '___stack1' size mismatch at index 0. expected 1239, actual 1281",),
    on_first_call=True,
)


def _broken(recompiles, steady_frames, steady_compile_ms, marked=True):
    return CompileDiagnostics(
        dynamo_loaded=True,
        graph_count=3,
        frames_compiled=6,
        graph_breaks=(GraphBreak("data-dependent shape", "w.py:8", 4, ""),),
        recompiles=recompiles,
        compile_time_ms=300.0,
        first_call_marked=marked,
        steady_frames_compiled=steady_frames,
        steady_compile_time_ms=steady_compile_ms,
    )


def test_a_resume_function_recompiled_inside_the_first_call_is_not_recompilation():
    """Frame counters of such a function read 6 after 4 calls and after 24: every compile was on the
    first call. Before the fix the rule counted the one logged recompile as steady-state, at high
    confidence."""
    diag = _broken((_RESUME,), steady_frames=0, steady_compile_ms=0.0)
    assert diag.recompile_count == 1 and diag.steady_recompile_count == 0
    assert fires("recompiles", run([1.0] * 20, cold=400.0, compile=diag)) == []
    assert fires("graph_breaks", run([1.0] * 20, cold=400.0, compile=diag))  # the breaks are the finding


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
    diag = _broken(
        (Recompile("f", "w.py:2", ("size mismatch",)),), steady_frames=None, steady_compile_ms=None, marked=False
    )
    assert fires("recompiles", run([1.0] * 20, compile=diag))[0].evidence[0].value == 1
    as_dict = {"graph_count": 2, "recompile_count": 2, "compile_time_ms": 10.0}
    assert fires("recompiles", run([1.0] * 20, compile=as_dict))[0].evidence[0].value == 2


def _conv_training_step(backward_us: float = 3500.0):
    """One training step of a conv layer on the host: ``aten::conv2d`` (forward, its stride/padding not in
    the table) then the autograd node ``autograd::engine::evaluate_function: ConvolutionBackward0`` ->
    ``ConvolutionBackward0`` -> ``aten::convolution_backward`` on grad_output [8, 32, 32, 32], input
    [8, 32, 32, 32], weight [32, 32, 3, 3]: 2 x 75.5 M multiply-adds, 302 MFLOP, about 95 FLOP/byte."""
    import numpy as np

    from workbench.trace.schema import frame

    act, w = "[8,32,32,32]", "[32,32,3,3]"
    rows = [  # name, ts, dur, depth, parent, dims, types
        ("aten::conv2d", 0.0, 1000.0, 0, -1, f"[{act},{w},[32],[],[],[],[]]", '["float","float","float"]'),
        ("autograd::engine::evaluate_function: ConvolutionBackward0", 1100.0, backward_us, 0, -1, "", "[]"),
        ("ConvolutionBackward0", 1101.0, backward_us - 2, 1, 1, f"[{act}]", '["float"]'),
        (
            "aten::convolution_backward",
            1102.0,
            backward_us - 4,
            2,
            2,
            f"[{act},{act},{w},[],[],[],[],[],[],[],[]]",
            '["float","float","float"]',
        ),
    ]
    name, ts, dur, depth, parent, dims, types = (list(col) for col in zip(*rows))
    n = len(rows)
    return frame(
        "cpu_ops",
        {
            "rank": [0] * n,
            "tid": ["1"] * n,
            "name": name,
            "ts_us": np.asarray(ts),
            "dur_us": np.asarray(dur),
            "end_us": np.asarray(ts) + np.asarray(dur),
            "depth": depth,
            "parent": parent,
            "input_dims": dims,
            "input_types": types,
        },
    )


def test_convolution_backward_is_judged_as_compute_work():
    """Before the fix ``aten::convolution_backward`` had no work formula, so its autograd node (most of a
    training step) was ``unknown`` and the compute-bound rule saw only the forward: 22 % of the time."""
    from tests.hypotheses.builders import facts
    from workbench.hypotheses.rules.host_ops import placed_main_ops

    f = facts(cpu_ops=_conv_training_step())
    placed = placed_main_ops(f).set_index("name")
    node = placed.loc["autograd::engine::evaluate_function: ConvolutionBackward0"]
    assert node["bound"] == "compute" and node["flops"] == 2 * 2 * (8 * 32 * 32 * 32) * (32 * 9)
    h = fires("cpu_compute_bound_ops", f)[0]
    assert h.category == "compute_bound" and h.evidence[0].value > 95  # of the window, a 100 µs gap included
