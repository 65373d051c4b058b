"""``workbench report``: profile a workload (or load a bundle), execute the template, render HTML."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from workbench.errors import BundleError, ReportError
from workbench.report.execute import execute_template
from workbench.report.experiments import write_experiments
from workbench.report.regression import SUMMARY_FILE, RegressionCheck, check_regression
from workbench.report.render import render_html
from workbench.report.sections import timing_summary
from workbench.report.workload import DEFAULT_WORKLOAD, resolve_workload

BUNDLE_DIR = "run"
NOTEBOOK_FILE = "report.ipynb"
HTML_FILE = "report.html"


def default_template() -> Path:
    """``templates/report.ipynb`` next to the package (a checkout or an editable install)."""
    here = Path(__file__).resolve()
    for candidate in (here.parents[1] / "templates" / "report.ipynb",
                      here.parents[2] / "templates" / "report.ipynb"):
        if candidate.is_file():
            return candidate
    raise ReportError("the default report template templates/report.ipynb was not found next to the "
                      "workbench package; pass --template PATH.ipynb")


@dataclass(frozen=True)
class ReportResult:
    """Where a report's files are and the timing it shows."""

    out_dir: str
    html_path: str
    notebook_path: str
    bundle_path: str
    summary: dict[str, Any]
    regression: RegressionCheck | None = field(default=None)

    def to_dict(self) -> dict[str, Any]:
        return {"out_dir": self.out_dir, "html_path": self.html_path, "notebook_path": self.notebook_path,
                "bundle_path": self.bundle_path, "summary": self.summary,
                "regression": self.regression.to_dict() if self.regression else None}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ReportResult":
        reg = d.get("regression")
        return cls(out_dir=d["out_dir"], html_path=d["html_path"], notebook_path=d["notebook_path"],
                   bundle_path=d["bundle_path"], summary=dict(d["summary"]),
                   regression=RegressionCheck.from_dict(reg) if reg else None)


def profile_workload(spec: str, *, warmup: int, repeat: int) -> Any:
    """Profile ``module:function`` with ``wb.profile`` (trace on)."""
    from workbench.capture.profile import profile

    func, args = resolve_workload(spec)
    return profile(func, *args, warmup=warmup, repeat=repeat, trace=True, name=spec)


def _load_bundle(path: Path) -> Any:
    from workbench.capture.run import load_run

    if not path.exists():
        raise BundleError(f"run bundle {str(path)!r} does not exist; pass a folder written by "
                          "ProfileRun.save() or by an earlier `workbench report` (its run/ folder)")
    return load_run(path)


def build_report(out_dir: str | Path, *, workload: str = DEFAULT_WORKLOAD, bundle: str | Path | None = None,
                 template: str | Path | None = None, warmup: int = 3, repeat: int = 20,
                 compare_to: str | Path | None = None, fail_on_regression_pct: float = math.inf,
                 title: str | None = None, experiments: bool = True) -> ReportResult:
    """Write ``run/`` (unless a bundle is given), ``experiments.json`` (``experiments`` and a
    workload: the variants its hypotheses suggest, compared with it), ``report.ipynb``,
    ``report.html`` and ``summary.json``."""
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    template_path = Path(template).resolve() if template else default_template()
    if bundle is not None:
        bundle_path = Path(bundle).resolve()
        run = _load_bundle(bundle_path)
    else:
        run = profile_workload(workload, warmup=warmup, repeat=repeat)
        bundle_path = run.save(out / BUNDLE_DIR)
    params = {"bundle": str(bundle_path), "title": title or f"workbench report: {run.name}",
              "experiments": ""}
    summary = {"timing": timing_summary(run), "workload": run.name, "bundle": str(bundle_path),
               "template": str(template_path), "created_at": datetime.now(timezone.utc).isoformat()}
    if bundle is None:
        path, summary["experiments"] = write_experiments(out, workload, run, enabled=experiments)
        params["experiments"] = str(path)
    notebook = execute_template(template_path, out / NOTEBOOK_FILE, params)
    html_path = render_html(notebook, out / HTML_FILE)
    regression = None
    if compare_to is not None:
        regression = check_regression(compare_to, summary["timing"]["median_ms"], fail_on_regression_pct)
        summary["regression"] = regression.to_dict()
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=1, default=str), encoding="utf-8")
    return ReportResult(out_dir=str(out), html_path=str(html_path), notebook_path=str(notebook),
                        bundle_path=str(bundle_path), summary=summary, regression=regression)
