"""**The** roofline placement: work (FLOPs, bytes) and the time that did it, against one ``Ceiling``
(``workbench.devices.ceilings``). Ops and kernels, the rules and the charts all place through here.

Per point: arithmetic intensity (FLOP/byte), achieved FLOP/s, the roof at that intensity, the roof
time (the least time the work can take), and:

- ``bound``: ``memory`` or ``compute`` only clearly away from the ridge (intensity below
  ridge / RIDGE_BAND or above ridge x RIDGE_BAND); in the band between, the roof time from bytes and
  from FLOPs differ by less than RIDGE_BAND x and small errors in the analytic counts (caches, reuse)
  can flip the verdict: ``uncertain``.
- ``above_roof``: the point claims more than the roof allows (achieved > roof x (1 + ROOF_TOLERANCE)):
  wrong counts, caches serving what the formula counts as DRAM traffic, or a measurement fault. It is
  an anomaly to look into, never a win.
- ``work_source``: where the FLOPs and bytes came from (``formula from shapes`` by default, or what the
  caller states: Inductor metadata, measured counters).

The time is the caller's: for an op whose work is in its children (``aten::relu`` -> the kernel, or a
callee without a formula), the op's inclusive time, not its self time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from workbench.analysis.result import AnalysisResult

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from workbench.devices.ceilings import Ceiling

RIDGE_BAND = 2.0  # memory-/compute-bound claimed only outside [ridge / 2, ridge x 2]
ROOF_TOLERANCE = 0.05  # above the roof by more than 5 %: an anomaly (timer and count noise below it)
FORMULA = "formula from shapes"


def bound_of(flops: ArrayLike, nbytes: ArrayLike, ceiling: Ceiling, dtype: Any = None) -> np.ndarray:
    """``memory`` / ``compute`` / ``uncertain`` per point (see the module docstring); ``unknown`` where the
    work is not finite and positive."""
    f = np.asarray(flops, dtype=float)
    b = np.asarray(nbytes, dtype=float)
    ridge = _ridges(ceiling, dtype, len(f))
    with np.errstate(divide="ignore", invalid="ignore"):
        intensity = f / b
    known = np.isfinite(f) & np.isfinite(b) & (b > 0) & (f >= 0)
    out = np.full(len(f), "uncertain", dtype=object)
    out[known & (intensity < ridge / RIDGE_BAND)] = "memory"
    out[known & (intensity > ridge * RIDGE_BAND)] = "compute"
    out[~known] = "unknown"
    return out


def _ridges(ceiling: Ceiling, dtype: Any, n: int) -> np.ndarray:
    if dtype is None or isinstance(dtype, str):
        return np.full(n, ceiling.ridge(dtype))
    cache: dict = {}
    return np.array([cache.setdefault(d, ceiling.ridge(d or None)) for d in dtype], dtype=float)


def _peaks(ceiling: Ceiling, dtype: Any, n: int) -> np.ndarray:
    if dtype is None or isinstance(dtype, str):
        return np.full(n, ceiling.peak(dtype))
    cache: dict = {}
    return np.array([cache.setdefault(d, ceiling.peak(d or None)) for d in dtype], dtype=float)


@dataclass(frozen=True, eq=False)
class RooflinePlacement(AnalysisResult):
    """``table``: the points given (name, flops, bytes, time_us, ...) with intensity (FLOP/byte),
    achieved_flops (FLOP/s), roof_flops (the ceiling at that intensity), roof_us (least time for the
    work), roof_fraction (roof_us / time_us), bound (memory / compute / uncertain / unknown),
    above_roof (bool) and work_source. ``ceiling``: the one ceiling judged against (``to_dict``)."""

    ceiling: dict
    n_above_roof: int
    ridge_band: float
    kind: ClassVar[str] = "roofline_placement"

    @property
    def anomalies(self) -> pd.DataFrame:
        return self.table[self.table["above_roof"]]


def place(
    points: pd.DataFrame,
    ceiling: Ceiling,
    *,
    time_column: str = "time_us",
    dtype_column: str | None = None,
    work_source: str = FORMULA,
) -> RooflinePlacement:
    """Place each row (``flops``, ``bytes`` and its time in ``time_column``) against ``ceiling``."""
    t = points.reset_index(drop=True)
    n = len(t)
    f = t["flops"].to_numpy(dtype=float) if n else np.zeros(0)
    b = t["bytes"].to_numpy(dtype=float) if n else np.zeros(0)
    time_us = t[time_column].to_numpy(dtype=float) if n else np.zeros(0)
    dtype = t[dtype_column].astype(str).to_numpy() if dtype_column and dtype_column in t else None
    peak = _peaks(ceiling, dtype, n)
    bw = ceiling.memory_gbps * 1e9
    with np.errstate(divide="ignore", invalid="ignore"):
        intensity = np.where(b > 0, f / b, np.nan)
        achieved = np.where(time_us > 0, f / (time_us * 1e-6), np.nan)
        roof_flops = np.minimum(peak, bw * intensity)
        roof_us = np.maximum(b / bw, f / peak) * 1e6
        fraction = np.where(time_us > 0, roof_us / time_us, np.nan)
    above = np.isfinite(achieved) & np.isfinite(roof_flops) & (achieved > roof_flops * (1 + ROOF_TOLERANCE))
    # memory-bound work beats the roof on bytes, compute-bound on FLOPs: either way the time is short
    above |= np.isfinite(fraction) & (fraction > 1 + ROOF_TOLERANCE)
    source = t["work_source"].astype(str).to_numpy() if "work_source" in t else np.full(n, work_source, dtype=object)
    table = t.assign(
        intensity=intensity,
        achieved_flops=achieved,
        roof_flops=roof_flops,
        roof_us=roof_us,
        roof_fraction=fraction,
        bound=bound_of(f, b, ceiling, dtype),
        above_roof=above,
        work_source=source,
    )
    return RooflinePlacement(
        table=table, ceiling=ceiling.to_dict(), n_above_roof=int(above.sum()), ridge_band=RIDGE_BAND
    )
