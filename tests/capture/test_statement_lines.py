"""Time by statement: the traced pass records which line of the user's code runs (sys.settrace on
the profiled thread), and "time by source line" names the statement that ran each op
(``file.py:42 in fn``), not the function's first line; without that record (a trace from a file,
an older bundle) it is as before."""

from __future__ import annotations

import dataclasses
import inspect
import json
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import workbench as wb  # noqa: E402
from workbench import render  # noqa: E402
from workbench.analysis.attribution import source_breakdown  # noqa: E402
from workbench.analysis.statement_lines import on_trace  # noqa: E402
from workbench.capture.profiler_session import ProfilerSession  # noqa: E402
from workbench.capture.statements import StatementRecorder  # noqa: E402
from workbench.capture.trace_link import load_trace  # noqa: E402
from workbench.errors import BundleError  # noqa: E402
from workbench.trace.statements import StatementLines  # noqa: E402

pytestmark = pytest.mark.skipif(
    sys.gettrace() is not None, reason="a debugger or coverage holds the trace function: statements are not recorded"
)

SIZE = 192


def scaled(x):
    y = x * 3.0
    return y.relu()


def step(a, b):
    c = a @ b
    d = (c + 1.0).sin().cos().exp()
    e = scaled(d)
    return e.sum()


def _line(fn, text: str) -> int:
    """The file line of the statement of ``fn`` that starts with ``text``."""
    lines, first = inspect.getsourcelines(fn)
    found = [first + i for i, line in enumerate(lines) if line.strip().startswith(text)]
    assert len(found) == 1, (text, lines)
    return found[0]


def _ops_us(trace, names) -> float:
    ops = trace.cpu_ops
    return float(ops.loc[ops["name"].astype(str).isin(names), "self_us"].sum())


def _row(table, fn, text: str):
    line = _line(fn, text)
    rows = table[(table["line"] == line) & (table["function"] == fn.__name__)]
    assert len(rows) == 1, (line, table[["location", "line", "def_line"]])
    return rows.iloc[0]


@pytest.fixture(scope="module")
def run():
    torch.manual_seed(0)
    a, b = torch.randn(SIZE, SIZE), torch.randn(SIZE, SIZE)
    return wb.profile(step, a, b, warmup=1, repeat=3, trace_repeat=3, threads=1, history=False, name="step")


def test_the_traced_pass_records_the_statements_and_removes_its_trace_function(run):
    statements = run.record.statements
    assert isinstance(statements, StatementLines) and len(statements) > 0 and statements.note == ""
    assert sys.gettrace() is None
    names = set(run.trace.python_calls["name"].astype(str))
    for file, first, function in statements.codes:  # named as the trace names the same functions
        assert f"{file}({first}): {function}" in names
    timed = on_trace(statements, run.trace)
    assert timed is not None and timed.shift_us == 0.0  # the clocks agree: no re-alignment needed
    assert run.record.notes == () or all("statement" not in n for n in run.record.notes)


def test_the_matmul_and_the_chain_are_attributed_to_their_own_lines(run):
    sources = run.attribution.sources
    assert sources.recorded
    table = sources.table
    def_line = inspect.getsourcelines(step)[1]
    assert not ((table["function"] == "step") & (table["line"] == def_line)).any()  # no row at the def line
    detailed = source_breakdown(run.trace, top=50, statements=run.record.statements)
    matmul = _row(detailed.table, step, "c = a @ b")
    chain = _row(detailed.table, step, "d = (c + 1.0)")
    assert matmul["location"].endswith(f"test_statement_lines.py:{matmul['line']} in step")
    assert matmul["def_line"] == def_line and chain["def_line"] == def_line
    mm_us = _ops_us(run.trace, ["aten::mm"])
    chain_us = _ops_us(run.trace, ["aten::sin", "aten::cos", "aten::exp"])
    assert mm_us > 0 and chain_us > 0
    items = detailed.top_items(matmul["location"])
    assert float(items.loc[items["name"] == "aten::mm", "us"].sum()) >= 0.95 * mm_us
    items = detailed.top_items(chain["location"])
    assert float(items.loc[items["name"].isin(["aten::sin", "aten::cos", "aten::exp"]), "us"].sum()) >= 0.95 * chain_us
    assert chain["count"] == matmul["count"] >= 2  # once per traced call that ran ops


