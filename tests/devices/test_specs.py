"""Known device specs: lookup by the names real traces carry, datasheet sanity, round trips."""

from __future__ import annotations

import pytest

from workbench.devices import (
    DTYPES,
    KNOWN_DEVICES,
    DeviceSpec,
    device_spec,
    find_device_spec,
    spec_for_device_properties,
)
from workbench.errors import RegistryError

# deviceProperties names found in /work/shared/traces (real Kineto traces) and common others
TRACE_NAMES = {
    "NVIDIA H100 80GB HBM3": ("NVIDIA H100 SXM5 80GB", 3350),
    "NVIDIA A100-PG509-200": ("NVIDIA A100 40GB", 1555),
    "NVIDIA A100-SXM4-80GB": ("NVIDIA A100 SXM4 80GB", 2039),
    "NVIDIA A100 80GB PCIe": ("NVIDIA A100 PCIe 80GB", 1935),
    "Tesla V100-SXM2-32GB": ("NVIDIA V100 SXM2", 900),
    "Tesla V100-DGXS-32GB": ("NVIDIA V100 SXM2", 900),
    "Tesla V100-PCIE-16GB": ("NVIDIA V100 PCIe", 900),
    "NVIDIA GeForce RTX 2080 Ti": ("NVIDIA GeForce RTX 2080 Ti", 616),
    "AMD Instinct MI300X": ("AMD Instinct MI300X", 5300),
    "NVIDIA H200": ("NVIDIA H200 SXM 141GB", 4800),
    "NVIDIA H100 PCIe": ("NVIDIA H100 PCIe 80GB", 2000),
    "NVIDIA L4": ("NVIDIA L4", 300),
    "NVIDIA L40S": ("NVIDIA L40S", 864),
}


@pytest.mark.parametrize("name, expected", sorted(TRACE_NAMES.items()))
def test_trace_names_find_their_spec(name, expected):
    spec = find_device_spec(name)
    assert spec is not None and (spec.name, spec.memory_gbps) == expected


def test_unknown_names():
    assert find_device_spec("Intel(R) Xeon(R) Processor") is None
    assert find_device_spec("") is None
    with pytest.raises(RegistryError, match="known devices: .*H100"):
        device_spec("Imaginary GPU 9000")


def test_lookup_from_trace_device_properties_shapes():
    one = {"id": 0, "name": "NVIDIA A100-PG509-200", "totalGlobalMem": 42297524224}
    assert spec_for_device_properties({0: (one, dict(one, id=1))}).name == "NVIDIA A100 40GB"
    assert spec_for_device_properties([one]).name == "NVIDIA A100 40GB"
    assert spec_for_device_properties({}) is None
    assert spec_for_device_properties(None) is None


def test_table_is_sane_and_cited():
    assert len({s.name for s in KNOWN_DEVICES}) == len(KNOWN_DEVICES)
    for spec in KNOWN_DEVICES:
        assert set(spec.peak_tflops) <= set(DTYPES) and spec.peak_tflops, spec.name
        assert spec.memory_gbps > 100 and spec.memory_gb > 8, spec.name
        assert "http" in spec.source and spec.vendor in {"nvidia", "amd"}
        tensor = [v for k, v in spec.peak_tflops.items() if k.endswith("_tensor") and k != "fp64_tensor"]
        assert all(v >= spec.peak_tflops.get("fp32", 0) for v in tensor), spec.name


def test_peaks_ridge_and_round_trip():
    h100 = device_spec("NVIDIA H100 80GB HBM3")
    assert h100.peak_flops("bf16_tensor") == pytest.approx(989.5e12)
    assert h100.ridge_flops_per_byte("bf16_tensor") == pytest.approx(989.5e12 / 3350e9)
    with pytest.raises(RegistryError, match="no peak for dtype 'fp4'"):
        h100.peak_flops("fp4")
    assert DeviceSpec.from_dict(h100.to_dict()) == h100
