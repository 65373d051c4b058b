"""rocprofv3 JSON (rocprofiler-sdk's tool, ``rocprofv3 --output-format json``) -> the declared trace tables.

The file is one object ``{"rocprofiler-sdk-tool": [ {metadata, agents, kernel_symbols, strings,
buffer_records, ...}, ... ]}``, one entry per profiled process. What is read:

- ``buffer_records.kernel_dispatch``: kernels (the symbol's demangled name from ``kernel_symbols``), agent
  (device), HIP stream (``stream_id``, else the queue), grid (work-items, turned into work-groups as CUDA
  counts a grid) and work-group size, group segment (LDS) bytes, the symbol's VGPR count as registers;
- ``buffer_records.hip_api``: HIP API calls, named from ``strings.buffer_records[kind].operations``, linked to
  their dispatches and copies by the internal correlation id;
- ``buffer_records.memory_copy``: copies with their direction and bytes;
- ``buffer_records.marker_api``: roctx ranges, named from ``strings.marker_api`` (``{key: correlation id,
  value: message}``), become annotations (``ProfilerStep#N`` and "step N" ranges are steps). rocprofv3 writes
  one record per closed range (``roctxRangePushA`` / ``roctxThreadRangeA`` / ``roctxRangeStartA`` ...:
  start = push, end = pop); a file that holds the calls themselves (``roctxRangePop`` records) is paired
  push -> pop per thread, a pop with no open push is named in a warning and ignored, the rest kept.
  ``roctxMarkA`` instants, control and naming calls are counted in a note, not read;
- ``agents``: device properties (product name, compute units, wave front size, clocks).

One rank per process entry. A file whose layout is not this one (another tool version) is refused,
naming the keys it has and lacks; a partial entry says what was read.
"""

from __future__ import annotations

import gzip
import zlib
from typing import Any

import msgspec
import numpy as np

from workbench.errors import TraceFormatError
from workbench.trace.data import TraceData
from workbench.trace.imported import build_trace, strings
from workbench.trace.nsys_sqlite import _STEP, _mark_steps
from workbench.trace.paths import open_checked, shown

FORMAT = "rocprofv3-json"
TOP_KEY = "rocprofiler-sdk-tool"
REQUIRED = ("metadata", "agents", "kernel_symbols", "strings", "buffer_records")
DISPATCH_FIELDS = ("correlation_id", "start_timestamp", "end_timestamp", "dispatch_info")
MAX_BYTES = 2 << 30  # decompressed JSON read at most
_HINT = "record with rocprofv3 (rocprofiler-sdk) --kernel-trace --hip-trace --output-format json"
_COPY = {
    "MEMORY_COPY_HOST_TO_DEVICE": "HtoD",
    "MEMORY_COPY_DEVICE_TO_HOST": "DtoH",
    "MEMORY_COPY_DEVICE_TO_DEVICE": "DtoD",
    "MEMORY_COPY_HOST_TO_HOST": "HtoH",
}
_ENDS = {"HtoD": ("Host", "Device"), "DtoH": ("Device", "Host"), "DtoD": ("Device", "Device"), "HtoH": ("Host", "Host")}
# roctx operations (strings.buffer_records[kind].operations) whose record is one closed range: rocprofv3
# writes a push/pop pair as one roctxRangePushA record (start at the push, end at the pop), rocprofiler-sdk
# 1.x as roctxThreadRangeA (MARKER_CORE_RANGE_API); roctxRangeStartA/Stop and process ranges likewise
_RANGE_OPS = frozenset({"roctxRangePushA", "roctxThreadRangeA", "roctxProcessRangeA", "roctxRangeStartA"})
_PUSH = "roctxRangePushA"
_POP = "roctxRangePop"
_START = "roctxRangeStartA"
_STOP = "roctxRangeStop"
_MARK = "roctxMarkA"
_NAMED = 3  # ranges named at most in one warning


def _read_bytes(path: str) -> bytes:
    with open_checked(path) as fh:
        raw = fh.read(MAX_BYTES + 1)
    if raw[:2] == b"\x1f\x8b":
        try:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            raw = d.decompress(raw, MAX_BYTES + 1)
            if not d.eof and len(raw) <= MAX_BYTES:
                raise TraceFormatError(
                    "the gzip stream ends early: the file is truncated; nothing was loaded", path=shown(path)
                )
        except (zlib.error, gzip.BadGzipFile) as exc:
            raise TraceFormatError(f"not a readable gzip file ({exc})", path=shown(path)) from None
    if len(raw) > MAX_BYTES:
        raise TraceFormatError(
            f"the rocprofv3 JSON is larger than {MAX_BYTES >> 30} GB, more than this reader "
            "reads; profile a shorter region",
            path=shown(path),
        )
    return raw


