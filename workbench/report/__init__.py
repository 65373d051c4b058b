"""Reports: papermill executes a template notebook on a run bundle, nbconvert renders offline HTML.

    from workbench.report import build_report
    result = build_report("reports/demo")          # profiles workbench.demo:workload
    print(result.html_path)
"""
from workbench.report.pipeline import ReportResult, build_report, default_template
from workbench.report.regression import RegressionCheck, check_regression, load_summary
from workbench.report.render import external_sources, render_html
from workbench.report.workload import DEFAULT_WORKLOAD, resolve_workload

__all__ = ["DEFAULT_WORKLOAD", "RegressionCheck", "ReportResult", "build_report", "check_regression",
           "default_template", "external_sources", "load_summary", "render_html", "resolve_workload"]
