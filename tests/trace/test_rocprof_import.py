"""rocprofv3 (rocprofiler-sdk) JSON read into the declared tables, held against a direct reading of the JSON.

Kernel count and total time per kernel name equal the file's own kernel_dispatch records (exact, in ns);
HIP API calls link to their dispatches by correlation id; what the format lacks is said; a file of
another layout (tool version), a truncated file and JSON that is not rocprof's are clear errors.
"""

from __future__ import annotations

import copy
import gzip
import json
import shutil
import warnings
from collections import defaultdict

import pytest

from tests.trace.formats_data import ROCPROF_FILE, shared
from workbench.errors import TraceFormatError


@pytest.fixture(scope="module")
def document():
    with gzip.open(shared("rocprof", ROCPROF_FILE)) as fh:
        return json.load(fh)


@pytest.fixture(scope="module")
def trace():
    from workbench.api.trace import load_trace

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_trace(shared("rocprof", ROCPROF_FILE), cache=False, workers=1)


def test_kernels_per_name_equal_the_json(document, trace):
    entry = document["rocprofiler-sdk-tool"][0]
    names = {s["kernel_id"]: s["demangled_kernel_name"] for s in entry["kernel_symbols"]}
    expected = defaultdict(lambda: [0, 0])
    for r in entry["buffer_records"]["kernel_dispatch"]:
        e = expected[names[r["dispatch_info"]["kernel_id"]]]
        e[0] += 1
        e[1] += r["end_timestamp"] - r["start_timestamp"]
    table = trace.kernel_breakdown().table
    got = table.groupby(table["name"].astype(str)).agg(count=("count", "sum"), sum_us=("sum_us", "sum"))
    assert set(got.index) == set(expected)
    for name, (count, total_ns) in expected.items():
        assert int(got.loc[name, "count"]) == count, name
        assert round(float(got.loc[name, "sum_us"]) * 1000) == total_ns, name
    assert len(trace.kernels) == len(entry["buffer_records"]["kernel_dispatch"])


