"""The Comparison rendering: one row per variant, the baseline's first (correct ✓ / ✗, median and
p95 in ms, the speed-up against that one baseline with its 95 % interval, setup in adaptive units,
the decision), the decision, the hypothesis held against the measurement, the decision record
(once, in HTML), and in HTML the comparison's charts (offline, ``workbench.charts``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from workbench.render import decision as decision_render
from workbench.render.escape import html_text, markdown_code, markdown_text, plain
from workbench.render.tables import Cell, html_table, markdown_table, text_table
from workbench.units import format_ms

if TYPE_CHECKING:
    from workbench.variants.results import Comparison, VariantResult

HEADERS = (
    "variant",
    "status",
    "correct",
    "median (ms)",
    "p95 (ms)",
    "speed-up",
    "95 % interval",
    "setup",
    "decision",
    "reason",
)
GRADIENT_HEADER = "gradient error"  # shown where a row compared gradients (a training step)
MARKS = {True: "✓", False: "✗", None: "—"}


def ms_number(value: float | None) -> Cell:
    """A time in ms as a plain number for a "(ms)" column: three significant figures, never in
    scientific notation (22 650, 4.21, 0.0123); the exact figure is the cell's title."""
    if value is None or not math.isfinite(value):
        return Cell("—", numeric=True)
    magnitude = abs(value)
    if magnitude >= 1000:
        shown = f"{value:,.0f}".replace(",", " ")  # a narrow space between thousands
    elif magnitude == 0:
        shown = "0"
    else:
        shown = f"{value:.3g}"
        if "e" in shown:
            shown = f"{value:.{max(0, 2 - math.floor(math.log10(magnitude)))}f}"
    return Cell(shown, title=f"{value:.4f} ms", numeric=True)


def _ms(value: float | None) -> Cell:
    """A time in adaptive units (12.3 µs, 4.56 ms, 22.6 s)."""
    if value is None or not math.isfinite(value):
        return Cell("—", numeric=True)
    return Cell(format_ms(value), title=f"{value:.4f} ms", numeric=True)


def _ratio(value: float | None) -> str:
    return "—" if value is None or not math.isfinite(value) else f"{value:.3g}×"


def correct_mark(passed: bool | None) -> str:
    return MARKS.get(passed, "—")


def _relative(value: float | None) -> Cell:
    if value is None or not isinstance(value, (int, float)) or not math.isfinite(value):
        return Cell("—", numeric=True)
    return Cell(
        f"{value:.2g}" if value else "0",
        title=f"largest gradient error / largest |gradient| = {value:.6g}",
        numeric=True,
    )


def _has_gradients(results: Sequence[VariantResult]) -> bool:
    return any(getattr(r, "max_grad_rel_err", None) is not None for r in results)


def headers(cmp: Comparison) -> tuple[str, ...]:
    """The table's columns: ``HEADERS``, with the gradient error after "correct" on a training step."""
    if not _has_gradients(cmp.results):
        return HEADERS
    i = HEADERS.index("correct") + 1
    return HEADERS[:i] + (GRADIENT_HEADER,) + HEADERS[i:]


def variant_row(result: VariantResult, *, gradients: bool = False) -> list[Cell]:
    t, s, c = result.timing, result.speedup, result.correctness
    ci = "—" if s is None else f"{_ratio(s.ci_low)} – {_ratio(s.ci_high)}"
    decision = result.decision or "—"
    speedup = Cell(_ratio(s.point if s else None), numeric=True)
    if decision == "baseline":
        speedup, ci = Cell("1× (reference)", numeric=True), "—"
    row = [
        Cell(result.name),
        Cell(result.status),
        Cell(correct_mark(None if c is None else c.passed), title=(c.reason or None) if c is not None else None),
    ]
    if gradients:
        row.append(_relative(getattr(result, "max_grad_rel_err", None)))
    return row + [
        ms_number(t.median_ms if t else None),
        ms_number(t.p95_ms if t else None),
        speedup,
        Cell(ci),
        _ms(result.setup_ms),
        Cell(decision),
        Cell(result.decision_reason or result.reason or ""),
    ]


def rows(cmp: Comparison) -> list[list[Cell]]:
    """One row per variant, the baseline's (measured once, alongside every candidate) first."""
    gradients = _has_gradients(cmp.results)
    ordered = sorted(cmp.results, key=lambda r: r.name != cmp.baseline)
    return [variant_row(r, gradients=gradients) for r in ordered]


