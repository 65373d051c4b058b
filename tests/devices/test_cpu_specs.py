"""CPU datasheet rows: every figure recomputed from its parameters, model-name matching
(real /proc/cpuinfo strings and near-miss SKUs), lookup errors and thread scaling."""

from __future__ import annotations

import pytest

from workbench.devices import DTYPES, KNOWN_CPUS, CpuSpec, cpu_spec, find_cpu_spec, find_device_spec
from workbench.errors import InvalidArgumentError, RegistryError

# /proc/cpuinfo "model name" strings -> row name
REAL_NAMES = {
    "Intel(R) Xeon(R) Platinum 8280 CPU @ 2.70GHz": "Intel Xeon Platinum 8280",
    "Intel(R) Xeon(R) Platinum 8280L CPU @ 2.70GHz": "Intel Xeon Platinum 8280",
    "Intel(R) Xeon(R) Platinum 8380 CPU @ 2.30GHz": "Intel Xeon Platinum 8380",
    "Intel(R) Xeon(R) Platinum 8480+": "Intel Xeon Platinum 8480+",
    "INTEL(R) XEON(R) PLATINUM 8592+": "Intel Xeon Platinum 8592+",
    "AMD EPYC 7763 64-Core Processor": "AMD EPYC 7763",
    "AMD EPYC 9654 96-Core Processor": "AMD EPYC 9654",
    "AMD EPYC 9654P 96-Core Processor": "AMD EPYC 9654",
    "AMD EPYC 9754 128-Core Processor": "AMD EPYC 9754",
}
# Other SKUs of the same families, whose parameters differ: they must match no row.
NEAR_MISSES = [
    "Intel(R) Xeon(R) Platinum 8480",  # no such SKU without the "+"
    "Intel(R) Xeon(R) Platinum 8480C",  # cloud-only part
    "Intel(R) Xeon(R) Platinum 8380H CPU @ 2.90GHz",  # Cooper Lake, 28 cores, 6 channels
    "Intel(R) Xeon(R) Platinum 8380HL CPU @ 2.90GHz",
    "INTEL(R) XEON(R) PLATINUM 8592V",  # Emerald Rapids, other clocks and memory
    "Intel(R) Xeon(R) Platinum 82800",
    "Intel(R) Xeon(R) Gold 6280 CPU",
    "AMD EPYC 7V13 64-Core Processor",  # Azure's Milan
    "AMD EPYC 77630 Processor",
    "AMD EPYC 9754S 128-Core Processor",  # SMT off
    "AMD EPYC 9684X 96-Core Processor",  # Genoa-X
    "Intel(R) Xeon(R) Processor",  # this build machine
    "NVIDIA H100 80GB HBM3",
]
# Hand-computed from the vendor parameters (not through the table's code).
HAND_COMPUTED = {  # name: (GB/s, fp32 TFLOP/s, bf16 TFLOP/s or None)
    "Intel Xeon Platinum 8280": (6 * 2933 * 8 / 1000, 28 * 2.7 * 64 / 1000, None),  # 140.784, 4.8384
    "Intel Xeon Platinum 8480+": (307.2, 7.168, 114.688),  # 56 x 2.0 GHz
    "AMD EPYC 9654": (460.8, 7.3728, None),  # 96 x 2.4 x 32
}


@pytest.mark.parametrize("name, expected", sorted(REAL_NAMES.items()))
def test_real_model_names_find_their_row(name, expected):
    assert find_cpu_spec(name).name == expected
    assert cpu_spec(name).name == expected


@pytest.mark.parametrize("name", NEAR_MISSES)
def test_near_miss_names_match_no_row(name):
    assert find_cpu_spec(name) is None


