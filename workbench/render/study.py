"""The study's renderings: a Study's current state (its baseline and ID, the top hypotheses, the
last round, the ledger) and a round's summary in the method's terms, as HTML, text and Markdown.

    html(study), text(study), markdown(study)          # a Study
    html(rnd), html(rnd.summary)                       # a StudyRound or its RoundSummary
    html(baseline)                                     # a Baseline (what study.accept returns)

The study layer may not import this one: a Study is displayed through the IPython formatter
registered by type name (``workbench.render.ipython``). Every text from the study (names,
reasons, hypotheses) is escaped here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeGuard, Union

from workbench.render.escape import html_text, markdown_code, markdown_text, plain
from workbench.units import format_ms

if TYPE_CHECKING:
    from workbench.study.baseline import Baseline
    from workbench.study.ledger import LedgerEntry
    from workbench.study.study import Study, StudyRound
    from workbench.study.summary import RoundSummary

    StudyValue = Union[Study, StudyRound, RoundSummary, Baseline]

TOP_HYPOTHESES = 5
STYLE = (
    "<style>.wb-study table{border-collapse:collapse;margin:4px 0 10px 0}"
    ".wb-study th,.wb-study td{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top}"
    ".wb-study .wb-keep{color:#1a7f37;font-weight:600}.wb-study .wb-reject{color:#b42318;font-weight:600}"
    ".wb-study .wb-undecided{color:#9a6700;font-weight:600}</style>"
)
DECISION_CLASS = {
    "keep": "wb-keep",
    "keep_guarded": "wb-keep",
    "reject": "wb-reject",
    "need_more_evidence": "wb-undecided",
    "micro_only": "wb-undecided",
}


def _kind(value: Any) -> str:
    return type(value).__name__


def _is_study(value: Any) -> TypeGuard["Study"]:
    """A Study (matched by name: the render layer imports the study layer for types only)."""
    return _kind(value) == "Study"


def _is_baseline(value: Any) -> TypeGuard["Baseline"]:
    return _kind(value) == "Baseline" and hasattr(value, "baseline_id")


def _summary_of(value: Any) -> "RoundSummary":
    return value.summary if _kind(value) == "StudyRound" else value


# -- small pieces ---------------------------------------------------------------------------------
def _table(header: Sequence[str], rows: Iterable[Sequence[Any]], raw: Sequence[int] = ()) -> str:
    """An HTML table, every cell escaped except the columns in ``raw`` (already HTML)."""
    head = "".join(f"<th>{html_text(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{c if i in raw else html_text(c)}</td>" for i, c in enumerate(row)) + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _decision_html(decision: Any) -> str:
    d = str(decision or "—")
    return f"<span class='{DECISION_CLASS.get(d, '')}'>{html_text(d)}</span>"


def _md_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    out = ["| " + " | ".join(markdown_text(h) for h in header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(markdown_text(c) for c in row) + " |" for row in rows]
    return out


def _speedup(r: Mapping[str, Any]) -> str:
    s, ci = r.get("speedup"), r.get("speedup_ci")
    if s is None:
        return "—"
    if ci and None not in ci:
        return f"x{s:.3g} [{ci[0]:.3g}, {ci[1]:.3g}]"
    return f"x{s:.3g}"


def _ms(value: Any) -> str:
    return format_ms(float(value)) if isinstance(value, (int, float)) else "—"


def baseline_line(b: "Baseline") -> str:
    """One baseline in words: ID, label, median (p95, n), device, mode, where it came from."""
    mode = ", training path" if b.mode == "training" else ""
    origin = (
        f", accepted from round {b.accepted_from.get('round')} ({b.accepted_from.get('variant')})"
        if b.accepted_from
        else ""
    )
    git = ""
    if b.git:
        git = f", commit {str(b.git.get('commit', ''))[:10]}{' (dirty)' if b.git.get('dirty') else ''}"
    return (
        f"{b.baseline_id} [{b.label}{mode}]: median {_ms(b.median_ms)} (p95 {_ms(b.p95_ms)}, n={b.n}) "
        f"on {b.device}{git}{origin}"
    )


def _hypothesis_rows(study: "Study") -> list[list[Any]]:
    return [
        [h.status, h.confidence, h.category, h.title, _ms(h.time_at_stake_ms), ", ".join(h.suggested_variants)]
        for h in study.hypotheses[:TOP_HYPOTHESES]
    ]


def _ledger_rows(entries: Sequence["LedgerEntry"]) -> list[list[Any]]:
    rows = []
    for e in entries:
        scope = e.evidence_scope or {}
        tested = ", ".join(f"{v.get('name')} ({v.get('residual')})" for v in scope.get("variants", ()) or ())
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
    return rows


LEDGER_HEADER = ("hypothesis", "title", "status", "confidence", "round", "baseline", "evidence", "reopen when")
HYPOTHESIS_HEADER = ("status", "confidence", "category", "title", "at stake per call", "suggested variants")
RESULT_HEADER = ("variant", "decision", "correct", "median", "speedup [CI]", "reason")


def _result_rows(summary: "RoundSummary") -> list[list[Any]]:
    return [
        [
            r.get("variant"),
            r.get("decision"),
            {True: "✓", False: "✗", None: "—"}.get(r.get("correct"), "—"),
            _ms(r.get("median_ms")),
            _speedup(r),
            r.get("reason") or "",
        ]
        for r in summary.results
    ]


# -- a round -------------------------------------------------------------------------------------
def _round_html(summary: "RoundSummary", *, heading: str = "h3") -> str:
    parts = [
        f"<{heading}>Round {summary.round} against baseline <code>{html_text(summary.baseline_id)}</code></{heading}>"
    ]
    rows = _result_rows(summary)
    for row in rows:
        row[1] = _decision_html(row[1])
    parts.append(_table(RESULT_HEADER, rows, raw=(1,)))

    def items(title: str, lines: Iterable[str]) -> None:
        lines = [x for x in lines if x]
        if lines:
            parts.append(
                f"<p><b>{html_text(title)}</b></p><ul>" + "".join(f"<li>{html_text(x)}</li>" for x in lines) + "</ul>"
            )

    items("Reset procedure", summary.reset_procedure)
    items(
        "Hypotheses and discriminators",
        [
            f"{h.get('key')} ({h.get('confidence', '?')} confidence, "
            f"{h.get('status', '?')}): {h.get('discriminator', '')}"
            for h in summary.hypotheses
        ]
        or ["none tested by this round"],
    )
    items(
        "Variants",
        [
            f"{v.get('name')} ({v.get('kind', '?')}): {v.get('description', '') or '—'}; tests "
            f"{', '.join(v.get('tests', ())) or 'no hypothesis'}"
            for v in summary.variants
        ],
    )
    items("Baseline check per variant", [f"{c.get('variant')}: {c.get('text', '')}" for c in summary.baseline_checks])
    items(
        "Confidence updates",
        [
            f"{u.get('key')}: {u.get('status_before')} -> {u.get('status_after')}, confidence "
            f"{u.get('confidence_before')} -> {u.get('confidence_after')} ({u.get('residual')}: "
            f"{u.get('reason', '')})"
            for u in summary.confidence_updates
        ]
        or ["none"],
    )
    items(
        "Residuals",
        [
            f"{r.get('key')} x {r.get('variant')}: {r.get('residual')} — {r.get('explanation', '')}"
            for r in summary.residuals
        ]
        or ["none"],
    )
    items("Disposition", [f"{d.get('variant')}: {d.get('action', '')}" for d in summary.disposition])
    items(
        "Next",
        [summary.next_step]
        + [
            f"{r.get('key')} ({r.get('status')}): reopen when {r.get('reopen_when')}" for r in summary.reopen_conditions
        ],
    )
    items("Timing", [summary.timing])
    items("Notes", summary.notes)
    return "".join(parts)


# -- a study -------------------------------------------------------------------------------------
def _study_html(study: "Study") -> str:
    base = study.baseline
    parts = [
        f"<h3>Study <code>{html_text(study.name)}</code></h3>",
        f"<p>{html_text(str(study.folder))}: {len(study.baselines)} baseline(s), {len(study.rounds)} round(s), "
        f"{len(study.ledger)} ledger entr{'y' if len(study.ledger) == 1 else 'ies'}</p>",
    ]
    if base is None:
        parts.append("<p>No baseline yet: <code>study.set_baseline(fn, make_inputs)</code></p>")
        return STYLE + f"<div class='wb-study'>{''.join(parts)}</div>"
    parts.append(f"<p><b>Baseline</b> <code>{html_text(base.baseline_id)}</code>: {html_text(baseline_line(base))}</p>")
    if study.hypotheses:
        parts.append(
            "<p><b>Top hypotheses of the current baseline</b></p>" + _table(HYPOTHESIS_HEADER, _hypothesis_rows(study))
        )
    else:
        parts.append("<p>No hypothesis proposed for the current baseline.</p>")
    if base.held_back:
        parts.append(
            "<p><b>Held back</b> (rejected before under the same scope)</p><ul>"
            + "".join(f"<li>{html_text(h.get('key'))}: {html_text(h.get('reason'))}</li>" for h in base.held_back)
            + "</ul>"
        )
    if study.rounds:
        parts.append(_round_html(study.rounds[-1].summary, heading="h4"))
    else:
        parts.append("<p>No round yet: <code>study.run_round({...})</code></p>")
    if study.ledger:
        parts.append("<p><b>Ledger</b></p>" + _table(LEDGER_HEADER, _ledger_rows(study.ledger)))
    if len(study.baselines) > 1:
        parts.append(
            "<p><b>Baselines</b></p><ol>"
            + "".join(f"<li>{html_text(baseline_line(b))}</li>" for b in study.baselines)
            + "</ol>"
        )
    return STYLE + f"<div class='wb-study'>{''.join(parts)}</div>"


def _study_text(study: "Study") -> str:
    lines = [
        plain(
            f"Study {study.name!r} in {str(study.folder)!r}: {len(study.baselines)} baseline(s), "
            f"{len(study.rounds)} round(s), {len(study.ledger)} ledger entries"
        )
    ]
    base = study.baseline
    if base is None:
        return "\n".join(lines + ["  no baseline yet: study.set_baseline(fn, make_inputs)"])
    lines.append(plain(f"  baseline {baseline_line(base)}"))
    if study.hypotheses:
        lines.append("  top hypotheses:")
        lines += [
            plain(f"    - [{h.status}, {h.confidence}] {h.category}: {h.title} ({_ms(h.time_at_stake_ms)} at stake)")
            for h in study.hypotheses[:TOP_HYPOTHESES]
        ]
    if study.rounds:
        last = study.rounds[-1]
        lines.append(f"  last round {last.index}:")
        lines += [
            plain(f"    - {r.get('variant')}: {r.get('decision')} ({r.get('reason') or ''})")
            for r in last.summary.results
        ]
        lines.append(plain(f"    next: {last.summary.next_step}"))
    if study.ledger:
        lines.append("  ledger:")
        lines += [
            plain(
                f"    - {e.category} ({e.title}): {e.status}, round {e.round if e.round is not None else '—'}, "
                f"reopen when {e.reopen_when}"
            )
            for e in study.ledger
        ]
    return "\n".join(lines)


def _study_markdown(study: "Study") -> str:
    lines = [f"## Study {markdown_code(study.name)}", ""]
    base = study.baseline
    if base is None:
        return "\n".join(lines + ["No baseline yet."])
    lines += [f"**Baseline** {markdown_code(base.baseline_id)}: {markdown_text(baseline_line(base))}", ""]
    if study.hypotheses:
        lines += ["**Top hypotheses**", ""] + _md_table(HYPOTHESIS_HEADER, _hypothesis_rows(study)) + [""]
    if study.rounds:
        last = study.rounds[-1].summary
        lines += (
            [f"**Last round ({last.round})**", ""]
            + _md_table(RESULT_HEADER, _result_rows(last))
            + ["", f"Next: {markdown_text(last.next_step)}", ""]
        )
    if study.ledger:
        lines += ["**Ledger**", ""] + _md_table(LEDGER_HEADER, _ledger_rows(study.ledger))
    return "\n".join(lines) + "\n"


# -- a baseline -----------------------------------------------------------------------------------
def _baseline_hypothesis_rows(b: "Baseline") -> list[list[Any]]:
    return [
        [h.status, h.confidence, h.category, h.title, _ms(h.time_at_stake_ms), ", ".join(h.suggested_variants)]
        for h in b.hypotheses[:TOP_HYPOTHESES]
    ]


def _origin(b: "Baseline") -> str:
    """Where the baseline came from, in words: accepted from a round (and its measured speed-up), or set."""
    a = b.accepted_from
    if not a:
        return f"set as baseline {b.index} of the study"
    speedup = a.get("speedup")
    gain = f", measured speed-up x{speedup:.3g}" if isinstance(speedup, (int, float)) else ""
    guard = f"; guard: {a.get('guard')}" if a.get("guard") else ""
    return (
        f"accepted {a.get('variant')} from round {a.get('round')} ({a.get('decision')}{gain}) on top of "
        f"{a.get('from') or b.parent_id}; re-profiled and its hypotheses ranked afresh{guard}"
    )


def _baseline_html(b: "Baseline") -> str:
    parts = [
        f"<h3>Baseline <code>{html_text(b.baseline_id)}</code> [{html_text(b.label)}]</h3>",
        f"<p>{html_text(_origin(b))}</p>",
        f"<p>{html_text(baseline_line(b))}</p>",
    ]
    if b.hypotheses:
        parts.append("<p><b>Top hypotheses</b></p>" + _table(HYPOTHESIS_HEADER, _baseline_hypothesis_rows(b)))
    else:
        parts.append("<p>No hypothesis proposed for this baseline.</p>")
    if b.held_back:
        parts.append(
            "<p><b>Held back</b> (rejected before under the same scope)</p><ul>"
            + "".join(f"<li>{html_text(h.get('key'))}: {html_text(h.get('reason'))}</li>" for h in b.held_back)
            + "</ul>"
        )
    parts.append(
        "<p><b>Reset procedure</b></p><ul>" + "".join(f"<li>{html_text(x)}</li>" for x in b.reset_procedure) + "</ul>"
    )
    return STYLE + f"<div class='wb-study'>{''.join(parts)}</div>"


def _baseline_text(b: "Baseline") -> str:
    lines = [plain(f"baseline {b.baseline_id} [{b.label}]: {_origin(b)}"), plain(f"  {baseline_line(b)}")]
    if b.hypotheses:
        lines.append("  top hypotheses:")
        lines += [
            plain(f"    - [{h.status}, {h.confidence}] {h.category}: {h.title} ({_ms(h.time_at_stake_ms)} at stake)")
            for h in b.hypotheses[:TOP_HYPOTHESES]
        ]
    else:
        lines.append("  no hypothesis proposed")
    return "\n".join(lines)


def _baseline_markdown(b: "Baseline") -> str:
    lines = [
        f"## Baseline {markdown_code(b.baseline_id)} [{markdown_text(b.label)}]",
        "",
        markdown_text(_origin(b)),
        "",
        markdown_text(baseline_line(b)),
        "",
    ]
    if b.hypotheses:
        lines += ["**Top hypotheses**", ""] + _md_table(HYPOTHESIS_HEADER, _baseline_hypothesis_rows(b))
    return "\n".join(lines) + "\n"


# -- the renderer's three functions ----------------------------------------------------------------
def html(value: "StudyValue") -> str:
    """A Study's current state, a round's summary, or a Baseline, as HTML."""
    if _is_study(value):
        return _study_html(value)
    if _is_baseline(value):
        return _baseline_html(value)
    diff = ""
    comparison = getattr(value, "comparison", None) if _kind(value) == "StudyRound" else None
    if comparison is not None:  # a round run in this process: its variants' profiled calls were kept
        from workbench.render.comparison import _diff_html

        diff = _diff_html(comparison)
    return STYLE + f"<div class='wb-study'>{_round_html(_summary_of(value))}{diff}</div>"


def text(value: "StudyValue") -> str:
    if _is_study(value):
        return _study_text(value)
    if _is_baseline(value):
        return _baseline_text(value)
    return plain(_summary_of(value).to_text())


def markdown(value: "StudyValue") -> str:
    if _is_study(value):
        return _study_markdown(value)
    if _is_baseline(value):
        return _baseline_markdown(value)
    summary = _summary_of(value)
    lines = [
        f"## Round {summary.round} of study {markdown_code(summary.study)} against baseline "
        f"{markdown_code(summary.baseline_id)}",
        "",
    ] + _md_table(RESULT_HEADER, _result_rows(summary))
    for title, items in summary.sections():  # the round's record: hypotheses, checks, residuals, disposition
        if items and title not in ("Baseline", "Results"):  # (in the heading and the table above)
            lines += ["", f"**{markdown_text(title)}**", ""] + [f"- {markdown_text(x)}" for x in items]
    return "\n".join(lines) + "\n"
