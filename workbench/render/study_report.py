"""The sections of ``workbench report --study`` (the whole optimization study as one offline HTML
page): the study now, the baselines in order, the bottleneck each was profiled with, every round,
every decision record and the ledger.

``workbench.report.study_report`` reads the study and puts the sections in order; the rounds, the
decision records and the study's current state are their own renderings (``workbench.render.study``,
``workbench.render.decision``) and the tables here are written by ``workbench.render.tables``, the
ledger's rows being the study card's own. Every text from the study is escaped. The study layer
is imported for types only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from workbench.render.escape import html_text
from workbench.render.study import LEDGER_HEADER, _ledger_rows
from workbench.render.tables import html_table
from workbench.units import format_ms

if TYPE_CHECKING:
    from workbench.study.study import Study

TABLE_CLASS = "wb-study-table"
PAGE_CSS = """<style>
.wb-study-report table { border-collapse: collapse; font-size: 12px; margin: 4px 0 10px 0; }
.wb-study-report th, .wb-study-report td { padding: 2px 8px; border-bottom: 1px solid #e3e3e3; text-align: left;
  vertical-align: top; }
.wb-study-report th { background: #f6f6f6; }
</style>"""
BASELINE_HEADER = ("#", "baseline", "label", "mode", "median", "p95", "n", "device", "git", "from")
BOTTLENECK_HEADER = ("baseline", "profiled", "median", "bottleneck (ranked hypotheses)")
BOTTLENECK_HYPOTHESES = 3  # ranked hypotheses named per baseline


def page_style() -> str:
    """The report's table styles (one ``<style>`` block, no external stylesheet)."""
    return PAGE_CSS


def _wrap(body: str) -> str:
    return f"<div class='wb-study-report'>{body}</div>"


def _section(header: Sequence[str], rows: list[list[Any]], empty: str) -> str:
    if not rows:
        return _wrap(f"<p>{html_text(empty)}</p>")
    return _wrap(html_table(header, [[str(c) for c in row] for row in rows], TABLE_CLASS))


def overview_html(study: Study, read_warnings: Sequence[str] = ()) -> str:
    """The study now (``workbench.render.study``) and the warnings reading it gave."""
    from workbench.render.dispatch import html

    warned = "".join(f"<li>{html_text(w)}</li>" for w in read_warnings)
    notes = f"<p><b>While reading the study</b></p><ul>{warned}</ul>" if warned else ""
    return _wrap(html(study) + notes)


def baseline_rows(study: Study) -> list[list[Any]]:
    """Per baseline: index, ID, label, mode, median, p95, n, device, git commit, where it came from."""
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
            [b.index, b.baseline_id, b.label, b.mode, format_ms(b.median_ms), format_ms(b.p95_ms), b.n, b.device]
            + [git, origin]
        )
    return rows


def baselines_html(study: Study) -> str:
    """The baselines in order: ID, label, mode, median (p95, n), device, git, where each came from."""
    return _section(BASELINE_HEADER, baseline_rows(study), "No baseline yet.")


def bottleneck_rows(study: Study) -> list[list[Any]]:
    """Per baseline: what it was profiled after, its median, its first ranked hypotheses (and what
    was held back)."""
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
                for i, h in enumerate(b.hypotheses[:BOTTLENECK_HYPOTHESES])
            )
            or "no hypothesis fired"
        )
        held = "; ".join(f"{h.get('key')} held back" for h in b.held_back)
        rows.append([b.baseline_id, after, format_ms(b.median_ms), ranked + (f" ({held})" if held else "")])
    return rows


def bottlenecks_html(study: Study) -> str:
    """Per baseline: what it came from and its ranked hypotheses (the re-profiled bottleneck)."""
    return _section(BOTTLENECK_HEADER, bottleneck_rows(study), "No baseline yet.")


def rounds_html(study: Study) -> str:
    """Every round's summary in the method's terms, oldest first (``workbench.render.study``)."""
    from workbench.render.dispatch import html

    if not study.rounds:
        return _wrap("<p>No round has been run.</p>")
    return _wrap("".join(html(r) for r in study.rounds))


def decisions_html(study: Study) -> str:
    """Every round's decision records, one per variant (``workbench.render.decision``)."""
    from workbench.render.dispatch import html

    parts = []
    for r in study.rounds:
        parts.append(f"<h3>Round {html_text(r.index)}</h3>")
        parts += [html(record) for record in r.decisions.values()]
    return _wrap("".join(parts) or "<p>No decision yet.</p>")


def ledger_html(study: Study) -> str:
    """Every hypothesis ever proposed: status, confidence, round, evidence and when to reopen it
    (the rows of the study card's ledger)."""
    return _section(LEDGER_HEADER, _ledger_rows(study.ledger), "The ledger is empty.")
