"""roctx ranges in rocprofv3 JSON read into the annotations table (names, times, threads, steps), held against
the records themselves.

rocprofv3 writes one ``marker_api`` record per closed range (``roctxRangePushA``: start at the push, end at
the pop; ``roctxThreadRangeA`` in rocprofiler-sdk 1.x), its message in ``strings.marker_api`` under the
record's correlation id. ``tests/data/rocprof/roctx_ranges.json`` is a hand-written file of that layout:
thread 4242 holds two ``ProfilerStep#N`` ranges with nested ranges and an instant marker, in rocprofv3's
shape; thread 4250 holds the calls themselves (a push record and a pop record each: a pair, a nested
pair and a pop with no push). The shared real file (``908_results.json.gz``, recorded without
``--marker-trace``) has no marker record at all: read as it is, it says so; with ranges written around its
own dispatches in rocprofv3's layout, the steps hold the dispatches launched inside them.
"""

from __future__ import annotations

import copy
import gzip
import json
import warnings
from pathlib import Path

import pytest

from tests.trace.formats_data import ROCPROF_FILE, shared
from workbench.errors import TraceWarning

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "rocprof" / "roctx_ranges.json"
BASE_NS = 5_000_000_000_000  # the fixture's times: BASE_NS + µs * 1000
# (name, thread, start µs, duration µs) of every range in the fixture, by start (origin: the first range, 100 µs)
EXPECTED = [
    ("ProfilerStep#1", "4242", 100, 1000),
    ("load_batch", "4250", 120, 581),  # push call at 120, pop call 700-701
    ("forward", "4242", 150, 350),
    ("backward", "4242", 520, 480),
    ("ProfilerStep#2", "4242", 1200, 800),
    ("outer", "4250", 1210, 591),  # push 1210, pop 1800-1801
    ("forward", "4242", 1250, 350),
    ("inner", "4250", 1300, 101),  # push 1300, pop 1400-1401
]


def _load(path):
    from workbench.api.trace import load_trace

    return load_trace(str(path), cache=False, workers=1)


def _doc():
    return json.loads(FIXTURE.read_text())


