"""``workbench report --study FOLDER``: the whole optimization study as one offline HTML page.

The study is read (``wb.Study.open``) here first, so that a folder that is not a study, or one
from a newer format, is refused before any notebook runs (exit 2); a damaged line is skipped with
a warning, as the study itself does, and the rest is reported. Nothing in the folder is written.
The template (``templates/study_report.ipynb``) shows the baselines in order, the bottleneck each
one was profiled with (so the bottleneck after each accepted change), every round with its
summary in the method's terms and its decision records, and the ledger. The HTML sections are
built here from ``workbench.render``; every text from the study is escaped there.
"""

from __future__ import annotations

import json
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from workbench.errors import ReportError
from workbench.render.escape import html_text
from workbench.report.files import ReportFiles, find_template

if TYPE_CHECKING:
    import altair

    from workbench.study.study import Study

TEMPLATE_NAME = "study_report.ipynb"
NOTEBOOK_FILE = "report.ipynb"
HTML_FILE = "report.html"
SUMMARY_FILE = "summary.json"
PAGE_CSS = """<style>
.wb-study-report table { border-collapse: collapse; font-size: 12px; margin: 4px 0 10px 0; }
.wb-study-report th, .wb-study-report td { padding: 2px 8px; border-bottom: 1px solid #e3e3e3; text-align: left;
  vertical-align: top; }
.wb-study-report th { background: #f6f6f6; }
</style>"""


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


# --- the sections the template shows -----------------------------------------------------------
def page_style() -> str:
    return PAGE_CSS


def _wrap(body: str) -> str:
    return f"<div class='wb-study-report'>{body}</div>"


def _table(header: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html_text(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html_text(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def overview_html(study: "Study", read_warnings: Sequence[str] = ()) -> str:
    from workbench import render

    warned = "".join(f"<li>{html_text(w)}</li>" for w in read_warnings)
    notes = f"<p><b>While reading the study</b></p><ul>{warned}</ul>" if warned else ""
    return _wrap(render.html(study) + notes)


def baselines_html(study: "Study") -> str:
    """The baselines in order: ID, label, mode, median (p95, n), device, git, where each came from."""
    from workbench.units import format_ms

    rows = []
    for b in study.baselines:
        git = f"{str(b.git.get('commit', ''))[:10]}{' (dirty)' if b.git.get('dirty') else ''}" if b.git else "—"
        origin = (
            f"round {b.accepted_from.get('round')}: {b.accepted_from.get('variant')} "
            f"({b.accepted_from.get('decision')})"
            if b.accepted_from
            else "set"
        )
        rows.append(
            [
                b.index,
                b.baseline_id,
                b.label,
                b.mode,
                format_ms(b.median_ms),
                format_ms(b.p95_ms),
                b.n,
                b.device,
                git,
                origin,
            ]
        )
    if not rows:
        return _wrap("<p>No baseline yet.</p>")
    return _wrap(_table(["#", "baseline", "label", "mode", "median", "p95", "n", "device", "git", "from"], rows))


def bottlenecks_html(study: "Study") -> str:
    """Per baseline: what it came from and its ranked hypotheses (the re-profiled bottleneck)."""
    from workbench.units import format_ms

    rows = []
    for b in study.baselines:
        after = (
            f"after accepting {b.accepted_from.get('variant')} (round {b.accepted_from.get('round')})"
            if b.accepted_from
            else "the starting point"
        )
        ranked = (
            "; ".join(
                f"{i + 1}. {h.category} ({format_ms(h.time_at_stake_ms)} at stake): {h.title}"
                for i, h in enumerate(b.hypotheses[:3])
            )
            or "no hypothesis fired"
        )
        held = "; ".join(f"{h.get('key')} held back" for h in b.held_back)
        rows.append([b.baseline_id, after, format_ms(b.median_ms), ranked + (f" ({held})" if held else "")])
    if not rows:
        return _wrap("<p>No baseline yet.</p>")
    return _wrap(_table(["baseline", "profiled", "median", "bottleneck (ranked hypotheses)"], rows))


def rounds_html(study: "Study") -> str:
    """Every round's summary in the method's terms, oldest first."""
    from workbench import render

    if not study.rounds:
        return _wrap("<p>No round has been run.</p>")
    return _wrap("".join(render.html(r) for r in study.rounds))


def decisions_html(study: "Study") -> str:
    """Every round's decision records, one per variant."""
    from workbench import render

    parts = []
    for r in study.rounds:
        parts.append(f"<h3>Round {r.index}</h3>")
        parts += [render.html(record) for record in r.decisions.values()]
    return _wrap("".join(parts) or "<p>No decision yet.</p>")


def ledger_html(study: "Study") -> str:
    """Every hypothesis ever proposed: status, confidence, round, evidence and when to reopen it."""
    rows = []
    for e in study.ledger:
        tested = ", ".join(
            f"{v.get('name')} ({v.get('residual')})" for v in (e.evidence_scope or {}).get("variants", ()) or ()
        )
        rows.append(
            [
                e.category,
                e.title,
                e.status,
                e.confidence,
                "—" if e.round is None else e.round,
                e.baseline_id,
                tested or "not tested",
                e.reopen_when,
            ]
        )
    if not rows:
        return _wrap("<p>The ledger is empty.</p>")
    return _wrap(
        _table(["hypothesis", "title", "status", "confidence", "round", "baseline", "evidence", "reopen when"], rows)
    )


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
