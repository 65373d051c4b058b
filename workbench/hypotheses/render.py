"""Render a diagnosis: plain text (the ``workbench analyze`` command), Markdown and HTML
(notebooks). Every string from a trace (op and kernel names) is escaped."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any, Iterable, Union, cast

from workbench.hypotheses.hypothesis import Hypothesis

if TYPE_CHECKING:
    from workbench.hypotheses.diagnose import Diagnosis

# what the renderers take: a Diagnosis, a HypothesisList, or hypotheses in rank order
Renderable = Union["Diagnosis", "HypothesisList", Iterable[Hypothesis]]


class HypothesisList(list):
    """Ranked hypotheses, best first: a plain list (index it, slice it, iterate it) that displays
    as the readable rendering below instead of a wall of dataclass reprs: ``_repr_html_`` in a
    notebook, the ``workbench analyze`` text as its ``repr``.  ``notes`` are the statements of
    what could not be judged (a Diagnosis's ``statements()``)."""

    def __init__(self, hypotheses: Iterable[Hypothesis] = (), notes: Iterable[str] = ()) -> None:
        super().__init__(hypotheses)
        self.notes = list(notes)

    @classmethod
    def from_diagnosis(cls, diag: Renderable) -> "HypothesisList":
        return cls(list(diag), list(diag.statements()) if hasattr(diag, "statements") else [])

    def statements(self) -> list[str]:
        return list(self.notes)

    def to_text(self, **kw: Any) -> str:
        return render_text(self, **kw)

    def to_markdown(self, **kw: Any) -> str:
        return render_markdown(self, **kw)

    def _repr_html_(self) -> str:
        return render_html(self)

    def _repr_markdown_(self) -> str:
        return render_markdown(self)

    def __repr__(self) -> str:
        return f"{len(self)} ranked hypothes{'is' if len(self) == 1 else 'es'}:\n" + render_text(self)

    __str__ = __repr__


def _items(diag: Renderable) -> tuple[list[Hypothesis], list[str]]:
    if isinstance(diag, HypothesisList):
        return list(diag), diag.statements()
    if hasattr(diag, "hypotheses"):  # a Diagnosis (or one reloaded with the same attributes)
        found = cast("Diagnosis", diag)
        return list(found.hypotheses), list(found.statements())
    return list(diag), []


def _rows_text(rows: Iterable[dict], limit: int = 3) -> list[str]:
    return [", ".join(f"{k}={v}" for k, v in r.items()) for r in list(rows)[:limit]]


def render_text(diag: Renderable, *, limit: int | None = None, evidence_rows: int = 3) -> str:
    hyps, notes = _items(diag)
    lines = []
    if not hyps:
        lines.append("No hypothesis: no rule found evidence of a problem.")
    for i, h in enumerate(hyps[:limit] if limit else hyps, 1):
        lines.append(
            f"{i}. [{h.category}] {h.title}  (~{h.time_at_stake_ms:.3g} ms at stake, {h.confidence} confidence, {h.status})"
        )
        lines.append(f"   observed:  {h.observed}")
        lines.append(f"   mechanism: {h.mechanism}")
        for e in h.evidence:
            lines.append(f"   evidence:  {e.describe()}" + (f"  [{e.source}]" if e.source else ""))
            lines.extend(f"              - {r}" for r in _rows_text(e.rows, evidence_rows))
        lines.append(f"   predicted: {h.predicted_effect}")
        lines.append(f"   refute by: {h.falsifier}")
        if h.confounders:
            lines.append(f"   confounders: {'; '.join(h.confounders)}")
        if h.suggested_variants:
            lines.append(f"   try variants: {', '.join(h.suggested_variants)}")
    if notes:
        lines.append("")
        lines.append("Not judged:")
        lines.extend(f"  - {n}" for n in notes)
    return "\n".join(lines)


def render_markdown(diag: Renderable, *, limit: int | None = None) -> str:
    hyps, notes = _items(diag)
    esc = _md_escape
    out = []
    if not hyps:
        out.append("_No hypothesis: no rule found evidence of a problem._")
    for i, h in enumerate(hyps[:limit] if limit else hyps, 1):
        out.append(f"### {i}. `{h.category}`: {esc(h.title)}")
        out.append(f"~{h.time_at_stake_ms:.3g} ms at stake · {h.confidence} confidence · {h.status}\n")
        out.append(f"- **Observed:** {esc(h.observed)}")
        out.append(f"- **Mechanism:** {esc(h.mechanism)}")
        for e in h.evidence:
            out.append(f"- **Evidence:** {esc(e.describe())}")
        out.append(f"- **Predicted effect:** {esc(h.predicted_effect)}")
        out.append(f"- **Next experiment (falsifier):** {esc(h.falsifier)}")
        if h.suggested_variants:
            out.append(f"- **Variants:** {', '.join('`' + v + '`' for v in h.suggested_variants)}")
        out.append("")
    if notes:
        out.append("**Not judged:**")
        out.extend(f"- {esc(n)}" for n in notes)
    return "\n".join(out)


def _md_escape(text: str) -> str:
    text = html.escape(str(text), quote=False)
    for ch in "\\`*_[]|#":
        text = text.replace(ch, "\\" + ch)
    return text


def render_html(diag: Renderable, *, limit: int | None = None, evidence_rows: int = 5) -> str:
    hyps, notes = _items(diag)
    e = html.escape
    parts = ['<div class="wb-diagnosis">']
    if not hyps:
        parts.append("<p><em>No hypothesis: no rule found evidence of a problem.</em></p>")
    parts.append("<ol>")
    for h in hyps[:limit] if limit else hyps:
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


def _rows_table(rows: Iterable[dict]) -> str:
    rows = list(rows)
    if not rows:
        return ""
    cols = list(dict.fromkeys(k for r in rows for k in r))
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(r.get(c, '')))}</td>" for c in cols) + "</tr>" for r in rows)
    return f'<table class="wb-evidence"><tr>{head}</tr>{body}</table>'
