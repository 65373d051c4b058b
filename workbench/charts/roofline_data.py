"""What a roofline chart needs from a trace: one point per (op, input shapes) and the ceilings.

Points: each CPU op call whose work ``workbench.analysis.op_work`` knows (FLOPs and bytes from the
recorded input shapes and dtypes). An op whose callees have known work is left out (its work is
theirs: ``aten::linear`` -> ``aten::addmm``), so no work is counted twice. Measured time: the time
that did the work: on CPU traces the op's inclusive time (its callees have no work of their own, so
what they carry is its work: ``aten::relu`` -> ``aten::clamp_min``); on GPU traces the time of the
kernels it (or its callees) launched. Where the points sit against the ceiling (bound, above the roof)
is ``workbench.analysis.roofline.place``, the same placement the rules read.

Ceilings: ``workbench.devices.ceilings`` (one ``Ceiling`` type, ``RooflineCeilings`` here; measured,
datasheet or default, each labelled): a GPU's datasheet peaks; a CPU's measured ceiling (recorded with
the run, or cached on this machine for a live trace), else the documented default, named as such;
a CPU model's datasheet peaks ride along as ``reference`` roofs, never used for judging.
No altair here: the chart is drawn by ``workbench.charts.roofline``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from workbench.devices.ceilings import (
    DRAWN_DTYPES,
    Ceiling,
    ceiling_for,
    cpu_ceilings,
    datasheet_ceilings,
    gpu_ceilings,
)
from workbench.errors import InvalidArgumentError

POINT_TIME_COLUMN = "dur_us"  # per-call time, what roofline_points divides the FLOPs by
ceilings_for = ceiling_for
__all__ = [
    "DRAWN_DTYPES",
    "RooflineCeilings",
    "Ceiling",
    "ceilings_for",
    "cpu_ceilings",
    "datasheet_ceilings",
    "gpu_ceilings",
    "op_roofline_points",
]


# One ceiling type and one resolution, in workbench.devices.ceilings (measured / datasheet / default,
# each labelled): the chart draws what the rules judge against. The names stay here for callers.
RooflineCeilings = Ceiling


def _text(ops: pd.DataFrame, column: str) -> np.ndarray:
    """A column as text per row ("" where missing), as ``op_work`` takes it."""
    from workbench.analysis.labels import column_codes

    codes, labels = column_codes(ops, column)
    return labels[codes]


def _row_work(ops: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """FLOPs and bytes per op row (NaN where unknown), computed once per distinct signature."""
    from workbench.analysis import op_work

    sig = pd.DataFrame(
        {"n": ops["name"].astype(str).to_numpy(), "d": _text(ops, "input_dims"), "t": _text(ops, "input_types")}
    )
    # grouped on the three columns themselves: a name may hold any character (NUL too)
    codes, uniques = pd.MultiIndex.from_frame(sig).factorize()
    work = [op_work(*u) for u in uniques]
    flops = np.array([w[0] for w in work], dtype=float)[codes] if work else np.zeros(0)
    nbytes = np.array([w[1] for w in work], dtype=float)[codes] if work else np.zeros(0)
    return flops, nbytes


def _parents(ops: pd.DataFrame) -> np.ndarray:
    if "parent" not in ops.columns:
        return np.full(len(ops), -1, dtype=np.int64)
    parent = ops["parent"].fillna(-1).to_numpy(dtype=np.int64)
    return np.where((parent >= 0) & (parent < len(ops)), parent, -1)


def _with_working_callee(parent: np.ndarray, known: np.ndarray) -> np.ndarray:
    """True for rows with a descendant (callee at any depth) whose work is known."""
    marked = np.zeros(len(parent), dtype=bool)
    cur = np.where(known, parent, -1)
    for _ in range(len(parent)):
        cur = cur[cur >= 0]
        if not len(cur):
            break
        marked[cur] = True
        cur = parent[cur]
    return marked


def _nearest_kept(parent: np.ndarray, kept: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """For each row index, the nearest ancestor-or-self that is kept (-1 if none)."""
    out = np.full(len(rows), -1, dtype=np.int64)
    cur = rows.astype(np.int64).copy()
    for _ in range(len(parent) + 1):
        live = (out < 0) & (cur >= 0)
        if not live.any():
            break
        hit = live & kept[np.where(cur >= 0, cur, 0)]
        out[hit] = cur[hit]
        cur = np.where(live & ~hit, parent[np.where(cur >= 0, cur, 0)], -1)
    return out


def _time_per_row(trace: Any, ops: pd.DataFrame, parent: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """Inclusive time (CPU: a kept op's callees have no work of their own, so the time they carry is
    the op's work: ``aten::relu`` -> ``aten::clamp_min``), or kernel time launched from the op's subtree
    (GPU), per op row."""
    kernels = getattr(trace, "kernels", None)
    if not getattr(trace, "has_gpu", False) or kernels is None or "op_index" not in kernels.columns:
        return ops["dur_us"].to_numpy(dtype=float)
    index = kernels["op_index"].fillna(-1).to_numpy(dtype=np.int64)
    valid = (index >= 0) & (index < len(ops))
    owner = _nearest_kept(parent, kept, index[valid])
    dur = kernels["dur_us"].to_numpy(dtype=float)[valid]
    return np.bincount(owner[owner >= 0], weights=dur[owner >= 0], minlength=len(ops))


def op_roofline_points(
    trace: Any, *, variant: str = "baseline", max_points: int = 40
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Points ``name, shapes, flops, bytes, dur_us (per call), count, time_us, dtype (the ceiling's key for the
    op's input dtype: fp32, bf16_tensor, ...; "" unknown), variant`` for the
    ``max_points`` (op, shapes) with the most time, and what was left out and why."""
    if max_points < 1:
        raise InvalidArgumentError(f"max_points must be >= 1; got {max_points}")
    ops = getattr(trace, "cpu_ops", None)
    if ops is None:
        raise InvalidArgumentError(f"a roofline needs a Trace with cpu_ops; got {type(trace).__name__}")
    ops = ops.reset_index(drop=True)
    flops, nbytes = _row_work(ops) if len(ops) else (np.zeros(0), np.zeros(0))
    known = np.isfinite(flops) & np.isfinite(nbytes) & (flops > 0) & (nbytes > 0)
    parent = _parents(ops)
    kept = known & ~_with_working_callee(parent, known)
    time_us = _time_per_row(trace, ops, parent, kept)
    from workbench.analysis.kernel_precision import ceiling_dtype, op_dtype

    types = _text(ops, "input_types")[kept]
    dtype_of = {t: ceiling_dtype(op_dtype(t)) for t in set(types)}
    rows = pd.DataFrame(
        {
            "name": ops["name"].astype(str).to_numpy()[kept],
            "shapes": _text(ops, "input_dims")[kept],
            "flops": flops[kept],
            "bytes": nbytes[kept],
            "time_us": time_us[kept],
            "dtype": [dtype_of[t] for t in types],
        }
    )
    rows = rows[np.isfinite(rows["time_us"])]
    points = (
        rows.groupby(["name", "shapes"], sort=False)
        .agg(
            count=("flops", "size"),
            flops=("flops", "first"),
            bytes=("bytes", "first"),
            time_us=("time_us", "sum"),
            dtype=("dtype", "first"),
        )
        .reset_index()
    )
    points = points[points["time_us"] > 0].sort_values("time_us", ascending=False, ignore_index=True)
    info: dict[str, Any] = {
        "ops": int(len(ops)),
        "ops_with_work": int(known.sum()),
        "points": int(len(points)),
        "left_out": max(0, int(len(points)) - max_points),
    }
    total = float(points["time_us"].sum())
    points = points.head(max_points).copy()
    info["time_shown_pct"] = 100.0 * float(points["time_us"].sum()) / total if total > 0 else 0.0
    points["dur_us"] = points["time_us"] / points["count"]
    points["variant"] = variant
    return points, info
