"""The types of the facts run rules read: the clean timing and torch.compile's record, typed once.

A run reaches the rules live (``ProfileRun``), reloaded from a bundle, or hand-built in a test (a
``SimpleNamespace``, a dict of compile diagnostics written before a field existed). ``RunFacts`` reads it
through these types, so that a rule reads ``diag.graph_break_count`` (checked by mypy) rather than
``field_of(diag, "graph_break_count", 0)`` (a string that can be misspelt, a default repeated per rule):

- ``Timing``: what a rule reads of a ``workbench.measurement.Measurement`` (a protocol: the measurement
  itself satisfies it; nothing is copied);
- ``CompileFacts``: torch.compile's record (``capture.compile_diag.CompileDiagnostics``, or its dict)
  read once into a frozen value, every field with the value "not recorded" has (``compile_facts``).
  The hypotheses layer does not import capture: the record is read by its field names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


def field_of(obj: Any, name: str, default: Any = None) -> Any:
    """``obj``'s field ``name`` whether it is an object or a dict (``default`` where it has none)."""
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


class Timing(Protocol):
    """The clean timing of a run, as rules read it (``Measurement``)."""

    @property
    def samples_ms(self) -> tuple[float, ...]: ...
    @property
    def calls_per_sample(self) -> int: ...
    @property
    def timer_resolution_ms(self) -> float: ...
    @property
    def n(self) -> int: ...
    @property
    def median_ms(self) -> float: ...
    @property
    def min_ms(self) -> float: ...
    @property
    def max_ms(self) -> float: ...
    @property
    def p95_ms(self) -> float: ...
    @property
    def iqr_ms(self) -> float: ...
    @property
    def relative_iqr(self) -> float: ...
    def median_ci_ms(self, confidence: float = 0.95) -> tuple[float, float]: ...


@dataclass(frozen=True)
class BreakFact:
    reason: str
    location: str  # "file:line", "" where dynamo did not say
    count: int
    source: str  # where it was found ("profile": logged during it; the trace's or the cache's names)


@dataclass(frozen=True)
class RecompileFact:
    function: str
    guard_failures: tuple[str, ...]
    on_first_call: bool
    text: str = ""  # an older record's entry, a plain text (then the fields above are empty)


@dataclass(frozen=True)
class CompileFacts:
    """torch.compile's record of one profile (see ``CompileDiagnostics`` for each field's meaning)."""

    graph_count: int
    frames_compiled: int
    graph_breaks: tuple[BreakFact, ...]
    recompiles: tuple[RecompileFact, ...]
    compile_time_ms: float
    recompile_limit_hit: bool
    note: str
    cudagraph_skip_reasons: tuple[str, ...]
    fallback_kernels: tuple[str, ...]
    steady_compile_time_ms: float | None  # None: the first call was not marked (an older record)
    graphs_per_call: float | None  # None: no compiled code found
    structure_source: str  # "trace", "dynamo cache" or ""
    graph_break_count: int  # breaks, counted as the record counts them
    recompile_count: int
    steady_recompile_count: int | None  # None: not recorded (then every recompile counts as steady)
    break_reasons: tuple[str, ...] = ()  # an older or hand-written record's plain list of break reasons
    recompile_reasons: tuple[str, ...] = ()  # the same for recompiles


def _int(value: Any, default: int = 0) -> int:
    return int(value) if value else default


def compile_facts(diag: Any) -> CompileFacts:
    """The compile record ``diag`` (an object or a dict; a field it lacks reads as not recorded)."""
    breaks = tuple(
        BreakFact(
            str(field_of(b, "reason", "")),
            str(field_of(b, "location", "") or ""),
            int(field_of(b, "count", 1) if field_of(b, "count", 1) is not None else 1),
            str(field_of(b, "source", "profile") or "profile"),
        )
        for b in field_of(diag, "graph_breaks", None) or ()
    )
    recompiles = tuple(
        RecompileFact("", (), False, r)
        if isinstance(r, str)
        else RecompileFact(
            str(field_of(r, "function", "")),
            tuple(str(g) for g in field_of(r, "guard_failures", ()) or ()),
            bool(field_of(r, "on_first_call", False)),
        )
        for r in field_of(diag, "recompiles", None) or ()
    )
    steady_time = field_of(diag, "steady_compile_time_ms", None)
    per_call = field_of(diag, "graphs_per_call", None)
    steady = field_of(diag, "steady_recompile_count", None)
    return CompileFacts(
        graph_count=_int(field_of(diag, "graph_count", 0)),
        frames_compiled=_int(field_of(diag, "frames_compiled", 0)),
        graph_breaks=breaks,
        recompiles=recompiles,
        compile_time_ms=float(field_of(diag, "compile_time_ms", 0.0) or 0.0),
        recompile_limit_hit=bool(field_of(diag, "recompile_limit_hit", False)),
        note=str(field_of(diag, "note", "") or ""),
        cudagraph_skip_reasons=tuple(str(r) for r in field_of(diag, "cudagraph_skip_reasons", ()) or ()),
        fallback_kernels=tuple(str(k) for k in field_of(diag, "fallback_kernels", ()) or ()),
        steady_compile_time_ms=float(steady_time) if steady_time is not None else None,
        graphs_per_call=float(per_call) if per_call is not None else None,
        structure_source=str(field_of(diag, "structure_source", "") or ""),
        graph_break_count=_int(field_of(diag, "graph_break_count", 0)),
        recompile_count=_int(field_of(diag, "recompile_count", 0)),
        steady_recompile_count=int(steady) if steady is not None else None,
        break_reasons=tuple(str(v) for v in field_of(diag, "break_reasons", ()) or ()),
        recompile_reasons=tuple(str(v) for v in field_of(diag, "recompile_reasons", ()) or ()),
    )
