"""What a roofline chart needs from a trace: one point per (op, input shapes) and the ceilings.

Points: each CPU op call whose work ``workbench.analysis.op_work`` knows (FLOPs and bytes from the
recorded input shapes and dtypes). An op whose callees have known work is left out (its work is
theirs: ``aten::linear`` -> ``aten::addmm``), so no work is counted twice. Measured time: the op's
self time on CPU traces; on GPU traces the time of the kernels it (or its callees) launched.

Ceilings: a GPU's vendor peaks (``workbench.devices.specs``, found from the trace's device
properties); a CPU's measured copy bandwidth and fp32 matmul rate (``measure_cpu_ceiling``, cached);
else the documented default of ``workbench.hypotheses.roofline``, named as such. Where the CPU
model has a datasheet row (``workbench.devices.cpu_specs``) its derived peaks come along as the
``reference`` ceilings, drawn beside the measured (or default) ones and never used for judging:
compute scaled to the threads torch uses (peak x min(threads, cores) / cores), memory the socket's
DRAM peak, which a few threads cannot reach.
No altair here: the chart is drawn by ``workbench.charts.roofline``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

import numpy as np
import pandas as pd

from workbench.errors import InvalidArgumentError

POINT_TIME_COLUMN = "dur_us"   # per-call time, what roofline_points divides the FLOPs by
DRAWN_DTYPES = ("fp32", "tf32_tensor", "fp16_tensor", "bf16_tensor", "fp8_tensor")


@dataclass(frozen=True)
class RooflineCeilings:
    """Peak memory bandwidth (GB/s) and peak FLOP/s per dtype of one device, and where they come from."""

    memory_gbps: float
    peak_flops: Mapping[str, float]
    device: str
    source: str
    measured: bool          # True: measured here or a vendor peak; False: a documented default
    # Drawn beside these, never used for judging: a CPU's datasheet peaks (``datasheet_ceilings``).
    reference: "RooflineCeilings | None" = None

    def to_dict(self) -> dict[str, Any]:
        return {"memory_gbps": self.memory_gbps, "peak_flops": dict(self.peak_flops), "device": self.device,
                "source": self.source, "measured": self.measured,
                "reference": self.reference.to_dict() if self.reference is not None else None}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "RooflineCeilings":
        reference = cls.from_dict(d["reference"]) if d.get("reference") else None
        return cls(float(d["memory_gbps"]), {k: float(v) for k, v in d["peak_flops"].items()},
                   str(d["device"]), str(d["source"]), bool(d["measured"]), reference)


def gpu_ceilings(device_properties: Any) -> RooflineCeilings | None:
    """Vendor peaks of the trace's GPU (fp32 and the tensor-core dtypes it has), None if unknown."""
    from workbench.devices.specs import spec_for_device_properties

    spec = spec_for_device_properties(device_properties)
    if spec is None:
        return None
    by_value: dict[float, list[str]] = {}
    for dtype in DRAWN_DTYPES:
        if dtype in spec.peak_tflops:
            by_value.setdefault(spec.peak_tflops[dtype] * 1e12, []).append(dtype)
    peaks = {"/".join(names): value for value, names in by_value.items()}  # fp16/bf16: one roof
    return RooflineCeilings(spec.memory_gbps, peaks, spec.name, f"vendor peak: {spec.source}", True)


def cpu_ceilings(environment: Mapping[str, Any] | None = None, *, measure: bool = False) -> RooflineCeilings:
    """A run's recorded CPU ceiling, else this machine's cached one, else (``measure=True``) a fresh
    measurement (a few seconds, then cached), else the documented default; with the CPU model's
    datasheet peaks as ``reference`` where the model has a row."""
    ceiling = _measured_cpu_ceiling(environment, measure)
    if ceiling is not None:
        primary = RooflineCeilings(
            ceiling.copy_gbps, {"fp32 matmul": ceiling.matmul_fp32_gflops * 1e9},
            f"{ceiling.cpu_model}, {ceiling.threads} thread(s)",
            f"measured {ceiling.measured_at}: copy {ceiling.copy_bytes // 2**20} MiB, "
            f"matmul n={ceiling.matmul_n}, best of {ceiling.repeats}", True)
        model, threads = ceiling.cpu_model, ceiling.threads
    else:
        from workbench.hypotheses.roofline import DEFAULT_CPU_CEILING as d

        primary = RooflineCeilings(d.memory_gbps, {"fp32": d.peak_gflops * 1e9}, "CPU (not measured)",
                                   d.source, False)
        model, threads = _run_cpu_and_threads(environment)
    reference = datasheet_ceilings(model, threads)
    return replace(primary, reference=reference) if reference is not None else primary


def _measured_cpu_ceiling(environment: Mapping[str, Any] | None, measure: bool) -> Any:
    """The run's recorded CpuCeiling, else this machine's cached (or, ``measure``, fresh) one."""
    from workbench.devices.cpu_ceiling import CpuCeiling, cached_cpu_ceiling, measure_cpu_ceiling

    recorded = (environment or {}).get("cpu_ceiling") if isinstance(environment, Mapping) else None
    if isinstance(recorded, Mapping) and set(CpuCeiling.__dataclass_fields__) <= set(recorded):
        return CpuCeiling.from_dict(dict(recorded))
    return measure_cpu_ceiling() if measure else cached_cpu_ceiling()


