"""Fresh memory mapped on every call: the run's health check counts minor page faults per clean call
(``fresh_pages``); many of them mean the call's buffers are returned to the OS and mapped (and zeroed)
again every time. The trace says which ops allocate those buffers.

The stake is a lower bound: each fresh 4 KiB page is zeroed by the kernel (written once at the memory
ceiling's bandwidth) before the op writes it; the fault's own trap costs more, unmeasured. Where another
allocation-churn finding speaks for the same buffers (large buffers made every call, a buffer grown by
concatenation), this evidence joins that finding instead of standing beside it (``fold_fresh_pages``): one
finding per problem.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import pandas as pd

from workbench.hypotheses.hypothesis import Evidence, Hypothesis
from workbench.hypotheses.registry import Limits, NotJudged, rule
from workbench.hypotheses.run_facts import RunFacts, field_of
from workbench.hypotheses.words import Finding, Words

if TYPE_CHECKING:
    from workbench.capture.health import ProfileHealth

PAGE_BYTES = 4096
FRESH_PAGES_CHECK = "fresh_pages"
# allocations at or above glibc's initial mmap threshold are mapped afresh unless the heap keeps them
MAPPED_ALLOC_BYTES = 128 << 10


def allocating_ops_per_call(f: RunFacts) -> tuple[pd.DataFrame, float]:
    """The top-level ops of the run's trace that allocate host buffers of at least ``MAPPED_ALLOC_BYTES``,
    with their allocations per call (``n``, ``alloc_bytes``) and their time above their floor per traced call
    (``excess_us``: above their roof, and above writing what they allocated once), largest first, and the
    bytes so allocated per call; empty when the trace has no allocator events or no CPU ops."""
    empty = pd.DataFrame(columns=["name", "n", "alloc_bytes", "excess_us"])
    try:
        tf = f.trace_facts
    except NotJudged:
        return empty, 0.0
    mem = tf.memory
    if mem.empty or tf.cpu_ops.empty:
        return empty, 0.0
    host = mem[mem["device_type"] == 0] if "device_type" in mem else mem
    big = host[host["bytes"] >= MAPPED_ALLOC_BYTES]
    calls = max(1, tf.n_steps)
    if big.empty:
        return empty, 0.0
    try:
        from workbench.hypotheses.rules.allocation import allocating_ops

        found = allocating_ops(tf, big)
    except NotJudged:
        return empty, float(big["bytes"].sum()) / calls
    if found.empty:
        return empty, float(big["bytes"].sum()) / calls
    by = found.groupby("name", as_index=False, observed=True).agg(
        n=("dur_us", "size"), alloc_bytes=("alloc_bytes", "sum"), excess_us=("excess_us", "sum")
    )
    by = by.assign(n=by["n"] / calls, alloc_bytes=by["alloc_bytes"] / calls, excess_us=by["excess_us"] / calls)
    return by.sort_values("alloc_bytes", ascending=False).reset_index(drop=True), float(big["bytes"].sum()) / calls


# the health check's own warning level (capture/health.py FRESH_PAGES_WARN_FAULTS): 1 MiB of 4 KiB pages
@dataclass(frozen=True)
class FreshPagesEveryCallLimits(Limits):
    """The thresholds of ``fresh_pages_every_call``."""

    min_faults_per_call: float = 256.0


@dataclass(frozen=True, kw_only=True)
class FreshPagesFinding(Finding):
    faults_per_call: float  # minor page faults per clean call (the run's health check)
    fresh_mib: float  # the memory those faults map, MiB per call (4 KiB pages)
    zero_ms: float  # zeroing the fresh pages at the memory ceiling (a lower bound on their cost)
    mib_per_call: float  # host buffers of >= MAPPED_ALLOC_BYTES the trace shows allocated per call, MiB
    mapped_kib: int  # that size, KiB
    top_op: str  # the op allocating the most of them ("" when the trace shows none)
    upper_ms: float  # the allocating ops' time a call above their roof (an upper bound on the faults' cost)


FRESH_PAGES_WORDS = Words(
    title="Every call maps {fresh_mib:,.1f} MiB of fresh memory",
    observed="{faults_per_call:,.0f} minor page faults per clean call{allocating}{bounded}",
    mechanism="The call's buffers are freed back to the OS and mapped again on the next call: each fresh page "
    "faults and is zeroed before the op writes it, on top of the op's own work; the cost depends on "
    "the allocator's state, so the same code can time differently from process to process.",
    predicted_effect="reusing buffers (out= arguments, in-place ops, a preallocated workspace) or fewer "
    "intermediates (fusion) removes the faults; at least the zeroing time, likely more",
    falsifier="preallocate the largest buffers once and pass them as out=: if the faults per call fall and the "
    "time does not, the fresh pages were not a cost (no variant in the registry preallocates: that "
    "experiment is your own rewrite)",
    confounders=("first-touch of memory the call needs anyway costs the same once; only repeated mapping is churn",),
    parts={
        # the trace names the ops that allocate mapped buffers (else: no allocator events, no CPU ops)
        "allocating": "; the trace shows {mib_per_call:,.1f} MiB allocated per call in buffers of >= "
        "{mapped_kib} KiB, most in {top_op}",
        # ... and their time above their roof exceeds the zeroing time: the faults' cost lies between the two
        "bounded": "; the ops that allocate them take {upper_ms:.3g} ms a call above their roof: the faults cost "
        "between {zero_ms:.3g} ms (zeroing the pages) and that",
    },
)


@rule(
    "fresh_pages_every_call",
    category="allocation_churn",
    scope="run",
    limits=FreshPagesEveryCallLimits,
    finding=FreshPagesFinding,
    words=FRESH_PAGES_WORDS,
)
def fresh_pages_every_call(f: RunFacts, limits: FreshPagesEveryCallLimits) -> FreshPagesFinding | None:
    """Every clean call maps fresh memory (many minor page faults per call): its buffers are made anew each time."""
    health: ProfileHealth | None = field_of(f.run, "health")
    check = health.check(FRESH_PAGES_CHECK) if health is not None else None
    if check is None or check.value is None:
        raise NotJudged("the run's health check has no page-fault count (fresh_pages): profile again to record it")
    faults = float(check.value)
    if faults < limits.min_faults_per_call:
        return None
    from workbench.hypotheses.roofline import cpu_ceiling_from

    try:
        ceiling = f.trace_facts.ceiling
    except NotJudged:
        ceiling = cpu_ceiling_from(f.environment)
    zero_ms = faults * PAGE_BYTES / (ceiling.memory_gbps * 1e9) * 1e3
    ops, bytes_per_call = allocating_ops_per_call(f)
    rows = tuple(
        {
            "name": str(r["name"]),
            "allocs_per_call": round(float(r["n"]), 2),
            "mib_per_call": round(float(r["alloc_bytes"]) / 2**20, 2),
        }
        for _, r in ops.head(5).iterrows()
    )
    # the most the faults can cost: the allocating ops' time above their floor (per clean call)
    upper_ms = float(ops["excess_us"].sum()) / 1e3 * f.trace_scale if rows else 0.0
    ev = [
        Evidence(
            "page_faults_per_call",
            faults,
            "faults",
            limits.min_faults_per_call,
            ">=",
            "run.health (fresh_pages: minor page faults counted around the clean calls)",
        ),
        Evidence(
            "fresh_page_zeroing_ms",
            zero_ms,
            "ms",
            source=f"faults x {PAGE_BYTES} B at the {ceiling.kind} "
            f"ceiling's {ceiling.memory_gbps:.3g} GB/s (a lower bound: the faults' own cost is not measured)",
        ),
    ]
    if rows:
        ev.append(
            Evidence(
                "mapped_alloc_mib_per_call",
                bytes_per_call / 2**20,
                "MiB",
                source="memory (allocator events) inside cpu_ops",
                rows=rows,
            )
        )
        ev.append(
            Evidence(
                "allocating_ops_excess_ms",
                upper_ms,
                "ms",
                source="cpu_ops that allocate them, time above their roof (an upper bound on the faults' cost)",
            )
        )
    return FreshPagesFinding(
        parts=(("allocating",) + (("bounded",) if upper_ms > zero_ms else ())) if rows else (),
        faults_per_call=faults,
        fresh_mib=faults * PAGE_BYTES / 2**20,
        zero_ms=zero_ms,
        mib_per_call=bytes_per_call / 2**20,
        mapped_kib=MAPPED_ALLOC_BYTES >> 10,
        top_op=str(rows[0]["name"]) if rows else "",
        upper_ms=upper_ms,
        evidence=tuple(ev),
        time_at_stake_ms=zero_ms,
        confidence="medium",
        scope="whole call",
    )


def fold_fresh_pages(found: list[Hypothesis]) -> list[Hypothesis]:
    """Where another allocation-churn finding names the buffers, the fresh-pages evidence joins the one
    with the largest stake and the standalone finding goes: one finding per problem."""
    pages = [h for h in found if h.rule == "fresh_pages_every_call"]
    others = [
        h
        for h in found
        if h.category == "allocation_churn"
        and h.rule != "fresh_pages_every_call"
        and h.has_evidence
        and h.time_at_stake_ms > 0
    ]
    if not pages:
        return found
    if not others:
        # the fresh buffers are the outputs of memory passes (each out-of-place op makes one): both findings
        # stand, and the memory-bound one says which part of its time the faults are, and what removes each
        note = (
            f"{pages[0].observed}: part of these passes' time is faulting in their fresh outputs (at least "
            f"{pages[0].time_at_stake_ms:.3g} ms a call, allocation_churn); fusion removes intermediates and "
            "their pages, reusing buffers (out=, in-place) only the faults"
        )
        return [
            replace(h, confounders=tuple(h.confounders) + (note,)) if h.category == "memory_bound" else h for h in found
        ]
    host = max(others, key=lambda h: h.time_at_stake_ms)
    joined = replace(
        host, evidence=host.evidence + pages[0].evidence[:1], observed=f"{host.observed}; {pages[0].observed}"
    )
    return [joined if h is host else h for h in found if h.rule != "fresh_pages_every_call"]
