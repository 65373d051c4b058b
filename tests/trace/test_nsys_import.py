"""Nsight Systems SQLite exports read into the declared tables, held against the file's own rows.

For each shared export: kernel count and total time per kernel name equal a direct SQL GROUP BY (exact,
in integer ns); the idle share per device equals the same union-of-intervals computation made from the
raw rows; copies, runtime calls and NVTX ranges are all there; the trace says what the format lacks.
Bad input (an SQLite file that is not an export, a truncated copy, an unknown schema version) is a
clear error.
"""

from __future__ import annotations

import shutil
import sqlite3
import warnings

import numpy as np
import pytest

from tests.trace.formats_data import NSYS_FILES, shared
from workbench.errors import TraceFormatError


@pytest.fixture(scope="module")
def loaded():
    from workbench.api.trace import load_trace

    cache = {}

    def _load(name):
        if name not in cache:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cache[name] = load_trace(shared("nsys", name), cache=False, workers=1)
        return cache[name]

    return _load


def _sql(path, query):
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


def _union_ns(rows):
    """Length of the union of [start, end) intervals (integer ns)."""
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(rows):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (cur_e - cur_s if cur_e is not None else 0)


@pytest.mark.parametrize("name", NSYS_FILES)
def test_kernels_per_name_equal_sql_group_by(loaded, name):
    path = shared("nsys", name)
    expected = {
        n: (c, t)
        for n, c, t in _sql(
            path,
            """
        SELECT s.value, count(*), sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN StringIds s ON s.id = k.demangledName GROUP BY s.value""",
        )
    }
    trace = loaded(name)
    table = trace.kernel_breakdown().table
    kernels = table[table["name"].astype(str).isin(expected)]
    got = kernels.groupby(kernels["name"].astype(str)).agg(count=("count", "sum"), sum_us=("sum_us", "sum"))
    assert set(got.index) == set(expected)
    for kernel, (count, total_ns) in expected.items():
        assert int(got.loc[kernel, "count"]) == count, kernel
        assert round(float(got.loc[kernel, "sum_us"]) * 1000) == total_ns, kernel
    # every GPU row of kind "kernel" is one of them, and the totals agree exactly
    k = trace.kernels[trace.kernels["kind"] == "kernel"]
    assert len(k) == sum(c for c, _ in expected.values())
    assert round(float(k["dur_us"].sum()) * 1000) == sum(t for _, t in expected.values())


@pytest.mark.parametrize("name", NSYS_FILES)
def test_kernels_per_device_and_name_equal_sql(loaded, name):
    path = shared("nsys", name)
    expected = {
        (d, n): (c, t)
        for d, n, c, t in _sql(
            path,
            """
        SELECT k.deviceId, s.value, count(*), sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN StringIds s ON s.id = k.demangledName GROUP BY 1, 2""",
        )
    }
    trace = loaded(name)
    device_of_rank = {r: info["device"] for r, info in trace.distributed_info.items()}
    assert sorted(device_of_rank.values()) == sorted({d for d, _ in expected})
    k = trace.kernels[trace.kernels["kind"] == "kernel"]
    got = k.groupby([k["rank"].map(device_of_rank), k["name"].astype(str)]).agg(
        n=("dur_us", "size"), t=("dur_us", "sum")
    )
    assert {key: (int(r.n), round(float(r.t) * 1000)) for key, r in got.iterrows()} == expected


