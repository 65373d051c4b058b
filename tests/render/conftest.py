"""Results with hostile names for the renderer tests: a small recorded-style trace (a CPU op, its
runtime launch and the GPU kernel it launched, each named like markup), a ProfileRun over it with
seeded samples, a Diagnosis, a Comparison and a DecisionRecord built from their own types."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from workbench.api.run import ProfileRun
from workbench.capture.compile_diag import CompileDiagnostics
from workbench.capture.run import RunRecord
from workbench.hypotheses import Diagnosis
from workbench.hypotheses.hypothesis import Evidence, Hypothesis
from workbench.measurement import Measurement
from workbench.trace import read_trace
from workbench.variants.decision import DecisionRecord
from workbench.variants.results import Comparison, VariantResult
from workbench.variants.stats import Speedup

HOSTILE_OP = '<script>alert("op")</script>'
HOSTILE_KERNEL = "<img src=x onerror='k'>&kernel"
HOSTILE_RUN = 'cell <b>"quoted"</b>'
HOSTILE_VARIANT = '<script>alert("variant")</script>'
# what must never reach an HTML page unescaped (markup that would run or render)
RAW_MARKUP = ("<script>", "<img", "<b>")


def _trace_events() -> list[dict]:
    events = []
    for step in range(3):
        t0 = 1000.0 + step * 100.0
        events += [
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": HOSTILE_OP,
                "pid": 1,
                "tid": 1,
                "ts": t0,
                "dur": 40.0,
                "args": {"External id": step + 1, "Input Dims": [[64, 64], [64, 64]], "Input type": ["float", "float"]},
            },
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": t0 + 5,
                "dur": 6.0,
                "args": {"correlation": 100 + step, "External id": step + 1},
            },
            {
                "ph": "X",
                "cat": "kernel",
                "name": HOSTILE_KERNEL,
                "pid": 0,
                "tid": 7,
                "ts": t0 + 20,
                "dur": 30.0,
                "args": {"correlation": 100 + step, "device": 0, "stream": 7, "External id": step + 1},
            },
        ]
    return events


@pytest.fixture(scope="session")
def hostile_trace_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("render") / "hostile.json"
    path.write_text(
        json.dumps({"traceEvents": _trace_events(), "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}]}),
        encoding="utf-8",
    )
    return path


def make_run(trace_path: Path | None, name: str = HOSTILE_RUN) -> ProfileRun:
    rng = np.random.default_rng(0)
    samples = tuple(float(2.0 * x) for x in np.exp(rng.normal(0, 0.01, 20)))
    traced = tuple(float(2.5 * x) for x in np.exp(rng.normal(0, 0.01, 3)))
    return ProfileRun(
        RunRecord(
            name=name,
            timing=Measurement(samples_ms=samples, label=name),
            cold_ms=9.0,
            warmup=2,
            repeat=20,
            device="cuda:0",
            compile=CompileDiagnostics(),
            environment={"torch": {"version": "<script>2.x"}, "seed": 0},
            settings={"num_threads": 1},
            memory={},
            profiler_warmup="warmed",
            created_at="2026-01-01T00:00:00+00:00",
            trace_path=str(trace_path) if trace_path else None,
            trace_note="" if trace_path else "trace off",
            trace=read_trace(trace_path) if trace_path else None,
            traced_timing=Measurement(samples_ms=traced, label="traced"),
            trace_repeat=3 if trace_path else 0,
        )
    )


@pytest.fixture(scope="session")
def hostile_run(hostile_trace_path: Path) -> ProfileRun:
    return make_run(hostile_trace_path)


def hypothesis(title: str = '<script>alert("h")</script>', stake_ms: float = 0.5) -> Hypothesis:
    return Hypothesis(
        category="memory_bound",
        title=title,
        observed='a chain of "full" passes <b>',
        mechanism="each pass reads and writes the tensor",
        evidence=(Evidence("share_pct", 80.0, "%", 50.0),),
        time_at_stake_ms=stake_ms,
        predicted_effect="fusing leaves one pass",
        falsifier="fuse it & time it",
        confidence="medium",
        suggested_variants=("compiled",),
        rule="chain_rule",
    )


@pytest.fixture()
def diagnosis() -> Diagnosis:
    return make_diagnosis()


def make_diagnosis() -> Diagnosis:
    return Diagnosis(hypotheses=(hypothesis(),))


def decision_record(variant: str = HOSTILE_VARIANT) -> DecisionRecord:
    return DecisionRecord(
        decision="keep",
        variant=variant,
        reason='faster by 1.5× "end to end" <i>',
        problem="slow <chain>",
        bottleneck="memory_bound",
        change="fused",
        numerical_class="reordered",
        why_safe="checked <ok>",
        guard="",
        fallback="eager",
        evidence=("median 2 ms -> 1.3 ms",),
        result="2 ms → 1.3 ms",
        rejected_alternatives=(),
        remaining_risk=("<script>risk</script>",),
        failure_cases=(),
        environment={"device": "cpu"},
    )


@pytest.fixture()
def comparison() -> Comparison:
    return make_comparison()


def make_comparison() -> Comparison:
    base = VariantResult(
        name="eager",
        kind="baseline",
        status="ok",
        timing=Measurement(samples_ms=(2.0, 2.1, 1.9, 2.0), label="eager"),
        setup_ms=0.0,
    )
    fast = VariantResult(
        name=HOSTILE_VARIANT,
        kind="custom",
        status="ok",
        timing=Measurement(samples_ms=(1.3, 1.31, 1.29, 1.3), label="v"),
        setup_ms=12.5,
        speedup=Speedup(
            point=1.54, ci_low=1.5, ci_high=1.58, p95_ratio=1.5, bootstrap_low=1.5, bootstrap_high=1.58, n_pairs=4
        ),
        decision="keep",
        decision_reason='faster "end to end"',
    )
    return Comparison(baseline="eager", results=(base, fast), decision=decision_record())


# --- a traced run with Python events (time by module and source line) ---------------------------
HOSTILE_MODULE = 'Chain<script "x">'  # an nn.Module named like markup (no "/": that separates a module path)


def _x(cat: str, name: str, ts: float, dur: float, tid: int = 1, **args: object) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def python_events() -> list[dict]:
    """One ProfilerStep: Model_0 > (model.py:5 forward) > Block_0 > (model.py:20 forward) >
    [aten::mm 100 µs, <HOSTILE_MODULE>_0 > (model.py:40 forward) > [aten::tanh 50, aten::pow 40]];
    aten::add 30 µs in Model's forward; aten::copy_ 20 µs outside any module (CPU ops only)."""
    py = "python_function"
    return [
        _x("user_annotation", "ProfilerStep#0", 0, 1000),
        _x(py, "nn.Module: Model_0", 10, 900),
        _x(py, "model.py(5): forward", 12, 880),
        _x(py, "nn.Module: Block_0", 20, 500),
        _x(py, "model.py(20): forward", 22, 496),
        _x("cpu_op", "aten::mm", 30, 100),
        _x(py, f"nn.Module: {HOSTILE_MODULE}_0", 200, 300),
        _x(py, "model.py(40): forward", 201, 298),
        _x("cpu_op", "aten::tanh", 210, 50),
        _x("cpu_op", "aten::pow", 300, 40),
        _x("cpu_op", "aten::add", 600, 30),
        _x("cpu_op", "aten::copy_", 950, 20),
    ]


def write_python_trace(path: Path) -> Path:
    path.write_text(json.dumps({"traceEvents": python_events()}), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def python_trace_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_python_trace(tmp_path_factory.mktemp("render") / "python_events.json")


@pytest.fixture()
def attributed_run(python_trace_path: Path) -> ProfileRun:
    """A run whose trace recorded Python events: 3 traced calls, clean / traced = 0.8."""
    return make_run(python_trace_path, name="attributed")
