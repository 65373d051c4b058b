"""rocprofv3 JSON (rocprofiler-sdk's tool, ``rocprofv3 --output-format json``) -> the declared trace tables.

The file is one object ``{"rocprofiler-sdk-tool": [ {metadata, agents, kernel_symbols, strings,
buffer_records, ...}, ... ]}``, one entry per profiled process. What is read:

- ``buffer_records.kernel_dispatch``: kernels (the symbol's demangled name from ``kernel_symbols``), agent
  (device), HIP stream (``stream_id``, else the queue), grid (work-items, turned into work-groups as CUDA
  counts a grid) and work-group size, group segment (LDS) bytes, the symbol's VGPR count as registers;
- ``buffer_records.hip_api``: HIP API calls, named from ``strings.buffer_records[kind].operations``, linked to
  their dispatches and copies by the internal correlation id;
- ``buffer_records.memory_copy``: copies with their direction and bytes;
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
        return build_trace(
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
        if skipped:
            self.warnings.append(
                f"{shown(self.path)}: entry #{rank}: {skipped} record(s) of an unknown layout were "
                "skipped (the others were read)"
            )
        unread = [
            key for key, value in records.items() if value and key not in ("kernel_dispatch", "memory_copy", "hip_api")
        ]
        if unread:
            self.notes.append(
                f"{shown(self.path)}: entry #{rank}: records not read by this reader: "
                + ", ".join(f"{key} ({len(records[key]):,})" for key in unread)
            )
        self.has_markers = bool(records.get("marker_api"))

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
        f["annotations"] = (
            "roctx marker ranges are not read by this reader"
            if getattr(self, "has_markers", False)
            else "the file has no roctx marker records (no step ranges)"
        )
        f["annotations.step"] = "no step ranges in rocprofv3 output"
        for column in ("blocks_per_sm", "warps_per_sm", "occupancy_pct"):
            f[f"kernels.{column}"] = "rocprofv3's kernel trace has no occupancy columns"


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