def test_every_row_is_its_parameters_arithmetic():
    assert len({s.name for s in KNOWN_CPUS}) == len(KNOWN_CPUS) >= 6
    for s in KNOWN_CPUS:
        assert s.memory_gbps == pytest.approx(s.memory_channels * s.memory_mts * 8 / 1000), s.name
        assert set(s.peak_tflops) == set(s.flops_per_cycle) and set(s.flops_per_cycle) <= set(DTYPES)
        for dtype, per_cycle in s.flops_per_cycle.items():
            assert s.peak_tflops[dtype] == pytest.approx(s.cores * s.base_ghz * per_cycle / 1000), s.name
            assert s.peak_flops(dtype) == pytest.approx(s.peak_tflops[dtype] * 1e12)
        lanes_fp32 = 16 if "AVX-512 FMA units" in s.simd else 8  # 512- or 256-bit FMA pipes
        assert s.flops_per_cycle["fp32"] == 2 * lanes_fp32 * 2 == 2 * s.flops_per_cycle["fp64"], s.name
        has_amx = "AMX" in s.simd
        assert ("bf16_tensor" in s.flops_per_cycle) == has_amx == ("int8_tensor" in s.flops_per_cycle)
        if has_amx:
            assert (s.flops_per_cycle["bf16_tensor"], s.flops_per_cycle["int8_tensor"]) == (1024, 2048)


@pytest.mark.parametrize("name, expected", sorted(HAND_COMPUTED.items()))
def test_rows_agree_with_hand_computed_figures(name, expected):
    gbps, fp32_tflops, bf16_tflops = expected
    s = cpu_spec(name)
    assert s.memory_gbps == pytest.approx(gbps) and s.peak_tflops["fp32"] == pytest.approx(fp32_tflops)
    assert s.peak_tflops.get("bf16_tensor") == (pytest.approx(bf16_tflops) if bf16_tflops else None)


def test_source_names_the_page_says_unverified_and_shows_the_arithmetic():
    for s in KNOWN_CPUS:
        assert ("ark.intel.com" if s.vendor == "intel" else "amd.com") in s.source
        assert "not verifiable offline" in s.source and "derived: " in s.source
        assert f"{s.memory_channels} ch x {s.memory_mts} MT/s x 8 B = {s.memory_gbps:g} GB/s" in s.source
        assert f"{s.cores} cores x {s.base_ghz:g} GHz base" in s.source
    d = cpu_spec("AMD EPYC 7763").to_dict()
    assert d["memory_gbps"] == pytest.approx(204.8) and d["peak_tflops"]["fp64"] == pytest.approx(2.5088)


def test_thread_scaling_is_per_core_and_capped_at_one_socket():
    s = cpu_spec("Intel(R) Xeon(R) Platinum 8480+")
    assert s.peak_flops("fp32", threads=8) == pytest.approx(8 * 2.0e9 * 64)
    assert s.peak_flops("bf16_tensor", threads=1) == pytest.approx(2.0e9 * 1024)
    assert s.peak_flops("fp32", threads=224) == pytest.approx(s.peak_flops("fp32"))  # 2 sockets x SMT
    with pytest.raises(InvalidArgumentError, match="threads must be >= 1"):
        s.peak_flops("fp32", threads=0)


def test_lookup_errors_name_what_is_known():
    with pytest.raises(RegistryError, match=r"no datasheet row for CPU 'Intel\(R\) Xeon\(R\) Processor'.*8480\+"):
        cpu_spec("Intel(R) Xeon(R) Processor")
    assert find_cpu_spec("") is None and find_cpu_spec(None) is None
    with pytest.raises(RegistryError, match="no peak for dtype 'bf16_tensor'.*fp32"):
        cpu_spec("AMD EPYC 9654 96-Core Processor").peak_flops("bf16_tensor")


def test_gpu_lookup_is_unchanged_by_the_cpu_table():
    assert find_device_spec("Intel(R) Xeon(R) Platinum 8480+") is None
    assert find_device_spec("NVIDIA H100 80GB HBM3").name == "NVIDIA H100 SXM5 80GB"
    assert isinstance(KNOWN_CPUS[0], CpuSpec)
