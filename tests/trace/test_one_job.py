"""A folder of rank files holds one job: a copy of a rank, a rank of another job (another world size, another
GPU model, another clock) and a rank file that cannot be opened (a link loop, a link to /dev/zero) are left out
with a warning naming the file and why, in one process and with workers alike."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import warnings

import pytest

import workbench as wb
from workbench.errors import TraceWarning
from workbench.trace.ranks import RankFile, one_job

SOURCE = os.path.join(os.path.dirname(__file__), "..", "data", "cpu", "cpu_mlp_plain.json.gz")


def _rank_file(folder, rank, world_size=3, *, device=None, base_shift_ns=0, name=None):
    with gzip.open(SOURCE, "rt", encoding="utf-8") as fh:
        trace = json.load(fh)
    trace["distributedInfo"] = {"rank": rank, "world_size": world_size, "backend": "gloo"}
    trace["baseTimeNanoseconds"] = int(trace["baseTimeNanoseconds"]) + base_shift_ns
    if device:
        trace["deviceProperties"] = [{"id": 0, "name": device}]
    for event in trace["traceEvents"]:
        if isinstance(event.get("ts"), (int, float)):
            event["ts"] += rank * 7  # distinct content per rank
    path = os.path.join(folder, name or f"rank-{rank}.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(trace, fh)
    return path


def _load(folder, workers):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trace = wb.load_trace(folder, workers=workers, cache=False)
    said = list(dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, TraceWarning)))
    return trace, said


@pytest.mark.parametrize("workers", [1, 2])
def test_a_copied_rank_is_left_out_not_counted_twice(tmp_path, workers):
    for r in range(3):
        _rank_file(tmp_path, r)
    shutil.copy(tmp_path / "rank-2.json", tmp_path / "rank-2-copy.json")
    trace, said = _load(tmp_path, workers)
    assert list(trace.ranks) == [0, 1, 2]
    assert any("rank-2-copy.json" in m and "a copy of one rank" in m and "rank-2.json" in m for m in said), said


@pytest.mark.parametrize("workers", [1, 2])
def test_a_rank_of_another_job_is_left_out(tmp_path, workers):
    for r in range(3):
        _rank_file(tmp_path, r, world_size=3)
    _rank_file(tmp_path, 3, world_size=8, name="stray.json")
    trace, said = _load(tmp_path, workers)
    assert list(trace.ranks) == [0, 1, 2]
    assert any("stray.json" in m and "world size 8" in m and "another job" in m for m in said), said


@pytest.mark.parametrize("workers", [1, 2])
def test_another_gpu_model_and_another_clock_are_left_out(tmp_path, workers):
    for r in range(3):
        _rank_file(tmp_path, r, device="NVIDIA H100 80GB HBM3")
    _rank_file(tmp_path, 3, world_size=3, device="Tesla V100-SXM2-16GB", name="other-device.json")
    _rank_file(
        tmp_path,
        4,
        world_size=3,
        device="NVIDIA H100 80GB HBM3",
        base_shift_ns=30 * 3600 * 10**9,
        name="other-day.json",
    )
    trace, said = _load(tmp_path, workers)
    assert list(trace.ranks) == [0, 1, 2]
    assert any("other-device.json" in m and "Tesla V100" in m for m in said), said
    assert any("other-day.json" in m and "30.0 h" in m for m in said), said


def test_no_majority_leaves_every_file_in():
    files = [
        RankFile("a.json", {"rank": 0, "world_size": 2}, (), None),
        RankFile("b.json", {"rank": 1, "world_size": 4}, (), None),
    ]
    kept, messages = one_job(files)  # the paths do not exist: no fingerprint, no copy check
    assert kept == [0, 1] and messages == []


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="not applicable: no /dev/zero")
def test_a_link_loop_and_a_link_to_dev_zero_are_named(tmp_path):
    for r in range(2):
        _rank_file(tmp_path, r, world_size=2)
    os.symlink(tmp_path / "loop-b.json", tmp_path / "loop-a.json")
    os.symlink(tmp_path / "loop-a.json", tmp_path / "loop-b.json")
    os.symlink("/dev/zero", tmp_path / "zero.json")
    for workers in (1, 2):
        trace, said = _load(tmp_path, workers)
        assert list(trace.ranks) == [0, 1]
        assert any("loop-a.json" in m and "left out" in m for m in said), said
        assert any("zero.json" in m and "character device" in m for m in said), said
