"""CPU roofline with datasheet rows: a known CPU model's derived peaks drawn as grey reference roofs
beside the measured (or default) ceiling, compute scaled to torch's threads; unknown models unchanged."""

from pathlib import Path

import pytest

import workbench as wb
from workbench import charts
from workbench.charts.roofline import REFERENCE_COLOR
from workbench.charts.roofline_data import RooflineCeilings, cpu_ceilings, datasheet_ceilings

DATA = Path(__file__).resolve().parents[1] / "data"
SPR = "Intel(R) Xeon(R) Platinum 8480+"
SPR_FP32_8T = 8 * 2.0e9 * 64  # 8 of 56 cores x 2.0 GHz x 64 FLOP/cycle
SPR_BF16_8T = 8 * 2.0e9 * 1024  # AMX


def _recorded(model, threads, copy_gbps=12.5, gflops=250.0):
    return {
        "cpu_model": model,
        "threads": threads,
        "torch_version": "x",
        "copy_gbps": copy_gbps,
        "matmul_fp32_gflops": gflops,
        "copy_bytes": 2**20,
        "matmul_n": 64,
        "repeats": 2,
        "measured_at": "2026-01-01T00:00:00+00:00",
    }


def _values(spec):
    return [row for rows in spec.get("datasets", {}).values() for row in rows]


def _roof_tops(spec):
    """Highest ceiling per roof line (dtype) in a chart spec."""
    tops = {}
    for r in _values(spec):
        if "dtype" in r and "ceiling_flops" in r:
            tops[r["dtype"]] = max(tops.get(r["dtype"], 0.0), r["ceiling_flops"])
    return tops


@pytest.fixture(autouse=True)
def _empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # no cached ceiling of this machine


@pytest.fixture(scope="module")
def cpu_trace():
    return wb.load_trace(DATA / "cpu" / "cpu_mlp_plain.json.gz")


def test_measured_ceiling_stays_primary_and_the_datasheet_comes_along():
    c = cpu_ceilings({"cpu_ceiling": _recorded(SPR, 8)})
    assert c.measured and c.memory_gbps == 12.5 and c.peak_flops == {"fp32 matmul": 250e9}
    ref = c.reference
    assert ref.memory_gbps == pytest.approx(307.2)
    assert ref.peak_flops == {
        "datasheet fp32 x8/56 cores": pytest.approx(SPR_FP32_8T),
        "datasheet bf16 AMX x8/56 cores": pytest.approx(SPR_BF16_8T),
    }
    assert "compute x 8/56 cores (torch threads / cores)" in ref.device
    assert "a few threads cannot reach" in ref.device and "not verifiable offline" in ref.source
    assert RooflineCeilings.from_dict(c.to_dict()) == c


def test_unmeasured_known_cpu_keeps_the_default_and_uses_the_runs_model_and_threads():
    env = {"host": {"cpu_model": "AMD EPYC 9654 96-Core Processor"}, "torch": {"num_threads": 4}}
    c = cpu_ceilings(env)
    assert not c.measured and "documented default" in c.source  # judging still on the default
    assert c.reference.memory_gbps == pytest.approx(460.8)
    assert c.reference.peak_flops == {"datasheet fp32 x4/96 cores": pytest.approx(4 * 2.4e9 * 32)}


def test_threads_beyond_one_socket_are_capped():
    ref = datasheet_ceilings("AMD EPYC 9654 96-Core Processor", 384)
    assert ref.peak_flops == {"datasheet fp32 x96/96 cores": pytest.approx(96 * 2.4e9 * 32)}


def test_unknown_models_keep_todays_ceilings():
    assert cpu_ceilings({"cpu_ceiling": _recorded("Test CPU", 1)}).reference is None
    assert cpu_ceilings({"host": {"cpu_model": "Intel(R) Xeon(R) Platinum 8480C"}}).reference is None
    assert datasheet_ceilings("Intel(R) Xeon(R) Processor", 2) is None
    default = cpu_ceilings({"host": {"cpu_model": "Intel(R) Xeon(R) Processor"}, "torch": {"num_threads": 2}})
    assert not default.measured and default.reference is None


def test_chart_draws_grey_datasheet_roofs_beside_the_measured_one(cpu_trace):
    spec = charts.trace_roofline_chart(cpu_trace, environment={"cpu_ceiling": _recorded(SPR, 8)}).to_dict()
    tops = _roof_tops(spec)
    assert tops["fp32 matmul"] == pytest.approx(250e9)
    assert tops["datasheet fp32 x8/56 cores"] == pytest.approx(SPR_FP32_8T)
    assert tops["datasheet bf16 AMX x8/56 cores"] == pytest.approx(SPR_BF16_8T)
    greys = [layer for layer in spec["layer"] if layer.get("mark", {}).get("color") == REFERENCE_COLOR]
    assert len(greys) == 2  # roofs and hollow ridge marks
    ridge_texts = [r["text"] for r in _values(spec) if "text" in r]
    assert any(t.startswith("ridge datasheet fp32") and "not used for judging" in t for t in ridge_texts)
    ridge = next(r for r in _values(spec) if r.get("dtype") == "datasheet fp32 x8/56 cores" and "text" in r)
    assert ridge["intensity"] == pytest.approx(SPR_FP32_8T / 307.2e9)
    subtitle = "\n".join(spec["title"]["subtitle"])
    assert "ceiling: measured 2026-01-01" in subtitle
    assert (
        "grey roofs, not used for judging: Intel Xeon Platinum 8480+ datasheet: "
        "compute x 8/56 cores (torch threads / cores)"
    ) in subtitle
    assert "307.2 GB/s is the socket's DRAM peak, which a few threads cannot reach" in subtitle


def test_chart_of_an_unknown_cpu_has_no_reference_roofs(cpu_trace):
    env = {"host": {"cpu_model": "Intel(R) Xeon(R) Processor"}, "torch": {"num_threads": 2}}
    spec = charts.trace_roofline_chart(cpu_trace, environment=env).to_dict()
    assert set(_roof_tops(spec)) == {"fp32"}
    assert not any(layer.get("mark", {}).get("color") == REFERENCE_COLOR for layer in spec["layer"])
    subtitle = " ".join(spec["title"]["subtitle"])
    assert "NOT MEASURED" in subtitle and "grey roofs" not in subtitle


def test_variants_chart_carries_the_reference(cpu_trace):
    ceilings = cpu_ceilings({"cpu_ceiling": _recorded(SPR, 8)})
    spec = charts.variants_roofline_chart({"a": cpu_trace, "b": cpu_trace}, ceilings=ceilings).to_dict()
    assert "datasheet fp32 x8/56 cores" in _roof_tops(spec)