def test_a_helper_call_attributes_to_the_innermost_statement_and_the_call_includes_it(run):
    detailed = source_breakdown(run.trace, top=50, statements=run.record.statements)
    mul = _row(detailed.table, scaled, "y = x * 3.0")
    relu = _row(detailed.table, scaled, "return y.relu()")
    call = _row(detailed.table, step, "e = scaled(d)")
    mul_us, relu_us = _ops_us(run.trace, ["aten::mul"]), _ops_us(run.trace, ["aten::clamp_min", "aten::relu"])
    items = detailed.top_items(mul["location"])
    assert float(items.loc[items["name"] == "aten::mul", "us"].sum()) >= 0.95 * mul_us
    items = detailed.top_items(relu["location"])
    assert float(items.loc[items["name"].isin(["aten::clamp_min", "aten::relu"]), "us"].sum()) >= 0.95 * relu_us
    # the calling statement runs nothing itself; with callees it holds the helper's statements
    assert call["self_us"] == pytest.approx(0.0, abs=1.0)
    assert call["inclusive_us"] >= mul["self_us"] + relu["self_us"] - 1e-6
    assert mul["def_line"] == inspect.getsourcelines(scaled)[1]


def test_without_statements_the_breakdown_is_as_before(run):
    old = dataclasses.replace(run.record, statements=None)  # a run recorded before statements
    before = source_breakdown(run.trace, calls=run.traced_calls, scale=run.trace_scale)
    assert wb.ProfileRun(old).attribution.sources == before
    first = inspect.getsourcelines(step)[1]
    row = _row(before.table, step, "def step(")
    assert row["line"] == row["def_line"] == first and row["location"].endswith(f":{first} in step")
    # statements that are not this trace's (another thread) are not used
    other = dataclasses.replace(run.record.statements, tid=run.record.statements.tid + 1)
    assert source_breakdown(run.trace, calls=run.traced_calls, scale=run.trace_scale, statements=other) == before
    empty = StatementLines.empty("not recorded (test)")
    assert source_breakdown(run.trace, calls=run.traced_calls, scale=run.trace_scale, statements=empty) == before
    text = render.text(wb.ProfileRun(old))
    assert f"test_statement_lines.py:{first} in step" in text


def test_the_statements_survive_a_bundle_and_an_older_bundle_loads_without_them(run, tmp_path):
    folder = run.save(tmp_path / "run")
    loaded = wb.load_run(folder)
    assert loaded.record.statements == run.record.statements
    assert loaded.attribution.sources == run.attribution.sources
    assert (folder / "run.json").stat().st_size < 64_000  # the record stays small
    doc = json.loads((folder / "run.json").read_text())
    del doc["run"]["statements"]  # a bundle saved before statements were recorded
    (folder / "run.json").write_text(json.dumps(doc))
    older = wb.load_run(folder)
    assert older.record.statements is None
    assert older.attribution.sources == source_breakdown(older.trace, calls=older.traced_calls, scale=older.trace_scale)
    doc["run"]["statements"] = {"format": "workbench.statements", "version": 1, "count": 3}
    (folder / "run.json").write_text(json.dumps(doc))
    with pytest.raises(BundleError, match="statements"):
        wb.load_run(folder)
    doc["run"]["statements"] = "not an object"
    (folder / "run.json").write_text(json.dumps(doc))
    with pytest.raises(BundleError, match="statements"):
        wb.load_run(folder)


def test_statement_lines_round_trip_and_refuse_damage():
    lines = StatementLines(
        pid=1,
        tid=2,
        ts_ns=np.array([10, 15, 40, 41], dtype=np.int64),
        code=np.array([0, 0, 1, 0], dtype=np.int32),
        line=np.array([3, 4, 8, 4], dtype=np.int32),
        depth=np.array([1, 1, 2, 1], dtype=np.int32),
        codes=(("model.py", 3, "forward"), ("model.py", 8, "helper")),
        end_ns=50,
        note="",
    )
    assert StatementLines.from_dict(json.loads(json.dumps(lines.to_dict()))) == lines
    damaged = lines.to_dict()
    damaged["count"] = 5
    with pytest.raises(ValueError, match="bytes"):
        StatementLines.from_dict(damaged)
    damaged = lines.to_dict()
    damaged["line"] = "%%%"
    with pytest.raises(ValueError, match="base64"):
        StatementLines.from_dict(damaged)
    damaged = lines.to_dict()
    damaged["codes"] = damaged["codes"][:1]  # code 1 names no function
    with pytest.raises(ValueError, match="name no function"):
        StatementLines.from_dict(damaged)


def test_the_trace_function_is_restored_after_a_raising_call(tmp_path):
    calls = []

    def fails(x):
        calls.append(1)
        y = x + 1
        if len(calls) > 2:  # the cold call and the timed one pass; the traced call raises
            raise RuntimeError("boom")
        return y

    x = torch.ones(8)
    with pytest.raises(RuntimeError, match="boom"):
        with ProfilerSession(torch, False, tmp_path) as session:
            calls.extend([1, 1])
            fails(x)
    assert sys.gettrace() is None and session.statements is not None and len(session.statements) > 0
    calls.clear()
    with pytest.raises(RuntimeError, match="boom"):
        wb.profile(fails, x, warmup=0, repeat=1, trace_repeat=1, history=False)
    assert len(calls) == 3 and sys.gettrace() is None


