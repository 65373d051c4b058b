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

import dataclasses
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast, overload

import pandas as pd

from workbench import render
from workbench.analysis.attribution import Attribution, attribution
from workbench.api.trace import Trace
from workbench.capture.bundle import read_bundle, save_bundle
from workbench.capture.compile_diag import CompileDiagnostics
from workbench.capture.health import ProfileHealth
from workbench.capture.run import RunRecord
from workbench.errors import BundleError
from workbench.fixes import FixList
from workbench.fixes import for_run as fixes_for_run
from workbench.hypotheses import HypothesisList, diagnose
from workbench.measurement import Measurement
from workbench.study.history import History
from workbench.trace import TraceData

if TYPE_CHECKING:
    from workbench.hypotheses import Diagnosis

__all__ = ["ProfileRun", "load_run"]

T = TypeVar("T")


class _FromRecord(Generic[T]):
    """A read-only attribute of the run that is its record's field or derived value of that name."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, run: None, owner: type) -> _FromRecord[T]: ...
    @overload
    def __get__(self, run: ProfileRun, owner: type) -> T: ...
    def __get__(self, run: ProfileRun | None, owner: type) -> T | _FromRecord[T]:
        if run is None:
            return self
        return cast(T, getattr(run.record, self._name))

    def __set__(self, run: ProfileRun, value: object) -> None:
        raise AttributeError(
            f"ProfileRun.{self._name} is its capture record's and cannot be set: "
            f"run.replace({self._name}=...) makes a run with another value"
        )


class ProfileRun:
    """A profiled run: it holds the capture layer's ``RunRecord`` (``run.record``: clean timing,
    cold call, traced pass, health, environment, trace data) and adds the face's trace, hypotheses,
    fixes, memory analyses and history. The record's fields read through (``run.timing``,
    ``run.cold_ms``, ``run.trace_scale``, ...) and cannot be set.

    ``history`` (``workbench.study.history.History`` or None) may be set after the run is made:
    whoever profiles records the run in the cell's history and assigns it
    (``run.history = record_run(...)``); it is saved and loaded with the run. ``code`` and
    ``code_args`` are the live callable that was profiled and its arguments (never saved).
    """

    name = _FromRecord[str]()
    timing = _FromRecord[Measurement]()
    cold_ms = _FromRecord[float]()
    warmup = _FromRecord[int]()
    repeat = _FromRecord[int]()
    device = _FromRecord[str]()
    compile = _FromRecord[CompileDiagnostics]()
    environment = _FromRecord[dict[str, Any]]()
    settings = _FromRecord[dict[str, Any]]()
    profiler_warmup = _FromRecord[str]()
    trace_path = _FromRecord["str | None"]()
    trace_note = _FromRecord[str]()
    created_at = _FromRecord[str]()
    traced_timing = _FromRecord["Measurement | None"]()
    trace_repeat = _FromRecord[int]()
    health = _FromRecord[ProfileHealth]()
    profiler_stderr = _FromRecord[str]()
    expected_calls = _FromRecord["int | None"]()
    warm_median_ms = _FromRecord[float]()
    cold_over_warm = _FromRecord[float]()
    timed_under_profiler = _FromRecord[bool]()
    profiler_overhead = _FromRecord["float | None"]()
    trace_scale = _FromRecord[float]()
    trace_step_mean_ms = _FromRecord["float | None"]()
    notes = _FromRecord["tuple[str, ...]"]()
    traced_calls = _FromRecord[int]()

    def __init__(
        self,
        record: RunRecord,
        *,
        history: History | None = None,
        code: Any = None,
        code_args: tuple[tuple[Any, ...], dict[str, Any]] = ((), {}),
        cells: dict[str, int] | None = None,
    ) -> None:
        if not isinstance(record, RunRecord):
            raise TypeError(
                f"ProfileRun(record) takes the capture layer's RunRecord, not {type(record).__name__}: "
                "wb.profile(fn) and wb.load_run(path) make runs"
            )
        self.record = record
        # the facade over the record's tables (the same frames, not a copy)
        self.trace: Trace | None = Trace.of(record.trace) if record.trace is not None else None
        from workbench.api.memory import RunMemory

        self.memory = RunMemory(dict(record.memory), self.trace)  # the record's memory facts + analyses
        self.history = history
        self.code = code  # the live callable that was profiled (wb.profile's fn, the cell's code)
        self.code_args = code_args  # the arguments it was profiled with
        # the notebook's cell files (ipykernel's ids) -> their execution counts (workbench.capture.cells); saved
        self.cells: dict[str, int] = dict(cells or {})

    @classmethod
    def from_record(cls, record: RunRecord, *, history: History | None = None) -> ProfileRun:
        """The face run of a capture record (``ProfileRun(record, history=...)``)."""
        return cls(record, history=history)

    def replace(self, **changes: Any) -> ProfileRun:
        """A run whose record has ``changes`` (``dataclasses.replace`` on the record); the history
        and the live code are kept."""
        run = ProfileRun(
            dataclasses.replace(self.record, **changes),
            history=self.history,
            code=self.code,
            code_args=self.code_args,
            cells=self.cells,
        )
        run.__dict__["_source_record"] = self.record  # its temporary trace folder goes when that record does
        return run

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProfileRun):
            return NotImplemented
        return self.record == other.record

    __hash__ = None  # type: ignore[assignment]  # a run is a value of mutable parts (its history)

    def __reduce__(self) -> tuple[Any, ...]:  # the live code is not pickled; cached analyses are recomputed
        return (_restore_run, (self.record, self.history))

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickle a run pickled before ProfileRun held its record (0.1.0's ProfileRun was the
        record's subclass: its fields are the state's keys)."""
        names = [f.name for f in dataclasses.fields(RunRecord)]
        missing = [n for n in names if n not in state and _required(n)]
        if missing:
            raise BundleError(
                f"this pickled ProfileRun lacks {', '.join(missing)}: it was not written by workbench "
                "0.1 or is damaged; profile again, or save runs with run.save(folder) and read them "
                "with wb.load_run(folder)"
            )
        trace = state.get("trace")
        fields = {n: state[n] for n in names if n in state}
        if isinstance(trace, TraceData):
            fields["trace"] = trace
        memory = fields.get("memory")
        fields["memory"] = dict(memory) if isinstance(memory, dict) else {}
        restored = _restore_run(RunRecord(**fields), state.get("history"))
        self.__dict__.update(restored.__dict__)

    # -- diagnosis -------------------------------------------------------------------------
    @cached_property
    def diagnosis(self) -> Diagnosis:
        """The run's diagnosis: ranked hypotheses and the rules that could not judge it
        (``workbench.hypotheses.diagnose``)."""
        return diagnose(self.record)  # the record's fields and trace tables (the facade's own frames)

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
        return attribution(
            self.trace,
            calls=max(1, self.traced_calls),
            scale=self.trace_scale,
            module_names=self.record.module_names,
            optimizer_params=self.record.optimizer_params,
            cells=self.cells,
            statements=self.record.statements,
        )

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
        """The record's fields (``RunRecord.to_dict``) and the history, as saved in ``run.json``."""
        out = self.record.to_dict()
        out["history"] = self.history.to_dict() if self.history is not None else None
        out["cells"] = dict(self.cells)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, trace: TraceData | None = None, folder: Path | None = None) -> ProfileRun:
        """The run of a ``to_dict`` record (``folder``: the bundle it came from, named in errors)."""
        history = d.get("history")
        record = RunRecord.from_dict(d, trace=trace, folder=folder)
        cells = d.get("cells")
        cells = {str(k): v for k, v in cells.items() if isinstance(v, int)} if isinstance(cells, dict) else {}
        return cls(record, history=_history(history, folder), cells=cells)

    def save(self, path: str | Path) -> Path:
        """Write the run as a bundle folder (run.json with the history, environment.json, trace.json.gz)."""
        return save_bundle(self.to_dict(), self.trace_path, path)

    @classmethod
    def load(cls, path: str | Path) -> ProfileRun:
        """Read a bundle folder written by ``save``; the trace is parsed again from its file."""
        contents = read_bundle(path)
        return cls.from_dict(contents.record, trace=contents.trace, folder=contents.folder)

    # -- views -----------------------------------------------------------------------------
    def save_charts(
        self, folder: str | Path, *, formats: str | Sequence[str] = ("svg",), scale: float = 1.0
    ) -> list[Path]:
        """Write the charts the notebook shows for this run to ``folder`` (svg, png, html, json;
        see ``workbench.charts.save_charts``); returns the paths written."""
        from workbench.charts.export import save_charts  # altair only when charts are asked for

        return save_charts(self, folder, formats=formats, scale=scale)

    def __repr__(self) -> str:
        return "ProfileRun" + repr(self.record)[len(type(self.record).__name__) :]

    def _repr_html_(self) -> str:
        return render.notebook_html(self)

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


def _restore_run(record: RunRecord, history: History | None) -> ProfileRun:
    return ProfileRun(record, history=history)


def _required(name: str) -> bool:
    """Whether a RunRecord field has no default (an old pickle must carry it)."""
    field = next(f for f in dataclasses.fields(RunRecord) if f.name == name)
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


def _per_call_table(
    run: ProfileRun, table: pd.DataFrame | None, time_col: str, total_col: str | None, top: int | None
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


def _history(value: Any, folder: Path | None) -> History | None:
    """A saved run's history (None where it has none); a damaged one read from a bundle is a
    ``BundleError`` naming the bundle, as a damaged record is."""
    if not isinstance(value, dict):
        return None
    try:
        return History.from_dict(value)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        if folder is None:
            raise
        from workbench.capture.bundle import incomplete_record

        raise incomplete_record(folder, exc) from exc
