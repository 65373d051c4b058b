"""A tensor filled on the CPU (randn, zeros, full, arange, ...) and then copied to the device: made on
the device directly, both the host fill and the host-to-device copy go away."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pandas as pd

from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.hypothesis import Evidence
from workbench.hypotheses.registry import Limits, NotJudged, rule
from workbench.hypotheses.rules._common import bounded_ms, pct, rows
from workbench.hypotheses.words import Finding, Words

# ops that write a whole tensor on the host; factory ops (randn, zeros, ...) record their shape on
# the in-place op they call (normal_, zero_, fill_ ...)
FILL_OPS = frozenset(
    {
        "aten::fill_",
        "aten::zero_",
        "aten::normal_",
        "aten::uniform_",
        "aten::random_",
        "aten::bernoulli_",
        "aten::exponential_",
        "aten::arange",
        "aten::linspace",
        "aten::randperm",
        "aten::eye",
        "aten::full",
        "aten::ones",
        "aten::zeros",
        "aten::rand",
        "aten::randn",
        "aten::randint",
    }
)


def _tensor_bytes(dims: str, types: str) -> int:
    """Bytes of the largest tensor input of one op (its shape and dtype as recorded), -1 if unknown."""
    from workbench.analysis.work_formulas import DTYPE_BYTES

    try:
        d, ty = json.loads(dims), json.loads(types)
    except ValueError:
        return -1
    best = -1
    for shape, dtype in zip(d or [], ty or []):
        if isinstance(shape, list) and shape and all(isinstance(x, int) for x in shape) and dtype in DTYPE_BYTES:
            best = max(best, int(np.prod(shape)) * DTYPE_BYTES[dtype])
    return best


def host_fills(f: TraceFacts) -> pd.DataFrame:
    """Fill ops that ran on the host (no runtime call inside them launched device work), with their bytes."""
    ops = f.require_cpu_ops()
    idx = np.flatnonzero(ops["name"].astype(str).isin(FILL_OPS).to_numpy())
    fills = ops.iloc[idx].assign(op_row=idx)
    if "op_index" in f.runtime:
        fills = fills[~fills["op_row"].isin(set(f.runtime["op_index"].tolist()))]
    sizes: dict[tuple[str, str], int] = {}
    fill_bytes = [
        sizes.setdefault((d, t), _tensor_bytes(d, t))
        for d, t in zip(fills["input_dims"].astype(str), fills["input_types"].astype(str))
    ]
    return fills.assign(bytes=np.asarray(fill_bytes, dtype=np.int64))


def htod_copies(f: TraceFacts) -> pd.DataFrame:
    k = f.require_gpu()
    c = k[(k["kind"] == "memcpy") & k["name"].astype(str).str.contains("HtoD") & (k["bytes"] > 0)]
    if "op_index" not in c:
        return c.iloc[0:0]
    c = c[c["op_index"] >= 0]
    ops = f.cpu_ops
    tid = ops["tid"].astype(str).to_numpy()
    start = ops["ts_us"].to_numpy(float)
    rows_ = c["op_index"].to_numpy(np.int64)
    return c.assign(op_tid=tid[rows_], op_ts_us=start[rows_])


@dataclass(frozen=True)
class CpuFillThenCopyLimits(Limits):
    """The thresholds of ``cpu_fill_then_copy``."""

    min_pct: float = 1.0
    max_lookback_us: float = 1e6


@dataclass(frozen=True, kw_only=True)
class CpuFillThenCopyFinding(Finding):
    n_copies: int  # host-to-device copies matched to a host fill of the same size before them
    copy_ms: float  # the copies' summed time
    fill_ms: float  # the matched fills' summed time


CPU_FILL_THEN_COPY_WORDS = Words(
    title="{n_copies} tensors are filled on the CPU, then copied to the device",
    observed="{n_copies} host-to-device copies ({copy_ms:.2f} ms) carry tensors of exactly the size a host fill op "
    "wrote just before ({fill_ms:.2f} ms of host fills)",
    mechanism="Creating the tensor on the host and moving it costs a host fill, a PCIe copy and (from pageable "
    "memory) a blocked host; a factory call with device= fills it on the GPU in microseconds.",
    predicted_effect="torch.randn/zeros/full/arange(..., device='cuda') removes the copy and most of the fill time",
    falsifier="create the tensor with device='cuda': if the step time does not fall by about the copy and fill "
    "time, they were hidden behind other work (no variant in the registry moves the fill to the device: that "
    "experiment is your own rewrite)",
    confounders=(
        "data that must come from the host (a dataset) cannot be made on the device",
        "a same-size match can be a coincidence for common sizes",
    ),
)


@rule(
    "cpu_fill_then_copy",
    category="transfer",
    scope="trace",
    limits=CpuFillThenCopyLimits,
    finding=CpuFillThenCopyFinding,
    words=CPU_FILL_THEN_COPY_WORDS,
)
def cpu_fill_then_copy(f: TraceFacts, limits: CpuFillThenCopyLimits) -> CpuFillThenCopyFinding | None:
    """A tensor is filled on the CPU and then copied, at the same size, to the device."""
    copies = htod_copies(f)
    if copies.empty:
        return None
    fills = host_fills(f)
    fills = fills[fills["bytes"] > 0]
    if fills.empty:
        if (f.cpu_ops["input_dims"].astype(str) == "").all():
            raise NotJudged(
                "input shapes were not recorded (profile with record_shapes=True): fills cannot be matched to copies"
            )
        return None
    left = copies.assign(op_tid=copies["op_tid"].astype(str), bytes=copies["bytes"].astype(np.int64)).sort_values(
        "op_ts_us"
    )
    right = fills[["rank", "tid", "bytes", "ts_us", "dur_us", "name"]].rename(
        columns={"ts_us": "fill_ts_us", "dur_us": "fill_us", "name": "fill_op", "tid": "op_tid"}
    )
    right = right.assign(op_tid=right["op_tid"].astype(str)).sort_values("fill_ts_us")
    m = pd.merge_asof(
        left,
        right,
        left_on="op_ts_us",
        right_on="fill_ts_us",
        by=["rank", "op_tid", "bytes"],
        direction="backward",
        tolerance=limits.max_lookback_us,
    )
    m = m[m["fill_op"].notna()]
    stake_us = float(m["dur_us"].sum() + m["fill_us"].sum())
    share = pct(stake_us, f.window_us)
    if m.empty or share < limits.min_pct:
        return None
    by = m.groupby(["fill_op", "name", "bytes"], as_index=False, observed=True).agg(
        n=("dur_us", "size"), copy_us=("dur_us", "sum"), fill_us=("fill_us", "sum")
    )
    return CpuFillThenCopyFinding(
        n_copies=len(m),
        copy_ms=m["dur_us"].sum() / 1e3,
        fill_ms=m["fill_us"].sum() / 1e3,
        evidence=(
            Evidence(
                "fill_and_copy_pct",
                share,
                "%",
                limits.min_pct,
                source="cpu_ops (fills) + kernels (HtoD copies)",
                rows=rows(by, ["fill_op", "name", "bytes", "n", "copy_us", "fill_us"], by="copy_us"),
            ),
            Evidence("matched_copies", len(m), "copies", source="same rank, thread and byte count"),
        ),
        time_at_stake_ms=bounded_ms(stake_us, f.window_us),
        confidence="medium",
        scope="all ranks",
    )
