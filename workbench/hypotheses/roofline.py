"""Roofline placement of operators from analytic work (``workbench.analysis.op_work``: FLOPs and
bytes from the recorded input shapes and dtypes) against a device's ceilings.

Each operator gets its roof time (the least time its FLOPs and bytes can take at the ceilings)
and a bound: ``overhead`` when it takes many times its roof (dispatch, not work, sets its time),
else ``memory`` or ``compute`` by which ceiling its roof time comes from. Matrix ops whose work
the shapes do not determine (convolution: stride and padding are not recorded) are placed by
name as ``compute``, and the evidence says so.

Ceilings: a GPU's vendor peaks from ``workbench.devices`` (found from the trace's device
properties); on a CPU the measured ceiling when the run recorded one
(``environment["cpu_ceiling"]``, from ``workbench.devices.measure_cpu_ceiling``), else the
documented defaults below, named as such in every evidence row that uses them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pandas as pd

# Documented default CPU ceilings: one modern x86 server core (AVX2/AVX-512 FMA) with torch's
# one-thread kernels. On the 2-vCPU build machine measure_cpu_ceiling gave 6.3-6.8 GB/s copy
# (read + write) and 155-159 GFLOP/s fp32 matmul (2026-11-29); the defaults sit between that and
# a desktop core. Use them only for *placing* ops; "faster than the roof" needs a measured one.
DEFAULT_CPU_COPY_GBPS = 10.0
DEFAULT_CPU_FP32_GFLOPS = 100.0
DEFAULT_CPU_SOURCE = (f"documented default CPU ceiling ({DEFAULT_CPU_COPY_GBPS:g} GB/s, "
                      f"{DEFAULT_CPU_FP32_GFLOPS:g} GFLOP/s fp32); measure yours with "
                      "workbench.devices.measure_cpu_ceiling()")
# An op that takes more than 1 / OVERHEAD_ROOF_FRACTION times its roof time is dispatch-bound.
OVERHEAD_ROOF_FRACTION = 0.05
# Ops with no work formula: shorter than this they count as per-op overhead, longer as unknown.
SHORT_OP_US = 20.0

MATRIX_OPS = re.compile(r"^aten::(mm|addmm|bmm|baddbmm|matmul|linear|conv\w*|_convolution|mkldnn_convolution|"
                        r"cudnn_convolution\w*|_scaled_dot_product\w*|scaled_dot_product_attention|einsum)$")
# Ops whose time is streaming memory (copies, fills, gathers) though the formulas do not cover them.
STREAMING_OPS = re.compile(r"^aten::(copy_|clone|contiguous|_to_copy|to|zeros|zeros_like|ones|ones_like|full|"
                           r"full_like|fill_|zero_|cat|stack|index|index_select|gather|scatter\w*|"
                           r"masked_fill\w*|index_put_?|_index_put_impl_|repeat|flip|roll|cumsum|"
                           r"randn|rand|normal_|uniform_|embedding|narrow_copy|pad|constant_pad_nd)$")


@dataclass(frozen=True)
class Ceiling:
    """The roof: peak memory bandwidth (GB/s) and peak FLOP/s (GFLOP/s) of one device."""

    memory_gbps: float
    peak_gflops: float
    source: str
    upper_bound: bool      # True for a vendor peak or a measured ceiling; False for a default

    @property
    def ridge_flops_per_byte(self) -> float:
        return self.peak_gflops / self.memory_gbps

    def roof_us(self, flops: Any, nbytes: Any) -> Any:
        """Least time (µs) for that work: bytes at the bandwidth or FLOPs at the peak."""
        return np.maximum(np.asarray(nbytes, dtype=float) / (self.memory_gbps * 1e3),
                          np.asarray(flops, dtype=float) / (self.peak_gflops * 1e3))

    def to_dict(self) -> dict[str, Any]:
        return {"memory_gbps": self.memory_gbps, "peak_gflops": self.peak_gflops,
                "source": self.source, "upper_bound": self.upper_bound}


DEFAULT_CPU_CEILING = Ceiling(DEFAULT_CPU_COPY_GBPS, DEFAULT_CPU_FP32_GFLOPS, DEFAULT_CPU_SOURCE, False)


def cpu_ceiling_from(environment: Mapping[str, Any] | None) -> Ceiling:
    """The measured CPU ceiling a run recorded (``environment["cpu_ceiling"]``), else the default."""
    measured = (environment or {}).get("cpu_ceiling") if isinstance(environment, Mapping) else None
    if isinstance(measured, Mapping) and measured.get("copy_gbps") and measured.get("matmul_fp32_gflops"):
        return Ceiling(float(measured["copy_gbps"]), float(measured["matmul_fp32_gflops"]),
                       f"measured CPU ceiling ({measured.get('cpu_model', 'this CPU')}, "
                       f"{measured.get('threads', '?')} thread(s))", True)
    return DEFAULT_CPU_CEILING


def gpu_ceiling(device_properties: Any, dtype: str = "fp32") -> Ceiling | None:
    """The vendor peak of the trace's GPU (``workbench.devices`` spec table), None if unknown."""
    from workbench.devices.specs import spec_for_device_properties

    spec = spec_for_device_properties(device_properties)
    if spec is None or dtype not in spec.peak_tflops:
        return None
    return Ceiling(spec.memory_gbps, spec.peak_tflops[dtype] * 1e3, f"{spec.name} vendor peak ({spec.source[:60]})", True)


