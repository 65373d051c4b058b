"""The variant panel's and the magics' small HTML pieces: the panel's heading, each fix's note (where
it applies, or why it cannot run here), its status line, a folded decision record, a note in italics,
and the magics' live status line. The panel (``workbench.widgets.variant_panel``) and the status line
(``workbench.magics.progress``) hold widgets and state; what they show is drawn here, every text
escaped (names, reasons and error messages come from the user's code).

    status_html("running ", Code("sdpa_attention"), ": timing…")
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.render.escape import html_text


@dataclass(frozen=True)
class Code:
    """A part of a status line shown as code (a name, a call to type)."""

    text: str


def status_html(*parts: str | Code) -> str:
    """A status line of plain texts (escaped) and ``Code`` parts."""
    return "".join(f"<code>{html_text(p.text)}</code>" if isinstance(p, Code) else html_text(p) for p in parts)


def heading_html(text: str) -> str:
    return f"<b>{html_text(text)}</b>"


def note_html(text: str) -> str:
    """A remark in place of something not there yet (no run, a chart not drawn)."""
    return f"<i>{html_text(text)}</i>"


def fix_note_html(*, applies: bool, where: str = "", reason: str = "", stake_ms: float | None = None) -> str:
    """A fix's line beside its box: where it applies and why, with the time at stake; or, greyed,
    why it is not applicable here (``reason``)."""
    if not applies:
        why = reason if reason.startswith("not applicable") else f"not applicable: {reason}"
        return f"<span style='color:#888'>{html_text(why)}</span>"
    stake = f" ({stake_ms:.3g} ms at stake)" if stake_ms else ""
    return f"at <code>{html_text(where or 'the whole call')}</code>: {html_text(reason)}{html_text(stake)}"


def folded_record_html(name: str, decision: str, record_html: str, *, open_: bool) -> str:
    """A decision record under a summary line naming the variant and its decision (``record_html``:
    the record as ``workbench.render`` draws it)."""
    state = " open" if open_ else ""
    return (
        f"<details{state} class='workbench-decision'><summary><b>Decision record: "
        f"{html_text(name)}</b> — {html_text(decision)}</summary>{record_html}</details>"
    )


def live_status_html(text: str) -> str:
    """The magics' status line while a long step runs (``workbench.magics.progress``)."""
    return f"<div class='workbench-status' style='font-family:monospace;color:#555'>{html_text(text)}</div>"