def _write(tmp_path, doc, name="roctx.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture(scope="module")
def trace():
    with pytest.warns(TraceWarning) as caught:
        t = _load(FIXTURE)
    t.caught = [str(w.message) for w in caught]
    return t


def test_ranges_names_times_threads(trace):
    a = trace.annotations
    got = list(zip(a["name"].astype(str), a["tid"].astype(str), a["ts_us"].round(6), a["dur_us"].round(6)))
    assert got == [(n, t, float(s - 100), float(d)) for n, t, s, d in EXPECTED]
    assert (a["end_us"] == a["ts_us"] + a["dur_us"]).all()
    assert set(a["pid"].astype(str)) == {"4242"} and set(a["rank"]) == {0}
    assert trace.meta.origins_ns[0] == BASE_NS + 100_000  # the first range is the rank's earliest event


def test_step_ranges_are_steps_the_rest_user(trace):
    a = trace.annotations.assign(name=lambda f: f["name"].astype(str), kind=lambda f: f["kind"].astype(str))
    steps = a[a["kind"] == "step"]
    assert steps["name"].tolist() == ["ProfilerStep#1", "ProfilerStep#2"] and steps["step"].tolist() == [1, 2]
    others = a[a["kind"] != "step"]
    assert set(others["kind"]) == {"user"} and (others["step"] == -1).all()


def test_fidelity_says_ranges_are_read(trace):
    assert "annotations" not in trace.meta.fidelity and "annotations.step" not in trace.meta.fidelity
    assert any("1 roctxMarkA instant marker" in n for n in trace.meta.notes)  # said, not read
    assert not any("marker_api" in n and "records not read by this reader" in n for n in trace.meta.notes)


def test_unmatched_pop_is_named_and_the_rest_kept(trace):
    (message,) = [m for m in trace.caught if "roctxRangePop" in m]
    assert "1 roctxRangePop with no open roctxRangePushA" in message
    assert f"thread 4250 at {BASE_NS + 1_900_000} ns" in message and "other ranges were read" in message
    assert len(trace.annotations) == len(EXPECTED)


def test_step_breakdown_on_roctx_steps(trace):
    table = trace.step_breakdown().table
    assert table["step"].tolist() == ["ProfilerStep#1", "ProfilerStep#2"]
    assert table["dur_us"].tolist() == [1000.0, 800.0]
    assert table["n_kernels"].tolist() == [3, 2]  # launched inside each step (hip_api correlation)
    assert table["gpu_busy_us"].tolist() == [200.0 + 300.0 + 100.0, 200.0 + 200.0]


def test_critical_path_through_a_roctx_range(trace):
    step = trace.critical_path(annotation="ProfilerStep", instance=1)
    assert step.step_us == pytest.approx(800.0) and 0 < step.length_us <= 800.0
    backward = trace.critical_path(annotation="backward")
    assert backward.step_us == pytest.approx(480.0) and 0 < backward.length_us <= 480.0


def test_push_never_popped_is_named_and_dropped(tmp_path):
    doc = _doc()
    records = doc["rocprofiler-sdk-tool"][0]["buffer_records"]
    # the last two pops of thread 4250 (1800: closes "outer"; 1900: the stray one) removed: "outer" stays open
    late = {BASE_NS + 1_800_000, BASE_NS + 1_900_000}
    records["marker_api"] = [r for r in records["marker_api"] if r["start_timestamp"] not in late]
    with pytest.warns(TraceWarning, match=r"1 roctxRangePushA never popped \('outer' on thread 4250 at") as caught:
        t = _load(_write(tmp_path, doc))
    assert not [w for w in caught if "no open roctxRangePushA" in str(w.message)]
    names = t.annotations["name"].astype(str).tolist()
    assert "outer" not in names and "inner" in names and len(names) == len(EXPECTED) - 1


def test_sdk_1x_thread_range_records(tmp_path):
    """rocprofiler-sdk 1.x writes a push/pop pair as one roctxThreadRangeA record (MARKER_CORE_RANGE_API)."""
    doc = _doc()
    entry = doc["rocprofiler-sdk-tool"][0]
    kinds = entry["strings"]["buffer_records"]
    kinds.append({"kind": "MARKER_CORE_RANGE_API", "operations": ["roctxMarkA", "roctxThreadRangeA"]})
    records = entry["buffer_records"]
    records["marker_api"] = [
        {
            "size": 48,
            "kind": len(kinds) - 1,
            "operation": 1,
            "thread_id": 4242,
            "correlation_id": {"internal": 900 + i, "external": 0},
            "start_timestamp": BASE_NS + start * 1000,
            "end_timestamp": BASE_NS + end * 1000,
        }
        for i, (start, end) in enumerate([(100, 1100), (1200, 2000)])
    ]
    entry["strings"]["marker_api"] = [{"key": 900, "value": "ProfilerStep#7"}, {"key": 901, "value": "ProfilerStep#8"}]
    with warnings.catch_warnings():
        warnings.simplefilter("error", TraceWarning)
        t = _load(_write(tmp_path, doc))
    a = t.annotations
    assert a["name"].astype(str).tolist() == ["ProfilerStep#7", "ProfilerStep#8"] and a["step"].tolist() == [7, 8]
    assert a["dur_us"].tolist() == [1000.0, 800.0]
    assert t.step_breakdown().table["n_kernels"].tolist() == [3, 2]


def test_only_instant_markers_say_no_range(tmp_path):
    doc = _doc()
    records = doc["rocprofiler-sdk-tool"][0]["buffer_records"]
    records["marker_api"] = [r for r in records["marker_api"] if r["operation"] == 0]  # roctxMarkA only
    t = _load(_write(tmp_path, doc))
    assert t.annotations.empty
    assert "no closed range" in t.meta.fidelity["annotations"]
    assert "no roctx range named ProfilerStep#N" in t.meta.fidelity["annotations.step"]


def test_ranges_without_steps_say_no_step(tmp_path):
    doc = _doc()
    entry = doc["rocprofiler-sdk-tool"][0]
    for m in entry["strings"]["marker_api"]:
        m["value"] = m["value"].replace("ProfilerStep#", "phase ")
    with pytest.warns(TraceWarning):
        t = _load(_write(tmp_path, doc))
    assert "annotations" not in t.meta.fidelity and len(t.annotations) == len(EXPECTED)
    assert "no step ranges" in t.meta.fidelity["annotations.step"]
    from workbench.trace.fidelity import NotAvailableError

    with pytest.raises(NotAvailableError, match="annotations.step"):
        t.step_breakdown()


# --- the shared real file ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def document():
    with gzip.open(shared("rocprof", ROCPROF_FILE)) as fh:
        return json.load(fh)


def test_real_file_has_no_marker_records_and_says_so(document):
    from workbench.trace.fidelity import NotAvailableError

    entry = document["rocprofiler-sdk-tool"][0]
    assert entry["buffer_records"]["marker_api"] == [] and entry["strings"]["marker_api"] == []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = _load(shared("rocprof", ROCPROF_FILE))
    assert t.annotations.empty
    assert "no roctx marker records" in t.meta.fidelity["annotations"]
    with pytest.raises(NotAvailableError, match="annotations: the file has no roctx marker records"):
        t.step_breakdown()


def _real_with_steps(document, steps=3, per_step=20):
    """The real file's first dispatches (by start), a HIP launch call before each, and rocprofv3-shaped
    ProfilerStep#N ranges (each holding ``per_step`` launches) with a nested "forward" range each."""
    entry = copy.deepcopy({k: v for k, v in document["rocprofiler-sdk-tool"][0].items() if k != "buffer_records"})
    records = dict(document["rocprofiler-sdk-tool"][0]["buffer_records"])
    dispatches = sorted(records["kernel_dispatch"], key=lambda r: r["start_timestamp"])[: steps * per_step]
    kinds = [k["kind"] for k in entry["strings"]["buffer_records"]]
    hip, marker = kinds.index("HIP_RUNTIME_API"), kinds.index("MARKER_CORE_API")
    launch = entry["strings"]["buffer_records"][hip]["operations"].index("hipLaunchKernel")
    push = entry["strings"]["buffer_records"][marker]["operations"].index("roctxRangePushA")
    tid = dispatches[0]["thread_id"]
    launches = [r["start_timestamp"] - 5000 for r in dispatches]
    hip_api = [
        {
            "kind": hip,
            "operation": launch,
            "thread_id": tid,
            "correlation_id": dict(r["correlation_id"]),
            "start_timestamp": at,
            "end_timestamp": at + 4000,
        }
        for r, at in zip(dispatches, launches)
    ]
    ranges, messages = [], []
    for s in range(steps):
        first, last = launches[s * per_step], launches[(s + 1) * per_step - 1]
        end = launches[(s + 1) * per_step] - 1 if s + 1 < steps else last + 4000
        for name, start, stop in ((f"ProfilerStep#{s}", first, end), ("forward", first + 1, last)):
            corr = 10**9 + len(ranges)
            ranges.append(
                {
                    "size": 48,
                    "kind": marker,
                    "operation": push,
                    "thread_id": tid,
                    "correlation_id": {"internal": corr, "external": 0},
                    "start_timestamp": start,
                    "end_timestamp": stop,
                }
            )
            messages.append({"key": corr, "value": name})
    entry["strings"]["marker_api"] = messages
    records.update(kernel_dispatch=dispatches, hip_api=hip_api, marker_api=ranges)
    entry["buffer_records"] = records
    return {"rocprofiler-sdk-tool": [entry]}, ranges, messages


def test_real_file_with_roctx_ranges(document, tmp_path):
    doc, ranges, messages = _real_with_steps(document)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = _load(_write(tmp_path, doc, "real_roctx.json"))
    a = t.annotations
    name_of = {m["key"]: m["value"] for m in messages}
    expected = sorted(
        (r["start_timestamp"], name_of[r["correlation_id"]["internal"]], r["end_timestamp"] - r["start_timestamp"])
        for r in ranges
    )
    assert a["name"].astype(str).tolist() == [n for _, n, _ in expected]
    assert [round(d * 1000) for d in a["dur_us"]] == [d for *_, d in expected]  # exact in ns
    assert a["kind"].astype(str).tolist().count("step") == 3 and "annotations" not in t.meta.fidelity
    table = t.step_breakdown().table
    assert table["step"].tolist() == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"]
    assert table["n_kernels"].tolist() == [20, 20, 20]
    path = t.critical_path(annotation="ProfilerStep", instance=1)
    step_ns = expected[2][2]  # ProfilerStep#1 (the third range by start: step 0, its forward, step 1)
    assert expected[2][1] == "ProfilerStep#1" and round(path.step_us * 1000) == step_ns
    assert 0 < path.length_us <= path.step_us + 1e-6
