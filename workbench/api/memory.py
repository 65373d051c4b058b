"""``run.memory``: the run's memory statistics (a dict, as saved in its bundle) and, over its trace, the
memory analyses (``workbench.analysis.memory``) with the tensors the capture named (``memory=True``)."""

from __future__ import annotations

from functools import cached_property
from typing import Any

import pandas as pd

from workbench.analysis import memory as memory_analysis


class RunMemory(dict):
    """The run's memory record (``peak_allocated_bytes`` on CUDA, ``recording_overhead``, ``roles``, ...),
    plus ``.timeline``, ``.peak``, ``.growth``, ``.events`` over the run's trace (None without one)."""

    def __init__(self, record: dict[str, Any] | None, trace: Any = None) -> None:
        super().__init__(record or {})
        self._trace = trace

    @property
    def recorded(self) -> bool:
        """Whether the run was profiled with ``memory=True``."""
        return bool(self.get("recorded"))

    @property
    def roles(self) -> pd.DataFrame | None:
        return memory_analysis.roles_frame(self.get("roles"))

    @cached_property
    def events(self) -> pd.DataFrame | None:
        if self._trace is None:
            return None
        return memory_analysis.memory_events(self._trace)

    @cached_property
    def timeline(self) -> memory_analysis.MemoryTimeline | None:
        return None if self._trace is None else memory_analysis.memory_timeline(self._trace, events=self.events)

    @cached_property
    def peak(self) -> memory_analysis.MemoryPeak | None:
        return (
            None
            if self._trace is None
            else memory_analysis.memory_peak(self._trace, roles=self.roles, events=self.events)
        )

    @cached_property
    def growth(self) -> memory_analysis.MemoryGrowth | None:
        return None if self._trace is None else memory_analysis.memory_growth(self._trace, events=self.events)

    @cached_property
    def hypotheses(self) -> list:
        """The memory rules' hypotheses on the run's trace, most specific first (``workbench.hypotheses.rules.
        memory``): a leak, a temporary at the peak, activations dominating, fragmentation; [] without a trace."""
        if self._trace is None:
            return []
        from workbench.hypotheses.rules.memory import diagnose_memory

        return diagnose_memory(self._trace)[0]

    @property
    def recording_overhead(self) -> float | None:
        """Traced pass with allocator events / the same pass without (1.3: 30 % slower); None unless measured."""
        value = self.get("recording_overhead")
        return float(value) if isinstance(value, (int, float)) else None

    def summary(self) -> str:
        """One line: the peak, where, and what recording cost."""
        if self.peak is None or not self.peak.device:
            return "memory: no allocator events in the trace"
        p = self.peak
        top = p.top(1)
        where = ""
        if len(top):
            row = top.iloc[0]
            what = row["module"] or row["top_op"] or row["category"]
            where = f"; largest live block {int(row['bytes']):,} B ({row['category']}, {what})"
        cost = self.recording_overhead
        cost_text = f"; recording memory cost the traced pass x{cost:.2f}" if cost else ""
        return f"memory: peak {p.peak_bytes:,} B on {p.device} at {p.peak_ts_us / 1e3:.3f} ms{where}{cost_text}"

    def __reduce__(self):  # pickles and copies as the plain record
        return (dict, (dict(self),))
