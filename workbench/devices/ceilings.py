"""The ceilings a roofline is judged against: one ``Ceiling`` type, resolved in one place.

A ``Ceiling`` holds a device's peak memory bandwidth and its peak FLOP/s per dtype label, what device
it describes, where the numbers come from, and which *kind* they are, each labelled:

- ``measured``: this machine's microbenchmarks (``measure_cpu_ceiling``: copy bandwidth, fp32 matmul),
  recorded with a run or cached on disk;
- ``datasheet``: a vendor's peak (GPUs, ``devices.specs``) or a CPU datasheet's derived peak;
- ``default``: the documented placeholder used when nothing better is known; it places ops, it can
  not judge "faster than the roof".

Resolution: a GPU trace's ceiling is its GPU's datasheet peaks (unknown GPU: not applicable, said
plainly). A CPU's is ``resolve_cpu_ceiling``, the one function the rules, the roofline chart and the
reports call: the measured ceiling a run recorded (``environment["cpu_ceiling"]``); else, for a run
recorded on this machine (or no environment: a live trace here), this machine's cached measurement
at the run's thread count (``measure=True``: measured now when none is cached); else the default.
Given the same environment every reader gets, and names, the same ceiling. A CPU's datasheet peaks ride along as ``reference``:
drawn beside the judged ceiling, never judged against.

Standard library only at import time; torch is imported where a measurement needs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Protocol

from workbench.errors import NotApplicableError

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import ArrayLike

    from workbench.devices.cpu_ceiling import CpuCeiling


class TracedDevices(Protocol):
    """What ``ceiling_for`` reads of a trace (``TraceData``, a ``Trace``): whether it ran on a GPU and
    its ``deviceProperties``."""

    @property
    def has_gpu(self) -> bool: ...

    @property
    def device_properties(self) -> object: ...


MEASURED, DATASHEET, DEFAULT = "measured", "datasheet", "default"
KINDS = (MEASURED, DATASHEET, DEFAULT)
DRAWN_DTYPES = ("fp32", "tf32_tensor", "fp16_tensor", "bf16_tensor", "fp8_tensor")

# Documented default CPU ceilings: one modern x86 server core (AVX2/AVX-512 FMA) with torch's
# one-thread kernels. On the 2-vCPU build machine measure_cpu_ceiling gave 6.3-6.8 GB/s copy
# (read + write) and 155-159 GFLOP/s fp32 matmul (2026-11-29); the defaults sit between that and
# a desktop core. Use them only for *placing* ops; "faster than the roof" needs a measured one.
DEFAULT_CPU_COPY_GBPS = 10.0
DEFAULT_CPU_FP32_GFLOPS = 100.0
DEFAULT_CPU_SOURCE = (
    f"documented default CPU ceiling ({DEFAULT_CPU_COPY_GBPS:g} GB/s, "
    f"{DEFAULT_CPU_FP32_GFLOPS:g} GFLOP/s fp32); measure yours with "
    "workbench.devices.measure_cpu_ceiling()"
)


@dataclass(frozen=True)
class Ceiling:
    """Peak memory bandwidth (GB/s) and peak FLOP/s per dtype label of one device; ``kind`` says whether
    the numbers are measured, from a datasheet, or a default. ``primary`` is the label judged against
    when no dtype is named (the first label by default)."""

    memory_gbps: float
    peak_flops: Mapping[str, float]
    device: str
    source: str
    measured: bool  # True: measured here or a datasheet peak (an upper bound); False: a default
    reference: "Ceiling | None" = None
    kind: str = ""
    primary: str = field(default="")

    def __post_init__(self) -> None:
        object.__setattr__(self, "peak_flops", dict(self.peak_flops))
        if not self.kind:
            kind = (
                DATASHEET
                if any(w in self.source.lower() for w in ("vendor peak", "datasheet"))
                else MEASURED
                if self.measured
                else DEFAULT
            )
            object.__setattr__(self, "kind", kind)
        if self.kind not in KINDS:
            raise ValueError(f"ceiling kind must be one of {KINDS}; got {self.kind!r}")
        if not self.primary and self.peak_flops:
            object.__setattr__(self, "primary", next(iter(self.peak_flops)))

    # -- the numbers judged against ------------------------------------------------------
    @property
    def upper_bound(self) -> bool:
        """True when no real run can beat it (measured or datasheet), False for a default."""
        return self.kind != DEFAULT

    def peak(self, dtype: str | None = None) -> float:
        """Peak FLOP/s for a dtype key (``bf16_tensor``: the label that names it), else the primary peak."""
        if dtype:
            for label, value in self.peak_flops.items():
                if dtype in label.split("/"):
                    return float(value)
        return float(self.peak_flops[self.primary])

    @property
    def peak_gflops(self) -> float:
        return self.peak() / 1e9

    def ridge(self, dtype: str | None = None) -> float:
        """Arithmetic intensity (FLOP/byte) where the roof turns from bandwidth to compute."""
        return self.peak(dtype) / (self.memory_gbps * 1e9)

    @property
    def ridge_flops_per_byte(self) -> float:
        return self.ridge()

    def roof_us(self, flops: ArrayLike, nbytes: ArrayLike, dtype: str | None = None) -> np.ndarray:
        """Least time (µs) for that work: bytes at the bandwidth or FLOPs at the peak."""
        import numpy as np

        return np.maximum(
            np.asarray(nbytes, dtype=float) / (self.memory_gbps * 1e3),
            np.asarray(flops, dtype=float) / (self.peak(dtype) / 1e6),
        )

    @property
    def label(self) -> str:
        """One line naming the ceiling and its kind, as charts and hypotheses print it."""
        return (
            f"{self.kind}: {self.device} ({self.memory_gbps:g} GB/s, {self.primary} "
            f"{self.peak() / 1e9:g} GFLOP/s) - {self.source}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "memory_gbps": self.memory_gbps,
            "peak_flops": dict(self.peak_flops),
            "device": self.device,
            "source": self.source,
            "measured": self.measured,
            "kind": self.kind,
            "primary": self.primary,
            "reference": self.reference.to_dict() if self.reference is not None else None,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Ceiling":
        reference = cls.from_dict(d["reference"]) if d.get("reference") else None
        return cls(
            float(d["memory_gbps"]),
            {k: float(v) for k, v in d["peak_flops"].items()},
            str(d["device"]),
            str(d["source"]),
            bool(d["measured"]),
            reference,
            str(d.get("kind", "")),
            str(d.get("primary", "")),
        )


DEFAULT_CPU_CEILING = Ceiling(
    DEFAULT_CPU_COPY_GBPS,
    {"fp32": DEFAULT_CPU_FP32_GFLOPS * 1e9},
    "CPU (not measured)",
    DEFAULT_CPU_SOURCE,
    False,
    kind=DEFAULT,
)


# -- GPUs -------------------------------------------------------------------------------------
def gpu_ceilings(device_properties: object) -> Ceiling | None:
    """Datasheet peaks of the trace's GPU (fp32 and the tensor-core dtypes it has), None if unknown."""
    from workbench.devices.specs import spec_for_device_properties

    spec = spec_for_device_properties(device_properties) if device_properties else None
    if spec is None:
        return None
    by_value: dict[float, list[str]] = {}
    for dtype in DRAWN_DTYPES:
        if dtype in spec.peak_tflops:
            by_value.setdefault(spec.peak_tflops[dtype] * 1e12, []).append(dtype)
    peaks = {"/".join(names): value for value, names in by_value.items()}  # fp16/bf16: one roof
    return Ceiling(spec.memory_gbps, peaks, spec.name, f"vendor peak: {spec.source}", True, kind=DATASHEET)


