"""``wb.load_memory_snapshot``: a snapshot-like pickle into the memory table; pickles that would run code are
refused before anything runs."""

from __future__ import annotations

import os
import pickle

import pytest

import workbench as wb
from workbench.trace.memory_snapshot import SnapshotError


def _snapshot():
    frames = [
        {"filename": "/usr/lib/python3.12/site-packages/torch/nn/modules/linear.py", "line": 125, "name": "forward"},
        {"filename": "/home/me/train.py", "line": 42, "name": "step"},
    ]
    trace = [
        {"action": "segment_alloc", "addr": 0, "size": 4 << 20, "stream": 0, "time_us": 10, "frames": []},
        {"action": "alloc", "addr": 0, "size": 1 << 20, "stream": 0, "time_us": 11, "frames": frames},
        {"action": "alloc", "addr": 1 << 20, "size": 2 << 20, "stream": 0, "time_us": 12, "frames": frames},
        {"action": "free_requested", "addr": 0, "size": 1 << 20, "stream": 0, "time_us": 13, "frames": []},
        {"action": "free_completed", "addr": 0, "size": 1 << 20, "stream": 0, "time_us": 14, "frames": []},
    ]
    # at snapshot time: the 2 MiB block and a 512 KiB block allocated before the history began
    segments = [
        {
            "device": 0,
            "address": 0,
            "total_size": 4 << 20,
            "blocks": [
                {"address": 1 << 20, "size": 2 << 20, "state": "active_allocated"},
                {"address": 3 << 20, "size": 512 << 10, "state": "active_allocated"},
            ],
        }
    ]
    return {"segments": segments, "device_traces": [trace]}


def test_snapshot_reads_into_the_memory_table(tmp_path):
    path = tmp_path / "snap.pickle"
    path.write_bytes(pickle.dumps(_snapshot()))
    trace = wb.load_memory_snapshot(path)
    m = trace.memory
    assert list(m["bytes"]) == [1 << 20, 2 << 20, -(1 << 20)]
    # the 512 KiB allocated before the history are counted from the segments
    assert list(m["total_allocated"]) == [(1 << 20) + (512 << 10), (3 << 20) + (512 << 10), (2 << 20) + (512 << 10)]
    peak = trace.memory_peak()
    assert peak.device == "cuda:0" and peak.peak_bytes == (3 << 20) + (512 << 10)
    assert set(peak.table["location"]) == {"/home/me/train.py:42 in step"}
    assert trace.memory_timeline().devices.iloc[0]["reserved_peak_bytes"] == 4 << 20


class _RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_that_would_run_code_is_refused(tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / "evil.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [[_RunsCode(marker)]]}))
    with pytest.raises(SnapshotError, match="no code from a pickle runs"):
        wb.load_memory_snapshot(path)
    assert not marker.exists()


def test_a_code_object_is_refused(tmp_path):
    """A code object reaches a pickle as marshal.loads(bytes) (pickle cannot hold one otherwise)."""
    import marshal

    class _Code:
        def __reduce__(self):
            return (marshal.loads, (marshal.dumps((lambda: os.system("true")).__code__),))

    path = tmp_path / "code.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [], "code": _Code()}))
    with pytest.raises(SnapshotError, match="marshal.loads"):
        wb.load_memory_snapshot(path)


def test_not_a_snapshot_says_what_it_holds(tmp_path):
    path = tmp_path / "list.pickle"
    path.write_bytes(pickle.dumps([1, 2, 3]))
    with pytest.raises(SnapshotError, match="not a memory snapshot"):
        wb.load_memory_snapshot(path)
    path.write_bytes(b"not a pickle at all")
    with pytest.raises(SnapshotError, match="not a readable pickle"):
        wb.load_memory_snapshot(path)