def test_another_trace_function_is_left_alone_and_noted(tmp_path):
    seen = []

    def tracer(frame, event, arg):
        seen.append(event)
        return None

    sys.settrace(tracer)
    try:
        with ProfilerSession(torch, False, tmp_path) as session:
            with session.step(0):
                scaled(torch.ones(8))
        assert sys.gettrace() is tracer
    finally:
        sys.settrace(None)
    assert session.statements is not None and len(session.statements) == 0
    assert "another trace function" in session.statements.note and seen


def test_code_that_replaces_the_trace_function_voids_the_recording(tmp_path):
    def meddles(x):
        sys.settrace(None)
        return x * 2

    with ProfilerSession(torch, False, tmp_path) as session:
        with session.step(0):
            meddles(torch.ones(8))
    assert sys.gettrace() is None
    assert len(session.statements) == 0 and "changed the trace function" in session.statements.note


def test_a_bounded_recording_keeps_its_prefix_and_says_so(run, tmp_path):
    def loop(x):
        for _ in range(50):
            x = x + 1
        return x

    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], with_stack=True)
    with prof:
        recorder = StatementRecorder(torch, max_events=40)
        assert recorder.start()
        try:
            loop(torch.ones(4))
            loop(torch.ones(4))
        finally:
            statements = recorder.stop()
    assert sys.gettrace() is None
    assert statements is not None and len(statements) == 40
    assert "first 40 events" in statements.note and "first line" in statements.note
    assert statements.ts_ns[-1] <= statements.end_ns
    path = tmp_path / "trace.json.gz"
    prof.export_chrome_trace(str(path))
    trace, _ = load_trace(path)
    timed = on_trace(statements, trace)
    assert timed is not None
    sources = source_breakdown(trace, statements=statements, top=50)
    first = inspect.getsourcelines(loop)[1]
    adds = sources.table[sources.table["function"] == "loop"].set_index("line")
    # ops before the bound are the loop body's; after it, the function's first line (as before)
    assert adds.loc[first + 2, "self_us"] > 0 and adds.loc[first, "self_us"] > 0
    assert any("first 40 events" in note for note in dataclasses.replace(run.record, statements=statements).notes)


def test_a_notebook_cell_reads_as_the_statement_line_inside_the_cell(tmp_path):
    source = "def work(v):\n    w = v.sin() * 2\n    return (w + 1).relu()\n"
    filename = "/tmp/ipykernel_4242/3855453478.py"  # ipykernel's file for a cell's code
    namespace: dict = {}
    exec(compile(source, filename, "exec"), namespace)
    x = torch.randn(50_000)
    run = wb.profile(namespace["work"], x, warmup=1, repeat=2, trace_repeat=2, threads=1, history=False)
    sources = source_breakdown(run.trace, cells={"3855453478": 7}, statements=run.record.statements)
    locations = set(sources.table["location"])
    assert "cell [7], line 2 in work" in locations and "cell [7], line 3 in work" in locations, locations
    assert "cell [7], line 1 in work" not in locations
    plain = source_breakdown(run.trace, cells={"3855453478": 7})
    assert "cell [7], line 1 in work" in set(plain.table["location"])


# --- a hand-written trace: exact numbers, CPU ops and GPU kernels through their launches ----------


def _x(cat: str, name: str, ts: float, dur: float, tid: int = 1, **args: object) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _kernel(name: str, ts: float, dur: float, correlation: int) -> dict:
    args = {"correlation": correlation, "device": 0, "stream": 7}
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur, "args": args}


HAND_EVENTS = [
    _x("user_annotation", "ProfilerStep#0", 0, 1000),
    _x("python_function", "model.py(5): forward", 10, 890),
    _x("cpu_op", "aten::mm", 30, 100),  # line 6
    _x("cuda_runtime", "cudaLaunchKernel", 40, 5, correlation=1),
    _x("python_function", "model.py(20): helper", 300, 200),  # called from line 7
    _x("cpu_op", "aten::tanh", 310, 50),  # line 21
    _x("cuda_runtime", "cudaLaunchKernel", 320, 5, correlation=2),
    _x("cpu_op", "aten::add", 600, 30),  # line 8
    _x("cuda_runtime", "cudaLaunchKernel", 610, 5, correlation=3),
    _kernel("gemm_kernel", 1100, 60, 1),
    _kernel("tanh_kernel", 1200, 77, 2),
    _kernel("add_kernel", 1300, 10, 3),
]