def read_rocprof(path: str) -> TraceData:
    try:
        doc = msgspec.json.decode(_read_bytes(path))
    except msgspec.DecodeError as exc:
        raise TraceFormatError(
            f"not valid JSON, or truncated ({exc}); nothing was loaded; {_HINT}", path=shown(path)
        ) from None
    entries = doc.get(TOP_KEY) if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not entries:
        keys = sorted(doc)[:8] if isinstance(doc, dict) else type(doc).__name__
        raise TraceFormatError(
            f"not rocprofv3 JSON: the top level has no non-empty '{TOP_KEY}' list (it has {keys}); {_HINT}",
            path=shown(path),
        )
    return _Reader(path, entries).read()


class _Reader:
    def __init__(self, path: str, entries: list):
        self.path, self.entries = path, entries
        self.warnings: list[str] = []
        self.notes: list[str] = []
        self.fidelity: dict[str, str] = {}
        self.marker_records = 0  # roctx records in the file (read or not)

    def check_layout(self, i: int, entry: object) -> None:
        if not isinstance(entry, dict):
            raise TraceFormatError(
                f"entry #{i} of '{TOP_KEY}' is {type(entry).__name__}, not an object: a layout "
                "this reader does not know (another rocprofiler-sdk version?)",
                path=shown(self.path),
            )
        lacking = [k for k in REQUIRED if k not in entry]
        if lacking:
            raise TraceFormatError(
                f"a rocprofiler-sdk JSON of a layout this reader does not know (another tool version?): entry #{i} "
                f"lacks {lacking} (it has {sorted(entry)[:12]}); nothing was loaded. This reader knows rocprofv3's "
                f"JSON with {list(REQUIRED)}",
                path=shown(self.path),
            )
        records = entry["buffer_records"]
        dispatches = records.get("kernel_dispatch") if isinstance(records, dict) else None
        if not isinstance(dispatches, list):
            raise TraceFormatError(
                f"entry #{i}: buffer_records has no kernel_dispatch list (another tool version, or "
                f"recorded without --kernel-trace); {_HINT}",
                path=shown(self.path),
            )
        if dispatches and not all(k in dispatches[0] for k in DISPATCH_FIELDS):
            raise TraceFormatError(
                f"entry #{i}: a kernel_dispatch record of a layout this reader does not know (it has "
                f"{sorted(dispatches[0])}, this reader needs {list(DISPATCH_FIELDS)}): another rocprofiler-sdk "
                "version; nothing was loaded",
                path=shown(self.path),
            )

    def read(self) -> TraceData:
        raw: dict[str, dict[str, list]] = {}
        devices, dist, names = {}, {}, {}
        for i, entry in enumerate(self.entries):
            self.check_layout(i, entry)
        for rank, entry in enumerate(self.entries):
            self.entry(rank, entry, raw)
            meta = entry.get("metadata") or {}
            pid = meta.get("pid")
            node = (meta.get("node") or {}).get("hostname", "")
            dist[rank] = {"rank": rank, "world_size": len(self.entries), "pid": pid, "host": node}
            names[rank] = {str(pid): " ".join(map(str, meta.get("command") or []))[:200]}
            devices[rank] = self.agents(entry)
        if not raw.get("kernels", {}).get("ts_ns"):
            raise TraceFormatError(
                f"the file holds no kernel dispatch: nothing to analyse; {_HINT}", path=shown(self.path)
            )
        columns = {
            t: {k: (np.asarray(v) if k not in ("name", "pid", "tid") else strings(v)) for k, v in cols.items()}
            for t, cols in raw.items()
        }
        self.describe_fidelity(columns)
        version = self.version()
        data = build_trace(
            self.path,
            f"{FORMAT} {version}",
            columns,
            ranks=list(range(len(self.entries))),
            device_properties=devices,
            distributed_info=dist,
            process_names=names,
            thread_names={},
            fidelity=self.fidelity,
            warnings_=self.warnings,
            notes=self.notes,
        )
        _mark_steps(data)  # "step N" ranges too, as for NVTX (ProfilerStep#N is marked by the assembly)
        return data

    def version(self) -> str:
        meta = self.entries[0].get("metadata") or {}
        for key in ("rocprofiler_sdk_version", "version", "rocprofiler-sdk-version"):
            value = meta.get(key)
            if isinstance(value, dict):
                return ".".join(str(value.get(k, 0)) for k in ("major", "minor", "patch"))
            if value:
                return str(value)
        return "(version not recorded)"

    def entry(self, rank: int, entry: dict, raw: dict) -> None:
        symbols = {}
        for s in entry.get("kernel_symbols") or []:
            if isinstance(s, dict) and "kernel_id" in s:
                symbols[s["kernel_id"]] = s
        operations = _operations(entry.get("strings") or {})
        agents = {a["id"]["handle"]: a for a in entry.get("agents") or [] if isinstance(a, dict) and "id" in a}
        records = entry["buffer_records"]
        pid = str((entry.get("metadata") or {}).get("pid", rank))
        k = raw.setdefault("kernels", {})
        skipped = 0
        for r in records.get("kernel_dispatch") or []:
            try:
                info = r["dispatch_info"]
                symbol = symbols.get(info["kernel_id"], {})
                name = symbol.get("demangled_kernel_name") or symbol.get("kernel_name") or f"kernel {info['kernel_id']}"
                wg, grid = info.get("workgroup_size") or {}, info.get("grid_size") or {}
                agent: dict[str, Any] = agents.get(info["agent_id"]["handle"], {})
                stream: Any = (r.get("stream_id") or {}).get("handle")
                stream_or_queue = int(stream) if stream is not None else int(info["queue_id"]["handle"])
                row = {
                    "rank": rank,
                    "ts_ns": int(r["start_timestamp"]),
                    "dur_ns": int(r["end_timestamp"]) - int(r["start_timestamp"]),
                    "name": name,
                    "device": int(agent.get("logical_node_type_id", agent.get("gpu_index", -1))),
                    "stream": stream_or_queue,
                    "correlation": int(r["correlation_id"]["internal"]),
                    "external_id": -1,
                    "bytes": -1,
                    "gbps": np.nan,
                    "registers_per_thread": int(symbol.get("arch_vgpr_count", -1)),
                    "shared_memory_bytes": int(info.get("group_segment_size", -1)),
                    "event_index": int(info.get("dispatch_id", -1)),
                    "pid": pid,
                    "tid": str(r.get("thread_id", "")),
                }
                for axis in "xyz":
                    size, group = int(grid.get(axis, 0)), int(wg.get(axis, 0))
                    row[f"block_{axis}"] = group if group else -1
                    row[f"grid_{axis}"] = -(-size // group) if group else -1
            except (KeyError, TypeError, ValueError):
                skipped += 1
                continue
            for key, value in row.items():
                k.setdefault(key, []).append(value)
        for r in records.get("memory_copy") or []:
            try:
                op = _name(operations, r["kind"], r["operation"])
                direction = _COPY.get(op, "Unknown")
                src, dst = _ENDS.get(direction, ("Unknown", "Unknown"))
                dst_agent = agents.get((r.get("dst_agent_id") or {}).get("handle"), {})
                src_agent = agents.get((r.get("src_agent_id") or {}).get("handle"), {})
                gpu = dst_agent if dst_agent.get("type") == 2 else src_agent
                nbytes = int(r.get("bytes", -1))
                dur = int(r["end_timestamp"]) - int(r["start_timestamp"])
                row = {
                    "rank": rank,
                    "ts_ns": int(r["start_timestamp"]),
                    "dur_ns": dur,
                    "name": f"Memcpy {direction} ({src} -> {dst})",
                    "device": int(gpu.get("logical_node_type_id", -1)),
                    "stream": int((r.get("stream_id") or {}).get("handle", -1)),
                    "correlation": int(r["correlation_id"]["internal"]),
                    "external_id": -1,
                    "bytes": nbytes,
                    "gbps": nbytes / dur if nbytes >= 0 and dur > 0 else np.nan,
                    "registers_per_thread": -1,
                    "shared_memory_bytes": -1,
                    "event_index": -1,
                    "pid": pid,
                    "tid": str(r.get("thread_id", "")),
                    **{f"{c}_{a}": -1 for c in ("grid", "block") for a in "xyz"},
                }
            except (KeyError, TypeError, ValueError):
                skipped += 1
                continue
            for key, value in row.items():
                k.setdefault(key, []).append(value)
        calls = raw.setdefault("runtime", {})
        for r in records.get("hip_api") or []:
            try:
                row = {
                    "rank": rank,
                    "ts_ns": int(r["start_timestamp"]),
                    "dur_ns": int(r["end_timestamp"]) - int(r["start_timestamp"]),
                    "name": _name(operations, r["kind"], r["operation"]),
                    "pid": pid,
                    "tid": str(r.get("thread_id", "")),
                    "correlation": int(r["correlation_id"]["internal"]),
                    "external_id": -1,
                    "event_index": -1,
                }
            except (KeyError, TypeError, ValueError):
                skipped += 1
                continue
            for key, value in row.items():
                calls.setdefault(key, []).append(value)
        skipped += self.markers(rank, pid, entry, records.get("marker_api") or [], operations, raw)
        if skipped:
            self.warnings.append(
                f"{shown(self.path)}: entry #{rank}: {skipped} record(s) of an unknown layout were "
                "skipped (the others were read)"
            )
        read = ("kernel_dispatch", "memory_copy", "hip_api", "marker_api")
        unread = [key for key, value in records.items() if value and key not in read]
        if unread:
            self.notes.append(
                f"{shown(self.path)}: entry #{rank}: records not read by this reader: "
                + ", ".join(f"{key} ({len(records[key]):,})" for key in unread)
            )

    def markers(self, rank: int, pid: str, entry: dict, records: list, operations: list, raw: dict) -> int:
        """The entry's roctx ranges -> ``raw["annotations"]``; the number of records of an unknown layout."""
        if not isinstance(records, list) or not records:
            return 0
        self.marker_records += len(records)
        messages = _marker_messages(entry.get("strings") or {})
        parsed, bad = [], 0
        for i, r in enumerate(records):
            try:
                start, end = int(r["start_timestamp"]), int(r["end_timestamp"])
                head = (start, i, _name(operations, r["kind"], r["operation"]), str(r.get("thread_id", "")), end)
                parsed.append((*head, int(r["correlation_id"]["internal"])))
            except (KeyError, TypeError, ValueError):
                bad += 1
        # threads whose records are the calls themselves (a pop record): their pushes pair with their pops
        popping = {p[3] for p in parsed if p[2] == _POP}
        stopping = any(p[2] == _STOP for p in parsed)  # Start/Stop calls: the records carry no range id
        ranges: list[tuple[int, str, int, int, int]] = []  # (record index, thread, start ns, end ns, correlation)
        stacks: dict[str, list[tuple[int, int, int]]] = {}
        unmatched: list[tuple[str, int]] = []
        backwards: list[tuple[str, int]] = []
        unpaired, marks = 0, 0
        others: dict[str, int] = {}
        for start, i, op, tid, end, corr in sorted(parsed):  # by time: a thread's pushes and pops in order
            if op == _PUSH and tid in popping:
                stacks.setdefault(tid, []).append((i, start, corr))
            elif op == _POP:
                stack = stacks.get(tid)
                if not stack:
                    unmatched.append((tid, start))
                    continue
                j, begin, c = stack.pop()
                ranges.append((j, tid, begin, max(end, begin), c))
            elif op in (_START, _STOP) and stopping:
                unpaired += 1
            elif op in _RANGE_OPS:
                if end < start:
                    backwards.append((tid, start))
                    continue
                ranges.append((i, tid, start, end, corr))
            elif op == _MARK:
                marks += 1
            else:
                others[op] = others.get(op, 0) + 1
        where = f"{shown(self.path)}: entry #{rank}"
        if unmatched:
            self.warnings.append(
                f"{where}: {len(unmatched)} roctxRangePop with no open roctxRangePushA on its thread ("
                + ", ".join(f"thread {t} at {ts} ns" for t, ts in unmatched[:_NAMED])
                + (", ..." if len(unmatched) > _NAMED else "")
                + "): ignored; the other ranges were read"
            )
        open_ = [(t, s, c) for t, stack in stacks.items() for _, s, c in stack]
        if open_:
            self.warnings.append(
                f"{where}: {len(open_)} roctxRangePushA never popped ("
                + ", ".join(f"{messages.get(c, '(unnamed)')!r} on thread {t} at {s} ns" for t, s, c in open_[:_NAMED])
                + (", ..." if len(open_) > _NAMED else "")
                + "): dropped (no end); the other ranges were read"
            )
        if backwards:
            self.warnings.append(
                f"{where}: {len(backwards)} roctx range(s) ending before they start ("
                + ", ".join(f"thread {t} at {ts} ns" for t, ts in backwards[:_NAMED])
                + "): dropped; the other ranges were read"
            )
        unnamed = sum(1 for *_, c in ranges if c not in messages)
        if unnamed:
            self.warnings.append(
                f"{where}: {unnamed} roctx range(s) whose message is not in strings.marker_api: named "
                "'(unnamed roctx range)'"
            )
        skipped = [f"{marks:,} roctxMarkA instant marker(s)"] if marks else []
        if unpaired:
            skipped.append(
                f"{unpaired:,} roctxRangeStartA/roctxRangeStop call record(s) (they carry no range id to pair by)"
            )
        skipped += [f"{op} ({n:,})" for op, n in sorted(others.items())]
        if skipped:
            self.notes.append(f"{where}: roctx records not read (not ranges): " + ", ".join(skipped))
        if ranges:
            out = raw.setdefault("annotations", {})
            for i, tid, begin, end, corr in sorted(ranges, key=lambda g: (g[2], g[0])):
                row = {
                    "rank": rank,
                    "ts_ns": begin,
                    "dur_ns": end - begin,
                    "name": messages.get(corr, "(unnamed roctx range)"),
                    "pid": pid,
                    "tid": tid,
                    "external_id": -1,
                    "event_index": i,
                }
                for key, value in row.items():
                    out.setdefault(key, []).append(value)
        return bad

    def agents(self, entry: dict) -> tuple[dict, ...]:
        out = []
        for a in entry.get("agents") or []:
            if not isinstance(a, dict) or a.get("type") != 2:
                continue
            banks = a.get("mem_banks") or []
            out.append(
                {
                    "id": a.get("logical_node_type_id"),
                    "name": a.get("product_name") or a.get("name"),
                    "arch": a.get("name"),
                    "numSms": a.get("cu_count"),
                    "warpSize": a.get("wave_front_size"),
                    "maxClockMhz": a.get("max_engine_clk_fcompute"),
                    "totalGlobalMem": sum(b.get("size_in_bytes", 0) for b in banks if isinstance(b, dict)) or None,
                    "vendor": a.get("vendor_name"),
                }
            )
        return tuple(out)

    def describe_fidelity(self, columns: dict) -> None:
        f = self.fidelity
        f["cpu_ops"] = (
            "rocprofv3 records no PyTorch CPU ops: no op breakdown, no op -> kernel attribution, no "
            "input shapes and so no FLOPs"
        )
        f["python_calls"] = "rocprofv3 records no Python function events"
        f["memory"] = "no PyTorch allocator events in rocprofv3 output"
        if not columns.get("runtime", {}).get("ts_ns", np.zeros(0)).size:
            f["runtime"] = "the file has no HIP API records (rocprofv3 --hip-trace was not used): no launch times"
            f["kernels.launch_ts_us"] = (
                "no HIP API records: a kernel's launch time is unknown, so idle time cannot "
                "be split into host wait and kernel wait"
            )
        names = [str(n) for n in columns.get("annotations", {}).get("name", ())]
        if not names:
            f["annotations"] = (
                "the file's roctx records hold no closed range (only instant markers, control or naming calls, "
                "or pops with no push): no annotations"
                if self.marker_records
                else "the file has no roctx marker records (record with rocprofv3 --marker-trace, the program "
                "calling roctxRangePush/Pop): no annotations and no step ranges"
            )
        if not any(_STEP.match(n) for n in names):
            f["annotations.step"] = "no step ranges (no roctx range named ProfilerStep#N or step N)"
        for column in ("blocks_per_sm", "warps_per_sm", "occupancy_pct"):
            f[f"kernels.{column}"] = "rocprofv3's kernel trace has no occupancy columns"


def _marker_messages(table: dict) -> dict[int, str]:
    """strings.marker_api: the roctx messages by correlation id (cereal writes a map as [{key, value}])."""
    items = table.get("marker_api") or []
    if isinstance(items, dict):
        items = [{"key": k, "value": v} for k, v in items.items()]
    out = {}
    for item in items if isinstance(items, list) else ():
        try:
            out[int(item["key"])] = str(item["value"])
        except (KeyError, TypeError, ValueError):
            continue
    return out


def _operations(table: dict) -> list[tuple[str, list[str]]]:
    out = []
    for item in table.get("buffer_records") or []:
        if isinstance(item, dict):
            out.append((str(item.get("kind", "")), [str(o) for o in item.get("operations") or []]))
    return out


def _name(operations: list, kind: int, operation: int) -> str:
    try:
        return operations[int(kind)][1][int(operation)]
    except (IndexError, ValueError, TypeError):
        return f"api {kind}:{operation}"
