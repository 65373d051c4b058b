"""What a renderer is, and which renderer draws which result type.

A renderer is a module with three functions over one result type, as pyinstrument's renderers
are classes with one ``render`` each: ``html(value) -> str``, ``text(value) -> str`` and
``markdown(value) -> str`` (keyword options allowed). The table below maps a result type, by its
module and class name, to its renderer's module: the render layer imports the capture, variants
and study layers for type checking only, so types are matched by name here, and the IPython
display formatter is told the same names (``workbench.render.ipython``).

This is the one display path of the values below the face: they have no ``_repr_html_`` or
``to_markdown`` of their own (their layers may not import this one, and a value drawing itself
would be a second rendering of it). A type's renderer covers its subclasses (``render.html`` and
IPython's formatter both walk the class's MRO, most-derived class first): ``AnalysisResult``'s
covers every analysis result that has no renderer of its own.
"""

from __future__ import annotations

from typing import Any, Protocol


class Renderer(Protocol):
    """One result type's renderings (a module of ``workbench.render``)."""

    def html(self, value: Any, /) -> str: ...

    def text(self, value: Any, /) -> str: ...

    def markdown(self, value: Any, /) -> str: ...


FORMATS = ("html", "text", "markdown")

# (module, class name) of a result type -> the module of its renderer
RENDERERS: dict[tuple[str, str], str] = {
    ("workbench.api.run", "ProfileRun"): "workbench.render.run",
    ("workbench.api.trace", "Trace"): "workbench.render.trace",
    ("workbench.trace.data", "TraceData"): "workbench.render.trace",
    ("workbench.hypotheses.diagnose", "Diagnosis"): "workbench.render.diagnosis",
    ("workbench.hypotheses.ranked", "HypothesisList"): "workbench.render.diagnosis",
    ("workbench.capture.health", "ProfileHealth"): "workbench.render.health",
    ("workbench.fixes.listing", "FixList"): "workbench.render.fixes",
    ("workbench.variants.results", "Comparison"): "workbench.render.comparison",
    ("workbench.variants.decision", "DecisionRecord"): "workbench.render.decision",
    ("workbench.study.study", "Study"): "workbench.render.study",
    ("workbench.study.rounds", "StudyRound"): "workbench.render.study",
    ("workbench.study.summary", "RoundSummary"): "workbench.render.study",
    ("workbench.analysis.attribution", "Attribution"): "workbench.render.attribution",
    ("workbench.analysis.attribution", "ModuleBreakdown"): "workbench.render.attribution",
    ("workbench.analysis.attribution", "SourceBreakdown"): "workbench.render.attribution",
    ("workbench.study.history", "History"): "workbench.render.history",
    ("workbench.analysis.diff", "TraceDiff"): "workbench.render.diff",
    ("workbench.analysis.critical_path", "CriticalPath"): "workbench.render.critical_path",
    ("workbench.analysis.critical_path", "WhatIf"): "workbench.render.critical_path",
    ("workbench.analysis.critical_path", "CollectiveWaits"): "workbench.render.critical_path",
    # every other analysis result (a subclass): its name and table
    ("workbench.analysis.result", "AnalysisResult"): "workbench.render.analysis_result",
}

# the types whose HTML the IPython display formatter gets from here, because their own layer may
# not import the render layer (they have no ``_repr_html_`` of their own)
DISPLAYED_BY_NAME: tuple[tuple[str, str], ...] = (
    ("workbench.hypotheses.diagnose", "Diagnosis"),
    ("workbench.hypotheses.ranked", "HypothesisList"),
    ("workbench.capture.health", "ProfileHealth"),  # run.health
    ("workbench.fixes.listing", "FixList"),  # run.fixes
    ("workbench.variants.results", "Comparison"),
    ("workbench.variants.decision", "DecisionRecord"),
    ("workbench.study.study", "Study"),
    ("workbench.study.rounds", "StudyRound"),
    ("workbench.study.summary", "RoundSummary"),
    ("workbench.analysis.attribution", "Attribution"),  # run.attribution: its own class has no view
    ("workbench.analysis.attribution", "ModuleBreakdown"),  # trace.module_breakdown(): replaces the bare
    ("workbench.analysis.attribution", "SourceBreakdown"),  # table of render.analysis_result
    ("workbench.study.history", "History"),  # run.history: the trend chart, change points
    ("workbench.analysis.critical_path", "CriticalPath"),  # the bound-by bar and the longest edges, not the
    ("workbench.analysis.critical_path", "WhatIf"),  # bare table of render.analysis_result
    ("workbench.analysis.critical_path", "CollectiveWaits"),
    # every other analysis result: the most-derived class registered above wins (IPython looks at the
    # class first, then its bases), and render.html picks the subclass's own renderer the same way
    ("workbench.analysis.result", "AnalysisResult"),
)

# the types whose plain-text display (a terminal IPython, the text/plain copy a notebook saves)
# is their text rendering, where the default would be a dataclass repr holding whole DataFrames
PLAIN_TEXT_BY_NAME: tuple[tuple[str, str], ...] = (
    ("workbench.capture.health", "ProfileHealth"),  # its headline and checks, not nested dataclass reprs
    ("workbench.analysis.attribution", "Attribution"),
    ("workbench.analysis.attribution", "ModuleBreakdown"),
    ("workbench.analysis.attribution", "SourceBreakdown"),
    ("workbench.study.history", "History"),
    ("workbench.analysis.critical_path", "CriticalPath"),
    ("workbench.analysis.critical_path", "WhatIf"),
    ("workbench.analysis.critical_path", "CollectiveWaits"),
)