# -- CPUs -------------------------------------------------------------------------------------
def recorded_cpu_ceiling(environment: Mapping[str, Any] | None) -> Ceiling | None:
    """The measured CPU ceiling a run recorded (``environment["cpu_ceiling"]``: at least copy_gbps and
    matmul_fp32_gflops), None when it recorded none."""
    recorded = (environment or {}).get("cpu_ceiling") if isinstance(environment, Mapping) else None
    if not (isinstance(recorded, Mapping) and recorded.get("copy_gbps") and recorded.get("matmul_fp32_gflops")):
        return None
    model = recorded.get("cpu_model", "this CPU")
    detail = (
        f"measured {recorded['measured_at']}: copy {int(recorded['copy_bytes']) // 2**20} MiB, "
        f"matmul n={recorded['matmul_n']}, best of {recorded['repeats']}"
        if all(k in recorded for k in ("measured_at", "copy_bytes", "matmul_n", "repeats"))
        else f"measured CPU ceiling ({model}, {recorded.get('threads', '?')} thread(s))"
    )
    return Ceiling(
        float(recorded["copy_gbps"]),
        {"fp32 matmul": float(recorded["matmul_fp32_gflops"]) * 1e9},
        f"{model}, {recorded.get('threads', '?')} thread(s)",
        detail,
        True,
        kind=MEASURED,
    )


