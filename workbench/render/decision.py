"""The DecisionRecord rendering: the decision, its reason, the mode it was decided in (training:
gradients checked and forward + backward timed; inference: forward only) with what the calls ran
on (no inputs, a stateful step's restored state, fresh or fixed inputs), DESIGN.md's fields, the
gradient checks the record carries, the lists (evidence, rejected alternatives, remaining risk,
failure cases), environment and settings.

The gradient checks are read from the record's own fields: its mode, the gradient tolerances in
its settings (``settings["gradient_tolerances"]``, dtype -> rtol / atol) and every line of its
evidence, rejected alternatives, remaining risk and failure cases that speaks of a gradient (a
candidate rejected for a wrong gradient says which one, ``grad arg[0]``); an inference record says
that no gradient was checked. A record of a variant built from a catalog fix names the fix (what it
changes, where it was applied, why) and its numerical class says the tolerance the fix was judged
with (a reduced-precision fix says so).

This is the one rendering of a DecisionRecord (the record draws nothing itself: a notebook reaches
this module through IPython's display formatter, ``workbench.render.ipython``; a report through
``record_html`` of the record's dict).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from workbench.render.escape import html_text, markdown_code, markdown_text, plain

if TYPE_CHECKING:
    from workbench.variants.decision import DecisionRecord

FIELDS = (
    ("Problem", "problem"),
    ("Bottleneck", "bottleneck"),
    ("Change", "change"),
    ("Numerical class", "numerical_class"),
    ("Why it is safe", "why_safe"),
    ("Guard", "guard"),
    ("Fallback", "fallback"),
    ("Result", "result"),
)
LISTS = (
    ("Evidence", "evidence"),
    ("Rejected alternatives", "rejected_alternatives"),
    ("Remaining risk", "remaining_risk"),
    ("Failure cases", "failure_cases"),
)
SETTINGS_LEFT_OUT = ("notes", "tolerances", "gradient_tolerances", "timing", "state")
MODES = {
    "training": "training: outputs checked, and the gradients and state changes the calls reach (counted "
    "as the record says why it is safe); forward and backward timed",
    "inference": "inference: outputs checked, forward timed (no gradient checked)",
}
_GRADIENT = re.compile(r"\b(grad|grads|gradient|gradients|backward|autograd)\b", re.IGNORECASE)


def mode_text(record: Mapping[str, Any]) -> str:
    """The record's mode in words (a record from before modes were recorded is an inference one),
    with what the calls ran on: no inputs (a notebook cell, a step that takes none: its state
    restored before each call), fresh random inputs, or the same fixed inputs each check."""
    mode = str(record.get("mode") or "inference")
    text = MODES.get(mode, mode)
    settings = record.get("settings") or {}
    state = str(settings.get("state") or "").strip().rstrip(".")
    if settings.get("inputs") == "none":
        text += "; the callable takes no inputs" + (f"; {state}" if state else "")
        return text
    if settings.get("fresh_inputs") is True:
        text += "; fresh random inputs each check"
    elif settings.get("fresh_inputs") is False:
        text += "; the same fixed inputs each check"
    return text + (f"; {state}" if state else "")


def gradient_checks(record: Mapping[str, Any]) -> list[str]:
    """The gradient checks the record carries (``DecisionRecord.to_dict()`` layout): the gradient
    tolerances per dtype, then each line of the record's lists that speaks of a gradient; [] for an
    inference record that mentions none."""
    lines = []
    tolerances = (record.get("settings") or {}).get("gradient_tolerances") or {}
    if tolerances:
        lines.append("gradient tolerances: " + ", ".join(f"{dtype} {_tolerance(t)}" for dtype, t in tolerances.items()))
    for title, key in LISTS:
        lines += [f"{title.lower()}: {item}" for item in record.get(key) or () if _GRADIENT.search(str(item))]
    return lines


def _tolerance(value: Any) -> str:
    if isinstance(value, Mapping):
        return " ".join(f"{k} {v:.3g}" if isinstance(v, (int, float)) else f"{k} {v}" for k, v in value.items())
    return str(value)


def _gradient_lines(record: Mapping[str, Any]) -> list[str]:
    checks = gradient_checks(record)
    if checks or record.get("mode") == "training":
        return checks or ["none listed in the record"]
    return []


def fix_text(record: Mapping[str, Any]) -> tuple[str, str]:
    """The catalog fix a record's variant was built from, as (its name, the rest: what it changes,
    where it was applied, what was found); ("", "") for a record of any other variant."""
    fix = record.get("fix") or {}
    if not fix:
        return "", ""
    rest = f" ({fix['changes']})" if fix.get("changes") else ""
    rest += f", applied at {fix.get('where') or 'the whole call'}"
    rest += f"; found: {fix['reason']}" if fix.get("reason") else ""
    return str(fix.get("name") or record.get("variant") or ""), rest


def numerical_text(record: Mapping[str, Any]) -> str:
    """The record's numerical class; for a fix, with the class the fix declares where it differs,
    whether it computes in reduced precision, and the tolerance it was judged with."""
    text = str(record.get("numerical_class") or "—")
    fix = record.get("fix") or {}
    if not fix:
        return text
    declared = fix.get("declared_class")
    if declared and declared != record.get("numerical_class"):
        text += f" (the fix declares '{declared}')"
    if fix.get("reduced_precision"):
        text += ": the fix computes in reduced precision, its results differ beyond rounding"
    return text + (f"; {fix['tolerance']}" if fix.get("tolerance") else "")


def _field_values(record: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(title, value) of the record's fields in order, the fix's row left out (``fix_text``)."""
    return [
        (title, numerical_text(record) if key == "numerical_class" else str(record.get(key) or "—"))
        for title, key in FIELDS
    ]


