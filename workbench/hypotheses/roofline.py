"""Roofline placement of operators from analytic work (``workbench.analysis.op_work``: FLOPs and
bytes from the recorded input shapes and dtypes) against a device's ceilings.

Each operator gets its roof time (the least time its FLOPs and bytes can take at the ceilings)
and a bound: ``overhead`` when it takes many times its roof (dispatch, not work, sets its time),
else ``memory`` or ``compute`` by which ceiling its roof time comes from. Matrix ops whose work
the shapes do not determine (a forward convolution whose stride and padding were not recorded; its
backward is counted from shapes) are placed by name as ``compute``, and the evidence says so.

Placement against the ceiling is ``workbench.analysis.roofline`` (memory / compute only clearly away
from the ridge, ``uncertain`` in the band between; a point above the roof is flagged ``above_roof``).
Ceilings: ``workbench.devices.ceilings`` (one ``Ceiling`` type): a GPU's datasheet peaks (found from
the trace's device properties); on a CPU the measured ceiling when the run recorded one
(``environment["cpu_ceiling"]``, from ``workbench.devices.measure_cpu_ceiling``), else the
documented default, named as such in every evidence row that uses them.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

import numpy as np
import pandas as pd

# The one ceiling type and its resolution live in workbench.devices.ceilings (measured / datasheet /
# default, each labelled); the names stay importable from here.
from workbench.devices.ceilings import (  # noqa: E402
    DEFAULT_CPU_CEILING,
    DEFAULT_CPU_COPY_GBPS,
    DEFAULT_CPU_FP32_GFLOPS,
    DEFAULT_CPU_SOURCE,
    Ceiling,
)

# An op that takes more than 1 / OVERHEAD_ROOF_FRACTION times its roof time is dispatch-bound.
OVERHEAD_ROOF_FRACTION = 0.05
# Ops with no work formula: shorter than this they count as per-op overhead, longer as unknown. An op whose
# work needs at least this at the roof is never dispatch-bound (dispatch costs a few µs an op).
SHORT_OP_US = 20.0

MATRIX_OPS = re.compile(
    r"^aten::(mm|addmm|bmm|baddbmm|matmul|linear|conv\w*|_convolution|mkldnn_convolution|"
    r"cudnn_convolution\w*|_scaled_dot_product\w*|scaled_dot_product_attention|einsum)$"
)
# Ops whose time is streaming memory (copies, fills, gathers) though the formulas do not cover them.
STREAMING_OPS = re.compile(
    r"^aten::(copy_|clone|contiguous|_to_copy|to|zeros|zeros_like|ones|ones_like|full|"
    r"full_like|fill_|zero_|cat|stack|index|index_select|gather|scatter\w*|"
    r"masked_fill\w*|index_put_?|_index_put_impl_|repeat|flip|roll|cumsum|"
    r"randn|rand|normal_|uniform_|embedding|narrow_copy|pad|constant_pad_nd)$"
)


def cpu_ceiling_from(environment: Mapping[str, Any] | None) -> Ceiling:
    """The CPU ceiling a run is judged against: ``workbench.devices.ceilings.resolve_cpu_ceiling``, the
    resolution the roofline chart uses for the same environment (recorded, else this machine's measured
    one when the run was recorded here, else the documented default; each labelled)."""
    from workbench.devices.ceilings import resolve_cpu_ceiling

    return resolve_cpu_ceiling(environment if isinstance(environment, Mapping) else {})


def gpu_ceiling(device_properties: object, dtype: str = "fp32") -> Ceiling | None:
    """The datasheet peaks of the trace's GPU (judged at ``dtype`` by default), None if unknown."""
    from dataclasses import replace

    from workbench.devices.ceilings import gpu_ceilings

    found = gpu_ceilings(device_properties)
    if found is None:
        return None
    label = next((k for k in found.peak_flops if dtype in k.split("/")), None)
    return replace(found, primary=label) if label else None


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
    from workbench.analysis.roofline import ROOF_TOLERANCE, bound_of

    by_work = bound_of(np.nan_to_num(flops, nan=-1.0), np.nan_to_num(nbytes, nan=0.0), ceiling)
    # the bound is a property of the work and its typical time: judged on the median time of the op's
    # signature (name, shapes, dtypes), so that a call preempted on a loaded machine (ten times its usual
    # time) does not turn a matmul into "overhead"
    typical = (
        pd.Series(dur).groupby([names, dims, types], sort=False).transform("median").to_numpy(dtype=float)
        if len(dur)
        else dur
    )
    bound = [_bound(n, f, b, r, d, w) for n, f, b, r, d, w in zip(names, flops, nbytes, roof, typical, by_work)]
    known = ~np.isnan(flops) & ~np.isnan(nbytes)
    fraction = np.where(known & (dur > 0), roof / np.maximum(dur, 1e-9), np.nan)
    return ops.assign(
        flops=flops,
        bytes=nbytes,
        roof_us=np.where(known, roof, np.nan),
        roof_fraction=fraction,
        bound=bound,
        above_roof=np.nan_to_num(fraction) > 1 + ROOF_TOLERANCE,
    )


def _bound(name: str, flops: float, nbytes: float, roof: float, dur: float, by_work: str) -> str:
    """By the work where it is known (``analysis.roofline.bound_of``: memory / compute only away from the
    ridge, else uncertain; overhead when the op takes many times its roof); by name where it is not."""
    if not (np.isnan(flops) or np.isnan(nbytes)):
        # dispatch is a fixed cost of a few µs an op: an op whose own work needs SHORT_OP_US or more at the roof is
        # judged by that work however slowly it ran (fresh pages, a loaded machine), never called dispatch-bound
        if roof < OVERHEAD_ROOF_FRACTION * dur and roof < SHORT_OP_US:
            return "overhead"
        return by_work
    if MATRIX_OPS.match(name):
        return "compute"
    if dur < SHORT_OP_US:
        return "overhead"
    return "memory" if STREAMING_OPS.match(name) or _has_formula(name) else "unknown"


def _has_formula(name: str) -> bool:
    """Elementwise, reduction, softmax and norm ops (a formula exists; shapes were not recorded)."""
    from workbench.analysis.work_formulas import FORMULAS

    return name in FORMULAS
