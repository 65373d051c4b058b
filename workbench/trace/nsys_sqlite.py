"""Nsight Systems SQLite exports (``nsys export --type sqlite``) -> the declared trace tables.

The schema is NVIDIA's ("Exporter SQLite schema", Nsight Systems user guide): times in ns; names
are ids into ``StringIds``; ``CUPTI_ACTIVITY_KIND_RUNTIME.correlationId`` joins a runtime call to its
kernel or copy; ``globalTid`` / ``globalPid`` are serialized ids whose bits 24-47 are the process id
and bits 0-23 the thread id. What is read:

- ``CUPTI_ACTIVITY_KIND_KERNEL``: kernels (demangled name), device, stream, grid, block, registers,
  static + dynamic shared memory;
- ``CUPTI_ACTIVITY_KIND_MEMCPY`` / ``_MEMSET``: copies and sets, named as Kineto names them
  ("Memcpy HtoD (Pageable -> Device)", "Memset (Device)") so kind, direction and host memory read the same;
- ``CUPTI_ACTIVITY_KIND_RUNTIME``: CUDA runtime calls (the ``_v7000`` version suffix dropped), linked to
  their kernels and copies by correlation id;
- ``CUPTI_ACTIVITY_KIND_SYNCHRONIZATION``: the GPU side of synchronisations;
- ``NVTX_EVENTS`` ranges: PyTorch's ``emit_nvtx`` ranges ("aten::mm, op_id = 12, sizes = [...]") become
  CPU ops named by the op (so kernels get their op through the runtime call they nest around, as for
  Kineto); every other range is an annotation (``ProfilerStep#N`` and ranges named "step N" are steps);
- ``TARGET_INFO_GPU`` / ``TARGET_INFO_CUDA_DEVICE``: device properties, where the export has them.

One rank per process with GPU activity (ordered by the lowest device it used); a process that drove
several devices is one rank per device, its host rows on the rank of the device their work went to.
Every read is bounded (``MAX_ROWS`` per table) and the file is opened read-only.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Sequence
from urllib.parse import quote

import numpy as np
import pandas as pd

from workbench.errors import TraceFormatError
from workbench.trace.data import TraceData
from workbench.trace.imported import build_trace
from workbench.trace.paths import shown

FORMAT = "nsys-sqlite"
KNOWN_MAJOR = 3  # the export schema's major version this reader knows (Nsight Systems 2021.x to 2026.x)
MAX_ROWS = 50_000_000  # rows read from one table at most (a larger export is refused, not truncated)
_HINT = "export the report with `nsys export --type sqlite REPORT.nsys-rep` (Nsight Systems 2021.2 or newer)"
_ACTIVITY = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
)
_NVTX_RANGES = (59, 60, 70, 71)  # NvtxPushPopRange, NvtxStartEndRange and their NVTXt forms
_VERSION_SUFFIX = re.compile(r"_v\d+$")
_EMIT_NVTX = re.compile(
    r"^(?P<name>.*?)(?:, seq = (?P<seq>\d+))?, op_id = (?P<op>\d+)"
    r"(?:, sizes = (?P<sizes>\[.*?\]))?(?:, input_op_ids = .*)?$"
)
_STEP = re.compile(r"^(?:ProfilerStep#|(?:train[_ ]?)?(?:step|iteration|iter)[ _#:=-]*)(\d+)$", re.IGNORECASE)
_COPY_KIND = {
    "HTOD": "HtoD",
    "DTOH": "DtoH",
    "DTOD": "DtoD",
    "HTOH": "HtoH",
    "PTOP": "PtoP",
    "HTOA": "HtoA",
    "ATOH": "AtoH",
    "ATOA": "AtoA",
    "ATOD": "AtoD",
    "DTOA": "DtoA",
    "UVM_HTOD": "HtoD",
    "UVM_DTOH": "DtoH",
    "UVM_DTOD": "DtoD",
}
_MEM_KIND = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed", 5: "Device", 6: "Managed"}
_SYNC_TYPE = {1: "Event Sync", 2: "Stream Wait Event", 3: "Stream Sync", 4: "Context Sync"}


def read_nsys(path: str) -> TraceData:
    """The tables of one Nsight Systems SQLite export (see the module docstring)."""
    try:
        con = sqlite3.connect(f"file:{quote(path)}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise TraceFormatError(f"the SQLite database cannot be opened ({exc}); {_HINT}", path=shown(path)) from None
    try:
        return _Reader(con, path).read()
    except sqlite3.DatabaseError as exc:
        raise TraceFormatError(
            f"the SQLite database cannot be read: truncated or corrupt ({exc}); nothing was "
            f"loaded. Re-export it, or copy the whole file",
            path=shown(path),
        ) from None
    finally:
        con.close()


class _Reader:
    def __init__(self, con: sqlite3.Connection, path: str):
        self.con, self.path = con, path
        self.read_tables: list[str] = []
        self.failed: dict[str, str] = {}
        self.warnings: list[str] = []
        self.notes: list[str] = []
        self.fidelity: dict[str, str] = {}

    # --- bounded reads ------------------------------------------------------------------------
    def tables(self) -> set[str]:
        return {r[0] for r in self.con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}

    def columns(self, table: str) -> list[str]:
        try:
            return [r[1] for r in self.con.execute(f'PRAGMA table_info("{table}")')]
        except sqlite3.DatabaseError as exc:  # said when the table itself is read
            self.failed.setdefault(table, str(exc))
            return []

    def frame(self, table: str, sql: str) -> pd.DataFrame | None:
        """The rows of ``sql`` over ``table``; None (and said) where the table cannot be read."""
        try:
            count = self.con.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
            if count > MAX_ROWS:
                raise TraceFormatError(
                    f"table {table} holds {count:,} rows, more than the {MAX_ROWS:,} this reader "
                    "reads; export a shorter time range (nsys export --times ...)",
                    path=shown(self.path),
                )
            cur = self.con.execute(sql)
            names = [d[0] for d in cur.description]
            rows = cur.fetchmany(MAX_ROWS + 1)
        except sqlite3.DatabaseError as exc:
            self.failed[table] = str(exc)
            return None
        self.read_tables.append(table)
        return pd.DataFrame.from_records(rows, columns=names)

    # --- the file -----------------------------------------------------------------------------
    def read(self) -> TraceData:
        present = self.tables()
        if "StringIds" not in present or not present & set(_ACTIVITY):
            found = ", ".join(sorted(present)[:8]) or "no tables"
            raise TraceFormatError(
                f"an SQLite database, but not an Nsight Systems export: it has no StringIds and "
                f"no CUPTI_ACTIVITY_KIND_* tables (it has {found}); {_HINT}",
                path=shown(self.path),
            )
        version = self.version(present)
        self.source = f"{FORMAT} {version}"
        strings_frame = self.frame("StringIds", "SELECT id, value FROM StringIds")
        if strings_frame is None:
            raise TraceFormatError(
                f"the StringIds table cannot be read ({self.failed['StringIds']}): the file is "
                "truncated or corrupt; nothing was loaded",
                path=shown(self.path),
            )
        self.strings = dict(zip(strings_frame["id"].tolist(), strings_frame["value"].tolist()))
        kernels = self.kernels(present)
        copies = self.copies(present)
        sets = self.sets(present)
        runtime = self.runtime(present)
        syncs = self.syncs(present)
        ranges = self.nvtx(present)
        gpu = (
            pd.concat([f for f in (kernels, copies, sets) if f is not None and len(f)], ignore_index=True)
            if any(f is not None and len(f) for f in (kernels, copies, sets))
            else None
        )
        if gpu is None and (runtime is None or not len(runtime)):
            what = (
                "; ".join(f"{t}: {e}" for t, e in self.failed.items())
                or "the CUPTI activity tables hold no rows (the report traced no CUDA: nsys profile --trace=cuda)"
            )
            raise TraceFormatError(
                f"no kernel, copy or CUDA runtime call could be read ({what})", path=shown(self.path)
            )
        if self.failed:
            self.warnings.append(
                f"{shown(self.path)}: partial result: read {', '.join(self.read_tables)}; could not read "
                + "; ".join(f"{t} ({e})" for t, e in self.failed.items())
                + " (the file is truncated or corrupt)"
            )
            for table in self.failed:
                self.fidelity[_TABLE_OF.get(table, table)] = (
                    f"the export's {table} table could not be read ({self.failed[table]})"
                )
        ranks, rank_of = self.ranks(gpu, runtime)
        raw: dict[str, dict] = {}
        if gpu is not None:
            gpu["rank"] = rank_of(gpu["pid_n"].to_numpy(), gpu["device"].to_numpy())
            raw["kernels"] = _columns(gpu)
        device_of = _device_by_correlation(gpu)
        if runtime is not None and len(runtime):
            runtime["rank"] = rank_of(runtime["pid_n"].to_numpy(), device_of(runtime))
            raw["runtime"] = _columns(runtime)
        if syncs is not None and len(syncs):
            syncs["rank"] = rank_of(syncs["pid_n"].to_numpy(), syncs["device"].to_numpy())
            raw["gpu_syncs"] = _columns(syncs)
        if ranges is not None and len(ranges):
            ranges["rank"] = rank_of(ranges["pid_n"].to_numpy(), np.full(len(ranges), -1))
            ranges = ranges[ranges["rank"] >= 0]
            ops = ranges[ranges["is_op"]]
            notes = ranges[~ranges["is_op"]]
            if len(ops):
                raw["cpu_ops"] = _columns(ops)
            if len(notes):
                raw["annotations"] = _columns(notes)
        self.describe_fidelity(raw, present)
        data = build_trace(
            self.path,
            self.source,
            raw,
            ranks=ranks,
            device_properties=self.devices(present, ranks),
            distributed_info={r: {"rank": r, "world_size": len(ranks), **self.rank_info[r]} for r in ranks},
            process_names=self.process_names,
            thread_names={},
            fidelity=self.fidelity,
            warnings_=self.warnings,
            notes=self.notes,
        )
        _mark_steps(data)
        return data

    def version(self, present: set[str]) -> str:
        if "META_DATA_EXPORT" not in present:
            self.warnings.append(
                f"{shown(self.path)}: the export records no schema version (no META_DATA_EXPORT "
                f"table, an export older than Nsight Systems 2022); read as schema {KNOWN_MAJOR}.x"
            )
            return "unknown-version"
        meta = self.frame("META_DATA_EXPORT", "SELECT name, value FROM META_DATA_EXPORT")
        values = dict(zip(meta["name"], meta["value"])) if meta is not None else {}
        version = str(values.get("EXPORT_SCHEMA_VERSION") or "")
        major = str(values.get("EXPORT_SCHEMA_VERSION_MAJOR") or version.split(".")[0])
        if not major.isdigit() or int(major) != KNOWN_MAJOR:
            raise TraceFormatError(
                f"an Nsight Systems export of schema version {version or major or '?'} "
                f"(Nsight Systems {values.get('EXPORT_PRODUCT_VERSION', '?')}), which this reader "
                f"does not know (it reads schema {KNOWN_MAJOR}.x); nothing was loaded. Export it "
                "with an Nsight Systems whose schema is 3.x, or report the version",
                path=shown(self.path),
            )
        product = values.get("EXPORT_PRODUCT_VERSION")
        if product:
            self.notes.append(f"{shown(self.path)}: Nsight Systems {product} export, schema {version}")
        return version

    # --- GPU activity -------------------------------------------------------------------------
    def kernels(self, present: set[str]) -> pd.DataFrame | None:
        table = "CUPTI_ACTIVITY_KIND_KERNEL"
        if table not in present:
            return None
        cols = set(self.columns(table))
        name_col = "demangledName" if "demangledName" in cols else "shortName"
        f = self.frame(
            table,
            f"SELECT rowid AS event_index, start, end, deviceId, streamId, correlationId, globalPid,"
            f" {name_col} AS name_id, gridX, gridY, gridZ, blockX, blockY, blockZ,"
            f" registersPerThread, staticSharedMemory, dynamicSharedMemory FROM {table}",
        )
        if f is None:
            return None
        f["name"] = [self.strings.get(i, f"<string {i}>") for i in f["name_id"].tolist()]
        out = _gpu_base(f)
        for axis in "xyz":
            out[f"grid_{axis}"] = f[f"grid{axis.upper()}"].to_numpy(np.int64)
            out[f"block_{axis}"] = f[f"block{axis.upper()}"].to_numpy(np.int64)
        out["registers_per_thread"] = f["registersPerThread"].to_numpy(np.int64)
        out["shared_memory_bytes"] = (f["staticSharedMemory"].fillna(0) + f["dynamicSharedMemory"].fillna(0)).to_numpy(
            np.int64
        )
        return out

    def copies(self, present: set[str]) -> pd.DataFrame | None:
        table = "CUPTI_ACTIVITY_KIND_MEMCPY"
        if table not in present:
            return None
        f = self.frame(
            table,
            f"SELECT rowid AS event_index, start, end, deviceId, streamId, correlationId, globalPid,"
            f" bytes, copyKind, srcKind, dstKind FROM {table}",
        )
        if f is None:
            return None
        kinds = self.enum("ENUM_CUDA_MEMCPY_OPER", present)
        mem = self.enum("ENUM_CUDA_MEM_KIND", present, label=True) or {}

        def kind(code):
            name = kinds.get(code, "")
            return _COPY_KIND.get(name.replace("CUDA_MEMCPY_KIND_", ""), "Unknown")

        def memory(code):
            if code is None or code != code:
                return "Unknown"
            label = mem.get(int(code)) or _MEM_KIND.get(int(code), "Unknown")
            return label.split(" ")[0]

        f["name"] = [
            f"Memcpy {kind(k)} ({memory(s)} -> {memory(d)})"
            for k, s, d in zip(f["copyKind"].tolist(), f["srcKind"].tolist(), f["dstKind"].tolist())
        ]
        out = _gpu_base(f)
        out["bytes"] = f["bytes"].to_numpy(np.int64)
        dur = (f["end"] - f["start"]).to_numpy(np.float64)
        out["gbps"] = np.where(dur > 0, f["bytes"].to_numpy(np.float64) / np.where(dur > 0, dur, 1), np.nan)
        return out

    def sets(self, present: set[str]) -> pd.DataFrame | None:
        table = "CUPTI_ACTIVITY_KIND_MEMSET"
        if table not in present:
            return None
        cols = set(self.columns(table))
        kind = "memKind" if "memKind" in cols else "NULL AS memKind"
        f = self.frame(
            table,
            f"SELECT rowid AS event_index, start, end, deviceId, streamId, correlationId, globalPid,"
            f" bytes, {kind} FROM {table}",
        )
        if f is None:
            return None
        mem = self.enum("ENUM_CUDA_MEM_KIND", present, label=True) or {}
        f["name"] = [
            f"Memset ({(mem.get(int(k)) or _MEM_KIND.get(int(k), 'Device')).split(' ')[0]})"
            if k is not None and k == k
            else "Memset (Device)"
            for k in f["memKind"].tolist()
        ]
        out = _gpu_base(f)
        out["bytes"] = f["bytes"].to_numpy(np.int64)
        return out

    def syncs(self, present: set[str]) -> pd.DataFrame | None:
        table = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
        if table not in present:
            return None
        f = self.frame(
            table,
            f"SELECT rowid AS event_index, start, end, deviceId, streamId, correlationId, globalPid,"
            f" syncType FROM {table}",
        )
        if f is None:
            return None
        f["name"] = [_SYNC_TYPE.get(int(t), "Sync") if t is not None else "Sync" for t in f["syncType"].tolist()]
        out = _gpu_base(f)
        out["tid"] = np.array([f"stream {s}" for s in f["streamId"].tolist()], dtype=object)
        return out

    def enum(self, table: str, present: set[str], label: bool = False) -> dict[int, str]:
        if table not in present:
            return {}
        f = self.frame(table, f"SELECT id, {'label' if label else 'name'} AS v FROM {table}")
        return {} if f is None else dict(zip(f["id"].tolist(), [str(v or "") for v in f["v"].tolist()]))

    # --- host side ----------------------------------------------------------------------------
    def runtime(self, present: set[str]) -> pd.DataFrame | None:
        table = "CUPTI_ACTIVITY_KIND_RUNTIME"
        if table not in present:
            return None
        f = self.frame(table, f"SELECT rowid AS event_index, start, end, globalTid, correlationId, nameId FROM {table}")
        if f is None:
            return None
        names = {i: _VERSION_SUFFIX.sub("", self.strings.get(i, f"<string {i}>")) for i in set(f["nameId"].tolist())}
        g = f["globalTid"].fillna(0).to_numpy(np.int64)
        return pd.DataFrame(
            {
                "event_index": f["event_index"].to_numpy(np.int64),
                "ts_ns": f["start"].to_numpy(np.int64),
                "dur_ns": (f["end"] - f["start"]).to_numpy(np.int64),
                "pid_n": (g >> 24) & 0xFFFFFF,
                "pid": np.array([str(p) for p in ((g >> 24) & 0xFFFFFF).tolist()], dtype=object),
                "tid": np.array([str(t) for t in (g & 0xFFFFFF).tolist()], dtype=object),
                "name": np.array([names[i] for i in f["nameId"].tolist()], dtype=object),
                "correlation": f["correlationId"].fillna(-1).to_numpy(np.int64),
                "external_id": np.full(len(f), -1, dtype=np.int64),
            }
        )

    def nvtx(self, present: set[str]) -> pd.DataFrame | None:
        table = "NVTX_EVENTS"
        if table not in present:
            self.fidelity["annotations"] = "the export has no NVTX_EVENTS table (nsys profile --trace=nvtx)"
            return None
        cols = set(self.columns(table))
        text_id = "textId" if "textId" in cols else "NULL AS textId"
        types = ", ".join(str(t) for t in _NVTX_RANGES)
        f = self.frame(
            table,
            f"SELECT rowid AS event_index, start, end, globalTid, text, {text_id} FROM {table} "
            f"WHERE eventType IN ({types}) AND end IS NOT NULL",
        )
        if f is None:
            return None
        text = [
            t if isinstance(t, str) else (self.strings.get(int(i), "") if i is not None and i == i else "")
            for t, i in zip(f["text"].tolist(), f["textId"].tolist())
        ]
        names, is_op, seq, sizes = [], [], [], []
        for t in text:
            m = _EMIT_NVTX.match(t)
            if m:
                names.append(m.group("name"))
                is_op.append(True)
                seq.append(int(m.group("seq")) if m.group("seq") else -1)
                sizes.append(_compact(m.group("sizes")))
            else:
                names.append(t)
                is_op.append(False)
                seq.append(-1)
                sizes.append("")
        g = f["globalTid"].fillna(0).to_numpy(np.int64)
        pid_n = (g >> 24) & 0xFFFFFF
        return pd.DataFrame(
            {
                "event_index": f["event_index"].to_numpy(np.int64),
                "ts_ns": f["start"].to_numpy(np.int64),
                "dur_ns": (f["end"] - f["start"]).to_numpy(np.int64),
                "pid_n": pid_n,
                "pid": np.array([str(p) for p in pid_n.tolist()], dtype=object),
                "tid": np.array([str(t) for t in (g & 0xFFFFFF).tolist()], dtype=object),
                "name": np.array(names, dtype=object),
                "is_op": np.array(is_op, dtype=bool),
                "cat": np.array(["cpu_op"] * len(f), dtype=object),
                "sequence_number": np.array(seq, dtype=np.int64),
                "input_dims": np.array(sizes, dtype=object),
                "input_types": np.array([""] * len(f), dtype=object),
                "external_id": np.full(len(f), -1, dtype=np.int64),
            }
        )

    # --- ranks and devices --------------------------------------------------------------------
    def ranks(self, gpu: pd.DataFrame | None, runtime: pd.DataFrame | None):
        """(ranks, rank_of(pid_n, device) -> rank array; -1 for a process with no GPU activity or calls)."""
        pairs: dict[int, set[int]] = {}
        if gpu is not None:
            for p, d in zip(gpu["pid_n"].tolist(), gpu["device"].tolist()):
                pairs.setdefault(int(p), set()).add(int(d))
        if runtime is not None:
            for p in set(runtime["pid_n"].tolist()):
                pairs.setdefault(int(p), set())
        keys = []
        for p, devices in pairs.items():
            keys += [(d, p) for d in sorted(devices)] if devices else [(1 << 30, p)]
        keys.sort()
        index = {(p, d): r for r, (d, p) in enumerate(keys)}
        first: dict[int, int] = {}
        for (p, d), r in sorted(index.items(), key=lambda kv: kv[1]):
            first.setdefault(p, r)
        self.rank_info = {r: {"pid": p, **({"device": d} if d != 1 << 30 else {})} for (p, d), r in index.items()}
        names = self.process_table()
        self.process_names = {r: {str(p): names.get(p, "")} for (p, d), r in index.items()}
        several = {p: sorted(d) for p, d in pairs.items() if len(d) > 1}
        for p, drove in several.items():
            self.notes.append(
                f"{shown(self.path)}: process {p} drove devices {drove}: one rank per device, its "
                "runtime calls on the rank of the device their work went to, its NVTX ranges and "
                "calls without GPU work on the rank of its first device"
            )

        exact = pd.MultiIndex.from_tuples(list(index), names=["pid", "device"]) if index else None
        exact_rank = np.array(list(index.values()), dtype=np.int64)
        first_pid = pd.Index(list(first), dtype="int64")
        first_rank = np.array(list(first.values()), dtype=np.int64)

        def rank_of(pid_n: np.ndarray, device: np.ndarray) -> np.ndarray:
            """The rank of each (process, device); a row of no known device: its process's first rank."""
            out = np.full(len(pid_n), -1, dtype=np.int64)
            if exact is None or not len(pid_n):
                return out
            hit = exact.get_indexer(
                pd.MultiIndex.from_arrays([np.asarray(pid_n, np.int64), np.asarray(device, np.int64)])
            )
            out[hit >= 0] = exact_rank[hit[hit >= 0]]
            rest = hit < 0
            if rest.any():
                by_pid = first_pid.get_indexer(np.asarray(pid_n, np.int64)[rest])
                out[np.flatnonzero(rest)] = np.where(by_pid >= 0, first_rank[np.clip(by_pid, 0, None)], -1)
            return out

        ranks = list(range(len(keys)))
        return ranks, rank_of

    def process_table(self) -> dict[int, str]:
        if "PROCESSES" not in self.tables():
            return {}
        f = self.frame("PROCESSES", "SELECT pid, name FROM PROCESSES")
        return (
            {}
            if f is None
            else {int(p): str(n or "") for p, n in zip(f["pid"].tolist(), f["name"].tolist()) if p is not None}
        )

    def devices(self, present: set[str], ranks: Sequence[int]) -> dict[int, tuple[dict, ...]]:
        """Kineto-like deviceProperties per rank from TARGET_INFO_GPU / TARGET_INFO_CUDA_DEVICE."""
        found: dict[int, dict] = {}
        for table, id_col in (("TARGET_INFO_GPU", "id"), ("TARGET_INFO_CUDA_DEVICE", "cudaId")):
            if table not in present:
                continue
            f = self.frame(table, f"SELECT * FROM {table}")
            if f is None or id_col not in f.columns:
                continue
            for row in f.to_dict("records"):
                device = row.get(id_col)
                if device is None:
                    continue
                entry = found.setdefault(int(device), {"id": int(device)})
                for src, dst in (
                    ("name", "name"),
                    ("totalMemory", "totalGlobalMem"),
                    ("smCount", "numSms"),
                    ("numMultiprocessors", "numSms"),
                    ("computeMajor", "computeMajor"),
                    ("computeMinor", "computeMinor"),
                    ("clockRate", "clockRate"),
                    ("memoryBandwidth", "memoryBandwidth"),
                    ("l2CacheSize", "l2CacheSize"),
                    ("maxShmemPerBlock", "sharedMemPerBlock"),
                    ("chipName", "chipName"),
                ):
                    if row.get(src) is not None and dst not in entry:
                        entry[dst] = row[src]
        if not found:
            self.fidelity["devices"] = (
                "the export has no TARGET_INFO_GPU / TARGET_INFO_CUDA_DEVICE rows: the GPU "
                "model is unknown (the roofline uses default ceilings)"
            )
        out: dict[int, tuple[dict, ...]] = {}
        for r in ranks:
            device = self.rank_info[r].get("device")
            out[r] = (found[device],) if device in found else ()
        return out

    def describe_fidelity(self, raw: dict[str, dict], present: set[str]) -> None:
        f = self.fidelity
        if "cpu_ops" not in raw:
            f["cpu_ops"] = (
                "no CPU-op events: the report has no PyTorch emit_nvtx ranges (name, op_id = N), so "
                "kernels have no op beyond the NVTX annotations they run under"
            )
        else:
            f.setdefault(
                "cpu_ops.external_id",
                "Nsight Systems records no PyTorch external ids: ops are "
                "emit_nvtx NVTX ranges, kernels reach them by range nesting",
            )
            if not any(raw["cpu_ops"]["input_dims"]):
                f["cpu_ops.input_dims"] = (
                    "no input shapes (emit_nvtx(record_shapes=True) was not used): no FLOPs or bytes per op"
                )
        if "runtime" not in raw:
            f["runtime"] = "no CUDA runtime calls in the export (nsys profile --trace=cuda)"
        f["python_calls"] = "Nsight Systems exports no Python function events (no module or source-line attribution)"
        f["memory"] = "no PyTorch allocator events in an Nsight Systems export"
        for column in ("blocks_per_sm", "warps_per_sm", "occupancy_pct"):
            f[f"kernels.{column}"] = "the export has no achieved-occupancy columns"
        steps = raw.get("annotations", {}).get("name", [])
        if not any(_STEP.match(str(n)) for n in steps):
            f["annotations.step"] = "no step ranges (no NVTX range named ProfilerStep#N or step N)"


