"""The charts shown for a profiled run (``ProfileRun``) or a loaded Trace."""
from __future__ import annotations

from typing import Any, Callable

from workbench.charts.breakdowns import (
    idle_chart, kernel_types_chart, top_kernels_chart, top_ops_chart,
)
from workbench.charts.common import message_chart
from workbench.charts.comparison import comparison_chart
from workbench.charts.timeline import timeline_chart
from workbench.errors import NotApplicableError


def _guarded(build: Callable[[], Any], title: str) -> Any:
    """Build a chart; a capability the trace lacks becomes a chart that says so."""
    try:
        return build()
    except NotApplicableError as exc:
        return message_chart(f"not applicable: {exc.reason}", title=title)


def trace_charts(trace: Any, *, timeline: bool = True) -> list[Any]:
    """Top ops, and on GPU traces top kernels and the idle split; then the timeline."""
    charts = [_guarded(lambda: top_ops_chart(trace.op_breakdown()), "Top ops")]
    if getattr(trace, "has_gpu", False):
        kernels = trace.kernel_breakdown()
        charts.append(_guarded(lambda: top_kernels_chart(kernels), "Top kernels"))
        types = getattr(kernels, "types", None)
        if types is not None:
            charts.append(_guarded(lambda: kernel_types_chart(types), "Kernel types"))
        charts.append(_guarded(lambda: idle_chart(trace.idle_breakdown()), "Idle time"))
    if timeline:
        charts.append(timeline_chart(trace))
    return charts


def timing_chart(timing: Any, *, label: str = "run") -> Any:
    """The distribution of a Measurement's samples."""
    return comparison_chart({timing.label or label: list(timing.samples_ms)})


def run_charts(run: Any, *, timeline: bool = True) -> list[Any]:
    """Charts for a ProfileRun: its timing samples, then its trace's charts when it has a trace."""
    charts = []
    timing = getattr(run, "timing", None)
    if timing is not None:
        charts.append(timing_chart(timing, label=getattr(run, "name", None) or "run"))
    trace = getattr(run, "trace", None)
    if trace is not None:
        charts.extend(trace_charts(trace, timeline=timeline))
    if not charts:
        charts.append(message_chart("this run has neither timing samples nor a trace"))
    return charts
