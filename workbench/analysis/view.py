"""The tables an analysis reads, prepared under one ``Semantics``: kernel types classified, and (for
HTA parity) timestamps rounded and the last ProfilerStep dropped. Vectorised; the trace is not changed."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from workbench.analysis.semantics import Semantics, kernel_type_of, resolve
from workbench.errors import InvalidArgumentError

STEP_PREFIX = "ProfilerStep#"


@dataclass(frozen=True)
class TraceView:
    kernels: pd.DataFrame  # GPU activity, with kernel_type under these semantics
    runtime: pd.DataFrame
    cpu_ops: pd.DataFrame
    steps: pd.DataFrame  # ProfilerStep# annotations: rank, name, ts_us, dur_us, end_us
    ranks: tuple
    semantics: Semantics


def prepare(trace, semantics: "Semantics | str" = "workbench") -> TraceView:
    sem = resolve(semantics)
    for attr in ("kernels", "runtime", "cpu_ops", "annotations"):
        if not hasattr(trace, attr):
            raise InvalidArgumentError(
                f"analyses need a Trace (from workbench.load_trace); got {type(trace).__name__} without .{attr}"
            )
    kernels, runtime, cpu_ops = trace.kernels, trace.runtime, trace.cpu_ops
    steps = _steps(trace.annotations)
    if sem.round_sub_us or sem.hta_float_times:
        origins = _origins_ns(trace)
        kernels, runtime, cpu_ops, steps = (_hta_times(df, origins, sem) for df in (kernels, runtime, cpu_ops, steps))
    if sem.drop_last_step:
        kernels, runtime, cpu_ops = _drop_last_step(kernels, runtime, cpu_ops, steps)
    # syncs, ranks and meta are optional: tables built by hand (TraceFacts' stand-in, tests) may lack them
    if sem.hta_kernel_types:
        kernels = _with_hta_gpu_syncs(kernels, getattr(trace, "syncs", None))
    kernels = kernels.assign(kernel_type=classify(kernels, sem))
    ranks = tuple(sorted(set(kernels["rank"].tolist()) | set(cpu_ops["rank"].tolist()))) or tuple(
        getattr(trace, "ranks", ()) or ()
    )
    return TraceView(kernels, runtime, cpu_ops, steps, ranks, sem)


def classify(kernels: pd.DataFrame, sem: Semantics) -> np.ndarray:
    """Kernel type per row: the reader's column for these semantics when it has one, else computed once
    per distinct (name, kind)."""
    if len(kernels) == 0:
        return np.array([], dtype=object)
    column = "kernel_type_hta" if sem.hta_kernel_types else "kernel_type"
    if column in kernels.columns and not (kernels[column].astype(str) == "").any():
        return kernels[column].astype(str).to_numpy(dtype=object)
    key = kernels["name"].astype(str) + "\x00" + kernels["kind"].astype(str)
    codes, uniques = pd.factorize(key)
    types = np.array([_kernel_type_of_key(u, sem) for u in uniques], dtype=object)
    return types[codes]


def _kernel_type_of_key(key: str, sem: Semantics) -> str:
    """``kernel_type_of`` for one key ``classify`` factorized: the name and the kind, joined by one NUL."""
    name, kind = key.split("\x00", 1)
    return kernel_type_of(name, kind, sem)


def _steps(annotations: pd.DataFrame) -> pd.DataFrame:
    cols = ["rank", "name", "ts_us", "dur_us", "end_us"]
    if len(annotations) == 0:
        return pd.DataFrame({c: pd.Series(dtype="float64" if c.endswith("_us") else object) for c in cols})
    names = annotations["name"].astype(str)
    cpu_side = (annotations["kind"].astype(str) != "gpu_user") if "kind" in annotations.columns else True
    steps = annotations[names.str.startswith(STEP_PREFIX) & cpu_side].copy()
    steps["end_us"] = steps["ts_us"] + steps["dur_us"]
    # one row per (rank, step): the CPU-side annotation, not its GPU-side echo
    steps = steps.sort_values(["rank", "ts_us"]).drop_duplicates(["rank", "name"], keep="first")
    return steps[cols].reset_index(drop=True)


def _origins_ns(trace) -> dict:
    """Absolute origin (file clock, ns) of each rank's relative times."""
    return dict(getattr(getattr(trace, "meta", None), "origins_ns", None) or {})


