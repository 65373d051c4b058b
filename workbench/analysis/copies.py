"""Copy statistics: per direction (HtoD / DtoH / DtoD / PtoP ...) and host memory (pageable / pinned),
count, bytes, time and achieved bandwidth; memsets alongside."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from workbench.analysis.result import AnalysisResult
from workbench.analysis.view import prepare

_COPY_NAME = re.compile(r"^Memcpy\s+(\w+)(?:\s*\((\w+)\s*->\s*(\w+)\))?")


@dataclass(frozen=True, eq=False)
class CopyStats(AnalysisResult):
    """``table``: one row per (rank, kind, direction, host_memory): count, bytes, dur_us, gbps
    (bytes / time), median_gbps (per copy). ``pageable_bytes``: host<->device bytes through pageable
    memory (the driver stages them and the call blocks the host)."""

    pageable_bytes: int
    total_copy_us: float
    semantics: str
    kind: ClassVar[str] = "copy_stats"


def copy_stats(trace, semantics="workbench") -> CopyStats:
    view = prepare(trace, semantics)
    k = view.kernels[view.kernels["kind"].astype(str).isin(["memcpy", "memset"])]
    parts = _parts(k)
    per_copy = pd.DataFrame(
        {
            "rank": k["rank"].to_numpy(),
            "kind": k["kind"].astype(str).to_numpy(),
            "direction": parts[0],
            "host_memory": parts[1],
            "bytes": pd.to_numeric(k["bytes"], errors="coerce").fillna(-1).to_numpy(np.int64),
            "dur_us": k["dur_us"].to_numpy(np.float64),
        }
    )
    per_copy["gbps"] = np.where(
        (per_copy["dur_us"] > 0) & (per_copy["bytes"] >= 0),
        per_copy["bytes"] / np.where(per_copy["dur_us"] > 0, per_copy["dur_us"], 1) / 1e3,
        np.nan,
    )
    table = _summarise(per_copy)
    pageable = per_copy[(per_copy["host_memory"] == "pageable") & (per_copy["bytes"] > 0)]["bytes"].sum()
    return CopyStats(
        table=table,
        pageable_bytes=int(pageable),
        total_copy_us=float(per_copy["dur_us"].sum()),
        semantics=view.semantics.name,
    )


def _parts(k: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(direction, host_memory) per row, parsed once per distinct name."""
    codes, uniques = pd.factorize(k["name"].astype(str))
    direction, memory = [], []
    for name in uniques:
        d, m = _parse(name)
        direction.append(d)
        memory.append(m)
    return np.array(direction, dtype=object)[codes], np.array(memory, dtype=object)[codes]


def _parse(name: str) -> tuple[str, str]:
    if name.startswith("Memset"):
        return "memset", "device"
    m = _COPY_NAME.match(name)
    if not m:
        return "unknown", "unknown"
    src, dst = (m.group(2) or "").lower(), (m.group(3) or "").lower()
    host = {src, dst} & {"pageable", "pinned", "managed"}
    return m.group(1), (host.pop() if host else ("device" if src or dst else "unknown"))


def _summarise(c: pd.DataFrame) -> pd.DataFrame:
    cols = ["rank", "kind", "direction", "host_memory", "count", "bytes", "dur_us", "gbps", "median_gbps"]
    if c.empty:
        return pd.DataFrame({col: pd.Series(dtype="float64") for col in cols})
    c = c.assign(known_bytes=c["bytes"].clip(lower=0))
    g = c.groupby(["rank", "kind", "direction", "host_memory"])
    t = g.agg(
        count=("dur_us", "size"), bytes=("known_bytes", "sum"), dur_us=("dur_us", "sum"), median_gbps=("gbps", "median")
    ).reset_index()
    t["gbps"] = np.where(t["dur_us"] > 0, t["bytes"] / t["dur_us"].where(t["dur_us"] > 0, 1) / 1e3, np.nan)
    t["count"] = t["count"].astype("int64")
    t["bytes"] = t["bytes"].astype("int64")
    return t.sort_values(["rank", "dur_us"], ascending=[True, False], ignore_index=True)[cols]