def _work_of(sig: tuple[str, str, str], cache: dict) -> tuple[float, float]:
    if sig not in cache:
        from workbench.analysis import op_work

        flops, nbytes, _ = op_work(*sig)
        cache[sig] = (flops, nbytes)
    return cache[sig]


def place_ops(ops: pd.DataFrame, ceiling: Ceiling) -> pd.DataFrame:
    """``ops`` with flops, bytes, roof_us, roof_fraction (roof / measured) and bound columns."""
    cache: dict = {}
    names = ops["name"].astype(str).to_numpy()
    dims = ops["input_dims"].astype(str).to_numpy() if "input_dims" in ops else np.full(len(ops), "")
    types = ops["input_types"].astype(str).to_numpy() if "input_types" in ops else np.full(len(ops), "")
    work = [_work_of((n, d, t), cache) for n, d, t in zip(names, dims, types)]
    flops = np.array([w[0] for w in work], dtype=float)
    nbytes = np.array([w[1] for w in work], dtype=float)
    roof = ceiling.roof_us(np.nan_to_num(flops), np.nan_to_num(nbytes))
    dur = ops["dur_us"].to_numpy(dtype=float)
    bound = [_bound(n, f, b, r, d, ceiling) for n, f, b, r, d in zip(names, flops, nbytes, roof, dur)]
    known = ~np.isnan(flops) & ~np.isnan(nbytes)
    return ops.assign(flops=flops, bytes=nbytes, roof_us=np.where(known, roof, np.nan),
                      roof_fraction=np.where(known & (dur > 0), roof / np.maximum(dur, 1e-9), np.nan),
                      bound=bound)


def _bound(name: str, flops: float, nbytes: float, roof: float, dur: float, c: Ceiling) -> str:
    if not (np.isnan(flops) or np.isnan(nbytes)):
        if roof < OVERHEAD_ROOF_FRACTION * dur:
            return "overhead"
        return "compute" if flops / (c.peak_gflops * 1e3) > nbytes / (c.memory_gbps * 1e3) else "memory"
    if MATRIX_OPS.match(name):
        return "compute"
    if dur < SHORT_OP_US:
        return "overhead"
    return "memory" if STREAMING_OPS.match(name) or _has_formula(name) else "unknown"


def _has_formula(name: str) -> bool:
    """Elementwise, reduction, softmax and norm ops (a formula exists; shapes were not recorded)."""
    from workbench.analysis.work_formulas import FORMULAS

    return name in FORMULAS