def _hand_statements(shift_us: float = 0.0, file: str = "model.py") -> StatementLines:
    """forward (model.py:5) runs line 6, calls helper (model.py:20) on line 7 (helper runs line 21),
    then runs line 8; times in µs on the trace (its earliest event is at 0, no base time)."""
    points = [  # (µs, code, line, depth)
        (9.5, 0, 5, 1),
        (11, 0, 6, 1),
        (200, 0, 7, 1),
        (299, 1, 20, 2),
        (301, 1, 21, 2),
        (499, 0, 7, 1),
        (550, 0, 8, 1),
        (899, -1, -1, 0),
    ]
    ts, code, line, depth = (np.array(c) for c in zip(*points))
    return StatementLines(
        pid=1,
        tid=1,
        ts_ns=((ts + shift_us) * 1000).astype(np.int64),
        code=code.astype(np.int32),
        line=line.astype(np.int32),
        depth=depth.astype(np.int32),
        codes=((file, 5, "forward"), (file, 20, "helper")),
        end_ns=int((950 + shift_us) * 1000),
    )


def _hand_trace(tmp_path: Path):
    import gzip

    path = tmp_path / "hand.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as out:
        json.dump({"traceEvents": HAND_EVENTS}, out)
    return wb.load_trace(path, cache=False)


def _by_location(result) -> dict:
    return result.table.set_index("location")[["self_us", "inclusive_us", "line", "def_line", "count"]].to_dict("index")


@pytest.mark.parametrize("shift_us", [0.0, 5000.0, -300.0])
def test_hand_written_trace_attributes_ops_and_kernels_to_statements(tmp_path, shift_us):
    trace = _hand_trace(tmp_path)
    statements = _hand_statements(shift_us)  # off by a clock offset: re-aligned on the Python events
    cpu = _by_location(source_breakdown(trace, basis="cpu_op", statements=statements))
    assert cpu["model.py:6 in forward"] == {
        "self_us": 100.0,
        "inclusive_us": 100.0,
        "line": 6,
        "def_line": 5,
        "count": 1,
    }
    assert cpu["model.py:21 in helper"]["self_us"] == 50.0 and cpu["model.py:21 in helper"]["def_line"] == 20
    assert cpu["model.py:7 in forward"]["self_us"] == 0.0 and cpu["model.py:7 in forward"]["inclusive_us"] == 50.0
    assert cpu["model.py:8 in forward"]["self_us"] == 30.0
    assert "model.py:5 in forward" not in cpu
    gpu = source_breakdown(trace, statements=statements)
    assert gpu.basis == "kernel"
    kernels = _by_location(gpu)
    assert kernels["model.py:6 in forward"]["self_us"] == 60.0
    assert (
        kernels["model.py:21 in helper"]["self_us"] == 77.0 and kernels["model.py:7 in forward"]["inclusive_us"] == 77.0
    )
    assert kernels["model.py:8 in forward"]["self_us"] == 10.0
    assert list(gpu.top_items("model.py:21 in helper")["name"]) == ["tanh_kernel"]


def test_hand_written_trace_without_matching_statements_names_first_lines(tmp_path):
    trace = _hand_trace(tmp_path)
    before = source_breakdown(trace, basis="cpu_op")
    assert set(before.table["location"]) == {"model.py:5 in forward", "model.py:20 in helper"}
    assert (before.table["line"] == before.table["def_line"]).all()
    # statements of other functions (not this trace's): not used
    assert source_breakdown(trace, basis="cpu_op", statements=_hand_statements(file="other.py")) == before
    assert on_trace(_hand_statements(file="other.py"), trace) is None
    # a recording that stopped early: what ran after it keeps the function's first line
    statements = _hand_statements()
    cut = dataclasses.replace(statements, end_ns=400_000, note="bounded (test)")
    rows = _by_location(source_breakdown(trace, basis="cpu_op", statements=cut))
    assert rows["model.py:21 in helper"]["self_us"] == 50.0 and rows["model.py:5 in forward"]["self_us"] == 30.0


def test_the_recorder_is_no_frame_of_a_compiled_call():
    """Dynamo's frame hook passes the recorder's own trace functions by: recording statements in a
    compiled function's call converts (and counts) nothing."""
    compiled = torch.compile(scaled, backend="eager")
    x = torch.ones(8)
    for _ in range(2):
        compiled(x)
    before = int(torch._dynamo.utils.counters["frames"]["ok"])
    recorder = StatementRecorder(torch)
    assert recorder.start()
    try:
        compiled(x)
    finally:
        statements = recorder.stop()
    assert int(torch._dynamo.utils.counters["frames"]["ok"]) == before
    assert statements is not None and sys.gettrace() is None
