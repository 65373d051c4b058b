"""One ceiling type, resolved in one place, each labelled measured / datasheet / default."""

from __future__ import annotations

import pytest

from workbench.devices.ceilings import (
    DEFAULT_CPU_CEILING,
    Ceiling,
    ceiling_for,
    cpu_ceilings,
    gpu_ceilings,
    recorded_cpu_ceiling,
)
from workbench.errors import NotApplicableError

RECORDED = {
    "cpu_model": "Test CPU",
    "threads": 2,
    "torch_version": "x",
    "copy_gbps": 27.9,
    "matmul_fp32_gflops": 357.0,
    "copy_bytes": 2**20,
    "matmul_n": 64,
    "repeats": 2,
    "measured_at": "2026-01-01T00:00:00+00:00",
}


def test_kinds_are_labelled():
    assert DEFAULT_CPU_CEILING.kind == "default" and not DEFAULT_CPU_CEILING.upper_bound
    assert "default" in DEFAULT_CPU_CEILING.label
    h100 = gpu_ceilings([{"name": "NVIDIA H100 80GB HBM3", "computeMajor": 9}])
    assert h100.kind == "datasheet" and h100.upper_bound and h100.primary == "fp32"
    assert h100.peak("bf16_tensor") == pytest.approx(989.5e12) and h100.peak() == pytest.approx(67e12)
    measured = recorded_cpu_ceiling({"cpu_ceiling": RECORDED})
    assert measured.kind == "measured" and measured.memory_gbps == 27.9
    assert measured.ridge() == pytest.approx(357.0 / 27.9)


def test_round_trip_and_the_old_fields():
    c = cpu_ceilings({"cpu_ceiling": RECORDED})
    assert Ceiling.from_dict(c.to_dict()) == c
    assert c.peak_gflops == pytest.approx(357.0) and c.ridge_flops_per_byte == pytest.approx(357.0 / 27.9)
    assert c.roof_us(0.0, 27.9e3) == pytest.approx(1.0)  # 27.9 kB at 27.9 GB/s: 1 µs


def test_a_run_environment_without_a_recorded_ceiling_gets_the_default_never_this_machines_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cpu_ceilings({}) is DEFAULT_CPU_CEILING


def test_the_rules_and_the_chart_name_the_same_ceiling():
    from types import SimpleNamespace

    from workbench.charts.roofline_data import ceilings_for
    from workbench.hypotheses.roofline import cpu_ceiling_from

    env = {"cpu_ceiling": RECORDED}
    cpu_trace = SimpleNamespace(has_gpu=False)
    assert cpu_ceiling_from(env) == ceilings_for(cpu_trace, env) == ceiling_for(cpu_trace, env)
    assert cpu_ceiling_from({}) == ceilings_for(cpu_trace, {})


def test_an_unknown_gpu_is_not_applicable():
    trace = type("T", (), {"has_gpu": True, "device_properties": {0: ({"name": "Mystery X1"},)}})()
    with pytest.raises(NotApplicableError, match="Mystery X1"):
        ceiling_for(trace)
    assert gpu_ceilings([]) is None


def _cache_here(tmp_path, monkeypatch, threads: int, copy_gbps: float) -> dict:
    """A cached measurement of this machine at ``threads`` torch threads, in a temporary cache; the
    environment of a run recorded here at that thread count."""
    import json
    import os
    import platform

    torch = pytest.importorskip("torch")
    from workbench.devices.cpu_ceiling import CACHE_FILE_NAME, CACHE_FORMAT_VERSION
    from workbench.devices.fingerprint import cpu_model

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    entry = dict(RECORDED, cpu_model=cpu_model(), threads=threads, torch_version=torch.__version__, copy_gbps=copy_gbps)
    key = f"{cpu_model()}|threads={threads}|torch={torch.__version__}"
    (tmp_path / "workbench").mkdir()
    (tmp_path / "workbench" / CACHE_FILE_NAME).write_text(
        json.dumps({"format_version": CACHE_FORMAT_VERSION, "entries": {key: entry}})
    )
    return {
        "host": {"cpu_model": cpu_model(), "logical_cpus": os.cpu_count(), "platform": platform.platform()},
        "torch": {"num_threads": threads},
    }


def test_a_run_recorded_here_is_judged_against_this_machines_measured_ceiling_at_its_threads(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from workbench.charts.roofline_data import ceilings_for
    from workbench.devices.ceilings import resolve_cpu_ceiling
    from workbench.hypotheses.run_facts import RunFacts

    env = _cache_here(tmp_path, monkeypatch, threads=3, copy_gbps=31.5)
    here = resolve_cpu_ceiling(env)
    assert here.kind == "measured" and here.memory_gbps == 31.5
    # the rules of the run and its roofline chart resolve the same ceiling
    run = SimpleNamespace(
        timing=None,
        cold_ms=None,
        compile=None,
        environment=env,
        name="r",
        trace=SimpleNamespace(kernels=__import__("pandas").DataFrame()),
    )
    assert RunFacts(run).trace_facts.ceiling == ceilings_for(SimpleNamespace(has_gpu=False), env) == here
    # another thread count has no measurement: the default, labelled, never a guess
    assert resolve_cpu_ceiling(dict(env, torch={"num_threads": 5})).kind == "default"
    # a run recorded on another machine is never judged against this machine's numbers
    elsewhere = dict(env, host=dict(env["host"], cpu_model="Some Other CPU 9000"))
    assert resolve_cpu_ceiling(elsewhere).kind == "default"
