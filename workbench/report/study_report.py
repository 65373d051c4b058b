"""``workbench report --study FOLDER``: the whole optimization study as one offline HTML page.

The study is read (``wb.Study.open``) here first, so that a folder that is not a study, or one
from a newer format, is refused before any notebook runs (exit 2); a damaged line is skipped with
a warning, as the study itself does, and the rest is reported. Nothing in the folder is written.
The template (``templates/study_report.ipynb``) shows the baselines in order, the bottleneck each
one was profiled with (so the bottleneck after each accepted change), every round with its
summary in the method's terms and its decision records, and the ledger. The sections are drawn by
``workbench.render.study_report`` (and the study's own renderings, ``workbench.render``); every text
from the study is escaped there.
"""

from __future__ import annotations

import json
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import workbench.render.study_report as draw
from workbench.errors import ReportError
from workbench.report.files import ReportFiles, find_template

if TYPE_CHECKING:
    import altair

    from workbench.study.study import Study

TEMPLATE_NAME = "study_report.ipynb"
NOTEBOOK_FILE = "report.ipynb"
HTML_FILE = "report.html"
SUMMARY_FILE = "summary.json"
PAGE_CSS = draw.PAGE_CSS


StudyReportResult = ReportFiles  # the files the report wrote (workbench.report.files)


def default_study_template() -> Path:
    """The template next to the package (``templates/`` + ``TEMPLATE_NAME``)."""
    return find_template(TEMPLATE_NAME, "study report")


def open_study(folder: str | Path) -> tuple["Study", list[str]]:
    """The study in ``folder`` and the warnings reading it gave (a damaged line, skipped)."""
    from workbench.study.study import Study

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        study = Study.open(folder)
    return study, [str(w.message) for w in caught]


def study_summary(study: "Study") -> dict[str, Any]:
    """What the report holds, as plain JSON: baselines, rounds and their decisions, the ledger."""
    return {
        "study": study.name,
        "folder": str(Path(study.folder).resolve()),
        "baselines": [
            {
                "baseline_id": b.baseline_id,
                "label": b.label,
                "mode": b.mode,
                "median_ms": b.median_ms,
                "parent_id": b.parent_id,
                "accepted_from": b.accepted_from,
                "hypotheses": [h.category for h in b.hypotheses],
            }
            for b in study.baselines
        ],
        "rounds": [
            {
                "round": r.index,
                "baseline_id": r.baseline_id,
                "decisions": {k: v.decision for k, v in r.decisions.items()},
            }
            for r in study.rounds
        ],
        "ledger": [
            {
                "category": e.category,
                "key": e.key,
                "status": e.status,
                "round": e.round,
                "baseline_id": e.baseline_id,
                "reopen_when": e.reopen_when,
            }
            for e in study.ledger
        ],
    }


def build_study_report(
    out_dir: str | Path,
    folder: str | Path,
    *,
    template: str | Path | None = None,
    title: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> StudyReportResult:
    """Write ``report.ipynb``, ``report.html`` and ``summary.json`` for the study in ``folder``.
    Bad input (no study there, a newer format) raises before any notebook runs."""
    from workbench.report.execute import check_template, execute_template
    from workbench.report.render import render_html

    say = progress or (lambda _: None)
    out = Path(out_dir).resolve()
    if out.exists() and not out.is_dir():
        raise ReportError(f"the report folder {str(out)!r} is a file; pass --out a folder")
    source = Path(folder).resolve()
    if out == source or source in out.parents:
        raise ReportError(
            f"the report folder {str(out)!r} is inside the study folder {str(source)!r}; a report "
            f"never writes into the study: pass --out another folder"
        )
    template_path = Path(template).resolve() if template else default_study_template()
    check_template(template_path)
    say("reading the study...")
    study, read_warnings = open_study(source)
    summary = study_summary(study)
    summary.update(
        {
            "warnings": read_warnings,
            "template": str(template_path),
            "created_at": datetime.now(timezone.utc).isoformat(),
        }
    )
    out.mkdir(parents=True, exist_ok=True)
    params = {"study_folder": str(source), "title": title or f"workbench study report: {study.name}"}
    say("executing the study report notebook...")
    notebook = execute_template(template_path, out / NOTEBOOK_FILE, params)
    say("rendering the HTML page...")
    html_path = render_html(notebook, out / HTML_FILE)
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=1, default=str), encoding="utf-8")
    return StudyReportResult(str(out), str(html_path), str(notebook), summary)


# --- the sections the template shows (drawn by workbench.render.study_report) ---------------------
page_style = draw.page_style  # the page's table styles


def overview_html(study: "Study", read_warnings: Sequence[str] = ()) -> str:
    """The study now and the warnings reading it gave."""
    return draw.overview_html(study, read_warnings)


def baselines_html(study: "Study") -> str:
    """The baselines in order: ID, label, mode, median (p95, n), device, git, where each came from."""
    return draw.baselines_html(study)


def bottlenecks_html(study: "Study") -> str:
    """Per baseline: what it came from and its ranked hypotheses (the re-profiled bottleneck)."""
    return draw.bottlenecks_html(study)


def rounds_html(study: "Study") -> str:
    """Every round's summary in the method's terms, oldest first."""
    return draw.rounds_html(study)


def decisions_html(study: "Study") -> str:
    """Every round's decision records, one per variant."""
    return draw.decisions_html(study)


def ledger_html(study: "Study") -> str:
    """Every hypothesis ever proposed: status, confidence, round, evidence and when to reopen it."""
    return draw.ledger_html(study)


def baseline_chart(study: "Study") -> altair.Chart | None:
    """The baselines' medians in order (a bar per baseline), or None before the second baseline."""
    if len(study.baselines) < 2:
        return None
    import altair as alt
    import pandas as pd

    table = pd.DataFrame(
        [{"baseline": f"{b.index}: {b.label}", "median_ms": b.median_ms, "id": b.baseline_id} for b in study.baselines]
    )
    return (
        alt.Chart(table)
        .mark_bar()
        .encode(
            x=alt.X("baseline:N", sort=None, title="baseline"),
            y=alt.Y("median_ms:Q", title="median per call (ms)"),
            tooltip=["id:N", alt.Tooltip("median_ms:Q", format=".4g")],
        )
        .properties(title="the baseline's median after each accepted change", width=360, height=200)
    )
