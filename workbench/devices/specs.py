"""Peak numbers of known accelerators, from vendor datasheets, with lookup by device name.

Every figure is the vendor's *dense* peak (no structured-sparsity doubling), in TFLOP/s (TOPS for
int8) and GB/s (10^9 bytes/s). Tensor-core figures for GeForce parts are the FP32-accumulate rate,
which is what PyTorch's matmuls use. A name from a trace's ``deviceProperties`` (``"NVIDIA H100
80GB HBM3"``, ``"Tesla V100-SXM2-32GB"``, ``"AMD Instinct MI300X"``) is matched by the patterns of
each entry, most specific first. CPUs have their own table of derived figures
(``workbench.devices.cpu_specs``: ``find_cpu_spec``); the machine you are on is best measured
(``workbench.devices.cpu_ceiling``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Protocol, TypeVar

from workbench.errors import RegistryError


class _Patterned(Protocol):
    @property
    def patterns(self) -> tuple[str, ...]: ...


_Row = TypeVar("_Row", bound=_Patterned)

DTYPES = ("fp64", "fp64_tensor", "fp32", "tf32_tensor", "fp16_tensor", "bf16_tensor", "fp8_tensor", "int8_tensor")


@dataclass(frozen=True)
class DeviceSpec:
    """Vendor peak figures of one device model."""

    name: str
    vendor: str
    memory_gb: float
    memory_gbps: float  # peak DRAM/HBM bandwidth, GB/s
    peak_tflops: Mapping[str, float]  # dtype key (DTYPES) -> dense peak TFLOP/s
    source: str  # datasheet the numbers come from
    patterns: tuple[str, ...] = field(default=(), compare=False)

    def peak_flops(self, dtype: str) -> float:
        """Peak FLOP/s for a dtype key; raises RegistryError naming the keys this device has."""
        try:
            return self.peak_tflops[dtype] * 1e12
        except KeyError:
            raise RegistryError(
                f"{self.name} has no peak for dtype {dtype!r}; known: {sorted(self.peak_tflops)}"
            ) from None

    def ridge_flops_per_byte(self, dtype: str) -> float:
        """Arithmetic intensity (FLOP/byte) where the roofline turns from memory to compute bound."""
        return self.peak_flops(dtype) / (self.memory_gbps * 1e9)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "vendor": self.vendor,
            "memory_gb": self.memory_gb,
            "memory_gbps": self.memory_gbps,
            "peak_tflops": dict(self.peak_tflops),
            "source": self.source,
            "patterns": list(self.patterns),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "DeviceSpec":
        return cls(
            name=d["name"],
            vendor=d["vendor"],
            memory_gb=float(d["memory_gb"]),
            memory_gbps=float(d["memory_gbps"]),
            peak_tflops=dict(d["peak_tflops"]),
            source=d["source"],
            patterns=tuple(d.get("patterns", ())),
        )


def _spec(name, vendor, memory_gb, memory_gbps, source, patterns, **tflops) -> DeviceSpec:
    unknown = set(tflops) - set(DTYPES)
    assert not unknown, f"unknown dtype keys {unknown}"
    return DeviceSpec(name, vendor, memory_gb, memory_gbps, dict(tflops), source, tuple(patterns))


_V100_DS = "NVIDIA Tesla V100 datasheet (2020), https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf"
_A100_DS = "NVIDIA A100 Tensor Core GPU datasheet (2021), https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
_H100_DS = "NVIDIA H100 Tensor Core GPU datasheet (2023), https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
_H200_DS = "NVIDIA H200 Tensor Core GPU datasheet (2024), https://nvdam.widen.net/s/nb5zzzsjdf/hpc-datasheet-sc23-h200-datasheet-3002446"
_TURING_WP = "NVIDIA Turing GPU Architecture whitepaper, Appendix A table 1 (RTX 2080 Ti reference clocks), https://images.nvidia.com/aem-dam/en-zz/Solutions/design-visualization/technologies/turing-architecture/NVIDIA-Turing-Architecture-Whitepaper.pdf"
_ADA_WP = "NVIDIA Ada GPU Architecture whitepaper v2.1, Appendix A (RTX 4090), https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf"
_L4_DS = "NVIDIA L4 Tensor Core GPU datasheet (2023), https://resources.nvidia.com/en-us-data-center-overview/l4-gpu-datasheet"
_L40S_DS = "NVIDIA L40S datasheet (2023), https://resources.nvidia.com/en-us-l40s/l40s-datasheet-28413"
_A10_DS = "NVIDIA A10 Tensor Core GPU datasheet (2021), https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a10/pdf/datasheet-new/nvidia-a10-datasheet.pdf"
_T4_DS = "NVIDIA T4 Tensor Core GPU datasheet (2019), https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf"
_MI300X_DS = "AMD Instinct MI300X accelerator data sheet (2023), https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/data-sheets/amd-instinct-mi300x-data-sheet.pdf"
_MI325X_DS = "AMD Instinct MI325X accelerator data sheet (2024), https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/product-briefs/instinct-mi325x-datasheet.pdf"
_MI250X_DS = "AMD Instinct MI250X accelerator data sheet (2021), https://www.amd.com/system/files/documents/amd-instinct-mi250x-datasheet.pdf"

# Order matters: the first entry whose pattern matches wins, so variants come before families.
KNOWN_DEVICES: tuple[DeviceSpec, ...] = (
    _spec(
        "NVIDIA H200 SXM 141GB",
        "nvidia",
        141,
        4800,
        _H200_DS,
        [r"\bh200\b"],
        fp64=34,
        fp64_tensor=67,
        fp32=67,
        tf32_tensor=494.5,
        fp16_tensor=989.5,
        bf16_tensor=989.5,
        fp8_tensor=1979,
        int8_tensor=1979,
    ),
    _spec(
        "NVIDIA H100 NVL 94GB",
        "nvidia",
        94,
        3900,
        _H100_DS,
        [r"\bh100\b.*\bnvl\b"],
        fp64=30,
        fp64_tensor=60,
        fp32=60,
        tf32_tensor=417.5,
        fp16_tensor=835.5,
        bf16_tensor=835.5,
        fp8_tensor=1670.5,
        int8_tensor=1670.5,
    ),
    _spec(
        "NVIDIA H100 PCIe 80GB",
        "nvidia",
        80,
        2000,
        _H100_DS,
        [r"\bh100\b.*\bpcie\b"],
        fp64=26,
        fp64_tensor=51,
        fp32=51,
        tf32_tensor=378,
        fp16_tensor=756.5,
        bf16_tensor=756.5,
        fp8_tensor=1513,
        int8_tensor=1513,
    ),
    # "NVIDIA H100 80GB HBM3" is the SXM5 board.
    _spec(
        "NVIDIA H100 SXM5 80GB",
        "nvidia",
        80,
        3350,
        _H100_DS,
        [r"\bh100\b"],
        fp64=34,
        fp64_tensor=67,
        fp32=67,
        tf32_tensor=494.5,
        fp16_tensor=989.5,
        bf16_tensor=989.5,
        fp8_tensor=1979,
        int8_tensor=1979,
    ),
    _spec(
        "NVIDIA A100 PCIe 80GB",
        "nvidia",
        80,
        1935,
        _A100_DS,
        [r"\ba100\b(?=.*pcie)(?=.*80\s*gb)"],
        fp64=9.7,
        fp64_tensor=19.5,
        fp32=19.5,
        tf32_tensor=156,
        fp16_tensor=312,
        bf16_tensor=312,
        int8_tensor=624,
    ),
    _spec(
        "NVIDIA A100 SXM4 80GB",
        "nvidia",
        80,
        2039,
        _A100_DS,
        [r"\ba100\b.*80\s*gb", r"\ba100\b.*pg509-210"],
        fp64=9.7,
        fp64_tensor=19.5,
        fp32=19.5,
        tf32_tensor=156,
        fp16_tensor=312,
        bf16_tensor=312,
        int8_tensor=624,
    ),
    # 40GB parts (SXM4 and PCIe share 1555 GB/s); PG509-200 is the 40GB SXM4 board id
    # (its traces report 42.3e9 bytes of global memory).
    _spec(
        "NVIDIA A100 40GB",
        "nvidia",
        40,
        1555,
        _A100_DS,
        [r"\ba100\b"],
        fp64=9.7,
        fp64_tensor=19.5,
        fp32=19.5,
        tf32_tensor=156,
        fp16_tensor=312,
        bf16_tensor=312,
        int8_tensor=624,
    ),
    _spec("NVIDIA V100S PCIe 32GB", "nvidia", 32, 1134, _V100_DS, [r"\bv100s\b"], fp64=8.2, fp32=16.4, fp16_tensor=130),
    _spec("NVIDIA V100 PCIe", "nvidia", 32, 900, _V100_DS, [r"\bv100\b.*pcie"], fp64=7, fp32=14, fp16_tensor=112),
    # SXM2 (16/32GB) and the DGX Station (DGXS) board run at the SXM2 clocks.
    _spec("NVIDIA V100 SXM2", "nvidia", 32, 900, _V100_DS, [r"\bv100\b"], fp64=7.8, fp32=15.7, fp16_tensor=125),
    _spec(
        "NVIDIA L40S",
        "nvidia",
        48,
        864,
        _L40S_DS,
        [r"\bl40s\b"],
        fp32=91.6,
        tf32_tensor=183,
        fp16_tensor=362.05,
        bf16_tensor=362.05,
        fp8_tensor=733,
        int8_tensor=733,
    ),
    _spec(
        "NVIDIA L4",
        "nvidia",
        24,
        300,
        _L4_DS,
        [r"\bl4\b"],
        fp32=30.3,
        tf32_tensor=60,
        fp16_tensor=121,
        bf16_tensor=121,
        fp8_tensor=242.5,
        int8_tensor=242.5,
    ),
    _spec(
        "NVIDIA A10",
        "nvidia",
        24,
        600,
        _A10_DS,
        [r"\ba10\b"],
        fp32=31.2,
        tf32_tensor=62.5,
        fp16_tensor=125,
        bf16_tensor=125,
        int8_tensor=250,
    ),
    _spec("NVIDIA T4", "nvidia", 16, 320, _T4_DS, [r"\bt4\b"], fp32=8.1, fp16_tensor=65, int8_tensor=130),
    _spec(
        "NVIDIA GeForce RTX 4090",
        "nvidia",
        24,
        1008,
        _ADA_WP,
        [r"rtx\s*4090"],
        fp32=82.6,
        tf32_tensor=82.6,
        fp16_tensor=165.2,
        bf16_tensor=165.2,
        fp8_tensor=330.3,
        int8_tensor=660.6,
    ),
    # fp64 on Turing GeForce is 1/32 of fp32.
    _spec(
        "NVIDIA GeForce RTX 2080 Ti",
        "nvidia",
        11,
        616,
        _TURING_WP,
        [r"rtx\s*2080\s*ti"],
        fp64=0.42,
        fp32=13.4,
        fp16_tensor=53.8,
        int8_tensor=215.2,
    ),
    _spec(
        "AMD Instinct MI325X",
        "amd",
        256,
        6000,
        _MI325X_DS,
        [r"\bmi325x\b"],
        fp64=81.7,
        fp64_tensor=163.4,
        fp32=163.4,
        tf32_tensor=653.7,
        fp16_tensor=1307.4,
        bf16_tensor=1307.4,
        fp8_tensor=2614.9,
        int8_tensor=2614.9,
    ),
    _spec(
        "AMD Instinct MI300X",
        "amd",
        192,
        5300,
        _MI300X_DS,
        [r"\bmi300x\b"],
        fp64=81.7,
        fp64_tensor=163.4,
        fp32=163.4,
        tf32_tensor=653.7,
        fp16_tensor=1307.4,
        bf16_tensor=1307.4,
        fp8_tensor=2614.9,
        int8_tensor=2614.9,
    ),
    _spec(
        "AMD Instinct MI250X",
        "amd",
        128,
        3276.8,
        _MI250X_DS,
        [r"\bmi250x\b"],
        fp64=47.9,
        fp64_tensor=95.7,
        fp32=47.9,
        fp16_tensor=383,
        bf16_tensor=383,
        int8_tensor=383,
    ),
)


def _normalise(name: str) -> str:
    return re.sub(r"[_\s]+", " ", name.strip().lower())


def find_by_patterns(name: str | None, rows: Iterable[_Row]) -> _Row | None:
    """The first of ``rows`` (each with regex ``patterns``) matching ``name``, case and
    white-space insensitive; None when ``name`` is empty or nothing matches."""
    if not name:
        return None
    key = _normalise(name)
    for row in rows:
        if any(re.search(p, key) for p in row.patterns):
            return row
    return None


def find_device_spec(name: str | None) -> DeviceSpec | None:
    """The spec whose pattern matches ``name`` (case-insensitive), or None when unknown."""
    return find_by_patterns(name, KNOWN_DEVICES)


def device_spec(name: str) -> DeviceSpec:
    """Like :func:`find_device_spec` but raises RegistryError listing the known devices."""
    spec = find_device_spec(name)
    if spec is None:
        known = ", ".join(s.name for s in KNOWN_DEVICES)
        raise RegistryError(
            f"no known spec for device {name!r}; known devices: {known}. "
            "For a CPU use workbench.devices.find_cpu_spec() (datasheet rows) or measure it with "
            "workbench.devices.measure_cpu_ceiling(); else pass peaks explicitly."
        )
    return spec


def spec_for_device_properties(props: object) -> DeviceSpec | None:
    """Spec for a trace's ``deviceProperties``: a dict with ``name``, a list of them, a mapping
    rank -> list (``Trace.device_properties``), or a table with a ``name`` column.

    With several devices, the first one with a known spec is returned (a trace holds one model).
    """
    for name in _names_in(props):
        spec = find_device_spec(name)
        if spec is not None:
            return spec
    return None


def _names_in(props: Any) -> Iterable[str]:
    if props is None:
        return []
    if isinstance(props, str):
        return [props]
    if isinstance(props, Mapping):  # one device's properties, or {rank: [devices]}
        return [props["name"]] if "name" in props else _names_in(list(props.values()))
    columns = getattr(props, "columns", None)
    if columns is not None:  # a pandas DataFrame
        return [str(n) for n in props["name"]] if "name" in columns else []
    names: list[str] = []
    for item in props:
        names.extend(_names_in(item))
    return names
