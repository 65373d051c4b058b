"""The charts shown for a profiled run (``ProfileRun``), a loaded Trace, or a variant Comparison."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Protocol

from workbench.charts.breakdowns import (
    idle_chart,
    kernel_types_chart,
    per_rank_chart,
    top_kernels_chart,
    top_ops_chart,
)
from workbench.charts.common import guarded_chart, message_chart
from workbench.charts.comparison import comparison_chart
from workbench.charts.roofline import trace_roofline_chart
from workbench.charts.timeline import timeline_chart

if TYPE_CHECKING:
    import altair
    import pandas as pd

    from workbench.measurement import Measurement
    from workbench.trace import TraceData
    from workbench.variants.results import Comparison

PER_RANK_PARTS = ("compute", "non_compute", "idle")


class ChartedRun(Protocol):
    """What the run's charts read of a profiled run (the face's ``ProfileRun`` has it): its name,
    clean timing, environment and trace, and its tables per clean call. Named structurally, so
    that the charts import nothing of the face."""

    @property
    def name(self) -> str: ...
    @property
    def timing(self) -> Measurement: ...
    @property
    def environment(self) -> dict[str, Any]: ...
    @property
    def trace(self) -> TraceData | None: ...
    def per_call_ops(self, top: int | None = ...) -> pd.DataFrame: ...
    def per_call_kernels(self, top: int | None = ...) -> pd.DataFrame: ...


PER_CALL_OP_TIME = "self_ms_per_call"  # ProfileRun.per_call_ops()
PER_CALL_KERNEL_TIME = "sum_ms_per_call"  # ProfileRun.per_call_kernels()


def _gpu_charts(trace: Any, kernel_table: pd.DataFrame | None = None) -> list[Any]:
    kernels = trace.kernel_breakdown()
    if kernel_table is not None:
        charts = [guarded_chart(lambda: top_kernels_chart(kernel_table, value=PER_CALL_KERNEL_TIME), "Top kernels")]
    else:
        charts = [guarded_chart(lambda: top_kernels_chart(kernels), "Top kernels")]
    types = kernels.types
    if types is not None:
        charts.append(guarded_chart(lambda: kernel_types_chart(types), "Kernel types"))
    charts.append(guarded_chart(lambda: idle_chart(trace.idle_breakdown()), "Idle time"))
    if len(trace.ranks) > 1:
        charts.append(
            guarded_chart(
                lambda: per_rank_chart(trace.temporal_breakdown(), parts=PER_RANK_PARTS, title="Time per rank"),
                "Time per rank",
            )
        )
    return charts


def _critical_path_charts(trace: Any) -> list[Any]:
    """The first step's critical path (the whole trace when it marks no ProfilerStep): its bound-by bar and
    the timeline with the path highlighted; a chart saying why where no path can be drawn."""
    from workbench.charts.critical_path import bound_by_chart, critical_path_chart
    from workbench.errors import WorkbenchError

    try:
        try:
            path = trace.critical_path()
        except WorkbenchError:
            path = trace.critical_path(annotation="")
    except WorkbenchError as exc:
        return [message_chart(f"cannot draw the critical path: {exc}", title="Critical path")]
    return [
        guarded_chart(lambda: bound_by_chart(path), "Bound by"),
        guarded_chart(lambda: critical_path_chart(path, trace), "Critical path"),
    ]


def trace_charts(
    trace: Any,
    *,
    timeline: bool = True,
    roofline: bool = True,
    environment: Mapping[str, Any] | None = None,
    measure_ceiling: bool = False,
    op_table: pd.DataFrame | None = None,
    kernel_table: pd.DataFrame | None = None,
) -> list[Any]:
    """Top ops; on GPU traces top kernels, kernel types, the idle split, time per rank and the critical path
    (bound-by bar, path on its timeline); the
    roofline of the ops with known work (``measure_ceiling``: measure this CPU's ceilings if
    they are not cached); then the timeline. The top ops and kernels are totals over the traced
    calls, or per call where ``op_table`` / ``kernel_table`` (a run's ``per_call_ops()`` /
    ``per_call_kernels()``) are given."""
    if op_table is not None:
        charts = [guarded_chart(lambda: top_ops_chart(op_table, value=PER_CALL_OP_TIME), "Top ops")]
    else:
        charts = [guarded_chart(lambda: top_ops_chart(trace.op_breakdown()), "Top ops")]
    if trace.has_gpu:
        charts.extend(_gpu_charts(trace, kernel_table))
        charts.extend(_critical_path_charts(trace))
    if roofline:
        charts.append(
            guarded_chart(
                lambda: trace_roofline_chart(trace, environment=environment, measure=measure_ceiling), "Roofline"
            )
        )
    if timeline:
        charts.append(guarded_chart(lambda: timeline_chart(trace), "Timeline"))
    return charts


def timing_chart(timing: Measurement, *, label: str = "run") -> altair.TopLevelMixin:
    """The distribution of a Measurement's samples."""
    return comparison_chart({timing.label or label: list(timing.samples_ms)})


def run_charts(
    run: ChartedRun, *, timeline: bool = True, roofline: bool = True, measure_ceiling: bool = False
) -> list[Any]:
    """Charts for a ProfileRun: its timing samples, then its trace's charts when it has a trace."""
    charts = []
    if run.timing is not None:
        charts.append(timing_chart(run.timing, label=run.name or "run"))
    if run.trace is not None:
        op_table, kernel_table = _per_call_tables(run)
        charts.extend(
            trace_charts(
                run.trace,
                timeline=timeline,
                roofline=roofline,
                environment=run.environment,
                measure_ceiling=measure_ceiling,
                op_table=op_table,
                kernel_table=kernel_table,
            )
        )
    if not charts:
        charts.append(message_chart("this run has neither timing samples nor a trace"))
    return charts


def _per_call_tables(run: ChartedRun) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """A run's op and kernel tables per clean call (the run states its times per call), or None each where
    the run cannot give them (then the charts show the trace's totals, and say so)."""
    tables = []
    for method, column in (("per_call_ops", PER_CALL_OP_TIME), ("per_call_kernels", PER_CALL_KERNEL_TIME)):
        build = getattr(run, method, None)
        table = build(top=None) if callable(build) else None
        tables.append(table if table is not None and column in table.columns and len(table) else None)
    return tables[0], tables[1]


def comparison_charts(cmp: Comparison) -> list[Any]:
    """Charts for a variant ``Comparison``: timing samples and speedup over the baseline with
    its interval; variants that were not timed are named with the reason."""
    samples = dict(cmp.samples_ms or {})
    baseline = cmp.baseline
    charts = []
    if samples:
        order = ([baseline] if baseline in samples else []) + [n for n in samples if n != baseline]
        charts.append(comparison_chart({n: samples[n] for n in order}, baseline=order[0]))
    untimed = [r for r in cmp.results if r.timing is None]
    if untimed:
        text = "; ".join(f"{r.name}: {r.status}" + (f" ({r.reason})" if r.reason else "") for r in untimed)
        charts.append(message_chart(f"not timed: {text}", title="Variants without timing"))
    if not charts:
        charts.append(message_chart("this comparison has no variant results", title="Comparison"))
    return charts
