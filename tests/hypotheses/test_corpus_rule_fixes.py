"""Rule fixes found on the tuning half of the planted corpus (tests/workloads/corpus.py), each with a
case where the rule fires and one where it must not: composite ops judged by their children, compile
gaps after a dynamo cache lookup, allocation faults not counted as streaming, and suggested variants
that test each hypothesis's mechanism."""

from __future__ import annotations

import numpy as np
import pytest

from tests.hypotheses.builders import cpu_ops, facts, fires, memory_events
from workbench.trace.schema import frame


def _composites(n_calls: int, child_dims: str, child_us: float = 2.0):
    """``n_calls`` top-level ``aten::gru_cell`` ops (no work formula, 30 µs each), each calling three
    children (two addmm and a sigmoid) on tensors of ``child_dims``."""
    names, ts, dur, depth, parent, dims = [], [], [], [], [], []
    t = 0.0
    for _ in range(n_calls):
        top = len(names)
        names.append("aten::gru_cell")
        ts.append(t)
        dur.append(30.0)
        depth.append(0)
        parent.append(-1)
        dims.append("")
        for j, child in enumerate(("aten::addmm", "aten::addmm", "aten::sigmoid")):
            names.append(child)
            ts.append(t + 1 + j * (child_us + 1))
            dur.append(child_us)
            depth.append(1)
            parent.append(top)
            dims.append(child_dims if child == "aten::addmm" else "[[1,18]]")
        t += 32.0
    n = len(names)
    ts_a, dur_a = np.asarray(ts), np.asarray(dur)
    return frame(
        "cpu_ops",
        {
            "rank": [0] * n,
            "tid": ["1"] * n,
            "name": names,
            "ts_us": ts_a,
            "dur_us": dur_a,
            "end_us": ts_a + dur_a,
            "depth": depth,
            "parent": parent,
            "input_dims": dims,
            "input_types": ['["float","float","float"]'] * n,
        },
    )


def test_a_composite_op_whose_children_are_tiny_is_dispatch_bound():
    tiny = _composites(60, "[[18],[1,6],[6,18]]")
    h = fires("cpu_dispatch_overhead", facts(cpu_ops=tiny))
    assert h and h[0].category == "launch_overhead"
    # the same composite calling children with real work (a 2048^3 matmul) is not overhead
    big = _composites(60, "[[2048],[2048,2048],[2048,2048]]", child_us=9.0)
    assert fires("cpu_dispatch_overhead", facts(cpu_ops=big)) == []


def test_gaps_right_after_a_dynamo_cache_lookup_are_compiles_not_host_work():
    names = ["TorchDynamo Cache Lookup", "aten::mm"] * 10
    durs = [5.0, 100.0] * 10
    ts = np.cumsum([0.0] + [d + (2000.0 if n == "TorchDynamo Cache Lookup" else 1.0) for n, d in zip(names, durs)][:-1])
    n = len(names)
    ops = frame(
        "cpu_ops",
        {
            "rank": [0] * n,
            "tid": ["1"] * n,
            "name": names,
            "ts_us": ts,
            "dur_us": durs,
            "end_us": ts + np.asarray(durs),
            "depth": [0] * n,
            "input_dims": [""] * n,
            "input_types": ['["float","float"]'] * n,
        },
    )
    assert fires("cpu_host_gaps", facts(cpu_ops=ops)) == []
    # the same gaps after an ordinary op are host work
    ops2 = ops.assign(name=["aten::relu", "aten::mm"] * 10)
    h = fires("cpu_host_gaps", facts(cpu_ops=ops2))
    assert h and h[0].category == "host_bound"


def test_memory_bound_ops_leave_out_the_fault_time_of_large_fresh_buffers():
    big = 40 << 20
    # two mul ops, each allocating 40 MiB and taking 30 ms where streaming their bytes needs ~4 ms,
    # plus a few small memory-bound ops: the excess is allocation, not bandwidth
    names = ["aten::mul", "aten::add", "aten::mul", "aten::add"]
    durs = [30_000.0, 200.0, 30_000.0, 200.0]
    dims = ["[[10000000],[]]", "[[1000],[1000]]", "[[10000000],[]]", "[[1000],[1000]]"]
    ops = cpu_ops(names, durs, 5.0, dims=dims)
    mem = memory_events([10.0, 30_215.0], [big, big])
    f = facts(cpu_ops=ops, memory=mem)
    assert fires("large_allocations_repeat", f)[0].category == "allocation_churn"
    assert fires("cpu_memory_bound_ops", f) == []
    # without allocator events the same ops are memory-bound
    assert fires("cpu_memory_bound_ops", facts(cpu_ops=ops))[0].category == "memory_bound"