_TABLE_OF = {
    "CUPTI_ACTIVITY_KIND_KERNEL": "kernels",
    "CUPTI_ACTIVITY_KIND_RUNTIME": "runtime",
    "NVTX_EVENTS": "annotations",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": "syncs",
}


def _gpu_base(f: pd.DataFrame) -> pd.DataFrame:
    n = len(f)
    pid = f["globalPid"].fillna(0).to_numpy(np.int64)
    return pd.DataFrame(
        {
            "event_index": f["event_index"].to_numpy(np.int64),
            "ts_ns": f["start"].to_numpy(np.int64),
            "dur_ns": (f["end"] - f["start"]).to_numpy(np.int64),
            "pid_n": (pid >> 24) & 0xFFFFFF,
            "name": np.asarray(f["name"], dtype=object),
            "device": f["deviceId"].to_numpy(np.int64),
            "stream": f["streamId"].to_numpy(np.int64),
            "correlation": f["correlationId"].fillna(-1).to_numpy(np.int64),
            "external_id": np.full(n, -1, dtype=np.int64),
            "bytes": np.full(n, -1, dtype=np.int64),
            "gbps": np.full(n, np.nan),
            **{f"{c}_{a}": np.full(n, -1, dtype=np.int64) for c in ("grid", "block") for a in "xyz"},
            "registers_per_thread": np.full(n, -1, dtype=np.int64),
            "shared_memory_bytes": np.full(n, -1, dtype=np.int64),
            "tid": np.array([""] * n, dtype=object),
        }
    )


