"""torch.compile diagnostics seen while profiling: graphs, graph breaks, recompiles, CUDA-graph
skips and inductor fallback kernels, with reasons.

Counts come from ``torch._dynamo.utils.counters`` (difference over the profiled span; dynamo is
not imported by us: if the profiled code never loads it, nothing was compiled). Reasons come from
log artifacts switched on for the span (``graph_breaks``, ``recompiles``, ``perf_hints``,
``output_code``; see ``compile_logs``) and from the ``cudagraphs`` artifact, which torch logs
at WARNING without being asked. The previous logging state is restored afterwards, and records
are kept out of the cell's output unless the user had switched those artifacts on themselves.

CUDA-graph skips: inductor logs "skipping cudagraphs due to ..." on
``torch._inductor.cudagraph_utils.__cudagraphs`` only when the compiled graph has CUDA tensors;
for a graph without any (CPU inputs) it bumps ``counters["inductor"]["cudagraph_skips"]`` and
logs nothing (``output_code.CompiledFxGraph``), so skips the counter shows but no record
explains get a stated reason of that kind.
"""

from __future__ import annotations

import logging
import re
import sys
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any, Iterable

from workbench.capture.compile_logs import ArtifactCapture, RecordCollector, artifact_of

_WATCHED_LOGGERS = ("torch._dynamo", "torch._inductor")
_ARTIFACTS = ("graph_breaks", "recompiles", "perf_hints", "output_code")
_LOCATION = re.compile(r"in user code at (\S+:\d+)")
_RECOMPILING = re.compile(r"Recompiling function (\S+) in (\S+:\d+)")
_DETAIL_CHARS = 2000
_LIMIT_PREFIX = "torch._dynamo hit config."  # convert_frame's warning: fell back to eager
_FALLBACK_HINT = "Using FallbackKernel: "  # GraphLowering.warn_fallback, once per op per graph
_OUTPUT_CODE = "Output code: "  # the wrapper, logged on fresh compiles and cache hits
# A wrapper statement calling an ATen/prims op directly: inductor's FallbackKernel codegen.
# Intended extern kernels are called as ``extern_kernels.mm(...)`` and do not match.
_FALLBACK_CALL = re.compile(
    r"^[ \t]*(?:\w+(?:[ \t]*,[ \t]*\w+)*[ \t]*=[ \t]*)?torch\.ops\.((?:aten|prims)\.\w+\.\w+)\("
)
_NOT_A_SKIP = "CUDAGraph supports dynamic shapes"  # the cudagraphs artifact's one non-skip warning
SILENT_CUDAGRAPH_SKIP = (
    "skipping cudagraphs: the compiled graph has no CUDA tensors (inductor counts "
    "this skip in counters['inductor']['cudagraph_skips'] without logging a reason)"
)


BREAK_LOGGED = "profile"  # logged by dynamo while it compiled during the profile
BREAK_IN_TRACE = "trace"  # a resume region the traced pass ran (``compiled_regions``)
BREAK_IN_CACHE = "dynamo cache"  # a resume frame dynamo holds compiled for the function