def test_suggested_variants_test_the_mechanism_and_exist_in_the_registry():
    from workbench.variants import registry

    big_mm = cpu_ops(["aten::mm"] * 5, [1000.0] * 5, 1.0, dims=["[[512,512],[512,512]]"] * 5)
    compute = fires("cpu_compute_bound_ops", facts(cpu_ops=big_mm))[0]
    assert "compiled" not in compute.suggested_variants
    # issue 24: the catalog has a fix that lowers the precision (autocast_bf16); the rule names it, and the
    # falsifier no longer says no variant does
    assert compute.suggested_variants == ("autocast_bf16",)
    assert "autocast_bf16" in compute.falsifier and "no variant in the registry" not in compute.falsifier
    adds = cpu_ops(["aten::add", "aten::mul", "aten::relu"] * 5, [500.0] * 15, 1.0)
    assert "compiled" in fires("cpu_memory_bound_ops", facts(cpu_ops=adds))[0].suggested_variants
    tiny = cpu_ops(["aten::add"] * 200, [3.0] * 200, 2.0)
    assert "compiled" in fires("cpu_dispatch_overhead", facts(cpu_ops=tiny))[0].suggested_variants
    gappy = cpu_ops(["aten::mm"] * 10, [100.0] * 10, 500.0)
    host = fires("cpu_host_gaps", facts(cpu_ops=gappy))[0]
    assert host.suggested_variants == () and "no variant in the registry" in host.falsifier
    known = set(registry.names())
    for h in (compute, host):
        assert set(h.suggested_variants) <= known


def test_recompiles_suggest_dynamic_shapes():
    from tests.hypotheses.builders import run
    from workbench.capture.compile_diag import CompileDiagnostics, Recompile

    diag = CompileDiagnostics(
        dynamo_loaded=True,
        graph_count=5,
        frames_compiled=5,
        compile_time_ms=500.0,
        recompiles=tuple(Recompile("f", "f.py:1", ("size mismatch",)) for _ in range(4)),
    )
    h = fires("recompiles", run([1.0] * 20, compile=diag))[0]
    assert h.suggested_variants == ("compiled_dynamic",)
    with pytest.raises(Exception):
        fires("recompiles", run([1.0] * 20))  # no compile diagnostics: not judged


def _backward_step(mm_dims: str, mm_us: float):
    """A training step's shape on the host: ``aten::linear`` (forward; its ``aten::addmm`` under it) then
    the autograd node ``autograd::engine::evaluate_function: MmBackward0`` -> ``MmBackward0`` -> two
    ``aten::mm`` (the gradients), none of the wrappers with a work formula of their own."""
    rows = [  # name, ts, dur, depth, parent, dims
        ("aten::linear", 0.0, mm_us + 4, 0, -1, "[[1024,1024],[1024,1024],[1024]]"),
        ("aten::addmm", 1.0, mm_us, 1, 0, "[[1024],[1024,1024],[1024,1024]]"),
        ("autograd::engine::evaluate_function: MmBackward0", mm_us + 10, 2 * mm_us + 8, 0, -1, ""),
        ("MmBackward0", mm_us + 11, 2 * mm_us + 6, 1, 2, ""),
        ("aten::mm", mm_us + 12, mm_us, 2, 3, mm_dims),
        ("aten::mm", 2 * mm_us + 14, mm_us, 2, 3, mm_dims),
    ]
    n = len(rows)
    ts = np.array([r[1] for r in rows])
    dur = np.array([r[2] for r in rows], dtype=float)
    return frame(
        "cpu_ops",
        {
            "rank": [0] * n,
            "tid": ["1"] * n,
            "name": [r[0] for r in rows],
            "ts_us": ts,
            "dur_us": dur,
            "end_us": ts + dur,
            "depth": [r[3] for r in rows],
            "parent": [r[4] for r in rows],
            "input_dims": [r[5] for r in rows],
            "input_types": ['["float","float","float"]'] * n,
        },
    )


def test_backward_nodes_get_the_work_of_the_ops_under_them_counted_once():
    from workbench.hypotheses.rules.host_ops import placed_main_ops

    ops = _backward_step("[[1024,1024],[1024,1024]]", 20_000.0)
    placed = placed_main_ops(facts(cpu_ops=ops)).set_index("name")
    node = placed.loc["autograd::engine::evaluate_function: MmBackward0"]
    assert node["flops"] == pytest.approx(2 * 2.0 * 1024**3)  # both gradient matmuls, once each
    assert node["bound"] == "compute"
    assert placed.loc["aten::linear", "bound"] == "compute"  # its own formula, not its addmm again
    h = fires("cpu_compute_bound_ops", facts(cpu_ops=ops))
    assert h and h[0].category == "compute_bound"
    # a backward node whose children's work is unknown and long: nothing is guessed
    unknown = _backward_step("", 20_000.0)
    placed = placed_main_ops(facts(cpu_ops=unknown)).set_index("name")
    assert placed.loc["autograd::engine::evaluate_function: MmBackward0", "bound"] == "unknown"
