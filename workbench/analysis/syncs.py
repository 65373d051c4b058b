"""Synchronisation audit: every host-side wait on the device (device/stream/event synchronize, blocking
copies), how long the host was blocked, and the CPU op that caused it (``aten::item`` ->
``aten::_local_scalar_dense``, ``aten::to``, ``aten::copy_``, ``aten::nonzero`` ...)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from workbench.analysis.labels import column_codes, label_mask
from workbench.analysis.result import AnalysisResult
from workbench.analysis.view import prepare

SYNC_KIND = {
    "cudaDeviceSynchronize": "device_synchronize",
    "hipDeviceSynchronize": "device_synchronize",
    "cuCtxSynchronize": "device_synchronize",
    "cudaStreamSynchronize": "stream_synchronize",
    "hipStreamSynchronize": "stream_synchronize",
    "cuStreamSynchronize": "stream_synchronize",
    "cudaEventSynchronize": "event_synchronize",
    "hipEventSynchronize": "event_synchronize",
    "cuEventSynchronize": "event_synchronize",
    "cudaMemcpy": "synchronous_copy",
    "hipMemcpy": "synchronous_copy",
    "hipMemcpyWithStream": "synchronous_copy",
    "cudaMemset": "synchronous_memset",
    "hipMemset": "synchronous_memset",
}
# ops that make the host wait for a value or a buffer from the device
CAUSE_OPS = frozenset(
    {
        "aten::item",
        "aten::_local_scalar_dense",
        "aten::to",
        "aten::_to_copy",
        "aten::copy_",
        "aten::cpu",
        "aten::nonzero",
        "aten::masked_select",
        "aten::unique",
        "aten::_unique2",
        "aten::is_nonzero",
        "aten::equal",
        "aten::allclose",
        "aten::tolist",
        "aten::repeat_interleave",
        "aten::index",
        "aten::bincount",
        "aten::histc",
        "aten::where",
    }
)


@dataclass(frozen=True, eq=False)
class SyncAudit(AnalysisResult):
    """``table``: one row per host wait: rank, tid, api, kind, ts_us, blocked_us, op (innermost enclosing
    CPU op), cause_op (outermost known syncing op above it, else op), top_op. ``by_cause``: per
    (kind, cause_op): count and blocked time."""

    by_cause: pd.DataFrame
    blocked_us: float
    semantics: str
    kind: ClassVar[str] = "sync_audit"


def sync_audit(trace, semantics="workbench") -> SyncAudit:
    view = prepare(trace, semantics)
    rt = view.runtime
    kind = _kinds(rt, view.kernels)
    waits = rt[kind != ""]
    table = pd.DataFrame(
        {
            "rank": waits["rank"].to_numpy(),
            "tid": waits["tid"].astype(str).to_numpy(),
            "api": waits["name"].astype(str).to_numpy(),
            "kind": kind[kind != ""],
            "ts_us": waits["ts_us"].to_numpy(np.float64),
            "blocked_us": waits["dur_us"].to_numpy(np.float64),
        }
    )
    op, cause, top = _attribution(waits, view.cpu_ops)
    table["op"], table["cause_op"], table["top_op"] = op, cause, top
    table = table.sort_values(["rank", "ts_us"], ignore_index=True)
    by_cause = (
        table.groupby(["kind", "cause_op"])
        .agg(count=("blocked_us", "size"), blocked_us=("blocked_us", "sum"))
        .reset_index()
        .sort_values("blocked_us", ascending=False, ignore_index=True)
    )
    by_cause["count"] = by_cause["count"].astype("int64")
    return SyncAudit(
        table=table, by_cause=by_cause, blocked_us=float(table["blocked_us"].sum()), semantics=view.semantics.name
    )


def _kinds(rt: pd.DataFrame, kernels: pd.DataFrame) -> np.ndarray:
    """Kind of wait per runtime row, "" when it is no wait. An async copy to pageable host memory or from
    the device to the host blocks the caller too (the driver stages it). Names are looked at once each."""
    codes, labels = column_codes(rt, "name")
    kind = np.array([SYNC_KIND.get(name, "") for name in labels], dtype=object)[codes]
    is_async_copy = np.array(["Memcpy" in name for name in labels], dtype=bool)[codes] & (kind == "")
    copies = kernels[(kernels["kind"] == "memcpy").to_numpy(bool)]
    copy_codes, copy_labels = column_codes(copies, "name")
    blocks = np.array([("Pageable" in n) or ("DtoH" in n) for n in copy_labels], dtype=bool)[copy_codes]
    blocking = copies[blocks]
    key = pd.MultiIndex.from_arrays([blocking["rank"], blocking["correlation"]])
    is_blocking_copy = pd.MultiIndex.from_arrays([rt["rank"], rt["correlation"]]).isin(key)
    kind[is_blocking_copy & is_async_copy] = "blocking_copy"
    return kind


def _attribution(waits: pd.DataFrame, ops: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Walk from each wait's enclosing op (``op_index``) up the ``parent`` links, one level at a time."""
    n = len(waits)
    empty = np.full(n, "", dtype=object)
    if n == 0 or "op_index" not in waits.columns or "parent" not in ops.columns or len(ops) == 0:
        return empty, empty.copy(), empty.copy()
    name_codes, labels = column_codes(ops, "name")
    parent = ops["parent"].to_numpy(np.int64)
    cur = waits["op_index"].to_numpy(np.int64)
    valid = (cur >= 0) & (cur < len(ops))
    op = np.where(valid, labels[name_codes[np.where(valid, cur, 0)]], "")
    cause, top = empty.copy(), op.copy()
    is_cause = label_mask(labels, name_codes, CAUSE_OPS)
    while valid.any():
        idx = np.where(valid, cur, 0)
        hit = valid & is_cause[idx]
        cause[hit] = labels[name_codes[idx[hit]]]  # keeps climbing: the outermost cause wins
        top[valid] = labels[name_codes[idx[valid]]]
        cur = np.where(valid, parent[idx], -1)
        valid = (cur >= 0) & (cur < len(ops))
    cause = np.where(cause == "", op, cause)
    return op, cause, top
