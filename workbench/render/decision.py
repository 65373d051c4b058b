"""The DecisionRecord rendering: the decision, its reason, DESIGN.md's fields and the lists
(evidence, rejected alternatives, remaining risk, failure cases), environment and settings."""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from workbench.render.escape import html_text, markdown_text, plain

if TYPE_CHECKING:
    from workbench.variants.decision import DecisionRecord

FIELDS = (("Problem", "problem"), ("Bottleneck", "bottleneck"), ("Change", "change"),
          ("Numerical class", "numerical_class"), ("Why it is safe", "why_safe"), ("Guard", "guard"),
          ("Fallback", "fallback"), ("Result", "result"))
LISTS = (("Evidence", "evidence"), ("Rejected alternatives", "rejected_alternatives"),
         ("Remaining risk", "remaining_risk"), ("Failure cases", "failure_cases"))
SETTINGS_LEFT_OUT = ("notes", "tolerances", "timing")


def record_html(record: Mapping[str, Any]) -> str:
    """A decision record's fields (``DecisionRecord.to_dict()`` layout) as HTML, every text escaped."""
    rows = "".join(f"<tr><th style='text-align:left'>{title}</th><td style='text-align:left'>"
                   f"{html_text(record.get(key) or '—')}</td></tr>" for title, key in FIELDS)
    lists = ""
    for title, key in LISTS:
        items = "".join(f"<li>{html_text(x)}</li>" for x in record.get(key) or ()) or "<li>none</li>"
        lists += f"<h4>{title}</h4><ul>{items}</ul>"
    head = (f"<h3>Decision record: <code>{html_text(record.get('decision'))}</code> for "
            f"{html_text(record.get('variant'))}</h3><p>{html_text(record.get('reason'))}</p>")
    return f"<div class='wb-decision-record'>{head}<table class='wb-decision'>{rows}</table>{lists}</div>"


def html(record: DecisionRecord) -> str:
    return record_html(record.to_dict())


def _settings(record: DecisionRecord) -> dict[str, Any]:
    return {k: v for k, v in record.settings.items() if k not in SETTINGS_LEFT_OUT}


def text(record: DecisionRecord) -> str:
    fields = record.to_dict()
    lines = [plain(f"decision: {record.decision} for {record.variant}"), "  " + plain(record.reason)]
    width = max(len(title) for title, _ in FIELDS)
    lines += [f"  {title.ljust(width)}  {plain(fields[key] or '—')}" for title, key in FIELDS]
    for title, key in LISTS:
        items = fields[key]
        lines.append(f"  {title}:")
        lines += [f"    - {plain(x)}" for x in items] or ["    - none"]
    if record.environment:
        lines.append("  Environment: " + plain(", ".join(f"{k}={v}" for k, v in record.environment.items())))
    return "\n".join(lines)


def markdown(record: DecisionRecord) -> str:
    fields = record.to_dict()
    lines = [f"### Decision: `{plain(record.decision)}` — {markdown_text(record.variant)}", "",
             markdown_text(record.reason), ""]
    lines += [f"**{title}:** {markdown_text(fields[key] or '—')}  " for title, key in FIELDS]
    for title, key in LISTS:
        lines += ["", f"#### {title}", ""] + ([f"- {markdown_text(x)}" for x in fields[key]] or ["- none"])
    if record.environment:
        lines += ["", "#### Environment", ""] + [f"- {markdown_text(k)}: {markdown_text(v)}"
                                                  for k, v in record.environment.items()]
    settings = _settings(record)
    if settings:
        lines += ["", "#### Settings", ""] + [f"- {markdown_text(k)}: {markdown_text(v)}" for k, v in settings.items()]
    return "\n".join(lines) + "\n"
