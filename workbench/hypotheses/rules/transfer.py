"""Host<->device transfers: their share of the GPU span, and copies from pageable memory."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from workbench.analysis.intervals import intersection_length, union_length
from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.hypothesis import Evidence, Hypothesis
from workbench.hypotheses.registry import Limits, rule
from workbench.hypotheses.rules._common import bounded_ms, pct, rows

HOST_DEVICE = r"HtoD|DtoH|Pageable|Pinned|Host"


def _host_copies(f: TraceFacts) -> pd.DataFrame:
    k = f.require_gpu()
    copies = k[k["kind"] == "memcpy"]
    return copies[copies["name"].astype(str).str.contains(HOST_DEVICE)]


def _copy_rows(f: TraceFacts, rank: int) -> tuple[dict, ...]:
    """Copy statistics of one rank per direction and host memory: count, bytes, time, GB/s."""
    table = f.copies.table
    table = table[(table["rank"] == rank) & (table["kind"] == "memcpy")]
    return rows(table, ["direction", "host_memory", "count", "bytes", "dur_us", "gbps"], by="dur_us")


@dataclass(frozen=True)
class TransferShareLimits(Limits):
    """The thresholds of ``transfer_share``."""

    min_share_pct: float = 10.0


@rule("transfer_share", category="transfer", scope="trace", limits=TransferShareLimits)
def transfer_share(f: TraceFacts, limits: TransferShareLimits):
    """Host<->device copies take a large share of the GPU's span, not hidden under compute."""
    copies = _host_copies(f)
    out = []
    for _, r in f.gpu_ranks.iterrows():
        c = copies[copies["rank"] == r["rank"]]
        if c.empty:
            continue
        k = f.kernels[(f.kernels["rank"] == r["rank"]) & (f.kernels["kernel_type"] == "computation")]
        copy_i = (c["ts_us"].to_numpy(float), c["end_us"].to_numpy(float))
        copy_us = union_length(*copy_i)
        exposed = copy_us - intersection_length(copy_i, (k["ts_us"].to_numpy(float), k["end_us"].to_numpy(float)))
        share = pct(exposed, r.span_us)
        if share < limits.min_share_pct:
            continue
        by_dir = _copy_rows(f, r["rank"])
        out.append(
            Hypothesis(
                category="transfer",
                title=f"Host<->device copies take {share:.0f}% of the GPU span",
                observed=f"rank {int(r['rank'])}: {len(c)} copies, {copy_us / 1e3:.2f} ms, {exposed / 1e3:.2f} ms not overlapped with compute",
                mechanism="Copies over PCIe/NVLink on the critical path stall the kernels that need their data.",
                evidence=(
                    Evidence(
                        "exposed_transfer_pct",
                        share,
                        "%",
                        limits.min_share_pct,
                        source="kernels (memcpy) + copy stats",
                        rows=by_dir,
                    ),
                    Evidence("transfer_us", copy_us, "us", source="kernels (memcpy)"),
                ),
                time_at_stake_ms=bounded_ms(exposed, r.span_us),
                predicted_effect="pinned memory with non_blocking copies on a side stream (or keeping data on the device) hides most of it",
                falsifier="run the step with inputs already on the device: if the step time does not fall by the copy time, the copies were not on the critical path",
                confounders=("small copies are latency-bound, not bandwidth-bound",),
                confidence="medium",
                suggested_variants=("pin_memory",),
                scope=f"rank {int(r['rank'])}",
            )
        )
    return out


@dataclass(frozen=True)
class PageableMemcpyLimits(Limits):
    """The thresholds of ``pageable_memcpy``."""

    min_pageable_pct: float = 1.0


@rule("pageable_memcpy", category="transfer", scope="trace", limits=PageableMemcpyLimits)
def pageable_memcpy(f: TraceFacts, limits: PageableMemcpyLimits):
    """Async copies from pageable host memory (staged through a bounce buffer, not truly async)."""
    copies = _host_copies(f)
    pageable = copies[copies["name"].astype(str).str.contains("Pageable")]
    window = f.window_us
    total = float(pageable["dur_us"].sum())
    if pageable.empty or pct(total, window) < limits.min_pageable_pct:
        return None
    stats = f.copies.table
    paged = stats[(stats["kind"] == "memcpy") & (stats["host_memory"] == "pageable")]
    gbps = float(paged["bytes"].sum() / (paged["dur_us"].sum() * 1e3)) if paged["dur_us"].sum() > 0 else float("nan")
    return Hypothesis(
        category="transfer",
        title=f"{len(pageable)} copies from pageable host memory",
        observed=f"{total / 1e3:.2f} ms of pageable copies" + (f" at {gbps:.1f} GB/s" if gbps == gbps else ""),
        mechanism="A copy from pageable memory is staged through a pinned buffer by the driver: slower, and it blocks the host.",
        evidence=(
            Evidence(
                "pageable_copy_pct",
                pct(total, window),
                "%",
                limits.min_pageable_pct,
                source="kernels (memcpy)",
                rows=rows(pageable, ["name", "ts_us", "dur_us", "bytes"], by="dur_us"),
            ),
            Evidence(
                "pageable_copies",
                len(pageable),
                "copies",
                source="copy stats",
                rows=rows(paged, ["rank", "direction", "count", "bytes", "dur_us", "gbps"], by="dur_us"),
            ),
            Evidence("pageable_bytes", f.copies.pageable_bytes, "bytes", source="copy stats"),
        ),
        time_at_stake_ms=bounded_ms(total / 2, window),
        predicted_effect="pin_memory() (DataLoader(pin_memory=True)) with non_blocking=True roughly halves copy time and lets it overlap",
        falsifier="pin the source tensor and copy with non_blocking=True: if the copy time does not drop, pageable staging was not the cost",
        confounders=("tiny copies are dominated by latency either way",),
        confidence="medium",
        suggested_variants=("pin_memory",),
        scope="all ranks",
    )
