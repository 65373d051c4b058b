"""Reports: papermill executes a template notebook on a run bundle, nbconvert renders offline HTML.

from workbench.report import ReportRequest, build_report
result = build_report("reports/demo")          # profiles workbench.workloads.demo:workload
print(result.html_path)
request = ReportRequest("reports/mine", workload="bench:step", repeat=50)   # checked when made
result = build_report(request)
"""

from __future__ import annotations

from typing import Any

# Names load on first use: the gate's worker processes (workbench.report.sampler) import this
# package and should not pay for papermill and nbformat, which only the notebook steps need.


def __getattr__(name: str) -> Any:
    if name in ("ReportResult", "build_report", "default_template"):
        from workbench.report import pipeline

        return getattr(pipeline, name)
    if name == "ReportRequest":
        from workbench.report import request

        return request.ReportRequest
    if name in ("GateVerdict", "SampleSet", "gate", "load_samples", "load_summary"):
        from workbench.report import regression

        return getattr(regression, name)
    if name in ("external_sources", "render_html"):
        from workbench.report import render

        return getattr(render, name)
    if name in ("DEFAULT_WORKLOAD", "resolve_workload"):
        from workbench.report import workload

        return getattr(workload, name)
    raise AttributeError(f"module 'workbench.report' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "DEFAULT_WORKLOAD",
    "GateVerdict",
    "ReportRequest",
    "ReportResult",
    "SampleSet",
    "build_report",
    "default_template",
    "external_sources",
    "gate",
    "load_samples",
    "load_summary",
    "render_html",
    "resolve_workload",
]