@dataclass(frozen=True)
class GraphBreak:
    """One break site. ``count``: times logged for ``source="profile"`` (once per compile of the
    frame); times met per call for ``"trace"``; resume frames compiled for ``"dynamo cache"``."""

    reason: str
    location: str  # "file:line" of the user code, "" when dynamo did not say
    count: int
    detail: str  # dynamo's full message (truncated), for the curious
    source: str = BREAK_LOGGED  # where it was found: BREAK_LOGGED, BREAK_IN_TRACE or BREAK_IN_CACHE

    def to_dict(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "location": self.location,
            "count": self.count,
            "detail": self.detail,
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "GraphBreak":
        return cls(
            d["reason"], d.get("location", ""), int(d["count"]), d.get("detail", ""), d.get("source", BREAK_LOGGED)
        )


@dataclass(frozen=True)
class Recompile:
    """One recompile dynamo logged. ``on_first_call``: it happened inside the first (cold) call,
    e.g. a resume function after a graph break met again with another stack shape in the same
    call: a one-time cost of the cold call, not a steady-state recompile. False where the run did
    not mark its first call (``CompileDiagnostics.first_call_marked``)."""

    function: str
    location: str
    guard_failures: tuple[str, ...]  # e.g. "tensor 'x' size mismatch at index 0. expected 8, actual 16"
    on_first_call: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "function": self.function,
            "location": self.location,
            "guard_failures": list(self.guard_failures),
            "on_first_call": self.on_first_call,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Recompile":
        return cls(
            d["function"],
            d.get("location", ""),
            tuple(d.get("guard_failures", ())),
            bool(d.get("on_first_call", False)),
        )


@dataclass(frozen=True)
class CompileDiagnostics:
    """What torch.compile did during one profile (cold call, warm-up and repeats).

    ``cudagraph_skip_reasons``: one entry per CUDA-graph skip inductor counted in the span
    (mode="reduce-overhead" or cudagraph backends): the logged reason, or
    ``SILENT_CUDAGRAPH_SKIP`` for a skip inductor counted without logging (graphs without CUDA
    tensors).
    ``fallback_kernels``: distinct ops inductor left to their eager kernel inside a compiled
    graph (``ir.FallbackKernel``: implicit fallbacks for ops without a lowering and explicit
    ``make_fallback`` ops such as fft, linalg, histc), named like "aten.histc.default". From
    inductor's "Using FallbackKernel" perf hint on a fresh compile, and from direct
    ``torch.ops.aten``/``torch.ops.prims`` calls in the generated wrapper, which also covers FX
    graph cache hits. Extern kernels inductor calls on purpose (``extern_kernels.mm``/addmm/bmm,
    mkldnn convolutions) are not fallbacks and are not listed. Custom-op fallbacks on a cache hit
    and fallbacks in a C++ wrapper on a cache hit are not seen.

    The first call compiles every frame it reaches (with graph breaks: the resume functions too,
    and a resume function met again with another stack shape inside that call recompiles there),
    so its compiles are one-time. ``first_call_marked``: capture marked the end of the first call
    (``CompileWatcher.first_call_done``); then ``steady_frames_compiled`` and
    ``steady_compile_time_ms`` are the frames converted and the compile time after it (warm-up,
    timed and traced calls), and each ``Recompile`` says whether it was ``on_first_call``. Runs
    saved before this was recorded load with ``first_call_marked=False`` and the steady fields
    None: their recompiles cannot be split and all count as steady-state ones.

    Compile facts that do not depend on when the compile happened (``compiled_regions``): a function
    compiled and called before the profile compiles nothing in it, so the counters and logs above
    show none of its graphs or breaks. ``graphs_per_call`` / ``breaks_per_call``: with
    ``structure_source="trace"``, the compiled regions holding a graph and the resume regions (one
    per break) each traced call ran, the median over the traced calls; with ``"dynamo cache"`` (a
    run without a trace), the graphs and resume frames dynamo holds compiled for the profiled
    function, every branch and guard set included; None where neither found compiled code. Breaks
    found there and not logged during the profile are in ``graph_breaks`` with their ``source``;
    ``compiled_frames`` names the frames seen. Runs saved before load with these empty.
    """

    dynamo_loaded: bool = False
    graph_count: int = 0  # new graphs compiled (counters["stats"]["unique_graphs"])
    frames_compiled: int = 0  # frames dynamo converted (counters["frames"]["ok"])
    graph_breaks: tuple[GraphBreak, ...] = ()
    recompiles: tuple[Recompile, ...] = ()
    compile_time_ms: float = 0.0  # time in dynamo's compile (tracing + backend), this span
    recompile_limit_hit: bool = False
    note: str = ""
    cudagraph_skip_reasons: tuple[str, ...] = ()
    fallback_kernels: tuple[str, ...] = ()
    first_call_marked: bool = False
    steady_frames_compiled: int | None = None  # frames converted after the first call
    steady_compile_time_ms: float | None = None  # compile time after the first call
    graphs_per_call: float | None = None  # graphs a call runs as (see structure_source)
    breaks_per_call: float | None = None  # graph breaks a call meets (see structure_source)
    structure_source: str = ""  # "trace", "dynamo cache", or "" (not found)
    compiled_frames: tuple[str, ...] = ()  # "<compile id> <name> at <file:line> (<ops>)"

    @property
    def graph_break_count(self) -> int:
        """Breaks logged during the profile, and those found in the trace or cache that were not."""
        return sum(b.count for b in self.graph_breaks)

    @property
    def ran_compiled_code(self) -> bool:
        """Compiled code ran in the profile (or is cached for the function), whenever it was compiled."""
        return bool(self.graphs_per_call) or bool(self.compiled_frames)

    @property
    def recompile_count(self) -> int:
        """Every recompile logged, the first call's included."""
        return len(self.recompiles)

    @property
    def steady_recompile_count(self) -> int:
        """Compiles that repeat in the steady state (after the first call): the recompiles logged
        there, or the frames converted there where more (a compile whose log record was not
        captured). Without a marked first call: every recompile logged."""
        logged = sum(1 for r in self.recompiles if not r.on_first_call)
        return max(logged, self.steady_frames_compiled or 0)

    @property
    def compiled_anything(self) -> bool:
        return self.graph_count > 0 or self.frames_compiled > 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "dynamo_loaded": self.dynamo_loaded,
            "graph_count": self.graph_count,
            "frames_compiled": self.frames_compiled,
            "graph_breaks": [b.to_dict() for b in self.graph_breaks],
            "recompiles": [r.to_dict() for r in self.recompiles],
            "compile_time_ms": self.compile_time_ms,
            "recompile_limit_hit": self.recompile_limit_hit,
            "note": self.note,
            "cudagraph_skip_reasons": list(self.cudagraph_skip_reasons),
            "fallback_kernels": list(self.fallback_kernels),
            "first_call_marked": self.first_call_marked,
            "steady_frames_compiled": self.steady_frames_compiled,
            "steady_compile_time_ms": self.steady_compile_time_ms,
            "graphs_per_call": self.graphs_per_call,
            "breaks_per_call": self.breaks_per_call,
            "structure_source": self.structure_source,
            "compiled_frames": list(self.compiled_frames),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CompileDiagnostics":
        """Bundles written before a field existed load with that field empty."""
        return cls(
            bool(d.get("dynamo_loaded", False)),
            int(d.get("graph_count", 0)),
            int(d.get("frames_compiled", 0)),
            tuple(GraphBreak.from_dict(b) for b in d.get("graph_breaks", ())),
            tuple(Recompile.from_dict(r) for r in d.get("recompiles", ())),
            float(d.get("compile_time_ms", 0.0)),
            bool(d.get("recompile_limit_hit", False)),
            d.get("note", ""),
            tuple(str(r) for r in d.get("cudagraph_skip_reasons", ())),
            tuple(str(k) for k in d.get("fallback_kernels", ())),
            bool(d.get("first_call_marked", False)),
            _int_or_none(d.get("steady_frames_compiled")),
            _float_or_none(d.get("steady_compile_time_ms")),
            _float_or_none(d.get("graphs_per_call")),
            _float_or_none(d.get("breaks_per_call")),
            str(d.get("structure_source", "") or ""),
            tuple(str(f) for f in d.get("compiled_frames", ()) or ()),
        )


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


def parse_graph_break(message: str) -> tuple[str, str]:
    """(reason, location) from a ``graph_breaks`` log message."""
    location_match = _LOCATION.search(message)
    location = location_match.group(1) if location_match else ""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith("Explanation:"):
            return ln[len("Explanation:") :].strip(), location
    for ln in lines:
        if ln.startswith("Graph Break Reason:"):
            return ln[len("Graph Break Reason:") :].strip(), location
    return (lines[0] if lines else message), location


def parse_recompile(message: str) -> Recompile:
    match = _RECOMPILING.search(message)
    function, location = (match.group(1), match.group(2)) if match else ("?", "")
    failures = tuple(ln.strip()[2:].split(": ", 1)[-1] for ln in message.splitlines() if ln.strip().startswith("- "))
    return Recompile(function, location, failures)


def fallback_ops_in_code(code: str) -> list[str]:
    """ATen/prims ops an inductor Python wrapper calls directly (its fallback kernels), in order."""
    calls = (_FALLBACK_CALL.match(line) for line in code.splitlines() if "torch.ops." in line)
    return list(dict.fromkeys(m.group(1) for m in calls if m))


def _op_name(kernel_name: str) -> str:
    return kernel_name.strip().removeprefix("torch.ops.")


def classify_record(record: logging.LogRecord) -> Iterable[tuple[str, str]]:
    """``(kind, text)`` items a dynamo/inductor log record contributes to the diagnostics."""
    artifact = artifact_of(record)
    if artifact in ("graph_breaks", "recompiles"):
        return [(artifact, record.getMessage())]
    if artifact == "cudagraphs":
        message = record.getMessage()
        is_skip = record.levelno >= logging.WARNING and not message.startswith(_NOT_A_SKIP)
        return [("cudagraph_skip", message[:_DETAIL_CHARS])] if is_skip else []
    if artifact == "perf_hints" and str(record.msg).startswith(_FALLBACK_HINT):
        return [("fallback", _op_name(record.getMessage()[len(_FALLBACK_HINT) :]))]
    if artifact == "output_code" and str(record.msg).startswith(_OUTPUT_CODE):
        return [("fallback", name) for name in fallback_ops_in_code(record.getMessage())]
    if isinstance(record.msg, str) and record.msg.startswith(_LIMIT_PREFIX):
        return [("limit", record.getMessage())]
    return []


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


def _skip_reasons(logged: list[str], skips_counted: int) -> tuple[str, ...]:
    """Logged reasons, plus the stated reason for each skip inductor counted without logging."""
    silent = SILENT_CUDAGRAPH_SKIP
    config = sys.modules.get("torch._inductor.config")
    if getattr(config, "cudagraph_policy", None) is not None:  # the other silent path
        silent += ", or config.cudagraph_policy declined to wrap it"
    return tuple(logged) + (silent,) * max(0, skips_counted - len(logged))


class CompileWatcher:
    """Context manager: collects CompileDiagnostics over the block; ``.result`` afterwards.

    ``first_call_done()``, called inside the block after the first call, splits what follows
    (the steady state) from that call's one-time compiles."""

    def __init__(self) -> None:
        self.result = CompileDiagnostics()
        self._collector = RecordCollector(classify_record)
        self._capture = ArtifactCapture(_ARTIFACTS, _WATCHED_LOGGERS, self._collector)
        self._capture_note = ""
        self._before: dict[str, Counter] = {}
        self._after_first: dict[str, Counter] | None = None
        self._first_call_records = 0

    def first_call_done(self) -> None:
        """Mark the end of the first call: compiles after this are steady-state ones."""
        self._after_first = _counters_snapshot()
        self._first_call_records = len(self._collector.records)

    def __enter__(self) -> "CompileWatcher":
        self._before = _counters_snapshot()
        try:
            self._capture.enable()
        except Exception as exc:  # private torch API moved: keep counts, say reasons are missing
            self._capture.restore()
            self._capture_note = f"torch.compile log reasons not captured: {exc!r}"
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._capture.restore()
        finally:
            self.result = self._summarise()

    def _records(self, kind: str) -> list[str]:
        return [text for k, text in self._collector.records if k == kind]

    def _recompiles(self) -> tuple[Recompile, ...]:
        marked = self._after_first is not None
        return tuple(
            replace(parse_recompile(text), on_first_call=marked and i < self._first_call_records)
            for i, (kind, text) in enumerate(self._collector.records)
            if kind == "recompiles"
        )

    def _steady(self, after: dict[str, Counter]) -> tuple[int | None, float | None]:
        """Frames converted and compile time (ms) after the first call; None where it was not marked."""
        if self._after_first is None:
            return None, None
        first = self._after_first
        compile_s = after.get("_workbench", Counter()).get("compile_s", 0.0) - first.get("_workbench", Counter()).get(
            "compile_s", 0.0
        )
        return _delta(first, after, "frames", "ok"), 1e3 * float(compile_s)

    def _summarise(self) -> CompileDiagnostics:
        after = _counters_snapshot()
        breaks: dict[tuple[str, str], list] = {}
        for message in self._records("graph_breaks"):
            reason, location = parse_graph_break(message)
            entry = breaks.setdefault((reason, location), [0, message[:_DETAIL_CHARS]])
            entry[0] += 1
        limit_messages = [m.splitlines()[0] for m in self._records("limit")]
        steady_frames, steady_compile_ms = self._steady(after)
        compile_s = after.get("_workbench", Counter()).get("compile_s", 0.0) - self._before.get(
            "_workbench", Counter()
        ).get("compile_s", 0.0)
        return CompileDiagnostics(
            dynamo_loaded="torch._dynamo" in sys.modules,
            graph_count=_delta(self._before, after, "stats", "unique_graphs"),
            frames_compiled=_delta(self._before, after, "frames", "ok"),
            graph_breaks=tuple(GraphBreak(r, loc, n, d) for (r, loc), (n, d) in breaks.items()),
            recompiles=self._recompiles(),
            compile_time_ms=1e3 * float(compile_s),
            recompile_limit_hit=bool(limit_messages),
            note="; ".join(limit_messages + ([self._capture_note] if self._capture_note else [])),
            cudagraph_skip_reasons=_skip_reasons(
                self._records("cudagraph_skip"), _delta(self._before, after, "inductor", "cudagraph_skips")
            ),
            fallback_kernels=tuple(dict.fromkeys(self._records("fallback"))),
            first_call_marked=self._after_first is not None,
            steady_frames_compiled=steady_frames,
            steady_compile_time_ms=steady_compile_ms,
        )
