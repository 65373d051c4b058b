"""Host<->device transfers: their share of the GPU span, and copies from pageable memory."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from workbench.analysis.intervals import intersection_length, union_length
from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.hypothesis import Evidence
from workbench.hypotheses.registry import Limits, rule
from workbench.hypotheses.rules._common import bounded_ms, pct, rows
from workbench.hypotheses.words import Finding, Words

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


@dataclass(frozen=True, kw_only=True)
class TransferShareFinding(Finding):
    rank: int  # the rank whose GPU span it is
    share_pct: float  # copy time not overlapped with computation kernels, of the rank's GPU span
    n_copies: int  # host<->device copies on the rank
    copy_ms: float  # the union of their time
    exposed_ms: float  # the part of it not overlapped with computation kernels


TRANSFER_SHARE_WORDS = Words(
    title="Host<->device copies take {share_pct:.0f}% of the GPU span",
    observed="rank {rank}: {n_copies} copies, {copy_ms:.2f} ms, {exposed_ms:.2f} ms not overlapped with compute",
    mechanism="Copies over PCIe/NVLink on the critical path stall the kernels that need their data.",
    predicted_effect="pinned memory with non_blocking copies on a side stream (or keeping data on the device) hides "
    "most of it",
    falsifier="run the step with inputs already on the device: if the step time does not fall by the copy time, the "
    "copies were not on the critical path",
    confounders=("small copies are latency-bound, not bandwidth-bound",),
    suggested_variants=("pin_memory",),
    scope="rank {rank}",
)


@rule(
    "transfer_share",
    category="transfer",
    scope="trace",
    limits=TransferShareLimits,
    finding=TransferShareFinding,
    words=TRANSFER_SHARE_WORDS,
)
def transfer_share(f: TraceFacts, limits: TransferShareLimits) -> list[TransferShareFinding]:
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
            TransferShareFinding(
                rank=int(r["rank"]),
                share_pct=share,
                n_copies=len(c),
                copy_ms=copy_us / 1e3,
                exposed_ms=exposed / 1e3,
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
                confidence="medium",
            )
        )
    return out


@dataclass(frozen=True)
class PageableMemcpyLimits(Limits):
    """The thresholds of ``pageable_memcpy``."""

    min_pageable_pct: float = 1.0


@dataclass(frozen=True, kw_only=True)
class PageableMemcpyFinding(Finding):
    n_copies: int  # copies from pageable host memory
    copy_ms: float  # their summed time
    gbps: float  # the pageable copies' bytes over their time, all ranks (nan without time: no part "rate")


PAGEABLE_MEMCPY_WORDS = Words(
    title="{n_copies} copies from pageable host memory",
    observed="{copy_ms:.2f} ms of pageable copies{rate}",
    mechanism="A copy from pageable memory is staged through a pinned buffer by the driver: slower, and it blocks "
    "the host.",
    predicted_effect="pin_memory() (DataLoader(pin_memory=True)) with non_blocking=True roughly halves copy time and "
    "lets it overlap",
    falsifier="pin the source tensor and copy with non_blocking=True: if the copy time does not drop, pageable "
    "staging was not the cost",
    confounders=("tiny copies are dominated by latency either way",),
    suggested_variants=("pin_memory",),
    parts={"rate": " at {gbps:.1f} GB/s"},  # where the copy stats time the pageable copies
)


@rule(
    "pageable_memcpy",
    category="transfer",
    scope="trace",
    limits=PageableMemcpyLimits,
    finding=PageableMemcpyFinding,
    words=PAGEABLE_MEMCPY_WORDS,
)
def pageable_memcpy(f: TraceFacts, limits: PageableMemcpyLimits) -> PageableMemcpyFinding | None:
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
    return PageableMemcpyFinding(
        n_copies=len(pageable),
        copy_ms=total / 1e3,
        gbps=gbps,
        parts=("rate",) if gbps == gbps else (),
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
        confidence="medium",
        scope="all ranks",
    )
