"""torch.compile diagnostics seen while profiling: graphs, graph breaks and recompiles, with reasons.

Counts come from ``torch._dynamo.utils.counters`` (difference over the profiled span; dynamo is
not imported by us: if the profiled code never loads it, nothing was compiled). Reasons come from
the ``graph_breaks`` and ``recompiles`` log artifacts, switched on for the span
(the equivalent of ``torch._logging.set_logs(graph_breaks=True, recompiles=True)``, touching no
other logging setting) and captured by a handler on the ``torch._dynamo``
logger; the previous logging state is restored afterwards, and the records are kept out of the
cell's output unless the user had switched those artifacts on themselves.
"""
from __future__ import annotations

import logging
import re
import sys
from collections import Counter
from dataclasses import dataclass
from typing import Any

_DYNAMO_LOGGER = "torch._dynamo"
_ARTIFACTS = ("graph_breaks", "recompiles")
_LOCATION = re.compile(r"in user code at (\S+:\d+)")
_RECOMPILING = re.compile(r"Recompiling function (\S+) in (\S+:\d+)")
_DETAIL_CHARS = 2000
_LIMIT_PREFIX = "torch._dynamo hit config."  # convert_frame's warning: fell back to eager


@dataclass(frozen=True)
class GraphBreak:
    reason: str
    location: str       # "file:line" of the user code, "" when dynamo did not say
    count: int
    detail: str         # dynamo's full message (truncated), for the curious

    def to_dict(self) -> dict[str, Any]:
        return {"reason": self.reason, "location": self.location, "count": self.count,
                "detail": self.detail}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "GraphBreak":
        return cls(d["reason"], d.get("location", ""), int(d["count"]), d.get("detail", ""))