def _machine_cpu_ceiling(measure: bool, threads: int | None = None) -> Ceiling | None:
    """This machine's cached (or, ``measure``, fresh) measured ceiling at ``threads`` torch threads (None:
    the current count); None if none or torch is absent."""
    try:
        from workbench.devices.cpu_ceiling import cached_cpu_ceiling, measure_cpu_ceiling

        found = cached_cpu_ceiling(threads=threads)
        if found is None and measure:
            found = _measured_at(measure_cpu_ceiling, threads)
    except ImportError:
        return None
    return recorded_cpu_ceiling({"cpu_ceiling": found.to_dict()}) if found is not None else None


def resolve_cpu_ceiling(environment: Mapping[str, Any] | None = None, *, measure: bool = False) -> Ceiling:
    """**The** CPU ceiling of a run or trace: the one function the rules (``TraceFacts``/``RunFacts``),
    the roofline chart and the reports call, so they judge against, and name, the same ceiling.

    Resolution, each labelled (``Ceiling.kind``):

    1. measured, recorded with the run (``environment["cpu_ceiling"]``);
    2. measured, this machine's cached measurement (``workbench.devices.measure_cpu_ceiling``) for the
       run's torch thread count, when the run was recorded on this machine (same CPU model, logical
       CPUs and platform; ``environment=None`` is a live trace on this machine); ``measure=True``
       measures it (and caches it) when none is cached. A run recorded elsewhere is never judged
       against this machine's numbers;
    3. the documented default (it places ops; it cannot judge "faster than the roof").

    The CPU model's datasheet peaks ride along as ``reference`` (drawn, never judged against: a few
    threads cannot reach a socket's DRAM peak)."""
    return cpu_ceilings(environment, measure=measure)


def _recorded_here(environment: Mapping[str, Any] | None) -> tuple[bool, int | None]:
    """(whether the environment was recorded on this machine, its torch thread count or None)."""
    if environment is None:
        return True, None
    if not isinstance(environment, Mapping):
        return False, None
    host = environment.get("host") or {}
    threads = (environment.get("torch") or {}).get("num_threads")
    threads = threads if isinstance(threads, int) and threads > 0 else None
    if not host.get("cpu_model"):
        return False, threads
    import os
    import platform

    from workbench.devices.fingerprint import cpu_model

    same = (
        str(host.get("cpu_model")) == cpu_model()
        and host.get("logical_cpus") in (None, os.cpu_count())
        and host.get("platform") in (None, platform.platform())
    )
    return same, threads


def cpu_ceilings(environment: Mapping[str, Any] | None = None, *, measure: bool = False) -> Ceiling:
    """A run's recorded CPU ceiling; else, on this machine, its cached (or ``measure``: fresh) one; else
    the documented default; with the CPU model's datasheet peaks as ``reference`` where it has a row."""
    primary = recorded_cpu_ceiling(environment)
    if primary is None:
        here, threads = _recorded_here(environment)
        if here:
            primary = _machine_cpu_ceiling(measure, threads)
    if primary is not None:
        model, threads = primary.device.rsplit(", ", 1)[0], _threads(primary.device)
    else:
        primary = DEFAULT_CPU_CEILING
        model, threads = _run_cpu_and_threads(environment)
    reference = datasheet_ceilings(model, threads) if model else None
    return replace(primary, reference=reference) if reference is not None else primary