@pytest.mark.parametrize("name", NSYS_FILES)
def test_idle_share_per_device_equals_raw_rows(loaded, name):
    path = shared("nsys", name)
    rows = _sql(
        path,
        """SELECT deviceId, streamId, start, end FROM CUPTI_ACTIVITY_KIND_KERNEL
                         UNION ALL SELECT deviceId, streamId, start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY
                         UNION ALL SELECT deviceId, streamId, start, end FROM CUPTI_ACTIVITY_KIND_MEMSET""",
    )
    trace = loaded(name)
    temporal = trace.temporal_breakdown().table.set_index("rank")
    idle = trace.idle_breakdown().table
    for rank, info in trace.distributed_info.items():
        mine = [(s, e) for d, _, s, e in rows if d == info["device"]]
        span = max(e for _, e in mine) - min(s for s, _ in mine)
        idle_ns = span - _union_ns(mine)
        assert temporal.loc[rank, "idle_pct"] == pytest.approx(100.0 * idle_ns / span, rel=1e-9, abs=1e-9)
        assert temporal.loc[rank, "idle_us"] * 1000 == pytest.approx(idle_ns, abs=1.0)
        # per stream: the gaps idle_breakdown splits by cause add up to the stream's own idle time
        for stream in {st for d, st, _, _ in rows if d == info["device"]}:
            on = [(s, e) for d, st, s, e in rows if d == info["device"] and st == stream]
            stream_idle = (max(e for _, e in on) - min(s for s, _ in on)) - _union_ns(on)
            got = idle[(idle["rank"] == rank) & (idle["stream"] == stream)]["idle_us"].sum() * 1000
            assert got == pytest.approx(stream_idle, abs=1.0)


