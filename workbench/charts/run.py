"""The charts shown for a profiled run (``ProfileRun``), a loaded Trace, or a variant Comparison."""
from __future__ import annotations

from typing import Any, Mapping

from workbench.charts.breakdowns import (
    idle_chart, kernel_types_chart, per_rank_chart, top_kernels_chart, top_ops_chart,
)
from workbench.charts.common import guarded_chart, message_chart
from workbench.charts.comparison import comparison_chart
from workbench.charts.roofline import trace_roofline_chart
from workbench.charts.timeline import timeline_chart

PER_RANK_PARTS = ("compute", "non_compute", "idle")


def _gpu_charts(trace: Any) -> list[Any]:
    kernels = trace.kernel_breakdown()
    charts = [guarded_chart(lambda: top_kernels_chart(kernels), "Top kernels")]
    types = getattr(kernels, "types", None)
    if types is not None:
        charts.append(guarded_chart(lambda: kernel_types_chart(types), "Kernel types"))
    charts.append(guarded_chart(lambda: idle_chart(trace.idle_breakdown()), "Idle time"))
    if len(getattr(trace, "ranks", ())) > 1:
        charts.append(guarded_chart(lambda: per_rank_chart(trace.temporal_breakdown(), parts=PER_RANK_PARTS,
                                                      title="Time per rank"), "Time per rank"))
    return charts


def trace_charts(trace: Any, *, timeline: bool = True, roofline: bool = True,
                 environment: Mapping[str, Any] | None = None, measure_ceiling: bool = False) -> list[Any]:
    """Top ops; on GPU traces top kernels, kernel types, the idle split and time per rank; the
    roofline of the ops with known work (``measure_ceiling``: measure this CPU's ceilings if
    they are not cached); then the timeline."""
    charts = [guarded_chart(lambda: top_ops_chart(trace.op_breakdown()), "Top ops")]
    if getattr(trace, "has_gpu", False):
        charts.extend(_gpu_charts(trace))
    if roofline:
        charts.append(guarded_chart(lambda: trace_roofline_chart(trace, environment=environment,
                                                            measure=measure_ceiling), "Roofline"))
    if timeline:
        charts.append(guarded_chart(lambda: timeline_chart(trace), "Timeline"))
    return charts


def timing_chart(timing: Any, *, label: str = "run") -> Any:
    """The distribution of a Measurement's samples."""
    return comparison_chart({timing.label or label: list(timing.samples_ms)})


def run_charts(run: Any, *, timeline: bool = True, roofline: bool = True,
               measure_ceiling: bool = False) -> list[Any]:
    """Charts for a ProfileRun: its timing samples, then its trace's charts when it has a trace."""
    charts = []
    timing = getattr(run, "timing", None)
    if timing is not None:
        charts.append(timing_chart(timing, label=getattr(run, "name", None) or "run"))
    trace = getattr(run, "trace", None)
    if trace is not None:
        charts.extend(trace_charts(trace, timeline=timeline, roofline=roofline,
                                   environment=getattr(run, "environment", None),
                                   measure_ceiling=measure_ceiling))
    if not charts:
        charts.append(message_chart("this run has neither timing samples nor a trace"))
    return charts


def comparison_charts(cmp: Any) -> list[Any]:
    """Charts for a variant ``Comparison``: timing samples and speedup over the baseline with
    its interval; variants that were not timed are named with the reason."""
    samples = dict(getattr(cmp, "samples_ms", None) or {})
    baseline = getattr(cmp, "baseline", None)
    charts = []
    if samples:
        order = ([baseline] if baseline in samples else []) + [n for n in samples if n != baseline]
        charts.append(comparison_chart({n: samples[n] for n in order}, baseline=order[0]))
    untimed = [r for r in getattr(cmp, "results", ()) if getattr(r, "timing", None) is None]
    if untimed:
        text = "; ".join(f"{r.name}: {r.status}" + (f" ({r.reason})" if r.reason else "") for r in untimed)
        charts.append(message_chart(f"not timed: {text}", title="Variants without timing"))
    if not charts:
        charts.append(message_chart("this comparison has no variant results", title="Comparison"))
    return charts