def _measured_at(measure_cpu_ceiling: Callable[[], CpuCeiling], threads: int | None) -> CpuCeiling:
    """``measure_cpu_ceiling()`` with torch set to ``threads`` threads for the measurement (then restored)."""
    import torch

    before = torch.get_num_threads()
    try:
        if threads and threads != before:
            torch.set_num_threads(threads)
        return measure_cpu_ceiling()
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


def _threads(device: str) -> int:
    try:
        return int(device.rsplit(", ", 1)[1].split()[0])
    except (IndexError, ValueError):
        return 1


def _run_cpu_and_threads(environment: Mapping[str, Any] | None) -> tuple[str, int]:
    """CPU model and torch thread count a run recorded (its fingerprint); this machine's for a live trace;
    ("", 1) when neither is known."""
    env = environment if isinstance(environment, Mapping) else {}
    model = (env.get("host") or {}).get("cpu_model")
    threads = (env.get("torch") or {}).get("num_threads")
    if model and isinstance(threads, int) and threads > 0:
        return str(model), threads
    if environment is not None:
        return (str(model), 1) if model else ("", 1)
    try:
        import torch
    except ImportError:
        return "", 1
    from workbench.devices.fingerprint import cpu_model

    return str(model or cpu_model()), torch.get_num_threads()


def datasheet_ceilings(model: str | None, threads: int) -> Ceiling | None:
    """The CPU model's datasheet-derived peaks, compute scaled to ``threads`` (peak x
    min(threads, cores) / cores), memory the socket's DRAM peak; None when the model has no row."""
    from workbench.devices.cpu_specs import find_cpu_spec

    spec = find_cpu_spec(model)
    if spec is None:
        return None
    used = min(max(int(threads), 1), spec.cores)
    names = {"fp32": "fp32", "bf16_tensor": "bf16 AMX"}
    peaks = {
        f"datasheet {names.get(d, d)} x{used}/{spec.cores} cores": spec.peak_flops(d, used)
        for d in DRAWN_DTYPES
        if d in spec.flops_per_cycle
    }
    device = (
        f"{spec.name} datasheet: compute x {used}/{spec.cores} cores (torch threads / cores); "
        f"memory {spec.memory_gbps:g} GB/s is the socket's DRAM peak, which a few threads cannot reach"
    )
    return Ceiling(spec.memory_gbps, peaks, device, f"datasheet-derived: {spec.source}", True, kind=DATASHEET)


def ceiling_for(
    trace: TracedDevices, environment: Mapping[str, Any] | None = None, *, measure: bool = False
) -> Ceiling:
    """The ceiling a trace is judged against: its GPU's datasheet peaks on GPU traces (unknown GPU:
    ``NotApplicableError``), else ``resolve_cpu_ceiling(environment)``."""
    if trace.has_gpu:
        props = trace.device_properties
        found = gpu_ceilings(props)
        if found is not None:
            return found
        names = sorted({str(d.get("name")) for d in device_property_dicts(props) if isinstance(d, dict)})
        raise NotApplicableError(
            f"no peak figures known for the trace's GPU {names or '(unnamed)'}; "
            "pass ceilings=Ceiling(...) with its datasheet numbers"
        )
    return resolve_cpu_ceiling(environment, measure=measure)


def device_property_dicts(props: object) -> Iterator[dict[str, Any]]:
    """Each device's properties dict in a trace's ``deviceProperties`` (a list, a dict of them, nested)."""
    if isinstance(props, dict):
        if "name" in props or "computeMajor" in props:
            yield props
            return
        props = list(props.values())
    if isinstance(props, (list, tuple)):
        for item in props:
            yield from device_property_dicts(item)
