"""Rich notebook HTML for results: a Trace, a ProfileRun's charts, a variant Comparison.

Result classes call these lazily from their ``_repr_html_`` (``Trace._repr_html_`` ->
``trace_html``), so that JupyterLab, papermill-executed notebooks and nbconvert HTML show the
charts with no network: the vega JavaScript goes inline with an output's first chart, once per
output, or once per notebook where the front end names its cells (``workbench.charts.offline``),
and draws after a reload or in a saved notebook. Every text that comes from the data is escaped.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    from workbench.api.run import ProfileRun
    from workbench.trace.data import TraceData
    from workbench.variants.results import Comparison

MAX_WARNINGS_SHOWN = 10


def charts_html(charts: Iterable[Any]) -> str:
    """Offline HTML of several charts for one output: the vega bundle goes with the first one
    (where it is wanted: once per notebook in JupyterLab, see ``workbench.charts.offline``)."""
    from workbench.charts.offline import notebook_html

    return "\n".join(notebook_html(chart, include_bundle=None if i == 0 else False) for i, chart in enumerate(charts))


def _failed(what: str, exc: Exception) -> str:
    return (
        f"<p class='workbench-chart-error'>{html.escape(what)} could not be drawn: "
        f"{html.escape(type(exc).__name__)}: {html.escape(str(exc))}</p>"
    )


def trace_html(trace: TraceData, *, timeline: bool = True, roofline: bool = True) -> str:
    """A loaded Trace: its one-line summary, its warnings, and its charts."""
    from workbench.charts.run import trace_charts

    warnings = list(trace.warnings or ())
    items = "".join(f"<li>{html.escape(str(w))}</li>" for w in warnings[:MAX_WARNINGS_SHOWN])
    more = len(warnings) - MAX_WARNINGS_SHOWN
    parts = [f"<div class='workbench-trace'><p><b>{html.escape(trace.summary())}</b></p>"]
    if items:
        parts.append(f"<p>Warnings:</p><ul>{items}</ul>" + (f"<p>… and {more} more</p>" if more > 0 else ""))
    try:
        parts.append(charts_html(trace_charts(trace, timeline=timeline, roofline=roofline)))
    except Exception as exc:  # a display must not raise: say what failed instead
        parts.append(_failed("the trace's charts", exc))
    parts.append("</div>")
    return "".join(parts)


def run_charts_html(run: ProfileRun, *, timeline: bool = True) -> str:
    """The charts of a ProfileRun (timing, breakdowns, roofline, timeline), for its ``_repr_html_``."""
    from workbench.charts.run import run_charts

    try:
        return "<h4>Charts</h4>" + charts_html(run_charts(run, timeline=timeline))
    except Exception as exc:  # a display must not raise: say what failed instead
        return _failed("the run's charts", exc)


def comparison_html(cmp: Comparison) -> str:
    """The charts of a variant Comparison (samples, speedup with its interval, untimed variants)."""
    from workbench.charts.run import comparison_charts

    try:
        return charts_html(comparison_charts(cmp))
    except Exception as exc:  # a display must not raise: say what failed instead
        return _failed("the comparison's charts", exc)