def _hta_times(df: pd.DataFrame, origins_ns: dict, sem: Semantics) -> pd.DataFrame:
    """Times as HTA holds them. It parses ``ts`` into float64 absolute µs (about 0.25 µs apart at 1.7e15,
    so ns-resolution epoch timestamps lose their last digits) and, when rounding, takes ``ceil(ts)`` and
    ``floor(ts + dur)`` of those floats: short events get 0 or negative length. Results stay relative to a
    whole-µs per-rank base, so durations and gaps are exactly HTA's."""
    if len(df) == 0:
        return df
    origin = df["rank"].map(origins_ns).fillna(0).to_numpy(np.int64)
    base_us = origin // 1000
    ts_us = df["ts_us"].to_numpy(np.float64)
    dur_us = df["dur_us"].to_numpy(np.float64)
    finite = np.isfinite(ts_us)
    ns = origin % 1000 + np.rint(np.where(finite, ts_us, 0.0) * 1000.0).astype(np.int64)  # since base_us
    if sem.hta_float_times:  # float64 of the absolute µs, correctly rounded as a JSON parser does
        absolute = (base_us + ns // 1000).astype(np.float64) + (ns % 1000) / 1000.0
    else:
        absolute = ns / 1000.0
    offset = base_us.astype(np.float64) if sem.hta_float_times else 0.0
    if sem.round_sub_us:
        start, end = np.ceil(absolute) - offset, np.floor(absolute + dur_us) - offset
    else:
        start = absolute - offset
        end = start + dur_us
    start = np.where(finite, start, np.nan)
    out = df.copy()
    out["ts_us"], out["dur_us"], out["end_us"] = start, end - start, end
    return out


def _drop_last_step(kernels, runtime, cpu_ops, steps):
    """HTA: with 2+ steps on a rank, keep CPU events starting before the last step starts, and GPU events
    whose correlation matches a kept runtime call."""
    if len(steps) == 0:
        return kernels, runtime, cpu_ops
    per_rank = steps.groupby("rank")["ts_us"].agg(["max", "size"])
    cut = per_rank.loc[per_rank["size"] >= 2, "max"]
    if cut.empty:
        return kernels, runtime, cpu_ops
    runtime = _before(runtime, cut)
    cpu_ops = _before(cpu_ops, cut)
    ranks_cut = set(cut.index.tolist())
    kept = pd.MultiIndex.from_arrays([runtime["rank"], runtime["correlation"]])
    key = pd.MultiIndex.from_arrays([kernels["rank"], kernels["correlation"]])
    keep = key.isin(kept) | ~kernels["rank"].isin(ranks_cut).to_numpy()
    return kernels[keep], runtime, cpu_ops


def _before(df: pd.DataFrame, cut: pd.Series) -> pd.DataFrame:
    limit = df["rank"].map(cut).to_numpy(dtype=np.float64, na_value=np.inf)
    return df[df["ts_us"].to_numpy() < limit]


def _with_hta_gpu_syncs(kernels: pd.DataFrame, syncs) -> pd.DataFrame:
    """HTA's kernel-type and temporal breakdowns count every event with a ``stream`` arg as GPU work, so the
    GPU-side ``cuda_sync`` markers ("Stream Sync", "Stream Wait Event") count there too; its idle breakdown
    leaves them out (checked on the alexnet trace: with them, no variant reproduces its CSV; without, all
    four numbers match to the µs). The added rows carry ``hta_sync_marker=True``. For parity only."""
    if syncs is None or len(syncs) == 0 or "source" not in syncs.columns:
        return kernels
    gpu = syncs[(syncs["source"].astype(str) == "cuda_sync") & (syncs["stream"] >= 0)]
    if gpu.empty:
        return kernels
    # on the shared traces HTA's compute time matches only when "Stream Wait Event" counts as
    # computation and the other markers (Stream/Context Sync) only stretch the GPU span
    ktype = np.where(gpu["name"].astype(str).str.contains("Wait").to_numpy(), "computation", "gpu_sync")
    extra = pd.DataFrame(
        {
            "rank": gpu["rank"].to_numpy(),
            "stream": gpu["stream"].to_numpy(),
            "name": gpu["name"].astype(str).to_numpy(),
            "kind": "kernel",
            "kernel_type": ktype,
            "kernel_type_hta": ktype,
            "ts_us": gpu["ts_us"].to_numpy(),
            "dur_us": gpu["dur_us"].to_numpy(),
            "end_us": gpu["end_us"].to_numpy(),
            "correlation": gpu["correlation"].to_numpy(),
            "hta_sync_marker": True,
        }
    )
    base = kernels.assign(hta_sync_marker=False)
    for col in ("name", "kind", "kernel_type", "kernel_type_hta"):
        if col in base.columns:
            base[col] = base[col].astype(str)
    return pd.concat([base, extra], ignore_index=True)
