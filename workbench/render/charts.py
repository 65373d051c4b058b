"""The HTML around a result's charts: a run's and a comparison's charts under their heading, and the
line that says a chart could not be drawn.

The charts themselves are drawn by ``workbench.charts`` (altair specs, embedded offline by
``workbench.charts.notebook.charts_html``: the vega JavaScript inline once per output or per
notebook); this module only wraps them, escaping every text that comes from the data. A display
never raises: a chart that fails is named with its error instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from workbench.render.escape import html_text

if TYPE_CHECKING:
    from workbench.charts.run import ChartedRun
    from workbench.variants.results import Comparison


def failed_html(what: str, exc: BaseException) -> str:
    """One line saying ``what`` could not be drawn, and why."""
    return (
        f"<p class='workbench-chart-error'>{html_text(what)} could not be drawn: "
        f"{html_text(type(exc).__name__)}: {html_text(exc)}</p>"
    )


def run_charts_html(run: ChartedRun, *, timeline: bool = True) -> str:
    """The charts of a profiled run (timing, breakdowns, roofline, timeline) under their heading."""
    from workbench.charts.notebook import charts_html
    from workbench.charts.run import run_charts

    try:
        return "<h4>Charts</h4>" + charts_html(run_charts(run, timeline=timeline))
    except Exception as exc:  # a display must not raise: say what failed instead
        return failed_html("the run's charts", exc)


def comparison_html(cmp: Comparison) -> str:
    """The charts of a variant Comparison (samples, speedup with its interval, untimed variants)."""
    from workbench.charts.notebook import charts_html
    from workbench.charts.run import comparison_charts

    try:
        return charts_html(comparison_charts(cmp))
    except Exception as exc:  # a display must not raise: say what failed instead
        return failed_html("the comparison's charts", exc)
