"""The Comparison rendering: one row per variant (correctness, median, p95, speedup with its
interval, setup, decision), the decision, the hypothesis held against the measurement, the
decision record, and in HTML the comparison's charts (offline, ``workbench.charts``)."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from workbench.render import decision as decision_render
from workbench.render.escape import html_text, markdown_code, markdown_text, plain
from workbench.render.tables import Cell, html_table, markdown_table, text_table
from workbench.units import format_ms

if TYPE_CHECKING:
    from workbench.variants.results import Comparison, VariantResult

HEADERS = ("variant", "status", "correct", "median", "p95", "speedup", "speedup 95% CI", "setup",
           "decision", "reason")


def _ms(value: float | None) -> Cell:
    if value is None or not math.isfinite(value):
        return Cell("—", numeric=True)
    return Cell(format_ms(value), title=f"{value:.4f} ms", numeric=True)


def _ratio(value: float | None) -> str:
    return "—" if value is None or not math.isfinite(value) else f"{value:.3g}×"


def variant_row(result: VariantResult) -> list[Cell]:
    t, s, c = result.timing, result.speedup, result.correctness
    correct = "—" if c is None else ("yes" if c.passed else "no")
    ci = "—" if s is None else f"{_ratio(s.ci_low)} – {_ratio(s.ci_high)}"
    return [Cell(result.name), Cell(result.status), Cell(correct), _ms(t.median_ms if t else None),
            _ms(t.p95_ms if t else None), Cell(_ratio(s.point if s else None), numeric=True), Cell(ci),
            _ms(result.setup_ms), Cell(result.decision or "—"), Cell(result.decision_reason or result.reason or "")]


def rows(cmp: Comparison) -> list[list[Cell]]:
    return [variant_row(r) for r in cmp.results]


def _verdict(cmp: Comparison) -> str:
    verdict = cmp.hypothesis_verdict
    if not isinstance(verdict, dict):
        return ""
    return f"{verdict.get('status', '')}: {verdict.get('explanation', '')}"


def _charts_html(cmp: Comparison) -> str:
    try:
        from workbench.charts.notebook import comparison_html
    except ImportError as exc:  # altair missing: say so instead of a blank
        return f"<p>charts not available: {html_text(exc)}</p>"
    return comparison_html(cmp)


def html(cmp: Comparison, *, charts: bool = True, record: bool = True) -> str:
    d = cmp.decision
    verdict = _verdict(cmp)
    return (f"<div class='workbench-comparison'><b>Comparison against {html_text(cmp.baseline)}</b>"
            f"<div style='overflow-x:auto'>{html_table(HEADERS, rows(cmp), 'workbench-comparison')}</div>"
            f"<p>Decision: <code>{html_text(d.decision)}</code> for {html_text(d.variant)}: {html_text(d.reason)}</p>"
            + (f"<p><b>Hypothesis held against the measurement:</b> {html_text(verdict)}</p>" if verdict else "")
            + (_charts_html(cmp) if charts else "") + (decision_render.html(d) if record else "") + "</div>")


def text(cmp: Comparison, **_: Any) -> str:
    d = cmp.decision
    lines = [plain(f"comparison against {cmp.baseline}"), text_table(HEADERS, rows(cmp)),
             plain(f"decision: {d.decision} for {d.variant}: {d.reason}")]
    verdict = _verdict(cmp)
    if verdict:
        lines.append(plain(f"hypothesis held against the measurement: {verdict}"))
    return "\n".join(lines)


def markdown(cmp: Comparison) -> str:
    d = cmp.decision
    out = [f"### Comparison against {markdown_text(cmp.baseline)}", "", markdown_table(HEADERS, rows(cmp)), "",
           f"**Decision:** {markdown_code(d.decision)} for {markdown_text(d.variant)}: {markdown_text(d.reason)}"]
    verdict = _verdict(cmp)
    if verdict:
        out += ["", f"**Hypothesis held against the measurement:** {markdown_text(verdict)}"]
    return "\n".join(out) + "\n"
