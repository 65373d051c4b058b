"""The diagnosis rendering: a ``Diagnosis`` and ``run.hypotheses`` (a ``HypothesisList``), in
HTML, text (what ``workbench analyze`` prints) and Markdown: the run-level banner of a Diagnosis
(its timing caveats), then the ranked entries with their evidence, prediction and falsifier, then
what could not be judged.

This is the one HTML and Markdown rendering of a diagnosis: the values draw nothing themselves
(a notebook reaches this module through IPython's display formatter, ``workbench.render.ipython``).
The plain text of the entries is the hypotheses package's own (``workbench.hypotheses.ranked``):
it is the list's ``repr`` too. Every string from a trace (op and kernel names, evidence rows) is
escaped here, with ``workbench.render.escape``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from workbench.hypotheses import Diagnosis, Hypothesis, HypothesisList
from workbench.hypotheses.ranked import ranked_items, render_text
from workbench.render.escape import html_text, markdown_code, markdown_text, plain

Diagnosed = Diagnosis | HypothesisList | Iterable[Hypothesis]

EVIDENCE_ROWS = 5  # evidence rows shown per item in HTML


def _banner(value: Diagnosed) -> str:
    """The timing caveats qualifying a Diagnosis ("" for a plain hypothesis list)."""
    return value.banner if isinstance(value, Diagnosis) else ""


def _shown(hyps: list[Hypothesis], limit: int | None) -> list[Hypothesis]:
    return hyps[:limit] if limit else hyps


def _rows_table(rows: Iterable[dict]) -> str:
    rows = list(rows)
    if not rows:
        return ""
    cols = list(dict.fromkeys(k for r in rows for k in r))
    head = "".join(f"<th>{html_text(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{html_text(r.get(c, ''))}</td>" for c in cols) + "</tr>" for r in rows)
    return f'<table class="wb-evidence"><tr>{head}</tr>{body}</table>'


def html(value: Diagnosed, *, limit: int | None = None, evidence_rows: int = EVIDENCE_ROWS) -> str:
    """The diagnosis as HTML: the banner, then an ordered list of the hypotheses (with their
    evidence rows as small tables), then what could not be judged; every text escaped."""
    hyps, notes = ranked_items(value)
    e = html_text
    banner = _banner(value)
    parts = [f"<p class='wb-banner'>{e(banner)}</p>" if banner else "", '<div class="wb-diagnosis">']
    if not hyps:
        parts.append("<p><em>No hypothesis: no rule found evidence of a problem.</em></p>")
    parts.append("<ol>")
    for h in _shown(hyps, limit):
        parts.append(
            f'<li class="wb-hyp wb-{e(h.confidence)}"><b>[{e(h.category)}] {e(h.title)}</b> '
            f"<small>~{h.time_at_stake_ms:.3g} ms at stake · {e(h.confidence)} confidence · {e(h.status)}</small>"
            f"<br>Observed: {e(h.observed)}<br>Mechanism: {e(h.mechanism)}<ul>"
        )
        for ev in h.evidence:
            parts.append(f"<li>{e(ev.describe())}{' <small>[' + e(ev.source) + ']</small>' if ev.source else ''}")
            parts.append(_rows_table(ev.rows[:evidence_rows]))
            parts.append("</li>")
        parts.append(f"</ul>Predicted: {e(h.predicted_effect)}<br><b>Next experiment:</b> {e(h.falsifier)}")
        if h.suggested_variants:
            parts.append(f"<br>Variants: {e(', '.join(h.suggested_variants))}")
        parts.append("</li>")
    parts.append("</ol>")
    if notes:
        parts.append("<p><b>Not judged:</b></p><ul>" + "".join(f"<li>{e(n)}</li>" for n in notes) + "</ul>")
    parts.append("</div>")
    return "".join(parts)


def text(value: Diagnosed, *, limit: int | None = None, **options: Any) -> str:
    """The diagnosis as plain text: the banner, then ``workbench.hypotheses.ranked.render_text``."""
    banner = _banner(value)
    return plain((banner + "\n" if banner else "") + render_text(value, limit=limit, **options))


def markdown(value: Diagnosed, *, limit: int | None = None) -> str:
    """The diagnosis as Markdown: the banner in italics, one heading per hypothesis with its fields
    as a list, then what could not be judged; every text backslash-escaped."""
    hyps, notes = ranked_items(value)
    esc = markdown_text
    banner = _banner(value)
    out = [f"_{esc(banner)}_\n"] if banner else []
    if not hyps:
        out.append("_No hypothesis: no rule found evidence of a problem._")
    for i, h in enumerate(_shown(hyps, limit), 1):
        out.append(f"### {i}. {markdown_code(h.category)}: {esc(h.title)}")
        out.append(f"~{h.time_at_stake_ms:.3g} ms at stake · {esc(h.confidence)} confidence · {esc(h.status)}\n")
        out.append(f"- **Observed:** {esc(h.observed)}")
        out.append(f"- **Mechanism:** {esc(h.mechanism)}")
        for ev in h.evidence:
            out.append(f"- **Evidence:** {esc(ev.describe())}")
        out.append(f"- **Predicted effect:** {esc(h.predicted_effect)}")
        out.append(f"- **Next experiment (falsifier):** {esc(h.falsifier)}")
        if h.suggested_variants:
            out.append(f"- **Variants:** {', '.join(markdown_code(v) for v in h.suggested_variants)}")
        out.append("")
    if notes:
        out.append("**Not judged:**")
        out.extend(f"- {esc(n)}" for n in notes)
    return "\n".join(out)
