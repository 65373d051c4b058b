"""``HypothesisList``: ranked hypotheses, best first (``run.hypotheses``), and their plain-text
form (``render_text``: what ``workbench analyze`` prints, and the list's ``repr``).

The HTML and Markdown of a diagnosis are drawn by the render layer (``workbench.render.diagnosis``,
reached by ``workbench.render.html(value)`` / ``markdown(value)`` and, in a notebook, by IPython's
display formatter, which ``workbench.render.ipython`` tells about this type by name): this layer
may not import it, and a value drawing itself would be a second rendering.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Union, cast

from workbench.hypotheses.hypothesis import Hypothesis

if TYPE_CHECKING:
    from workbench.hypotheses.diagnose import Diagnosis

# what the renderings take: a Diagnosis, a HypothesisList, or hypotheses in rank order
Renderable = Union["Diagnosis", "HypothesisList", Iterable[Hypothesis]]


class HypothesisList(list):
    """Ranked hypotheses, best first: a plain list (index it, slice it, iterate it) whose ``repr``
    is the readable text below instead of a wall of dataclass reprs; a notebook shows its HTML
    rendering (``workbench.render.diagnosis``, through IPython's display formatter). ``notes``
    are the statements of what could not be judged (a Diagnosis's ``statements()``)."""

    def __init__(self, hypotheses: Iterable[Hypothesis] = (), notes: Iterable[str] = ()) -> None:
        super().__init__(hypotheses)
        self.notes = list(notes)

    @classmethod
    def from_diagnosis(cls, diag: Renderable) -> "HypothesisList":
        return cls(list(diag), list(diag.statements()) if hasattr(diag, "statements") else [])

    def statements(self) -> list[str]:
        return list(self.notes)

    def to_text(self, *, limit: int | None = None, evidence_rows: int = 3) -> str:
        return render_text(self, limit=limit, evidence_rows=evidence_rows)

    def __repr__(self) -> str:
        return f"{len(self)} ranked hypothes{'is' if len(self) == 1 else 'es'}:\n" + render_text(self)

    __str__ = __repr__


def ranked_items(diag: Renderable) -> tuple[list[Hypothesis], list[str]]:
    """(the hypotheses in rank order, the statements of what could not be judged) of a Diagnosis, a
    HypothesisList or an iterable of hypotheses (which has no statements)."""
    if isinstance(diag, HypothesisList):
        return list(diag), diag.statements()
    if hasattr(diag, "hypotheses"):  # a Diagnosis (or one reloaded with the same attributes)
        found = cast("Diagnosis", diag)
        return list(found.hypotheses), list(found.statements())
    return list(diag), []


def _rows_text(rows: Iterable[dict], limit: int = 3) -> list[str]:
    return [", ".join(f"{k}={v}" for k, v in r.items()) for r in list(rows)[:limit]]


def render_text(diag: Renderable, *, limit: int | None = None, evidence_rows: int = 3) -> str:
    """The ranked hypotheses as plain text: each with its evidence, prediction and falsifier, then
    what could not be judged."""
    hyps, notes = ranked_items(diag)
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