def _columns(f: pd.DataFrame) -> dict:
    return {c: f[c].to_numpy() for c in f.columns}


def _device_by_correlation(gpu: pd.DataFrame | None):
    """runtime rows -> the device their correlated GPU work ran on (-1 where none)."""
    if gpu is None or not len(gpu):
        return lambda calls: np.full(len(calls), -1, dtype=np.int64)
    keyed = gpu[gpu["correlation"] >= 0].drop_duplicates(["pid_n", "correlation"])
    index = pd.MultiIndex.from_arrays([keyed["pid_n"].to_numpy(), keyed["correlation"].to_numpy()])
    devices = keyed["device"].to_numpy()

    def device_of(calls: pd.DataFrame) -> np.ndarray:
        found = index.get_indexer(
            pd.MultiIndex.from_arrays([calls["pid_n"].to_numpy(), calls["correlation"].to_numpy()])
        )
        return np.where(found >= 0, devices[np.clip(found, 0, None)] if len(devices) else -1, -1)

    return device_of


def _compact(sizes: str | None) -> str:
    if not sizes:
        return ""
    try:
        return json.dumps(json.loads(sizes), separators=(",", ":"))
    except ValueError:
        return sizes


def _mark_steps(data: TraceData) -> None:
    """NVTX ranges named like steps ("step 3", "ProfilerStep#3") are step annotations with their number."""
    notes = data.annotations
    if not len(notes):
        return
    labels = [str(c) for c in notes["name"].cat.categories]
    numbers = np.array([int(m.group(1)) if (m := _STEP.match(n)) else -1 for n in labels] + [-1], dtype=np.int64)
    codes = notes["name"].cat.codes.to_numpy()
    step = numbers[np.where(codes >= 0, codes, len(labels))]
    is_step = step >= 0
    if not is_step.any():
        return
    notes.loc[is_step, "step"] = step[is_step]
    notes.loc[is_step, "kind"] = "step"
