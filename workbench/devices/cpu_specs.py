"""Peak figures of common server CPUs, each DERIVED from architectural parameters kept in the row.

One row is one socket. Its parameters are public vendor product-page facts (Intel ARK, AMD EPYC
product pages, Intel/AMD architecture descriptions for the SIMD units); they were written down
from knowledge of those pages and cannot be checked offline here, and every row's ``source``
says so. The figures are computed, never typed in, so anyone can check the arithmetic:

* peak DRAM bandwidth (GB/s) = memory channels x MT/s x 8 bytes per transfer / 1000
* peak FLOP/s per dtype     = cores x base clock x FLOP/cycle/core of that dtype

FLOP/cycle/core: fp64 and fp32 from the SIMD width and FMA pipes (2 pipes x lanes x 2 for the
multiply-add); bf16 and int8 only from AMX (Intel's tile unit: 1024 bf16 FLOP and 2048 int8 ops
per cycle per core), keyed ``bf16_tensor`` / ``int8_tensor`` like the GPU tensor units.
The base clock makes these *nominal* peaks: an all-core turbo can exceed them, a heavy
AVX-512/AMX frequency licence can fall below them. A model name from ``/proc/cpuinfo``
(``workbench.devices.fingerprint.cpu_model``) is matched by each row's patterns; variants whose
parameters differ (8380H, 8592V, 9754S, cloud-only SKUs) deliberately match nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from workbench.errors import InvalidArgumentError, RegistryError

BYTES_PER_TRANSFER = 8  # one 64-bit DDR channel


@dataclass(frozen=True)
class CpuSpec:
    """One CPU model (one socket) and the architectural parameters its peaks are derived from."""

    name: str
    vendor: str  # "intel" or "amd"
    microarchitecture: str
    cores: int  # physical cores per socket
    base_ghz: float
    memory_channels: int  # DDR channels per socket
    memory_mts: int  # DDR transfer rate, MT/s
    simd: str  # the FP units the fp64/fp32 rates come from
    flops_per_cycle: Mapping[str, int]  # dtype key (specs.DTYPES) -> FLOP (ops) per cycle per core
    page: str  # the vendor page the parameters are from
    patterns: tuple[str, ...] = field(default=(), compare=False)

    @property
    def memory_gbps(self) -> float:
        """Peak DRAM bandwidth of the socket: channels x MT/s x 8 bytes."""
        return self.memory_channels * self.memory_mts * BYTES_PER_TRANSFER / 1000

    @property
    def peak_tflops(self) -> dict[str, float]:
        """Nominal peak per dtype at the base clock, all cores of the socket, TFLOP/s."""
        return {
            dtype: self.cores * self.base_ghz * per_cycle / 1000 for dtype, per_cycle in self.flops_per_cycle.items()
        }

    def peak_flops(self, dtype: str, threads: int | None = None) -> float:
        """Peak FLOP/s for a dtype; with ``threads``, scaled by min(threads, cores) / cores
        (one thread per physical core, at most one socket). Raises RegistryError for a dtype
        the CPU has no rate for."""
        if dtype not in self.flops_per_cycle:
            raise RegistryError(f"{self.name} has no peak for dtype {dtype!r}; known: {sorted(self.flops_per_cycle)}")
        return self.peak_tflops[dtype] * 1e12 * self.core_fraction(threads)

    def core_fraction(self, threads: int | None) -> float:
        """min(threads, cores) / cores; 1.0 for None. Raises InvalidArgumentError for threads < 1."""
        if threads is None:
            return 1.0
        if threads < 1:
            raise InvalidArgumentError(f"threads must be >= 1 to scale {self.name}'s peak; got {threads}")
        return min(threads, self.cores) / self.cores

    @property
    def source(self) -> str:
        """Where the parameters come from, that they were not checked here, and the arithmetic."""
        return (
            f"{self.page} (cores, base clock, memory channels and speed) and the vendor's "
            f"{self.microarchitecture} core description (FP units); written from knowledge of those "
            f"public pages, not verifiable offline here; derived: {self.derivation}"
        )

    @property
    def derivation(self) -> str:
        rates = ", ".join(f"{d} {n} FLOP/cycle/core" for d, n in self.flops_per_cycle.items())
        return (
            f"{self.memory_channels} ch x {self.memory_mts} MT/s x 8 B = {self.memory_gbps:g} GB/s; "
            f"{self.cores} cores x {self.base_ghz:g} GHz base x ({rates}; {self.simd})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "vendor": self.vendor,
            "microarchitecture": self.microarchitecture,
            "cores": self.cores,
            "base_ghz": self.base_ghz,
            "memory_channels": self.memory_channels,
            "memory_mts": self.memory_mts,
            "simd": self.simd,
            "flops_per_cycle": dict(self.flops_per_cycle),
            "page": self.page,
            "memory_gbps": self.memory_gbps,
            "peak_tflops": self.peak_tflops,
            "source": self.source,
            "patterns": list(self.patterns),
        }


# FLOP/cycle/core. 2 FMA pipes x lanes x 2 (multiply + add).
_AVX512_2FMA = {"fp64": 2 * 8 * 2, "fp32": 2 * 16 * 2}
_AVX2_2FMA = {"fp64": 2 * 4 * 2, "fp32": 2 * 8 * 2}
_AMX = {"bf16_tensor": 1024, "int8_tensor": 2048}  # per core per cycle, Intel's AMX description
_ZEN4_SIMD = "2 x 256-bit FMA pipes (AVX-512 executed as two 256-bit halves)"


def _ark(product: str) -> str:
    return f"Intel ARK product page 'Intel Xeon Platinum {product} Processor' (ark.intel.com)"


def _amd(product: str) -> str:
    return f"AMD product page 'AMD EPYC {product}' (amd.com)"


# A trailing (?![0-9a-z+]) keeps "8380" from matching "8380H", "8480+" from "8480+X", and so on.
_END = r"(?![0-9a-z+])"

KNOWN_CPUS: tuple[CpuSpec, ...] = (
    CpuSpec(
        "Intel Xeon Platinum 8280",
        "intel",
        "Cascade Lake",
        28,
        2.7,
        6,
        2933,
        "2 x AVX-512 FMA units",
        dict(_AVX512_2FMA),
        _ark("8280"),
        (rf"xeon.*\bplatinum 8280[lm]?{_END}",),
    ),  # L/M: same silicon, more addressable memory
    CpuSpec(
        "Intel Xeon Platinum 8380",
        "intel",
        "Ice Lake",
        40,
        2.3,
        8,
        3200,
        "2 x AVX-512 FMA units",
        dict(_AVX512_2FMA),
        _ark("8380"),
        (rf"xeon.*\bplatinum 8380{_END}",),
    ),
    CpuSpec(
        "Intel Xeon Platinum 8480+",
        "intel",
        "Sapphire Rapids",
        56,
        2.0,
        8,
        4800,
        "2 x AVX-512 FMA units; AMX",
        {**_AVX512_2FMA, **_AMX},
        _ark("8480+"),
        (r"xeon.*\bplatinum 8480\+(?![0-9a-z+])",),
    ),
    CpuSpec(
        "Intel Xeon Platinum 8592+",
        "intel",
        "Emerald Rapids",
        64,
        1.9,
        8,
        5600,
        "2 x AVX-512 FMA units; AMX",
        {**_AVX512_2FMA, **_AMX},
        _ark("8592+"),
        (r"xeon.*\bplatinum 8592\+(?![0-9a-z+])",),
    ),
    CpuSpec(
        "AMD EPYC 7763",
        "amd",
        "Zen 3 (Milan)",
        64,
        2.45,
        8,
        3200,
        "2 x 256-bit FMA pipes",
        dict(_AVX2_2FMA),
        _amd("7763"),
        (rf"\bepyc 7763{_END}",),
    ),
    CpuSpec(
        "AMD EPYC 9654",
        "amd",
        "Zen 4 (Genoa)",
        96,
        2.4,
        12,
        4800,
        _ZEN4_SIMD,
        dict(_AVX2_2FMA),
        _amd("9654"),
        (rf"\bepyc 9654p?{_END}",),
    ),  # P: 1-socket SKU
    CpuSpec(
        "AMD EPYC 9754",
        "amd",
        "Zen 4c (Bergamo)",
        128,
        2.25,
        12,
        4800,
        _ZEN4_SIMD,
        dict(_AVX2_2FMA),
        _amd("9754"),
        (rf"\bepyc 9754{_END}",),
    ),
)


def find_cpu_spec(name: str | None) -> CpuSpec | None:
    """The row whose pattern matches a CPU model name (case-insensitive), or None when unknown."""
    from workbench.devices.specs import find_by_patterns

    return find_by_patterns(name, KNOWN_CPUS)


def cpu_spec(name: str) -> CpuSpec:
    """Like :func:`find_cpu_spec` but raises RegistryError listing the known CPUs."""
    spec = find_cpu_spec(name)
    if spec is None:
        known = ", ".join(s.name for s in KNOWN_CPUS)
        raise RegistryError(
            f"no datasheet row for CPU {name!r}; known CPUs: {known}. "
            "Measure this machine with workbench.devices.measure_cpu_ceiling() instead."
        )
    return spec