def test_devices_streams_and_launch_geometry(document, trace):
    entry = document["rocprofiler-sdk-tool"][0]
    props = trace.device_properties[0]
    assert props and props[0]["name"] == "AMD Instinct MI350X" and props[0]["numSms"] == 256
    records = entry["buffer_records"]["kernel_dispatch"]
    assert trace.kernels["stream"].nunique() == len({r["stream_id"]["handle"] for r in records})
    wg = sum(r["dispatch_info"]["workgroup_size"]["x"] for r in records)
    assert int(trace.kernels["block_x"].sum()) == wg
    groups = sum(-(-r["dispatch_info"]["grid_size"]["x"] // r["dispatch_info"]["workgroup_size"]["x"]) for r in records)
    assert int(trace.kernels["grid_x"].sum()) == groups


def test_source_fidelity_and_not_available(trace):
    from workbench.trace.fidelity import NotAvailableError

    assert trace.meta.source.startswith("rocprofv3-json")
    with pytest.raises(NotAvailableError, match="not available from rocprofv3-json.*cpu_ops.*no FLOPs"):
        trace.op_breakdown()
    with pytest.raises(NotAvailableError, match="HIP API"):
        trace.launch_stats()
    with pytest.raises(NotAvailableError, match="host wait"):
        trace.idle_breakdown()
    assert trace.temporal_breakdown().table["idle_pct"].notna().all()


def test_analyze_runs_and_says_what_is_missing(capsys):
    from workbench.cli import main

    assert main(["analyze", str(shared("rocprof", ROCPROF_FILE)), "--top", "2", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "not available from rocprofv3-json" in out and "== kernel breakdown ==" in out
    assert "not available: not available" not in out


def _small(document, n=50):
    """The shared file cut to its first ``n`` dispatches, with HIP API calls and copies added."""
    doc = copy.deepcopy({"rocprofiler-sdk-tool": [dict(document["rocprofiler-sdk-tool"][0])]})
    entry = doc["rocprofiler-sdk-tool"][0]
    records = dict(entry["buffer_records"])
    records["kernel_dispatch"] = records["kernel_dispatch"][:n]
    kinds = [k["kind"] for k in entry["strings"]["buffer_records"]]
    hip, copy_kind = kinds.index("HIP_RUNTIME_API"), kinds.index("MEMORY_COPY")
    launch = entry["strings"]["buffer_records"][hip]["operations"].index("hipLaunchKernel")
    htod = entry["strings"]["buffer_records"][copy_kind]["operations"].index("MEMORY_COPY_HOST_TO_DEVICE")
    gpu = next(a["id"]["handle"] for a in entry["agents"] if a["type"] == 2)
    cpu = next(a["id"]["handle"] for a in entry["agents"] if a["type"] == 1)
    records["hip_api"] = [
        {
            "kind": hip,
            "operation": launch,
            "thread_id": r["thread_id"],
            "correlation_id": dict(r["correlation_id"]),
            "start_timestamp": r["start_timestamp"] - 5000,
            "end_timestamp": r["start_timestamp"] - 1000,
        }
        for r in records["kernel_dispatch"]
    ]
    start = records["kernel_dispatch"][-1]["end_timestamp"] + 1000
    records["memory_copy"] = [
        {
            "kind": copy_kind,
            "operation": htod,
            "thread_id": 1,
            "bytes": 4096,
            "correlation_id": {"internal": 10**6, "external": 0},
            "start_timestamp": start,
            "end_timestamp": start + 2048,
            "src_agent_id": {"handle": cpu},
            "dst_agent_id": {"handle": gpu},
        }
    ]
    entry["buffer_records"] = records
    return doc


def test_hip_api_and_copies(document, tmp_path):
    from workbench.trace import read_trace

    path = tmp_path / "small.json"
    path.write_text(json.dumps(_small(document)))
    data = read_trace(path)
    assert len(data.runtime) == 50 and data.runtime["is_launch"].all()
    k = data.kernels[data.kernels["kind"] == "kernel"]
    assert (k["runtime_index"] >= 0).all() and (k["launch_name"].astype(str) == "hipLaunchKernel").all()
    copies = data.copies
    assert len(copies) == 1 and copies["copy_kind"].astype(str).tolist() == ["HtoD"]
    assert int(copies["bytes"].iloc[0]) == 4096
    assert "runtime" not in data.meta.fidelity and "kernels.launch_ts_us" not in data.meta.fidelity


def test_format_is_judged_by_content(tmp_path):
    from workbench.trace import read_trace

    path = tmp_path / "profile.bin"
    shutil.copy(shared("rocprof", ROCPROF_FILE), path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert read_trace(path).meta.source.startswith("rocprofv3-json")


# --- bad input -------------------------------------------------------------------------------------
def test_another_tool_version_layout(document, tmp_path):
    from workbench.trace import read_trace

    doc = _small(document)
    del doc["rocprofiler-sdk-tool"][0]["kernel_symbols"]
    path = tmp_path / "older.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(TraceFormatError, match=r"layout this reader does not know.*lacks \['kernel_symbols'\]"):
        read_trace(path)
    doc = _small(document)
    for r in doc["rocprofiler-sdk-tool"][0]["buffer_records"]["kernel_dispatch"]:
        r["begin_ns"] = r.pop("start_timestamp")
    path.write_text(json.dumps(doc))
    with pytest.raises(TraceFormatError, match="kernel_dispatch record of a layout.*start_timestamp"):
        read_trace(path)


def test_truncated_file(tmp_path):
    from workbench.trace import read_trace

    data = shared("rocprof", ROCPROF_FILE).read_bytes()
    path = tmp_path / "cut.json.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceFormatError, match="truncated"):
        read_trace(path)
    plain = tmp_path / "cut.json"
    plain.write_bytes(gzip.decompress(data)[:100_000])
    with pytest.raises(TraceFormatError, match="truncated"):
        read_trace(plain)


def test_no_dispatch_is_an_error_not_an_empty_table(document, tmp_path):
    from workbench.trace import read_trace

    doc = _small(document)
    doc["rocprofiler-sdk-tool"][0]["buffer_records"]["kernel_dispatch"] = []
    doc["rocprofiler-sdk-tool"][0]["buffer_records"]["memory_copy"] = []
    path = tmp_path / "empty.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(TraceFormatError, match="no kernel dispatch"):
        read_trace(path)