def _with_fix(rows: list[tuple[str, str]], fix_row: str | None) -> list[tuple[str, str]]:
    """The field rows with the fix's row after "Change" (where the record has a fix)."""
    if fix_row is None:
        return rows
    at = [title for title, _ in rows].index("Change") + 1
    return rows[:at] + [("Fix", fix_row)] + rows[at:]


def record_html(record: Mapping[str, Any]) -> str:
    """A decision record's fields (``DecisionRecord.to_dict()`` layout) as HTML, every text escaped."""
    name, rest = fix_text(record)
    fields = [(title, html_text(value)) for title, value in _field_values(record)]
    fix_row = f"<code>{html_text(name)}</code>{html_text(rest)}" if name else None
    rows = "".join(
        f"<tr><th style='text-align:left'>{title}</th><td style='text-align:left'>{value}</td></tr>"
        for title, value in [("Mode", html_text(mode_text(record)))] + _with_fix(fields, fix_row)
    )
    gradients = _gradient_lines(record)
    lists = (
        (
            "<h4>Gradient checks</h4><ul class='wb-gradient-checks'>"
            + "".join(f"<li>{html_text(x)}</li>" for x in gradients)
            + "</ul>"
        )
        if gradients
        else ""
    )
    for title, key in LISTS:
        items = "".join(f"<li>{html_text(x)}</li>" for x in record.get(key) or ()) or "<li>none</li>"
        lists += f"<h4>{title}</h4><ul>{items}</ul>"
    head = (
        f"<h3>Decision record: <code>{html_text(record.get('decision'))}</code> for "
        f"{html_text(record.get('variant'))}</h3><p>{html_text(record.get('reason'))}</p>"
    )
    return f"<div class='wb-decision-record'>{head}<table class='wb-decision'>{rows}</table>{lists}</div>"


def html(record: DecisionRecord) -> str:
    return record_html(record.to_dict())


def _settings(record: DecisionRecord) -> dict[str, Any]:
    return {k: v for k, v in record.settings.items() if k not in SETTINGS_LEFT_OUT}


def text(record: DecisionRecord) -> str:
    fields = record.to_dict()
    lines = [plain(f"decision: {record.decision} for {record.variant}"), "  " + plain(record.reason)]
    width = max(len(title) for title, _ in FIELDS)
    lines.append(f"  {'Mode'.ljust(width)}  {plain(mode_text(fields))}")
    name, rest = fix_text(fields)
    rows = _with_fix(_field_values(fields), name + rest if name else None)
    lines += [f"  {title.ljust(width)}  {plain(value)}" for title, value in rows]
    gradients = _gradient_lines(fields)
    if gradients:
        lines.append("  Gradient checks:")
        lines += [f"    - {plain(x)}" for x in gradients]
    for title, key in LISTS:
        items = fields[key]
        lines.append(f"  {title}:")
        lines += [f"    - {plain(x)}" for x in items] or ["    - none"]
    if record.environment:
        lines.append("  Environment: " + plain(", ".join(f"{k}={v}" for k, v in record.environment.items())))
    return "\n".join(lines)


def markdown(record: DecisionRecord) -> str:
    fields = record.to_dict()
    lines = [
        f"### Decision: {markdown_code(record.decision)} — {markdown_text(record.variant)}",
        "",
        markdown_text(record.reason),
        "",
        f"**Mode:** {markdown_text(mode_text(fields))}  ",
    ]
    name, rest = fix_text(fields)
    rows = [(title, markdown_text(value)) for title, value in _field_values(fields)]
    rows = _with_fix(rows, markdown_code(name) + markdown_text(rest) if name else None)
    lines += [f"**{title}:** {value}  " for title, value in rows]
    gradients = _gradient_lines(fields)
    if gradients:
        lines += ["", "#### Gradient checks", ""] + [f"- {markdown_text(x)}" for x in gradients]
    for title, key in LISTS:
        lines += ["", f"#### {title}", ""] + ([f"- {markdown_text(x)}" for x in fields[key]] or ["- none"])
    if record.environment:
        lines += ["", "#### Environment", ""] + [
            f"- {markdown_text(k)}: {markdown_text(v)}" for k, v in record.environment.items()
        ]
    settings = _settings(record)
    if settings:
        lines += ["", "#### Settings", ""] + [f"- {markdown_text(k)}: {markdown_text(v)}" for k, v in settings.items()]
    return "\n".join(lines) + "\n"
