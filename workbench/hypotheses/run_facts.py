"""Facts of one ``ProfileRun``: its timing, cold call, compile diagnostics, and its trace.

Reads the run through attributes (``timing``, ``cold_ms``, ``compile``, ``environment``,
``trace``) so that a reloaded run (``wb.load_run``) is judged the same as a live one.
Compile diagnostics may be an object or a dict; missing fields mean "not recorded".
"""
from __future__ import annotations

from functools import cached_property
from typing import Any

import pandas as pd

from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.registry import NotJudged


def field_of(obj: Any, name: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


class RunFacts:
    def __init__(self, run: Any):
        self.run = run
        self.timing = field_of(run, "timing")
        self.cold_ms = field_of(run, "cold_ms")
        self.compile = field_of(run, "compile")
        self.environment = field_of(run, "environment", {}) or {}
        self.name = field_of(run, "name", "") or ""

    def require_timing(self):
        if self.timing is None:
            raise NotJudged("the run has no timing samples")
        return self.timing

    def require_compile(self):
        used = field_of(self.compile, "compiled_anything", None)
        if used is None:
            used = field_of(self.compile, "enabled", True)
        if self.compile is None or not used:
            raise NotJudged("the run did not use torch.compile (no compile diagnostics)")
        return self.compile

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
        """Every call the profile made (cold + warm-up + timed): one-time costs are spread over these
        when ranked against per-call costs."""
        warmup = field_of(self.run, "warmup", 0) or 0
        repeat = field_of(self.run, "repeat", None) or (self.timing.n if self.timing is not None else 0)
        return max(1, 1 + int(warmup) + int(repeat))

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