def table_html(cmp: Comparison) -> str:
    """The comparison's table alone (the variant panel shows it under its buttons)."""
    return f"<div style='overflow-x:auto'>{html_table(headers(cmp), rows(cmp), 'workbench-comparison')}</div>"


def _verdict(cmp: Comparison) -> str:
    verdict = cmp.hypothesis_verdict
    if not isinstance(verdict, dict):
        return ""
    return f"{verdict.get('status', '')}: {verdict.get('explanation', '')}"


def _charts_html(cmp: Comparison) -> str:
    try:
        from workbench.render.charts import comparison_html
    except ImportError as exc:  # altair missing: say so instead of a blank
        return f"<p>charts not available: {html_text(exc)}</p>"
    return comparison_html(cmp)


def winner_diff(cmp: Comparison) -> Any:
    """What changed between the baseline's profiled call and the record's variant's (``workbench.analysis.diff``:
    kernels and ops matched by name and call-tree place), read from the traces the comparison kept; None where
    there are none (``profile=False``, a comparison read back from a file), the record's variant is the baseline,
    or it was rejected."""
    import warnings

    d = cmp.decision
    paths = getattr(cmp, "trace_paths", None) or {}
    if d.variant == cmp.baseline or d.decision == "reject" or d.variant not in paths or cmp.baseline not in paths:
        return None
    from workbench.analysis.diff import trace_diff
    from workbench.trace import read_trace

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a one-call trace: what the loader would say is not the user's concern
        a, b = read_trace(paths[cmp.baseline], cache=False), read_trace(paths[d.variant], cache=False)
    return trace_diff(a, b, label_a=cmp.baseline, label_b=d.variant)


def _diff_html(cmp: Comparison) -> str:
    try:
        found = winner_diff(cmp)
    except Exception as exc:  # noqa: BLE001 - a diff that cannot be made must not hide the comparison
        return (
            f"<p class='wb-note'>no diff of the profiled calls: {html_text(type(exc).__name__)}: {html_text(exc)}</p>"
        )
    if found is None:
        return ""
    from workbench.render import diff as diff_render

    return (
        f"<h4>What changed in one profiled call: {html_text(cmp.decision.variant)} against "
        f"{html_text(cmp.baseline)}</h4>" + diff_render.html(found, limit=8, chart=False)
    )


def html(cmp: Comparison, *, charts: bool = True, record: bool = True) -> str:
    d = cmp.decision
    verdict = _verdict(cmp)
    return (
        f"<div class='workbench-comparison'><b>Comparison against {html_text(cmp.baseline)}</b>"
        + table_html(cmp)
        + f"<p>Decision: <code>{html_text(d.decision)}</code> for {html_text(d.variant)}: {html_text(d.reason)}</p>"
        + (f"<p><b>Hypothesis held against the measurement:</b> {html_text(verdict)}</p>" if verdict else "")
        + (_charts_html(cmp) if charts else "")
        + _diff_html(cmp)
        + (decision_render.html(d) if record else "")
        + "</div>"
    )


def text(cmp: Comparison, *, record: bool = False, **_: Any) -> str:
    """The table and the decision; ``record=True`` adds the decision record (a terminal shell's
    display of a comparison, where nothing else shows it)."""
    d = cmp.decision
    lines = [
        plain(f"comparison against {cmp.baseline}"),
        text_table(headers(cmp), rows(cmp)),
        plain(f"decision: {d.decision} for {d.variant}: {d.reason}"),
    ]
    verdict = _verdict(cmp)
    if verdict:
        lines.append(plain(f"hypothesis held against the measurement: {verdict}"))
    try:
        found = winner_diff(cmp)
    except Exception:  # noqa: BLE001 - the table and the decision stand
        found = None
    if found is not None:
        lines.append(plain(f"what changed in one profiled call: {found.summary}"))
    if record:
        lines += ["", decision_render.text(d)]
    return "\n".join(lines)


def markdown(cmp: Comparison) -> str:
    d = cmp.decision
    out = [
        f"### Comparison against {markdown_text(cmp.baseline)}",
        "",
        markdown_table(headers(cmp), rows(cmp)),
        "",
        f"**Decision:** {markdown_code(d.decision)} for {markdown_text(d.variant)}: {markdown_text(d.reason)}",
    ]
    verdict = _verdict(cmp)
    if verdict:
        out += ["", f"**Hypothesis held against the measurement:** {markdown_text(verdict)}"]
    return "\n".join(out) + "\n"
