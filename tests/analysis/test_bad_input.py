"""Every analysis on awkward traces: no GPU events, one event, only CPU ops, no steps, NaN durations.
Each returns a well-formed result (the same columns as on a full trace, finite totals, a JSON round
trip) or says plainly why it has nothing to report; none raises.

The awkward traces are cut from real ones (the H100 bert trace, the A100 alexnet trace, a CPU trace the
capture code recorded), in a temporary folder."""

from __future__ import annotations

import functools
import gzip
import json
import math
import warnings

import numpy as np
import pytest

import workbench as wb
import workbench.analysis as wb_analysis
from tests.analysis.conftest import GPU_DIR, load_set
from workbench.api.trace import Trace

FUNCS = [
    "op_breakdown",
    "kernel_breakdown",
    "temporal_breakdown",
    "idle_breakdown",
    "launch_stats",
    "comm_overlap",
    "copy_stats",
    "sync_audit",
    "stragglers",
    "step_breakdown",
    "analytic_work",
]
KINDS = ["no_gpu_events", "one_event", "only_cpu_ops", "no_steps", "nan_durations"]
FRAMES = ("table", "types", "gaps", "by_api", "by_cause")
CPU_TRACE = GPU_DIR.parent / "cpu" / "cpu_mlp_plain.json.gz"


def _cut(tmp, name: str, keep) -> Trace:
    with gzip.open(GPU_DIR / "h100_bert_small.json.gz") as fh:
        trace = json.load(fh)
    trace["traceEvents"] = keep(trace["traceEvents"])
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(trace))
    return wb.load_trace(path)


def _with_nan_durations(trace: Trace) -> Trace:
    """Every third kernel, runtime call, CPU op and annotation loses its duration (NaN)."""
    tables = {name: trace.table(name).copy() for name in trace._tables}
    for name in ("kernels", "runtime", "cpu_ops", "annotations"):
        df = tables[name]
        rows = df.index[::3]
        df.loc[rows, "dur_us"] = np.nan
        df.loc[rows, "end_us"] = np.nan
    return Trace(tables, trace.meta)


@functools.lru_cache(maxsize=None)
def _on_full_trace(func: str, semantics: str):
    return getattr(wb_analysis, func)(load_set("param_v100_dlrm_8rank"), semantics)


@pytest.fixture(scope="module")
def awkward(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("awkward")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {
            "no_gpu_events": wb.load_trace(CPU_TRACE),
            "one_event": _cut(tmp, "one_event", lambda ev: [e for e in ev if e.get("cat") == "kernel"][:1]),
            "only_cpu_ops": _cut(tmp, "only_cpu_ops", lambda ev: [e for e in ev if e.get("cat") == "cpu_op"]),
            "no_steps": load_set("hta_a100_alexnet"),  # a real GPU trace without ProfilerStep annotations
            "nan_durations": _with_nan_durations(load_set("tracelens_h100_bert_small")),
        }


def test_the_awkward_traces_are_what_they_claim(awkward):
    assert not awkward["no_gpu_events"].has_gpu and len(awkward["no_gpu_events"].cpu_ops) > 0
    one = awkward["one_event"]
    assert len(one.kernels) == 1 and len(one.cpu_ops) == 0 and len(one.runtime) == 0
    only = awkward["only_cpu_ops"]
    assert len(only.cpu_ops) > 0 and not only.has_gpu and len(only.runtime) == 0
    assert not awkward["no_steps"].annotations["name"].astype(str).str.startswith("ProfilerStep#").any()
    assert awkward["nan_durations"].kernels["dur_us"].isna().sum() > 10


@pytest.mark.parametrize("semantics", ["workbench", "hta"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("func", FUNCS)
def test_analysis_is_well_formed_on_awkward_traces(awkward, func, kind, semantics):
    result = getattr(wb_analysis, func)(awkward[kind], semantics)
    full = _on_full_trace(func, semantics)
    for frame in FRAMES:
        if hasattr(result, frame):
            assert list(getattr(result, frame).columns) == list(getattr(full, frame).columns), frame
    again = type(result).from_dict(json.loads(json.dumps(result.to_dict())))
    assert again == result
    for name in ("total_kernel_us", "busy_us", "total_self_us", "blocked_us", "total_copy_us", "total_flops"):
        if hasattr(result, name):
            assert math.isfinite(getattr(result, name)), name


@pytest.mark.parametrize("kind", ["no_gpu_events", "only_cpu_ops"])
def test_gpu_tables_are_empty_without_gpu_work_and_say_why(awkward, kind):
    trace = awkward[kind]
    for func in (
        "kernel_breakdown",
        "temporal_breakdown",
        "idle_breakdown",
        "launch_stats",
        "comm_overlap",
        "copy_stats",
        "stragglers",
    ):
        assert len(getattr(wb_analysis, func)(trace).table) == 0, func
    assert "no GPU kernels" in wb_analysis.stragglers(trace).reason
    assert math.isnan(wb_analysis.temporal_breakdown(trace).idle_pct)


def test_nan_durations_are_left_out_not_spread(awkward):
    trace = awkward["nan_durations"]
    k = trace.kernels
    assert wb_analysis.kernel_breakdown(trace).total_kernel_us == pytest.approx(float(k["dur_us"].sum(skipna=True)))
    temporal = wb_analysis.temporal_breakdown(trace).table
    assert np.isfinite(temporal.drop(columns="rank").to_numpy(float)).all()
    assert 0 < temporal.loc[0, "idle_us"] < temporal.loc[0, "kernel_time_us"]
    idle = wb_analysis.idle_breakdown(trace).table
    assert np.isfinite(idle["idle_us"]).all() and idle["idle_us"].sum() > 0
    ops = wb_analysis.op_breakdown(trace).table
    assert np.isfinite(ops["self_us"]).all() and np.isfinite(ops["total_us"]).all()


def test_one_event_trace_has_one_kernel_and_no_idle(awkward):
    trace = awkward["one_event"]
    kb = wb_analysis.kernel_breakdown(trace)
    assert len(kb.table) == 1 and kb.table.loc[0, "count"] == 1
    temporal = wb_analysis.temporal_breakdown(trace).table
    assert temporal.loc[0, "idle_us"] == 0 and temporal.loc[0, "kernel_time_us"] == kb.total_kernel_us
    assert len(wb_analysis.idle_breakdown(trace).gaps) == 0
    assert "two or more ranks" in wb_analysis.stragglers(trace).reason