@pytest.mark.parametrize("name", NSYS_FILES)
def test_copies_runtime_and_ranges_are_all_read(loaded, name):
    path = shared("nsys", name)
    trace = loaded(name)
    ((n_copy, copy_bytes),) = _sql(path, "SELECT count(*), sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY")
    ((n_set,),) = _sql(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET")
    ((n_calls,),) = _sql(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME")
    ((n_ranges,),) = _sql(path, "SELECT count(*) FROM NVTX_EVENTS WHERE end IS NOT NULL AND eventType IN (59, 60)")
    copies = trace.copies
    assert (copies["kind"] == "memcpy").sum() == n_copy and (copies["kind"] == "memset").sum() == n_set
    assert int(copies.loc[copies["kind"] == "memcpy", "bytes"].sum()) == copy_bytes
    assert set(copies.loc[copies["kind"] == "memcpy", "copy_kind"].astype(str)) <= {
        "HtoD",
        "DtoH",
        "DtoD",
        "HtoH",
        "PtoP",
    }
    assert len(trace.runtime) == n_calls
    assert len(trace.cpu_ops) + len(trace.annotations) == n_ranges
    # runtime calls joined to their kernels by correlation id, and kernels to the emit_nvtx op around the call
    # (correlation ids are per process: the same id in two processes is two calls)
    ((linked,),) = _sql(
        path,
        """SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k WHERE EXISTS
        (SELECT 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME r WHERE r.correlationId = k.correlationId
         AND (r.globalTid >> 24) = (k.globalPid >> 24))""",
    )
    k = trace.kernels[trace.kernels["kind"] == "kernel"]
    assert int((k["runtime_index"] >= 0).sum()) == linked
    assert (k.loc[k["runtime_index"] >= 0, "launch_name"].astype(str).str.startswith("cu")).all()
    assert (k["op_name"].astype(str) != "").sum() > 0.9 * linked
    assert not trace.cpu_ops["name"].astype(str).str.contains("op_id").any()
    # grid, block, registers and shared memory as recorded
    ((grid, block, regs, smem),) = _sql(
        path,
        """SELECT sum(gridX*gridY*gridZ), sum(blockX*blockY*blockZ),
        sum(registersPerThread), sum(staticSharedMemory + dynamicSharedMemory) FROM CUPTI_ACTIVITY_KIND_KERNEL""",
    )
    assert int((k["grid_x"] * k["grid_y"] * k["grid_z"]).sum()) == grid
    assert int((k["block_x"] * k["block_y"] * k["block_z"]).sum()) == block
    assert int(k["registers_per_thread"].sum()) == regs and int(k["shared_memory_bytes"].sum()) == smem


def test_source_fidelity_and_not_available(loaded):
    from workbench.trace.fidelity import NotAvailableError

    trace = loaded("h100_2gpu_1s.sqlite")
    assert trace.meta.source == "nsys-sqlite 3.25.0"
    assert "python_calls" in trace.meta.fidelity and "cpu_ops.input_dims" in trace.meta.fidelity
    assert trace.ranks == [0, 1] and len(trace.cpu_ops) > 0
    with pytest.raises(NotAvailableError, match=r"not available from nsys-sqlite 3\.25\.0: annotations\.step"):
        trace.step_breakdown()
    with pytest.raises(NotAvailableError, match="python_calls"):
        trace.module_breakdown()
    assert len(trace.launch_stats().table) > 0  # what the format has still works


def test_analyze_says_what_the_format_lacks(capsys):
    from workbench.cli import main

    path = shared("nsys", "h100_2gpu_1s.sqlite")
    assert main(["analyze", str(path), "--top", "2", "--no-cache", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "read from nsys-sqlite 3.25.0" in out
    assert "not available from nsys-sqlite 3.25.0: annotations.step" in out
    assert "== kernel breakdown ==" in out and "flash" in out.lower() or "kernel" in out


def test_format_is_judged_by_content_not_name(tmp_path):
    from workbench.trace import read_trace

    copy = tmp_path / "looks_like.json"
    shutil.copy(shared("nsys", "h100_2gpu_1s.sqlite"), copy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert read_trace(copy).meta.source.startswith("nsys-sqlite")


# --- bad input -------------------------------------------------------------------------------------
def test_sqlite_that_is_not_an_export(tmp_path):
    from workbench.trace import read_trace

    path = tmp_path / "other.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE people (name TEXT, age INTEGER)")
    con.execute("INSERT INTO people VALUES ('a', 1)")
    con.commit()
    con.close()
    with pytest.raises(TraceFormatError, match="not an Nsight Systems export.*people"):
        read_trace(path)


def test_truncated_export(tmp_path):
    from workbench.trace import read_trace

    source = shared("nsys", "h100_2gpu_1s.sqlite").read_bytes()
    for keep in (len(source) // 2, 20_000):
        path = tmp_path / f"cut_{keep}.sqlite"
        path.write_bytes(source[:keep])
        with pytest.raises(TraceFormatError, match="truncated or corrupt.*nothing was loaded"):
            read_trace(path)


def test_unknown_schema_version(tmp_path):
    from workbench.trace import read_trace

    path = tmp_path / "future.sqlite"
    shutil.copy(shared("nsys", "h100_2gpu_1s.sqlite"), path)
    con = sqlite3.connect(path)
    con.execute("UPDATE META_DATA_EXPORT SET value = '4.1.0' WHERE name = 'EXPORT_SCHEMA_VERSION'")
    con.execute("UPDATE META_DATA_EXPORT SET value = '4' WHERE name = 'EXPORT_SCHEMA_VERSION_MAJOR'")
    con.commit()
    con.close()
    with pytest.raises(TraceFormatError, match=r"schema version 4\.1\.0.*does not know.*nothing was loaded"):
        read_trace(path)


def test_partial_export_says_what_was_read(tmp_path):
    """A table that cannot be read (dropped here) leaves the rest loaded, with a warning naming both."""
    from workbench.trace import read_trace

    path = tmp_path / "no_nvtx_view.sqlite"
    shutil.copy(shared("nsys", "h100_2gpu_1s.sqlite"), path)
    con = sqlite3.connect(path)
    con.execute("DROP TABLE NVTX_EVENTS")
    con.execute("CREATE VIEW NVTX_EVENTS AS SELECT * FROM no_such_table")  # present, but unreadable
    con.commit()
    con.close()
    with pytest.warns(Warning, match="partial result: read .*CUPTI_ACTIVITY_KIND_KERNEL.*could not read NVTX_EVENTS"):
        data = read_trace(path)
    assert len(data.kernels) > 0 and len(data.cpu_ops) == 0
    assert "could not be read" in data.meta.fidelity["annotations"]


def test_one_process_on_two_devices_is_two_ranks(tmp_path):
    """A process that drove two GPUs: one rank per device, its calls on the rank their work went to."""
    from workbench.trace import read_trace

    path = tmp_path / "one_process.sqlite"
    shutil.copy(shared("nsys", "h100_2gpu_1s.sqlite"), path)
    con = sqlite3.connect(path)
    ((first,),) = con.execute("SELECT min(globalPid) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall()
    ((tid,),) = con.execute("SELECT min(globalTid) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchall()
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        con.execute(f"UPDATE {table} SET globalPid = ?", (first,))
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET globalTid = ?", (tid,))
    con.execute("UPDATE NVTX_EVENTS SET globalTid = ?", (tid,))
    # correlation ids were per process: keep them apart
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET correlationId = -1 WHERE deviceId = 1")
    con.commit()
    con.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = read_trace(path)
    assert data.ranks == [0, 1]
    assert {info["device"] for info in data.distributed_info.values()} == {0, 1}
    assert any("drove devices [0, 1]" in n for n in data.meta.notes)
    per_rank = data.kernels.groupby("rank")["device"].unique()
    assert [list(v) for v in per_rank] == [[0], [1]]
    assert np.all(data.runtime["rank"].isin([0, 1]))


@pytest.mark.timeout(240)
@pytest.mark.parametrize("parts", [("nsys", "h100_2gpu_1s.sqlite"), ("rocprof", "908_results.json.gz")])
def test_report_on_another_format_says_what_it_lacks(tmp_path, parts):
    import html
    import json
    import re

    from workbench.cli import main

    out = tmp_path / "report"
    assert main(["report", "--trace", str(shared(*parts)), "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["source"].startswith(("nsys-sqlite", "rocprofv3-json")) and summary["fidelity"]
    page = html.unescape(re.sub(r"<[^>]+>", " ", (out / "report.html").read_text()))
    assert f"Read from {summary['source']}" in page
    assert f"not available from {summary['source']}" in page
    assert "Traceback" not in page


def test_export_without_a_version_table_is_read_and_said(tmp_path):
    from workbench.trace import read_trace

    path = tmp_path / "old.sqlite"
    shutil.copy(shared("nsys", "h100_2gpu_1s.sqlite"), path)
    con = sqlite3.connect(path)
    con.execute("DROP TABLE META_DATA_EXPORT")
    con.commit()
    con.close()
    with pytest.warns(Warning, match="records no schema version"):
        data = read_trace(path)
    assert data.meta.source == "nsys-sqlite unknown-version" and len(data.kernels) == 4368


def test_devices_from_target_info_gpu(tmp_path):
    """Where the export has TARGET_INFO_GPU (NVIDIA's schema: id, name, totalMemory, smCount, ...), each rank's
    device properties name its GPU."""
    from workbench.trace import read_trace

    path = tmp_path / "with_gpu_info.sqlite"
    shutil.copy(shared("nsys", "h100_2gpu_1s.sqlite"), path)
    con = sqlite3.connect(path)
    con.execute(
        "CREATE TABLE TARGET_INFO_GPU (vmId INTEGER, id INTEGER, name TEXT, totalMemory INTEGER, "
        "smCount INTEGER, clockRate INTEGER, memoryBandwidth INTEGER)"
    )
    for device in (0, 1):
        con.execute(
            "INSERT INTO TARGET_INFO_GPU VALUES (1, ?, 'NVIDIA H100 80GB HBM3', 85520809984, 132, "
            "1980000000, 3352320000000)",
            (device,),
        )
    con.commit()
    con.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = read_trace(path)
    assert "devices" not in data.meta.fidelity
    for rank in data.ranks:
        (props,) = data.device_properties[rank]
        assert props["name"] == "NVIDIA H100 80GB HBM3" and props["numSms"] == 132
        assert props["id"] == data.distributed_info[rank]["device"]
    assert "NVIDIA H100 80GB HBM3" in data.summary()
