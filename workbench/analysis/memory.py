"""Memory over time from a trace's allocator events (``[memory]`` instants, or a memory snapshot read
into the same table): allocated (and reserved) bytes per device, the peak and what is live at it,
each live block attributed to the op, ``nn.Module`` and user source line that allocated it, a split
into categories, and growth across ``ProfilerStep`` spans (a leak).

**Allocated bytes.** Where the trace records the allocator's totals (``Total Allocated``, Kineto's
newer traces), the timeline *is* those totals: the peak equals the largest total the trace records on
that device, exactly. Where it records sizes only (``Bytes``, the 2021 traces), the timeline is the
running sum of the sizes from the trace's start, raised by the least that keeps it from going
negative (frees of memory allocated before the trace began): the peak is then relative to what was
allocated when the trace started, and ``source`` says so. Where some events have totals and others
not, each event's total is carried forward by the sizes since the last recorded one.

**Blocks.** An allocation and the next free of the same address on the same device (with the same
size) are one block with a lifetime. A free whose address was not allocated in the trace is a block
allocated *before* it (``preexisting``), live from the start until that free. Without addresses no
block can be paired: live blocks and categories are then not given, and ``notes`` says why.

**Attribution.** Each allocation is placed in the innermost CPU op open on its thread when it happened
(``op_name``), that op's outermost ancestor (``top_op``), the ``nn.Module`` scope and the innermost
frame in the user's files open at that moment (the trace's Python events, ``with_stack=True``).

**Categories** (``torch.profiler._memory_profiler``'s names), from the op context:
``gradient`` (allocated in backward and still live when the backward ends, or under ``AccumulateGrad``),
``autograd_detail`` (allocated in backward, freed in it), ``optimizer_state`` (allocated in an
``Optimizer.step`` span and live after it), ``temporary`` (allocated and freed inside one top-level op),
``activation`` (allocated in forward and live past its op), ``parameter`` / ``input`` /
``optimizer_state`` / ``gradient`` for memory allocated before the trace, where the capture named those
tensors (``roles``: what ``wb.profile(memory=True)`` records), ``unknown`` otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import pandas as pd

from workbench.analysis.python_stack import MODULE_PREFIX, python_stack
from workbench.analysis.result import AnalysisResult
from workbench.errors import InvalidArgumentError
from workbench.trace.nesting import nest

if TYPE_CHECKING:
    from workbench.trace import TraceData

CATEGORIES = (
    "parameter",
    "optimizer_state",
    "input",
    "temporary",
    "activation",
    "gradient",
    "autograd_detail",
    "unknown",
)
PHASES = ("forward", "backward", "optimizer", "zero_grad", "other")
DEVICE_TYPES = {0: "cpu", 1: "cuda", 6: "hip", 12: "xpu", 13: "mps", 20: "privateuse1"}
TOP_BLOCKS = 10
# a memory table larger than this is analysed only for its timeline and peak (no block pairing)
MAX_PAIRED_EVENTS = 5_000_000
ROLE_COLUMNS = ["device", "addr", "bytes", "role", "name"]
TIMELINE_COLUMNS = ["rank", "device", "ts_us", "bytes", "allocated_bytes", "reserved_bytes"]
DEVICE_COLUMNS = [
    "rank",
    "device",
    "events",
    "peak_bytes",
    "peak_ts_us",
    "peak_order",
    "reserved_peak_bytes",
    "reserved_at_peak_bytes",
    "start_bytes",
    "end_bytes",
    "source",
    "baseline_bytes",
]
BLOCK_COLUMNS = [
    "rank",
    "device",
    "addr",
    "bytes",
    "alloc_ts_us",
    "free_ts_us",
    "lifetime_us",
    "preexisting",
    "op_name",
    "top_op",
    "module",
    "location",
    "phase",
    "category",
    "name",
]

RECORDED, FROM_SIZES, MIXED = "recorded totals", "from sizes", "recorded totals and sizes"
NO_ADDRESSES = (
    "the trace's memory events carry no addresses (Addr): allocations cannot be paired with their "
    "frees, so the blocks live at the peak, their lifetimes and categories are not known"
)
FROM_SIZES_NOTE = (
    "{device}: the trace records sizes only (no Total Allocated): allocated bytes are the running "
    "sum of sizes from the trace's start, raised by {base:,} bytes freed that were allocated "
    "before it; the peak is relative to what was allocated when the trace started"
)


def device_label(device_type: int, device_id: int) -> str:
    """``cpu``, ``cuda:0``: Kineto's ``Device Type`` (c10's numbering) and ``Device Id``."""
    kind = DEVICE_TYPES.get(int(device_type), f"device{int(device_type)}")
    return kind if kind == "cpu" else f"{kind}:{max(0, int(device_id))}"


# --- the events with their context ---------------------------------------------------------------


def memory_events(trace: TraceData, user_paths: Sequence[str] | None = None) -> pd.DataFrame:
    """The trace's memory table in time order, with ``device`` (``cpu``, ``cuda:0``), ``order`` (its
    position), and where the trace tells: ``op_name``, ``top_op``, ``module``, ``location``, ``phase``."""
    mem = getattr(trace, "memory", None)
    if mem is None:
        raise InvalidArgumentError(f"memory analysis needs a Trace (wb.load_trace); got {type(trace).__name__}")
    mem = mem.reset_index(drop=True)
    n = len(mem)
    if n and (mem["bytes"].to_numpy() == -1).all() and (mem["total_allocated"].to_numpy() < 0).all():
        raise InvalidArgumentError(
            "the trace's memory events carry neither sizes (Bytes) nor totals "
            "(Total Allocated): there is nothing to add up; re-record with "
            "torch.profiler.profile(profile_memory=True)"
        )
    types = mem["device_type"].to_numpy() if n else np.zeros(0, np.int64)
    ids = mem["device_id"].to_numpy() if n else np.zeros(0, np.int64)
    pairs = (
        {(int(t), int(i)) for t, i in zip(types, ids)}
        if n < 1000
        else {tuple(p) for p in np.unique(np.stack([types, ids]), axis=1).T.tolist()}
    )
    labels = {p: device_label(*p) for p in pairs}
    device = (
        np.array([labels[(int(t), int(i))] for t, i in zip(types, ids)], dtype=object)
        if n < 1000
        else _labels_fast(types, ids, labels)
    )
    out = pd.DataFrame(
        {
            "rank": mem["rank"].to_numpy(),
            "pid": mem["pid"],
            "tid": mem["tid"],
            "device": pd.Categorical(device),
            "ts_us": mem["ts_us"].to_numpy(),
            "bytes": mem["bytes"].to_numpy(),
            "total_allocated": mem["total_allocated"].to_numpy(),
            "total_reserved": mem["total_reserved"].to_numpy(),
            "addr": mem["addr"].to_numpy(),
        }
    )
    for col in ("op_name", "top_op", "module", "location", "phase", "name", "frame"):
        if col in mem.columns:
            out[col] = mem[col].astype(str).to_numpy(dtype=object)
    out = out.sort_values(["rank", "ts_us"], kind="stable").reset_index(drop=True)
    out["order"] = np.arange(len(out))
    if "op_name" not in out.columns:
        _add_context(out, trace, user_paths)
    return out


def _labels_fast(types: np.ndarray, ids: np.ndarray, labels: dict) -> np.ndarray:
    keys = types.astype(np.int64) * 1_000_003 + ids.astype(np.int64)
    uniq, inverse = np.unique(keys, return_inverse=True)
    names = np.array(
        [
            labels[(int(k // 1_000_003), int(k % 1_000_003))]
            if (int(k // 1_000_003), int(k % 1_000_003)) in labels
            else labels[_split_key(int(k))]
            for k in uniq
        ],
        dtype=object,
    )
    return names[inverse]


def _split_key(k: int) -> tuple[int, int]:
    t, i = divmod(k, 1_000_003)
    if i > 500_000:
        t, i = t + 1, i - 1_000_003
    return t, i


def _points(events: pd.DataFrame) -> pd.DataFrame:
    pts = events[["rank", "pid", "tid", "ts_us"]].copy()
    pts["end_us"] = pts["ts_us"]
    return pts


def _add_context(events: pd.DataFrame, trace: TraceData, user_paths: Sequence[str] | None) -> None:
    n = len(events)
    events["op_name"] = np.full(n, "", dtype=object)
    events["top_op"] = np.full(n, "", dtype=object)
    events["module"] = np.full(n, "", dtype=object)
    events["location"] = np.full(n, "", dtype=object)
    events["phase"] = np.full(n, "other", dtype=object)
    if not n:
        return
    points = _points(events)
    ops = getattr(trace, "cpu_ops", None)
    backward = np.zeros(n, dtype=bool)
    if ops is not None and len(ops):
        op = nest(ops, points)[3]
        names = ops["name"].astype(str).to_numpy(dtype=object)
        parent = ops["parent"].to_numpy()
        has = op >= 0
        events.loc[has, "op_name"] = names[op[has]]
        top = op.copy()
        for _ in range(256):
            up = np.where(top >= 0, parent[np.clip(top, 0, None)], -1)
            move = up >= 0
            if not move.any():
                break
            top[move] = up[move]
        events.loc[has, "top_op"] = names[top[has]]
        is_backward = np.array(
            [("Backward" in s or "autograd::engine" in s or "AccumulateGrad" in s) for s in names], dtype=bool
        )
        # an allocation is in backward when any op on its chain is a backward op
        cur = op.copy()
        for _ in range(256):
            live = cur >= 0
            if not live.any():
                break
            backward[live] |= is_backward[cur[live]]
            cur[live] = parent[cur[live]]
        events.loc[has, "phase"] = "forward"
        events.loc[backward, "phase"] = "backward"
    notes = getattr(trace, "annotations", None)
    if notes is not None and len(notes):
        text = notes["name"].astype(str)
        for prefix, phase in (("Optimizer.step#", "optimizer"), ("Optimizer.zero_grad#", "zero_grad")):
            spans = notes[text.str.startswith(prefix).to_numpy()]
            if len(spans):
                inside = nest(spans.reset_index(drop=True), points)[3] >= 0
                events.loc[inside & ~backward, "phase"] = phase
    calls = getattr(trace, "python_calls", None)
    stack_events = calls if calls is not None else pd.DataFrame()
    if notes is not None and len(notes):
        scopes = notes[notes["name"].astype(str).str.startswith(MODULE_PREFIX).to_numpy()]
        if len(scopes):
            cols = ["rank", "pid", "tid", "name", "ts_us", "end_us"]
            text = {"pid": str, "tid": str, "name": str}
            stack_events = pd.concat(
                [
                    stack_events[cols].astype(text) if len(stack_events) else pd.DataFrame(columns=cols),
                    scopes[cols].astype(text),
                ],
                ignore_index=True,
            )
    if len(stack_events):
        stack = python_stack(stack_events, user_paths)
        at = stack.enclosing(points)
        has = at >= 0
        if has.any():
            module = np.where(has, stack.module[np.clip(at, 0, None)], -1)
            events["module"] = np.where(module >= 0, stack.module_path[np.clip(module, 0, None)], "")
            user = np.where(has, stack.user[np.clip(at, 0, None)], -1)
            events["location"] = np.where(user >= 0, stack.location[np.clip(user, 0, None)], "")


# --- timeline ------------------------------------------------------------------------------------


def _allocated(events: pd.DataFrame) -> tuple[np.ndarray, dict[tuple[int, str], tuple[str, int]]]:
    """Allocated bytes after each event, and per (rank, device) how they were found and the baseline."""
    allocated = np.zeros(len(events), dtype=np.int64)
    how: dict[tuple[int, str], tuple[str, int]] = {}
    for (rank, device), rows in events.groupby(["rank", "device"], observed=True, sort=True).indices.items():
        size = events["bytes"].to_numpy()[rows]
        size = np.where(size == -1, 0, size)  # an absent size adds nothing (a recorded total still counts)
        total = events["total_allocated"].to_numpy()[rows]
        running = np.cumsum(size)
        known = total >= 0
        if known.all():
            allocated[rows], source, base = total, RECORDED, int(total[0] - running[0])
        elif not known.any():
            base = int(max(0, -int(running.min()))) if len(running) else 0
            allocated[rows], source = running + base, FROM_SIZES
        else:
            offset = np.where(known, total - running, 0)
            index = np.where(known, np.arange(len(rows)), -1)
            last = np.maximum.accumulate(index)
            first = int(np.flatnonzero(known)[0])
            last = np.where(last < 0, first, last)
            allocated[rows] = running + offset[last]
            source, base = MIXED, int(offset[first])
        how[(int(rank), str(device))] = (source, base)
    return allocated, how


@dataclass(frozen=True, eq=False)
class MemoryTimeline(AnalysisResult):
    """``table``: one row per allocator event, in time order per (rank, device): ts_us, bytes (signed:
    negative on free), allocated_bytes and reserved_bytes after it (-1 where the trace records no
    reserved total). ``devices``: one row per (rank, device): events, peak_bytes and its peak_ts_us,
    reserved_peak_bytes, reserved_at_peak_bytes, start_bytes / end_bytes, ``source`` (how allocated
    bytes were found: "recorded totals", "from sizes", both) and baseline_bytes (allocated before the
    trace's first event, as far as the trace tells). ``notes``: what is partial, and why."""

    devices: pd.DataFrame
    notes: tuple[str, ...]
    kind: ClassVar[str] = "memory_timeline"

    def peak_bytes(self, device: str | None = None, rank: int | None = None) -> int:
        """The largest allocated bytes on ``device`` (default: the device with the largest peak)."""
        rows = self._device_rows(device, rank)
        return int(rows["peak_bytes"].max()) if len(rows) else 0

    def main_device(self) -> str:
        """The device with the largest peak (a GPU before the host at a tie)."""
        if not len(self.devices):
            return ""
        d = self.devices.assign(gpu=self.devices["device"].astype(str) != "cpu")
        return str(d.sort_values(["peak_bytes", "gpu"], ascending=False).iloc[0]["device"])

    def _device_rows(self, device: str | None, rank: int | None) -> pd.DataFrame:
        d = self.devices
        device = device if device is not None else self.main_device()
        d = d[d["device"].astype(str) == device]
        return d if rank is None else d[d["rank"] == rank]


def memory_timeline(trace: TraceData, *, events: pd.DataFrame | None = None) -> MemoryTimeline:
    """Allocated (and reserved) bytes over time per device (see the module's docstring)."""
    ev = events if events is not None else memory_events(trace)
    notes: list[str] = []
    if not len(ev):
        return MemoryTimeline(
            table=pd.DataFrame({c: pd.Series(dtype="int64") for c in TIMELINE_COLUMNS}),
            devices=pd.DataFrame({c: pd.Series(dtype="int64") for c in DEVICE_COLUMNS}),
            notes=("the trace has no memory events: record with profile_memory=True (wb.profile(fn, memory=True))",),
        )
    allocated, how = _allocated(ev)
    table = pd.DataFrame(
        {
            "rank": ev["rank"].to_numpy(),
            "device": ev["device"].astype(str).to_numpy(),
            "ts_us": ev["ts_us"].to_numpy(),
            "bytes": ev["bytes"].to_numpy(),
            "allocated_bytes": allocated,
            "reserved_bytes": ev["total_reserved"].to_numpy(),
        }
    )
    rows = []
    for (rank, device), index in table.groupby(["rank", "device"], sort=True).indices.items():
        part = table.iloc[index]
        at = int(np.argmax(part["allocated_bytes"].to_numpy()))
        reserved = part["reserved_bytes"].to_numpy()
        source, base = how[(int(rank), str(device))]
        first = part.iloc[0]
        start = (
            int(first["allocated_bytes"] - first["bytes"]) if first["bytes"] != -1 else int(first["allocated_bytes"])
        )
        peak_bytes, peak_ts, peak_order = (
            int(part["allocated_bytes"].iloc[at]),
            float(part["ts_us"].iloc[at]),
            int(index[at]),
        )
        if start > peak_bytes:  # the most was allocated before the first event (a trace that starts mid-run)
            peak_bytes, peak_ts, peak_order = start, float(first["ts_us"]), int(index[0]) - 1
        rows.append(
            {
                "rank": int(rank),
                "device": device,
                "events": len(part),
                "peak_bytes": peak_bytes,
                "peak_ts_us": peak_ts,
                "peak_order": peak_order,
                "reserved_peak_bytes": int(reserved.max()) if (reserved >= 0).any() else -1,
                "reserved_at_peak_bytes": int(reserved[at]),
                "start_bytes": start,
                "end_bytes": int(part["allocated_bytes"].iloc[-1]),
                "source": source,
                "baseline_bytes": base,
            }
        )
        if source == FROM_SIZES:
            notes.append(FROM_SIZES_NOTE.format(device=device, base=base))
        if (part["bytes"].to_numpy() == -1).any() and source != RECORDED:
            notes.append(
                f"{device}: {(part['bytes'].to_numpy() == -1).sum():,} memory event(s) without a size were "
                "counted as 0 bytes: the timeline may be low"
            )
    return MemoryTimeline(table=table, devices=pd.DataFrame(rows, columns=DEVICE_COLUMNS), notes=tuple(notes))


# --- blocks --------------------------------------------------------------------------------------


def memory_blocks(events: pd.DataFrame, roles: pd.DataFrame | None = None) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """One row per block (an allocation and its free; a free without an allocation in the trace is a block
    allocated before it), with its lifetime, context and category; and notes on what could not be paired."""
    notes: list[str] = []
    if not len(events):
        return pd.DataFrame(columns=BLOCK_COLUMNS), ()
    if (events["addr"].to_numpy() < 0).all():
        return pd.DataFrame(columns=BLOCK_COLUMNS), (NO_ADDRESSES,)
    if len(events) > MAX_PAIRED_EVENTS:
        return pd.DataFrame(columns=BLOCK_COLUMNS), (
            f"{len(events):,} memory events: more than {MAX_PAIRED_EVENTS:,}, so allocations were not paired "
            "with their frees (the timeline and its peak are exact; live blocks and categories are not given); "
            "trace fewer steps for them",
        )
    ev = events[(events["addr"].to_numpy() >= 0) & (events["bytes"].to_numpy() != 0)]
    if len(ev) < len(events):
        missing = int((events["addr"].to_numpy() < 0).sum())
        if missing:
            notes.append(f"{missing:,} memory event(s) without an address were left out of the blocks")
    key = ev[["rank", "device", "addr"]].astype({"device": str})
    order = np.lexsort(
        (ev["order"].to_numpy(), key["addr"].to_numpy(), key["device"].to_numpy(), key["rank"].to_numpy())
    )
    e = ev.iloc[order].reset_index(drop=True)
    k = key.iloc[order].reset_index(drop=True)
    same_next = np.zeros(len(e), dtype=bool)
    if len(e) > 1:
        same_next[:-1] = (
            (k["rank"].to_numpy()[1:] == k["rank"].to_numpy()[:-1])
            & (k["device"].to_numpy()[1:] == k["device"].to_numpy()[:-1])
            & (k["addr"].to_numpy()[1:] == k["addr"].to_numpy()[:-1])
        )
    size = e["bytes"].to_numpy()
    is_alloc = size > 0
    nxt = np.arange(1, len(e) + 1)
    nxt_free = np.zeros(len(e), dtype=bool)
    nxt_free[:-1] = size[1:] < 0
    paired = is_alloc & same_next & nxt_free
    prev_alloc_paired = np.zeros(len(e), dtype=bool)
    prev_alloc_paired[1:] = paired[:-1]
    lone_free = (size < 0) & ~prev_alloc_paired
    alloc_rows = np.flatnonzero(is_alloc)
    free_rows = np.where(paired[alloc_rows], nxt[alloc_rows], -1)
    pre_rows = np.flatnonzero(lone_free)
    ts = e["ts_us"].to_numpy()
    end_ts = float(events["ts_us"].max())
    start_ts = float(events["ts_us"].min())

    def pick(col: str, rows: np.ndarray) -> np.ndarray:
        return e[col].to_numpy()[rows] if col in e.columns else np.full(len(rows), "", dtype=object)

    a_free = np.where(free_rows >= 0, ts[np.clip(free_rows, 0, None)], np.nan)
    blocks = pd.DataFrame(
        {
            "rank": pick("rank", alloc_rows),
            "device": k["device"].to_numpy()[alloc_rows],
            "addr": pick("addr", alloc_rows),
            "bytes": size[alloc_rows],
            "alloc_ts_us": ts[alloc_rows],
            "free_ts_us": a_free,
            "alloc_order": pick("order", alloc_rows),
            "free_order": np.where(
                free_rows >= 0, e["order"].to_numpy()[np.clip(free_rows, 0, None)], np.iinfo(np.int64).max
            ),
            "preexisting": np.zeros(len(alloc_rows), dtype=bool),
            "op_name": pick("op_name", alloc_rows),
            "top_op": pick("top_op", alloc_rows),
            "module": pick("module", alloc_rows),
            "location": pick("location", alloc_rows),
            "phase": pick("phase", alloc_rows),
            "free_phase": np.where(free_rows >= 0, pick("phase", np.clip(free_rows, 0, None)), ""),
            "free_top_op": np.where(free_rows >= 0, pick("top_op", np.clip(free_rows, 0, None)), ""),
            "name": pick("name", alloc_rows) if "name" in e.columns else np.full(len(alloc_rows), "", dtype=object),
        }
    )
    pre = pd.DataFrame(
        {
            "rank": pick("rank", pre_rows),
            "device": k["device"].to_numpy()[pre_rows],
            "addr": pick("addr", pre_rows),
            "bytes": -size[pre_rows],
            "alloc_ts_us": np.full(len(pre_rows), start_ts),
            "free_ts_us": ts[pre_rows],
            "alloc_order": np.full(len(pre_rows), -1, dtype=np.int64),
            "free_order": pick("order", pre_rows),
            "preexisting": np.ones(len(pre_rows), dtype=bool),
            "op_name": "",
            "top_op": "",
            "module": "",
            "location": "",
            "phase": "before the trace",
            "free_phase": pick("phase", pre_rows),
            "free_top_op": pick("top_op", pre_rows),
            "name": "",
        }
    )
    if len(pre_rows):
        notes.append(
            f"{len(pre_rows):,} free(s) of memory allocated before the trace began "
            f"({int(-size[pre_rows].sum()):,} bytes): counted as blocks live from the trace's start"
        )
    out = pd.concat([blocks, pre], ignore_index=True) if len(pre) else blocks
    out["lifetime_us"] = np.where(
        np.isnan(out["free_ts_us"].to_numpy(np.float64)),
        end_ts - out["alloc_ts_us"].to_numpy(np.float64),
        out["free_ts_us"].to_numpy(np.float64) - out["alloc_ts_us"].to_numpy(np.float64),
    )
    out["category"] = _categories(out, events)
    if roles is not None and len(roles):
        out = _with_roles(out, roles, start_ts)
    return out.sort_values(["rank", "device", "alloc_order"], kind="stable").reset_index(drop=True), tuple(notes)


def _backward_end(events: pd.DataFrame) -> dict[int, np.ndarray]:
    """Per rank, the orders of the last backward event of each backward run (sorted)."""
    out: dict[int, np.ndarray] = {}
    if "phase" not in events.columns:
        return out
    for rank, part in events.groupby("rank", sort=True):
        phase = part["phase"].to_numpy()
        order = part["order"].to_numpy()
        back = phase == "backward"
        ends = back & ~np.append(back[1:], False)
        out[int(rank)] = order[ends]
    return out


def _categories(blocks: pd.DataFrame, events: pd.DataFrame) -> np.ndarray:
    phase = blocks["phase"].to_numpy()
    top = blocks["top_op"].astype(str).to_numpy()
    free_top = blocks["free_top_op"].astype(str).to_numpy()
    freed = ~np.isnan(blocks["free_ts_us"].to_numpy(np.float64))
    free_phase = blocks["free_phase"].astype(str).to_numpy()
    alloc_order, free_order = blocks["alloc_order"].to_numpy(), blocks["free_order"].to_numpy()
    out = np.full(len(blocks), "unknown", dtype=object)
    same_op = freed & (free_top == top) & (top != "") & _same_top_call(blocks, events)
    # backward: a block still live after the backward run it was made in ends is a gradient
    ends = _backward_end(events)
    outlives = np.zeros(len(blocks), dtype=bool)
    for rank, end_orders in ends.items():
        rows = np.flatnonzero((blocks["rank"].to_numpy() == rank) & (phase == "backward"))
        if not len(rows) or not len(end_orders):
            continue
        at = np.searchsorted(end_orders, alloc_order[rows])
        run_end = np.where(
            at < len(end_orders), end_orders[np.clip(at, 0, len(end_orders) - 1)], np.iinfo(np.int64).max
        )
        outlives[rows] = free_order[rows] > run_end
    accumulate = np.array(["AccumulateGrad" in s for s in top], dtype=bool)
    back = phase == "backward"
    out[back] = "autograd_detail"
    out[back & (outlives | accumulate)] = "gradient"
    out[(phase == "optimizer")] = np.where(
        freed[phase == "optimizer"] & (free_phase[phase == "optimizer"] == "optimizer"), "temporary", "optimizer_state"
    )
    fwd = (phase == "forward") | (phase == "other")
    out[fwd] = "activation"
    out[fwd & same_op] = "temporary"
    out[back & same_op & ~accumulate & ~outlives] = "autograd_detail"
    out[(phase == "zero_grad")] = "temporary"
    out[blocks["preexisting"].to_numpy(bool)] = "unknown"
    return out


def _same_top_call(blocks: pd.DataFrame, events: pd.DataFrame) -> np.ndarray:
    """Whether a block's free happened inside the same call of its top-level op (not a later call of the
    same op name): no event of another top-level op lies between its allocation and its free."""
    if "top_op" not in events.columns or not len(blocks):
        return np.zeros(len(blocks), dtype=bool)
    tops = events["top_op"].astype(str).to_numpy()
    change = np.ones(len(tops), dtype=bool)
    change[1:] = (tops[1:] != tops[:-1]) | (events["rank"].to_numpy()[1:] != events["rank"].to_numpy()[:-1])
    segment = np.cumsum(change)
    order_to_segment = np.zeros(int(events["order"].max()) + 1, dtype=np.int64)
    order_to_segment[events["order"].to_numpy()] = segment
    a, f = blocks["alloc_order"].to_numpy(), blocks["free_order"].to_numpy()
    valid = (a >= 0) & (f < len(order_to_segment))
    out = np.zeros(len(blocks), dtype=bool)
    out[valid] = order_to_segment[a[valid]] == order_to_segment[f[valid]]
    return out


def _with_roles(blocks: pd.DataFrame, roles: pd.DataFrame, start_ts: float) -> pd.DataFrame:
    """Name pre-existing blocks from the capture's roles (parameter, input, ...); add the named tensors
    that the trace never freed as blocks live over the whole trace."""
    roles = roles.copy()
    roles["device"] = roles["device"].astype(str)
    known = {
        (str(d), int(a)): (str(r), str(n), int(b))
        for d, a, r, n, b in zip(roles["device"], roles["addr"], roles["role"], roles["name"], roles["bytes"])
    }
    pre = blocks["preexisting"].to_numpy(bool)
    cats = blocks["category"].to_numpy().copy()
    names = blocks["name"].astype(str).to_numpy(dtype=object).copy()
    seen: set[tuple[str, int]] = set()
    for i in np.flatnonzero(pre):
        hit = known.get((str(blocks["device"].iloc[i]), int(blocks["addr"].iloc[i])))
        if hit is not None:
            cats[i], names[i] = hit[0], hit[1]
            seen.add((str(blocks["device"].iloc[i]), int(blocks["addr"].iloc[i])))
    blocks = blocks.assign(category=cats, name=names)
    allocated_in_trace = {(str(d), int(a)) for d, a, p in zip(blocks["device"], blocks["addr"], pre) if not p}
    # gradients are named at the traced pass's end: they may have been allocated in it, so only the
    # tensors that outlive steps (parameters, optimizer state, inputs) are added as live from the start
    extra = roles[
        [
            (d, int(a)) not in seen and (d, int(a)) not in allocated_in_trace and r != "gradient"
            for d, a, r in zip(roles["device"], roles["addr"], roles["role"])
        ]
    ].drop_duplicates(["device", "addr"])
    if not len(extra):
        return blocks
    rank = int(blocks["rank"].iloc[0]) if len(blocks) else 0
    add = pd.DataFrame(
        {
            "rank": rank,
            "device": extra["device"].to_numpy(),
            "addr": extra["addr"].to_numpy(np.int64),
            "bytes": extra["bytes"].to_numpy(np.int64),
            "alloc_ts_us": start_ts,
            "free_ts_us": np.nan,
            "alloc_order": -1,
            "free_order": np.iinfo(np.int64).max,
            "preexisting": True,
            "op_name": "",
            "top_op": "",
            "module": "",
            "location": "",
            "phase": "before the trace",
            "free_phase": "",
            "free_top_op": "",
            "name": extra["name"].astype(str).to_numpy(),
            "lifetime_us": np.nan,
            "category": extra["role"].astype(str).to_numpy(),
        }
    )
    return pd.concat([blocks, add], ignore_index=True)


# --- the peak ------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class MemoryPeak(AnalysisResult):
    """``table``: the blocks live at each device's peak, largest first: rank, device, addr, bytes,
    alloc_ts_us, free_ts_us (NaN: never freed in the trace), lifetime_us, preexisting (allocated before
    the trace), op_name / top_op (the op that allocated it: innermost and outermost), module, location
    (the user's source line), phase (forward / backward / optimizer / ...), category, name (a tensor's
    name where the capture knew it). ``devices``: the timeline's per-device summary (peak_bytes is the
    largest allocated total, see ``MemoryTimeline``). ``categories``: bytes per (device, category) at
    the peak. ``device``: the device with the largest peak; ``peak_bytes`` / ``peak_ts_us`` its peak;
    ``live_bytes``: the live blocks' bytes there; ``unattributed_bytes``: peak bytes no block accounts
    for (allocated before the trace and never freed in it). ``notes``: what is partial."""

    devices: pd.DataFrame
    categories: pd.DataFrame
    device: str
    peak_bytes: int
    peak_ts_us: float
    live_bytes: int
    unattributed_bytes: int
    notes: tuple[str, ...]
    kind: ClassVar[str] = "memory_peak"

    def top(self, n: int = TOP_BLOCKS, device: str | None = None) -> pd.DataFrame:
        """The ``n`` largest blocks live at the peak of ``device`` (default: the main device)."""
        t = self.table[self.table["device"].astype(str) == (device or self.device)]
        return t.head(n).reset_index(drop=True)

    def category_bytes(self, device: str | None = None) -> dict[str, int]:
        c = self.categories[self.categories["device"].astype(str) == (device or self.device)]
        return {str(k): int(v) for k, v in zip(c["category"], c["bytes"])}

    def by(self, column: str, device: str | None = None) -> pd.Series:
        """Live bytes at the peak grouped by ``column`` (``module``, ``location``, ``top_op``), largest first."""
        t = self.table[self.table["device"].astype(str) == (device or self.device)]
        return t.groupby(column)["bytes"].sum().sort_values(ascending=False)


def memory_peak(
    trace: TraceData,
    *,
    roles: pd.DataFrame | None = None,
    user_paths: Sequence[str] | None = None,
    events: pd.DataFrame | None = None,
) -> MemoryPeak:
    """The peak of allocated bytes per device, and the blocks live at it (see the module's docstring).
    ``roles``: tensors the capture named (columns device, addr, bytes, role, name), for memory allocated
    before the trace."""
    ev = events if events is not None else memory_events(trace, user_paths)
    timeline = memory_timeline(trace, events=ev)
    blocks, block_notes = memory_blocks(ev, roles)
    notes = list(timeline.notes) + list(block_notes)
    live_parts, cat_rows = [], []
    main = timeline.main_device()
    main_live = 0
    for row in timeline.devices.itertuples():
        if not len(blocks):
            continue
        at = int(row.peak_order)  # the event after which the peak holds (the row's position in ``ev``)
        b = blocks[(blocks["rank"] == row.rank) & (blocks["device"].astype(str) == row.device)]
        live = b[(b["alloc_order"].to_numpy() <= at) & (b["free_order"].to_numpy() > at)]
        live = live.sort_values("bytes", ascending=False, kind="stable")
        live_parts.append(live)
        sums = live.groupby("category")["bytes"].sum()
        # without the capture's named tensors, what no block accounts for (allocated before the trace) is unknown
        before = 0 if (roles is not None and len(roles)) else max(0, int(row.peak_bytes) - int(live["bytes"].sum()))
        for cat in CATEGORIES:
            cat_rows.append(
                {
                    "rank": int(row.rank),
                    "device": row.device,
                    "category": cat,
                    "bytes": int(sums.get(cat, 0)) + (before if cat == "unknown" else 0),
                }
            )
        if row.device == main:
            main_live = int(live["bytes"].sum())
    table = pd.concat(live_parts, ignore_index=True) if live_parts else pd.DataFrame(columns=BLOCK_COLUMNS)
    table = table.reindex(columns=BLOCK_COLUMNS).reset_index(drop=True)
    peak = timeline.peak_bytes(main) if main else 0
    main_rows = timeline.devices[timeline.devices["device"] == main]
    peak_ts = float(main_rows.sort_values("peak_bytes").iloc[-1]["peak_ts_us"]) if len(main_rows) else float("nan")
    has_roles = roles is not None and len(roles) > 0
    unattributed = max(0, peak - main_live) if len(blocks) and not has_roles else 0
    if len(blocks) and unattributed:
        notes.append(
            f"{main}: {unattributed:,} of the peak's {peak:,} bytes were allocated before the trace and not "
            "freed in it: no block in the trace accounts for them"
        )
    if has_roles and main_live > peak:
        peak_note = (
            f"{main}: the named tensors alive before the trace add {main_live - peak:,} bytes "
            "the trace's totals do not count (they count from the profiler's start)"
        )
        notes.append(peak_note)
    return MemoryPeak(
        table=table,
        devices=timeline.devices,
        categories=pd.DataFrame(cat_rows, columns=["rank", "device", "category", "bytes"]),
        device=main,
        peak_bytes=int(peak),
        peak_ts_us=peak_ts,
        live_bytes=int(main_live),
        unattributed_bytes=int(unattributed),
        notes=tuple(notes),
    )


# --- growth across steps -------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class MemoryGrowth(AnalysisResult):
    """``table``: one row per (rank, device, step) of the trace's ``ProfilerStep#`` spans: start_bytes and
    end_bytes (allocated at its first and after its last memory event), growth_bytes (end - start),
    kept_bytes / kept_blocks (allocated in the step and never freed in the trace), and the top op,
    module and source line that allocated the kept blocks. ``growth_per_step_bytes``: the median growth
    of the steps after the first (the first step may build caches); ``steps``; ``device``."""

    device: str
    steps: int
    growth_per_step_bytes: float
    kept_per_step_bytes: float
    steps_growing: int
    notes: tuple[str, ...]
    kind: ClassVar[str] = "memory_growth"


GROWTH_COLUMNS = [
    "rank",
    "device",
    "step",
    "start_bytes",
    "end_bytes",
    "growth_bytes",
    "kept_bytes",
    "kept_blocks",
    "top_op",
    "module",
    "location",
]


def memory_growth(
    trace: TraceData, *, events: pd.DataFrame | None = None, user_paths: Sequence[str] | None = None
) -> MemoryGrowth:
    """Allocated bytes across ``ProfilerStep#`` spans: what each step kept (see ``MemoryGrowth``)."""
    ev = events if events is not None else memory_events(trace, user_paths)
    notes: list[str] = []
    empty = MemoryGrowth(
        table=pd.DataFrame(columns=GROWTH_COLUMNS),
        device="",
        steps=0,
        growth_per_step_bytes=0.0,
        kept_per_step_bytes=0.0,
        steps_growing=0,
        notes=(),
    )
    anns = getattr(trace, "annotations", None)
    if not len(ev) or anns is None or not len(anns):
        return MemoryGrowth(
            **{
                **empty.__dict__,
                "notes": ("no ProfilerStep# spans or no memory events: growth across steps needs both",),
            }
        )
    steps = anns[anns["kind"].astype(str) == "step"].sort_values(["rank", "ts_us"])
    if len(steps) < 2:
        return MemoryGrowth(
            **{
                **empty.__dict__,
                "notes": ("fewer than two ProfilerStep# spans: growth across steps needs at least two",),
            }
        )
    timeline = memory_timeline(trace, events=ev)
    blocks, _ = memory_blocks(ev)
    device = timeline.main_device()
    rows = []
    t = timeline.table
    for rank, rank_steps in steps.groupby("rank"):
        sel = (t["rank"].to_numpy() == rank) & (t["device"].to_numpy() == device)
        ts, alloc, size = t["ts_us"].to_numpy()[sel], t["allocated_bytes"].to_numpy()[sel], t["bytes"].to_numpy()[sel]
        for step in rank_steps.itertuples():
            inside = (ts >= step.ts_us) & (ts <= step.end_us)
            if not inside.any():
                continue
            first, last = np.flatnonzero(inside)[[0, -1]]
            start = int(alloc[first] - max(0, size[first])) if size[first] > 0 else int(alloc[first] - size[first])
            kept = (
                blocks[
                    (blocks["rank"] == rank)
                    & (blocks["device"].astype(str) == device)
                    & ~blocks["preexisting"].to_numpy(bool)
                    & blocks["free_ts_us"].isna()
                    & (blocks["alloc_ts_us"] >= step.ts_us)
                    & (blocks["alloc_ts_us"] <= step.end_us)
                ]
                if len(blocks)
                else blocks
            )
            top = kept.sort_values("bytes", ascending=False).head(1) if len(kept) else None
            rows.append(
                {
                    "rank": int(rank),
                    "device": device,
                    "step": int(step.step),
                    "start_bytes": start,
                    "end_bytes": int(alloc[last]),
                    "growth_bytes": int(alloc[last]) - start,
                    "kept_bytes": int(kept["bytes"].sum()) if len(kept) else 0,
                    "kept_blocks": int(len(kept)),
                    "top_op": str(top["top_op"].iloc[0]) if top is not None else "",
                    "module": str(top["module"].iloc[0]) if top is not None else "",
                    "location": str(top["location"].iloc[0]) if top is not None else "",
                }
            )
    table = pd.DataFrame(rows, columns=GROWTH_COLUMNS)
    later = table.iloc[1:] if len(table) > 1 else table
    if not len(blocks):
        notes.append("blocks could not be paired (no addresses): kept bytes per step are not known")
    return MemoryGrowth(
        table=table,
        device=device,
        steps=int(len(table)),
        growth_per_step_bytes=float(later["growth_bytes"].median()) if len(later) else 0.0,
        kept_per_step_bytes=float(later["kept_bytes"].median()) if len(later) else 0.0,
        steps_growing=int((later["growth_bytes"] > 0).sum()),
        notes=tuple(notes),
    )


def roles_frame(records: object) -> pd.DataFrame | None:
    """The capture's named tensors (a list of {device, addr, bytes, role, name}) as a frame; None if none."""
    if not isinstance(records, (list, tuple)) or not records:
        return None
    frame = pd.DataFrame([r for r in records if isinstance(r, dict)])
    if not set(ROLE_COLUMNS) <= set(frame.columns):
        return None
    return frame[ROLE_COLUMNS]