@dataclass(frozen=True)
class Recompile:
    function: str
    location: str
    guard_failures: tuple[str, ...]   # e.g. "tensor 'x' size mismatch at index 0. expected 8, actual 16"

    def to_dict(self) -> dict[str, Any]:
        return {"function": self.function, "location": self.location,
                "guard_failures": list(self.guard_failures)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Recompile":
        return cls(d["function"], d.get("location", ""), tuple(d.get("guard_failures", ())))


@dataclass(frozen=True)
class CompileDiagnostics:
    """What torch.compile did during one profile (cold call, warm-up and repeats)."""

    dynamo_loaded: bool = False
    graph_count: int = 0            # new graphs compiled (counters["stats"]["unique_graphs"])
    frames_compiled: int = 0        # frames dynamo converted (counters["frames"]["ok"])
    graph_breaks: tuple[GraphBreak, ...] = ()
    recompiles: tuple[Recompile, ...] = ()
    compile_time_ms: float = 0.0    # time in dynamo's compile (tracing + backend), this span
    recompile_limit_hit: bool = False
    note: str = ""

    @property
    def graph_break_count(self) -> int:
        return sum(b.count for b in self.graph_breaks)

    @property
    def recompile_count(self) -> int:
        return len(self.recompiles)

    @property
    def compiled_anything(self) -> bool:
        return self.graph_count > 0 or self.frames_compiled > 0

    def to_dict(self) -> dict[str, Any]:
        return {"dynamo_loaded": self.dynamo_loaded, "graph_count": self.graph_count,
                "frames_compiled": self.frames_compiled,
                "graph_breaks": [b.to_dict() for b in self.graph_breaks],
                "recompiles": [r.to_dict() for r in self.recompiles],
                "compile_time_ms": self.compile_time_ms,
                "recompile_limit_hit": self.recompile_limit_hit, "note": self.note}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CompileDiagnostics":
        return cls(bool(d.get("dynamo_loaded", False)), int(d.get("graph_count", 0)),
                   int(d.get("frames_compiled", 0)),
                   tuple(GraphBreak.from_dict(b) for b in d.get("graph_breaks", ())),
                   tuple(Recompile.from_dict(r) for r in d.get("recompiles", ())),
                   float(d.get("compile_time_ms", 0.0)), bool(d.get("recompile_limit_hit", False)),
                   d.get("note", ""))


def parse_graph_break(message: str) -> tuple[str, str]:
    """(reason, location) from a ``graph_breaks`` log message."""
    location_match = _LOCATION.search(message)
    location = location_match.group(1) if location_match else ""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith("Explanation:"):
            return ln[len("Explanation:"):].strip(), location
    for ln in lines:
        if ln.startswith("Graph Break Reason:"):
            return ln[len("Graph Break Reason:"):].strip(), location
    return (lines[0] if lines else message), location


def parse_recompile(message: str) -> Recompile:
    match = _RECOMPILING.search(message)
    function, location = (match.group(1), match.group(2)) if match else ("?", "")
    failures = tuple(ln.strip()[2:].split(": ", 1)[-1] for ln in message.splitlines()
                     if ln.strip().startswith("- "))
    return Recompile(function, location, failures)


class _RecordCollector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[tuple[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        kind = next((a for a in _ARTIFACTS if record.name.endswith("__" + a)), None)
        try:
            if kind is not None:
                self.records.append((kind, record.getMessage()))
            elif isinstance(record.msg, str) and record.msg.startswith(_LIMIT_PREFIX):
                self.records.append(("limit", record.getMessage()))
        except Exception:  # a record that cannot format must not break the user's code
            pass


class _DropArtifacts(logging.Filter):
    def __init__(self, artifacts: set[str]) -> None:
        super().__init__()
        self.suffixes = tuple("__" + a for a in artifacts)

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.name.endswith(self.suffixes)


def _counters_snapshot() -> dict[str, Counter]:
    utils = sys.modules.get("torch._dynamo.utils")
    if utils is None:
        return {}
    snap = {k: Counter(v) for k, v in utils.counters.items()}
    times = getattr(utils, "compilation_time_metrics", {}).get("_compile.compile_inner", [])
    snap["_workbench"] = Counter({"compile_s": sum(times)})
    return snap


def _delta(before: dict[str, Counter], after: dict[str, Counter], group: str, key: str) -> int:
    return int(after.get(group, Counter()).get(key, 0) - before.get(group, Counter()).get(key, 0))


class CompileWatcher:
    """Context manager: collects CompileDiagnostics over the block; ``.result`` afterwards."""

    def __init__(self) -> None:
        self.result = CompileDiagnostics()
        self._collector = _RecordCollector()
        self._filters: list[tuple[logging.Handler, logging.Filter]] = []
        self._saved_state: tuple[dict[str, Any], set[str]] | None = None
        self._added: list[str] = []
        self._capture_note = ""
        self._before: dict[str, Counter] = {}

    def __enter__(self) -> "CompileWatcher":
        self._before = _counters_snapshot()
        try:
            self._enable_logs()
        except Exception as exc:  # private torch API moved: keep counts, say reasons are missing
            self._restore_logs()
            self._capture_note = f"graph-break/recompile reasons not captured: {exc!r}"
        return self

    def _enable_logs(self) -> None:
        import torch._logging._internal as internal

        state = internal.log_state
        self._added = [a for a in _ARTIFACTS if a not in state.artifact_names]
        for name in self._added:  # loggers created later read this when configured
            state.enable_artifact(name)
        self._saved_state = ({}, set(self._added))
        _reconfigure_artifact_loggers(internal, set(_ARTIFACTS))
        logger = logging.getLogger(_DYNAMO_LOGGER)
        if self._added:
            for handler in logger.handlers:
                flt = _DropArtifacts(set(self._added))
                handler.addFilter(flt)
                self._filters.append((handler, flt))
        logger.addHandler(self._collector)

    def _restore_logs(self) -> None:
        logging.getLogger(_DYNAMO_LOGGER).removeHandler(self._collector)
        for handler, flt in self._filters:
            handler.removeFilter(flt)
        self._filters.clear()
        if self._saved_state is None:
            return
        import torch._logging._internal as internal

        added = self._saved_state[1]
        internal.log_state.artifact_names.difference_update(added)
        _reconfigure_artifact_loggers(internal, added)
        self._saved_state = None

    def __exit__(self, *exc: Any) -> None:
        try:
            self._restore_logs()
        finally:
            self.result = self._summarise()

    def _summarise(self) -> CompileDiagnostics:
        after = _counters_snapshot()
        breaks: dict[tuple[str, str], list] = {}
        recompiles, limit_messages = [], []
        for kind, message in self._collector.records:
            if kind == "limit":
                limit_messages.append(message.splitlines()[0])
                continue
            if kind == "recompiles":
                recompiles.append(parse_recompile(message))
                continue
            reason, location = parse_graph_break(message)
            entry = breaks.setdefault((reason, location), [0, message[:_DETAIL_CHARS]])
            entry[0] += 1
        return CompileDiagnostics(
            dynamo_loaded="torch._dynamo" in sys.modules,
            graph_count=_delta(self._before, after, "stats", "unique_graphs"),
            frames_compiled=_delta(self._before, after, "frames", "ok"),
            graph_breaks=tuple(GraphBreak(r, loc, n, d) for (r, loc), (n, d) in breaks.items()),
            recompiles=tuple(recompiles),
            compile_time_ms=1e3 * float(after.get("_workbench", Counter()).get("compile_s", 0.0)
                                        - self._before.get("_workbench", Counter()).get("compile_s", 0.0)),
            recompile_limit_hit=bool(limit_messages),
            note="; ".join(limit_messages + ([self._capture_note] if self._capture_note else [])),
        )


def _reconfigure_artifact_loggers(internal: Any, artifacts: set[str]) -> None:
    """Re-derive level/propagation of existing artifact loggers from torch's log state.

    Mirrors what ``torch._logging._internal._init_logs`` does for artifact loggers, for only
    the named artifacts, so that no other logging setting is touched.
    """
    for qname in internal.log_registry.get_artifact_log_qnames():
        log = logging.getLogger(qname)
        if getattr(log, "artifact_name", None) in artifacts:
            log.setLevel(logging.NOTSET)
            log.propagate = True
            internal.configure_artifact_log(log)
