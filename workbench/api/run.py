"""ProfileRun: what ``wb.profile`` / ``%%gpuprofile`` return and ``wb.load_run`` reads back.

The face object of a profile (DESIGN.md's public names): the capture layer's ``RunRecord`` (clean
timing, cold call, traced pass, health, environment, trace data) plus what the layers above
capture give it: ``run.trace`` (the facade ``Trace``), ``run.hypotheses`` (ranked,
``workbench.hypotheses.diagnose``), ``run.history`` (this cell's earlier runs, set by whoever
profiles), the per-call op and kernel tables, charts, and its renderings (``workbench.render``).

    run = wb.profile(fn, x)
    run.timing.median_ms, run.cold_ms, run.hypotheses[0]
    run.save("runs/a"); again = wb.load_run("runs/a")
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from workbench import render
from workbench.analysis.attribution import Attribution, attribution
from workbench.api.trace import Trace
from workbench.capture.run import RunRecord
from workbench.fixes import FixList
from workbench.fixes import for_run as fixes_for_run
from workbench.hypotheses import HypothesisList, diagnose
from workbench.study.history import History
from workbench.trace import TraceData

if TYPE_CHECKING:
    from workbench.hypotheses import Diagnosis

__all__ = ["ProfileRun", "load_run"]


class ProfileRun(RunRecord):
    """A profiled run: the capture record's fields, and the face's trace, hypotheses and history.

    ``history`` (``workbench.study.history.History`` or None) is the one attribute that may be
    set after the run is made: whoever profiles records the run in the cell's history and
    assigns it (``run.history = record_run(...)``); it is saved and loaded with the run.
    """

    trace: Trace | None
    history: History | None
    code: Any = None  # the live callable that was profiled (``wb.profile``'s fn, the cell's code); never saved
    code_args: tuple[tuple[Any, ...], dict[str, Any]] = ((), {})  # the arguments it was profiled with

    def __init__(self, *args: Any, history: History | None = None, **fields: Any) -> None:
        super().__init__(*args, **fields)
        if self.trace is not None and not isinstance(self.trace, Trace):
            object.__setattr__(self, "trace", Trace.of(self.trace))  # the facade over the same tables
        from workbench.api.memory import RunMemory

        object.__setattr__(self, "memory", RunMemory(dict(self.memory), self.trace))  # + the memory analyses
        self.history = history

    @classmethod
    def from_record(cls, record: RunRecord, *, history: History | None = None) -> ProfileRun:
        """The face run of a capture record (the same fields; the trace wrapped as a Trace)."""
        return cls(**RunRecord.fields_from_dict(record.to_dict(), trace=record.trace), history=history)

    # -- diagnosis -------------------------------------------------------------------------
    @cached_property
    def diagnosis(self) -> Diagnosis:
        """The run's diagnosis: ranked hypotheses and the rules that could not judge it
        (``workbench.hypotheses.diagnose``)."""
        return diagnose(self)

    @cached_property
    def hypotheses(self) -> HypothesisList:
        """Ranked hypotheses, best first: run-level rules (cold start, compile, measurement) and
        the trace's rules with time at stake per call."""
        return HypothesisList.from_diagnosis(self.diagnosis)

    @cached_property
    def attribution(self) -> Attribution | None:
        """Time by ``nn.Module`` and by the user's source line, per clean call
        (``workbench.analysis.attribution``); None without a trace."""
        if self.trace is None:
            return None
        return attribution(self.trace, calls=max(1, self.traced_calls), scale=self.trace_scale)

    # -- fixes -----------------------------------------------------------------------------
    @cached_property
    def fixes(self) -> FixList:
        """The catalog fixes that apply to this run (``workbench.fixes``), ranked by the time the
        hypotheses they test put at stake, each with where it applies; ``run.fixes.variants()``
        feeds ``wb.compare``.  A run loaded from a file has no live code: the fixes that need it
        say so (``run.fixes_for(fn)`` recognises them on your callable)."""
        return self.fixes_for(None)

    def fixes_for(self, fn: Any = None, *, model: Any = None, optimizer: Any = None) -> FixList:
        """The fixes that apply to this run for the live callable ``fn`` (default: the profiled code).

        Args:
            fn: the callable to build the fixes from (default ``run.code``).
            model: an ``nn.Module`` the code uses but does not reach by itself.
            optimizer: an optimizer likewise.

        Returns:
            FixList: applicable fixes first (largest stake first), then the not-applicable ones.
        """
        return fixes_for_run(self, fn if fn is not None else self.code, model=model, optimizer=optimizer)

    # -- per-call tables -------------------------------------------------------------------
    def per_call_ops(self, top: int | None = 15) -> pd.DataFrame:
        """The trace's CPU ops by self time, per clean call: ``self_ms_per_call`` and
        ``total_ms_per_call`` are the trace's totals / traced calls x ``trace_scale``, ``pct``
        their share; empty (with the columns) without a trace."""
        if self.trace is None:
            return _per_call_table(self, None, "self_us", "total_us", top)
        return _per_call_table(self, self.trace.op_breakdown().table, "self_us", "total_us", top)

    def per_call_kernels(self, top: int | None = 15) -> pd.DataFrame:
        """The trace's GPU kernels by time, per clean call (``sum_ms_per_call``)."""
        if self.trace is None:
            return _per_call_table(self, None, "sum_us", None, top)
        return _per_call_table(self, self.trace.kernel_breakdown().table, "sum_us", None, top)

    # -- persistence -----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["history"] = self.history.to_dict() if self.history is not None else None
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, trace: TraceData | None = None, folder: Path | None = None) -> ProfileRun:
        run = super().from_dict(d, trace=trace, folder=folder)
        history = d.get("history")
        run.history = History.from_dict(history) if isinstance(history, dict) else None
        return run

    # -- views -----------------------------------------------------------------------------
    def save_charts(
        self, folder: str | Path, *, formats: str | Sequence[str] = ("svg",), scale: float = 1.0
    ) -> list[Path]:
        """Write the charts the notebook shows for this run to ``folder`` (svg, png, html, json;
        see ``workbench.charts.save_charts``); returns the paths written."""
        from workbench.charts.export import save_charts  # altair only when charts are asked for

        return save_charts(self, folder, formats=formats, scale=scale)

    def _repr_html_(self) -> str:
        return render.html(self)

    def to_text(self) -> str:
        """The run as plain text (``workbench.render.text``)."""
        return render.text(self)

    def to_markdown(self) -> str:
        """The run as Markdown (``workbench.render.markdown``)."""
        return render.markdown(self)


