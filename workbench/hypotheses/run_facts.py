"""Facts of one ``ProfileRun``: its timing, cold call, compile diagnostics, and its trace.

Reads the run through attributes (``timing``, ``cold_ms``, ``compile``, ``environment``,
``trace``) so that a reloaded run (``wb.load_run``) is judged the same as a live one.
Compile diagnostics may be an object or a dict; missing fields mean "not recorded".

The timing is the clean one (no profiler running); the trace comes from a separate, shorter
traced pass. ``trace_scale`` turns the trace's per-call times into clean per-call times
(clean median / traced median), so that stakes read from the trace keep the trace's shares and
take their magnitude from the clean timing. One-time costs are spread over
``one_time_cost_calls`` calls when ranked against per-call costs (a stated default, or the
run's ``expected_calls`` where the user gave one).
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import pandas as pd

from workbench.hypotheses.fact_types import CompileFacts, Timing, compile_facts, field_of
from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.registry import NotJudged

ONE_TIME_COST_CALLS = 100  # calls a one-time cost is spread over when ranked, unless the run says


class RunFacts:
    """What run rules read of one run (typed: ``fact_types``)."""

    def __init__(self, run: Any):
        self.run = run
        self.timing: Timing | None = field_of(run, "timing")
        cold = field_of(run, "cold_ms")
        self.cold_ms: float | None = float(cold) if cold is not None else None
        self.compile: Any = field_of(run, "compile")  # the record as given (``compile_record``: typed)
        self.environment: dict[str, Any] = field_of(run, "environment", {}) or {}
        self.name: str = field_of(run, "name", "") or ""

    @cached_property
    def compile_record(self) -> CompileFacts | None:
        """torch.compile's record, typed (None where the run has none)."""
        return compile_facts(self.compile) if self.compile is not None else None

    def require_timing(self) -> Timing:
        if self.timing is None:
            raise NotJudged("the run has no timing samples")
        return self.timing

    def require_compile(self) -> CompileFacts:
        """The compile diagnostics of a run that used torch.compile. Use is read from everything dynamo
        recorded, not from compiled graphs only: a graph break inside a loop can make dynamo skip the
        whole frame (no graph compiled), yet the breaks, recompiles and compile time it recorded show
        that torch.compile ran. A function compiled before the profile compiles nothing in it: the
        compiled code it ran (``graphs_per_call``, ``compiled_frames``) shows the use."""
        if self.compile_record is None or not self.used_compile:
            raise NotJudged(
                "the run did not use torch.compile (no compiled graph, graph break, recompile or compile time recorded)"
            )
        return self.compile_record

    @property
    def used_compile(self) -> bool:
        diag = self.compile
        if diag is None:
            return False
        recorded = (
            field_of(diag, "compiled_anything", False),
            field_of(diag, "graph_break_count", 0),
            field_of(diag, "graph_breaks", ()),
            field_of(diag, "break_reasons", ()),
            field_of(diag, "recompile_count", 0),
            field_of(diag, "recompiles", ()),
            field_of(diag, "recompile_limit_hit", False),
            field_of(diag, "compile_time_ms", 0.0),
            field_of(diag, "frames_compiled", 0),
            field_of(diag, "graph_count", 0),
            # compiled code the profile ran, whenever it was compiled (the trace's compiled regions)
            field_of(diag, "graphs_per_call", 0),
            field_of(diag, "compiled_frames", ()),
        )
        if any(bool(v) for v in recorded):
            return True
        # an older or hand-written record with none of those fields: its own "enabled" flag
        return field_of(diag, "compiled_anything", None) is None and bool(field_of(diag, "enabled", True))

    @cached_property
    def trace_facts(self) -> TraceFacts:
        trace = field_of(self.run, "trace")
        if trace is None:
            raise NotJudged("the run was profiled without a trace (trace=False)")
        from workbench.hypotheses.roofline import cpu_ceiling_from

        has_gpu = not getattr(trace, "kernels", pd.DataFrame()).empty
        return TraceFacts(trace, source="run trace", ceiling=None if has_gpu else cpu_ceiling_from(self.environment))

    @property
    def calls_profiled(self) -> int:
        """Every call the profile made (cold + warm-up + clean timed + traced)."""
        warmup = field_of(self.run, "warmup", 0) or 0
        repeat = field_of(self.run, "repeat", None) or (self.timing.n if self.timing is not None else 0)
        traced = field_of(self.run, "traced_timing")
        extra = traced.n if traced is not None and field_of(self.run, "trace_repeat") else 0
        return max(1, 1 + int(warmup) + int(repeat) + int(extra))

    @property
    def one_time_cost_calls(self) -> int:
        """Calls a one-time cost (cold start) is spread over when ranked against per-call costs:
        the run's ``expected_calls`` where given, else ``ONE_TIME_COST_CALLS``."""
        stated = field_of(self.run, "expected_calls")
        try:
            return max(1, int(stated)) if stated else ONE_TIME_COST_CALLS
        except (TypeError, ValueError):
            return ONE_TIME_COST_CALLS

    @property
    def one_time_basis(self) -> str:
        """The basis every one-time cost (cold start, compile, autotune) is ranked on, in words."""
        n = self.one_time_cost_calls
        if field_of(self.run, "expected_calls"):
            return f"spread over {n} calls (expected_calls={n}, as stated)"
        return f"spread over {n} calls (the stated default; pass expected_calls= to give yours)"

    @property
    def clean_ms(self) -> float | None:
        """The clean median time of one call (no profiler running), None without timing."""
        if self.timing is None:
            return None
        return float(self.timing.median_ms) / max(1, int(field_of(self.timing, "calls_per_sample", 1) or 1))

    @property
    def trace_scale(self) -> float:
        """Clean per-call time / traced per-call time: 1.0 where the run has no separate traced
        pass (an older bundle, whose trace covered the timed calls themselves)."""
        own = field_of(self.run, "trace_scale")  # a run record knows its trace's call spans
        if isinstance(own, (int, float)) and own > 0:
            return float(own)
        traced = field_of(self.run, "traced_timing")
        clean = self.clean_ms
        if traced is None or not clean or clean <= 0:
            return 1.0
        traced_ms = float(traced.median_ms)
        return clean / traced_ms if traced_ms > 0 else 1.0

    @property
    def calls_in_trace(self) -> int:
        """How many calls of the profiled function the trace covers (>= 1)."""
        trace = field_of(self.run, "trace")
        n = field_of(trace, "n_calls") or field_of(self.run, "traced_calls")
        if n:
            return int(n)
        try:
            return max(1, self.trace_facts.n_steps)
        except NotJudged:
            return 1
