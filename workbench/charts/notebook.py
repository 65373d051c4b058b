"""Several charts as one notebook output, drawn with no network: the vega JavaScript goes inline with
the output's first chart, once per output, or once per notebook where the front end names its cells
(``workbench.charts.offline``), and draws after a reload or in a saved notebook. The HTML around a
result's charts (headings, a trace's summary and warnings, a chart that failed) is
``workbench.render.charts``'."""

from __future__ import annotations

from typing import Any, Iterable


def charts_html(charts: Iterable[Any]) -> str:
    """Offline HTML of several charts for one output: the vega bundle goes with the first one
    (where it is wanted: once per notebook in JupyterLab, see ``workbench.charts.offline``)."""
    from workbench.charts.offline import notebook_html

    return "\n".join(notebook_html(chart, include_bundle=None if i == 0 else False) for i, chart in enumerate(charts))