def load_run(path: str | Path) -> ProfileRun:
    """Load a run bundle written by ``ProfileRun.save``; the trace is parsed again from its file.

    Args:
        path: the bundle folder (``run.save(path)``, or a report's ``run/`` folder).

    Returns:
        ProfileRun: the run, its trace, hypotheses and history as saved.
    """
    return ProfileRun.load(path)


def _per_call_table(
    run: RunRecord, table: pd.DataFrame | None, time_col: str, total_col: str | None, top: int | None
) -> pd.DataFrame:
    out_cols = {time_col: time_col.replace("_us", "_ms_per_call")}
    if total_col:
        out_cols[total_col] = total_col.replace("_us", "_ms_per_call")
    if table is None or len(table) == 0 or time_col not in table.columns:
        return pd.DataFrame(columns=["name", "calls_per_call", *out_cols.values(), "pct"])
    calls = max(1, run.traced_calls or 1)
    scale = run.trace_scale / calls / 1e3  # µs over the traced calls -> ms per clean call
    out = table.sort_values(time_col, ascending=False).copy()
    whole = float(table[time_col].sum())
    for src, dst in out_cols.items():
        out[dst] = out[src].astype(float) * scale
    if "count" in out.columns:
        out["calls_per_call"] = out["count"].astype(float) / calls
    out["pct"] = out[time_col].astype(float) / whole * 100 if whole > 0 else float("nan")
    keep = ["rank", "name", "kernel_type", "calls_per_call", *out_cols.values(), "pct"]
    keep += [c for c in out.columns if "dims" in c or "types" in c or "shape" in c]
    out = out[[c for c in dict.fromkeys(keep) if c in out.columns]]
    return (out.head(top) if top else out).reset_index(drop=True)
