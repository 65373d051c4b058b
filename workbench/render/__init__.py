"""The one seam through which values reach views: one HTML, text and Markdown rendering per result.

    from workbench import render
    render.html(run)          # the notebook card, the report's sections (ProfileRun)
    render.text(diagnosis)    # what ``workbench analyze`` prints
    render.markdown(cmp)      # a Comparison as a Markdown table

Result types and their renderers (``workbench.render.base.RENDERERS``): ProfileRun
(``render.run``), Trace (``render.trace``, a summary card), Diagnosis and ``run.hypotheses``
(``render.diagnosis``), Comparison (``render.comparison``), DecisionRecord (``render.decision``),
Study and its rounds (``render.study``), ``run.attribution`` and the module / source-line
breakdowns (``render.attribution``), ``run.history`` (``render.history``: the trend chart and
its change points). Every text from the data is escaped in one place
(``render.escape``); charts inside HTML draw offline (``workbench.charts``). Importing this package
imports no chart library: a renderer's module is loaded when it is first asked for.
"""

from __future__ import annotations

from workbench.render.dispatch import UnknownResultError, html, markdown, notebook_html, renderer_for, text

__all__ = ["UnknownResultError", "html", "markdown", "notebook_html", "renderer_for", "text"]
