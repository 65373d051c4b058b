"""Launch statistics: for every runtime/driver call that put work on the GPU (CUDA runtime and driver,
Triton's cuLaunchKernel, CUDA/HIP graph launches, HIP launches, async copies and memsets), its CPU
duration, the GPU time it launched and the launch delay (GPU start - end of the call)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from workbench.analysis.labels import column_codes, label_mask
from workbench.analysis.result import AnalysisResult
from workbench.analysis.semantics import HTA_LAUNCH_APIS
from workbench.analysis.view import prepare

RUNTIME_OUTLIER_US = 50.0  # HTA's cutoff for a slow launch call
DELAY_OUTLIER_US = 100.0  # HTA's cutoff for a long launch delay


@dataclass(frozen=True, eq=False)
class LaunchStats(AnalysisResult):
    """``table``: one row per launch (per GPU event under HTA semantics): rank, correlation, api,
    launch_ts_us, runtime_us, gpu_us (summed over a graph's kernels), n_gpu_events, launch_delay_us
    (>= 0), shorter_than_launch. ``by_api``: per api counts, medians and p95s, outlier counts."""

    by_api: pd.DataFrame
    n_launches: int
    n_shorter_than_launch: int
    semantics: str
    kind: ClassVar[str] = "launch_stats"

    @property
    def shorter_than_launch_pct(self) -> float:
        return 100.0 * self.n_shorter_than_launch / self.n_launches if self.n_launches else float("nan")


def launch_stats(trace, semantics="workbench") -> LaunchStats:
    view = prepare(trace, semantics)
    hta = view.semantics.hta_launch_apis
    table = _per_launch(view.kernels, view.runtime, hta)
    return LaunchStats(
        table=table,
        by_api=_by_api(table),
        n_launches=len(table),
        n_shorter_than_launch=int(table["shorter_than_launch"].sum()),
        semantics=view.semantics.name,
    )


def _gpu_per_correlation(k: pd.DataFrame, hta: bool) -> pd.DataFrame:
    k = k[k["correlation"] >= 0]
    if hta:  # one row per GPU event
        return pd.DataFrame(
            {
                "rank": k["rank"].to_numpy(),
                "correlation": k["correlation"].to_numpy(),
                "gpu_ts_us": k["ts_us"].to_numpy(),
                "gpu_us": k["dur_us"].to_numpy(),
                "n_gpu_events": 1,
            }
        )
    g = k.groupby(["rank", "correlation"], sort=False)
    return g.agg(gpu_ts_us=("ts_us", "min"), gpu_us=("dur_us", "sum"), n_gpu_events=("ts_us", "size")).reset_index()


def _per_launch(k: pd.DataFrame, runtime: pd.DataFrame, hta: bool) -> pd.DataFrame:
    rt = runtime[(runtime["correlation"] >= 0).to_numpy()]
    codes, labels = column_codes(rt, "name")
    if hta:
        keep = label_mask(labels, codes, HTA_LAUNCH_APIS)
        rt, codes = rt[keep], codes[keep]
    rt = pd.DataFrame(
        {
            "rank": rt["rank"].to_numpy(),
            "correlation": rt["correlation"].to_numpy(),
            "api": labels[codes],
            "launch_ts_us": rt["ts_us"].to_numpy(),
            "runtime_us": rt["dur_us"].to_numpy(),
        }
    ).drop_duplicates(["rank", "correlation"])
    t = rt.merge(_gpu_per_correlation(k, hta), on=["rank", "correlation"], how="inner")
    delay = t["gpu_ts_us"] - (t["launch_ts_us"] + t["runtime_us"])
    t["launch_delay_us"] = delay.clip(lower=0.0)
    t["shorter_than_launch"] = t["gpu_us"] < t["runtime_us"]
    t["n_gpu_events"] = t["n_gpu_events"].astype("int64")
    cols = [
        "rank",
        "correlation",
        "api",
        "launch_ts_us",
        "runtime_us",
        "gpu_us",
        "n_gpu_events",
        "launch_delay_us",
        "shorter_than_launch",
    ]
    return t.sort_values(["rank", "launch_ts_us"], ignore_index=True)[cols]


def _by_api(t: pd.DataFrame) -> pd.DataFrame:
    cols = [
        "api",
        "count",
        "runtime_median_us",
        "runtime_p95_us",
        "delay_median_us",
        "delay_p95_us",
        "gpu_median_us",
        "shorter_than_launch",
        "slow_calls",
        "long_delays",
    ]
    if t.empty:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in cols})
    g = t.groupby("api")
    out = pd.DataFrame(
        {
            "count": g.size(),
            "runtime_median_us": g["runtime_us"].median(),
            "runtime_p95_us": g["runtime_us"].quantile(0.95),
            "delay_median_us": g["launch_delay_us"].median(),
            "delay_p95_us": g["launch_delay_us"].quantile(0.95),
            "gpu_median_us": g["gpu_us"].median(),
            "shorter_than_launch": g["shorter_than_launch"].sum(),
            "slow_calls": g["runtime_us"].apply(lambda s: int((s > RUNTIME_OUTLIER_US).sum())),
            "long_delays": g["launch_delay_us"].apply(lambda s: int((s > DELAY_OUTLIER_US).sum())),
        }
    ).reset_index()
    for c in ("count", "shorter_than_launch", "slow_calls", "long_delays"):
        out[c] = out[c].astype("int64")
    return out.sort_values("count", ascending=False, ignore_index=True)[cols]
