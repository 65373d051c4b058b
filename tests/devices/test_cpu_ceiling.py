"""Measured CPU ceiling: real (small) microbenchmarks, cached on disk, opt-in."""

from __future__ import annotations

import json

import pytest

from workbench.devices import cpu_ceiling as cc
from workbench.errors import InvalidArgumentError

SMALL = {"copy_bytes": 8 * 2**20, "matmul_n": 128, "repeats": 2}


def test_measures_and_caches(tmp_path, monkeypatch):
    path = tmp_path / "ceiling.json"
    assert cc.cached_cpu_ceiling(cache_path=path) is None
    first = cc.measure_cpu_ceiling(cache_path=path, **SMALL)
    assert first.copy_gbps > 0.1 and first.matmul_fp32_gflops > 0.1
    assert first.ridge_flops_per_byte == pytest.approx(first.matmul_fp32_gflops / first.copy_gbps)

    def no_measuring(*a, **k):
        raise AssertionError("measured again although a cached value exists")

    monkeypatch.setattr(cc, "_measure", no_measuring)
    assert cc.measure_cpu_ceiling(cache_path=path, **SMALL) == first
    assert cc.cached_cpu_ceiling(cache_path=path) == first
    assert cc.CpuCeiling.from_dict(json.loads(json.dumps(first.to_dict()))) == first


def test_use_cache_false_measures_again(tmp_path):
    path = tmp_path / "ceiling.json"
    a = cc.measure_cpu_ceiling(cache_path=path, **SMALL)
    b = cc.measure_cpu_ceiling(cache_path=path, use_cache=False, **SMALL)
    assert (a.copy_gbps, a.matmul_fp32_gflops) != (b.copy_gbps, b.matmul_fp32_gflops)


def test_corrupt_or_old_cache_is_ignored(tmp_path):
    path = tmp_path / "ceiling.json"
    path.write_text("{not json")
    assert cc.cached_cpu_ceiling(cache_path=path) is None
    path.write_text(json.dumps({"format_version": 0, "entries": {"x": {}}}))
    assert cc.cached_cpu_ceiling(cache_path=path) is None


def test_cache_dir_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cc.cache_dir() == tmp_path / "workbench"


def test_bad_sizes_are_refused():
    with pytest.raises(InvalidArgumentError, match="matmul_n >= 16"):
        cc.measure_cpu_ceiling(matmul_n=2, use_cache=False)
