"""The per-rank map on a Dask cluster (``wb.load_trace(path, client=...)``, ``workbench analyze --scheduler``):
the same breakdowns as the local load; a scheduler that does not answer and a missing ``distributed`` are
said plainly."""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import pytest

import workbench as wb
from workbench.api.rank_folder import RankFolder, connect
from workbench.errors import MissingDependencyError, TraceWarning
from workbench.trace.rank_map import RankMapError, SchedulerError, map_ranks
from workbench.trace.ranks import trace_paths

DLRM = Path(__file__).resolve().parents[2] / "tests" / "data" / "gpu" / "dlrm_8rank"


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed", reason="the dask extra: pip install 'workbench[dask]'")
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None)
    with distributed.Client(cluster) as connected:
        yield connected
    cluster.close()


def _load(source, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWarning)
        return wb.load_trace(source, **kw)


@pytest.mark.timeout(120)
def test_a_local_cluster_gives_the_breakdowns_of_the_local_load(client):
    local = _load(DLRM, workers=1, cache=False)
    on_dask = _load(DLRM, client=client, cache=False)
    assert isinstance(on_dask.rank_folder, RankFolder) and on_dask.read_in == "dask"
    assert on_dask.ranks == local.ranks
    for method in ("temporal_breakdown", "kernel_breakdown", "idle_breakdown", "stragglers"):
        assert getattr(local, method)() == getattr(on_dask, method)(), method


@pytest.mark.timeout(120)
def test_a_failing_rank_on_the_cluster_is_named(client):
    paths = [str(p) for p in trace_paths(DLRM)[:2]]
    with pytest.raises(RankMapError, match="worker1.json.gz: the per-rank function failed"):
        map_ranks("tests.distributed.test_rank_map_local:raise_on", paths, {"victim": "worker1.json.gz"}, client=client)


@pytest.mark.timeout(60)
def test_a_scheduler_that_does_not_answer_is_named_within_the_timeout():
    pytest.importorskip("distributed", reason="the dask extra: pip install 'workbench[dask]'")
    start = time.monotonic()
    with pytest.raises(SchedulerError, match=r"tcp://127\.0\.0\.1:9.*did not answer within 2 s"):
        connect("tcp://127.0.0.1:9", timeout_s=2)
    assert time.monotonic() - start < 30


@pytest.mark.timeout(60)
def test_analyze_names_a_scheduler_that_does_not_answer(capsys, monkeypatch):
    pytest.importorskip("distributed", reason="the dask extra: pip install 'workbench[dask]'")
    import workbench.api.rank_folder as rank_folder
    from workbench.cli import main

    real = rank_folder.connect
    monkeypatch.setattr("workbench.cli.analyze.connect", lambda address: real(address, timeout_s=2))
    code = main(["analyze", str(DLRM), "--scheduler", "tcp://127.0.0.1:9"])
    assert code != 0
    assert "tcp://127.0.0.1:9" in capsys.readouterr().err


def test_without_distributed_client_and_scheduler_name_the_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if it were not installed
    with pytest.raises(MissingDependencyError, match=r"workbench\[dask\]") as info:
        wb.load_trace(DLRM, client=object())
    assert info.value.extra == "dask"
    with pytest.raises(MissingDependencyError, match=r"workbench\[dask\]"):
        connect("tcp://127.0.0.1:8786")