def _run_cpu_and_threads(environment: Mapping[str, Any] | None) -> tuple[str, int]:
    """CPU model and torch thread count a run recorded (its fingerprint), else this machine's."""
    env = environment if isinstance(environment, Mapping) else {}
    model = (env.get("host") or {}).get("cpu_model")
    threads = (env.get("torch") or {}).get("num_threads")
    if model and isinstance(threads, int) and threads > 0:
        return str(model), threads
    import torch

    from workbench.devices.fingerprint import cpu_model

    return str(model or cpu_model()), torch.get_num_threads()


def datasheet_ceilings(model: str | None, threads: int) -> RooflineCeilings | None:
    """The CPU model's datasheet-derived peaks, compute scaled to ``threads`` (peak x
    min(threads, cores) / cores), memory the socket's DRAM peak; None when the model has no row."""
    from workbench.devices.cpu_specs import find_cpu_spec

    spec = find_cpu_spec(model)
    if spec is None:
        return None
    used = min(max(int(threads), 1), spec.cores)
    names = {"fp32": "fp32", "bf16_tensor": "bf16 AMX"}
    peaks = {f"datasheet {names.get(d, d)} x{used}/{spec.cores} cores": spec.peak_flops(d, used)
             for d in DRAWN_DTYPES if d in spec.flops_per_cycle}
    device = (f"{spec.name} datasheet: compute x {used}/{spec.cores} cores (torch threads / cores); "
              f"memory {spec.memory_gbps:g} GB/s is the socket's DRAM peak, which a few threads cannot reach")
    return RooflineCeilings(spec.memory_gbps, peaks, device, f"datasheet-derived: {spec.source}", True)


def ceilings_for(trace: Any, environment: Mapping[str, Any] | None = None, *,
                 measure: bool = False) -> RooflineCeilings:
    """The ceilings to draw a trace against: its GPU's peaks on GPU traces, else CPU ceilings."""
    if getattr(trace, "has_gpu", False):
        found = gpu_ceilings(getattr(trace, "device_properties", None))
        if found is not None:
            return found
        from workbench.errors import NotApplicableError

        names = sorted({str(d.get("name")) for props in (trace.device_properties or {}).values()
                        for d in props if isinstance(d, dict)})
        raise NotApplicableError(f"no peak figures known for the trace's GPU {names or '(unnamed)'}; "
                                 "pass ceilings=RooflineCeilings(...) with its datasheet numbers")
    return cpu_ceilings(environment, measure=measure)


def _text(ops: pd.DataFrame, column: str) -> np.ndarray:
    """A column as text per row ("" where missing), as ``op_work`` takes it."""
    from workbench.analysis.labels import column_codes

    codes, labels = column_codes(ops, column)
    return labels[codes]


def _row_work(ops: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """FLOPs and bytes per op row (NaN where unknown), computed once per distinct signature."""
    from workbench.analysis import op_work

    sig = pd.DataFrame({"n": ops["name"].astype(str).to_numpy(), "d": _text(ops, "input_dims"),
                        "t": _text(ops, "input_types")})
    codes, uniques = pd.factorize(sig["n"] + "\x00" + sig["d"] + "\x00" + sig["t"])
    work = [op_work(*u.split("\x00")) for u in uniques]
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
    """Self time (CPU), or kernel time launched from the op's subtree (GPU), per op row."""
    kernels = getattr(trace, "kernels", None)
    if not getattr(trace, "has_gpu", False) or kernels is None or "op_index" not in kernels.columns:
        column = "self_us" if "self_us" in ops.columns else "dur_us"
        return ops[column].to_numpy(dtype=float)
    index = kernels["op_index"].fillna(-1).to_numpy(dtype=np.int64)
    valid = (index >= 0) & (index < len(ops))
    owner = _nearest_kept(parent, kept, index[valid])
    dur = kernels["dur_us"].to_numpy(dtype=float)[valid]
    return np.bincount(owner[owner >= 0], weights=dur[owner >= 0], minlength=len(ops))


def op_roofline_points(trace: Any, *, variant: str = "baseline", max_points: int = 40
                       ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Points ``name, shapes, flops, bytes, dur_us (per call), count, time_us, variant`` for the
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
    rows = pd.DataFrame({"name": ops["name"].astype(str).to_numpy()[kept], "shapes": _text(ops, "input_dims")[kept],
                         "flops": flops[kept], "bytes": nbytes[kept], "time_us": time_us[kept]})
    rows = rows[np.isfinite(rows["time_us"])]
    points = rows.groupby(["name", "shapes"], sort=False).agg(
        count=("flops", "size"), flops=("flops", "first"), bytes=("bytes", "first"),
        time_us=("time_us", "sum")).reset_index()
    points = points[points["time_us"] > 0].sort_values("time_us", ascending=False, ignore_index=True)
    info = {"ops": int(len(ops)), "ops_with_work": int(known.sum()), "points": int(len(points)),
            "left_out": max(0, int(len(points)) - max_points)}
    total = float(points["time_us"].sum())
    points = points.head(max_points).copy()
    info["time_shown_pct"] = 100.0 * float(points["time_us"].sum()) / total if total > 0 else 0.0
    points["dur_us"] = points["time_us"] / points["count"]
    points["variant"] = variant
    return points, info
