"""The ProfileHealth rendering (``run.health``): its headline, then each check that is not ok
(warnings and notes with what to do; checks that could not be read), then the ok checks by name;
in HTML (the notebook display and the run card's timing section), text and Markdown.

The checks' words are the capture layer's (``ProfileHealth.headline``, ``HealthCheck.line``);
every text is escaped here, with ``workbench.render.escape``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from workbench.render.escape import html_text, markdown_text, plain

if TYPE_CHECKING:
    from workbench.capture.health import HealthCheck, ProfileHealth

# the check levels of workbench.capture.health (matched by value: the render layer imports capture
# for type checking only)
OK, NOTE, WARN = "ok", "note", "warn"
LEVEL_COLOURS = {WARN: "#b35900", NOTE: "#555", OK: "#2e7d32", "unknown": "#777"}


def _name(check: HealthCheck) -> str:
    return check.name.replace("_", " ")


def _advised(check: HealthCheck) -> bool:
    return bool(check.advice) and check.level in (WARN, NOTE)


def _ok_names(health: ProfileHealth) -> list[str]:
    return [_name(c) for c in health.checks if c.level == OK]


def html(health: ProfileHealth) -> str:
    """The headline in bold, a list of the checks that are not ok (level coloured, what to do for
    the warnings and notes), the ok checks in one small line."""
    items = "".join(
        f"<li><b style='color:{LEVEL_COLOURS.get(c.level, '#555')}'>{html_text(c.level)}</b> "
        f"{html_text(_name(c))}: {html_text(c.observed)}"
        + (f"<br><i>what to do:</i> {html_text(c.advice)}" if _advised(c) else "")
        + "</li>"
        for c in health.checks
        if c.level != OK
    )
    ok = _ok_names(health)
    tail = f"<p style='font-size:smaller'>ok: {html_text(', '.join(ok))}</p>" if ok else ""
    return (
        f"<div class='wb-health'><p><b>{html_text(health.headline())}</b></p>"
        + (f"<ul>{items}</ul>" if items else "")
        + tail
        + "</div>"
    )


def text(health: ProfileHealth) -> str:
    """The headline, then one line per warning and note (``ProfileHealth.lines``)."""
    return "\n".join(plain(line) for line in health.lines())


def markdown(health: ProfileHealth) -> str:
    """The headline in bold, a bullet per check that is not ok, the ok checks in one line."""
    lines = [f"**{markdown_text(health.headline())}**"]
    items = [
        f"- **{markdown_text(c.level)}** {markdown_text(_name(c))}: {markdown_text(c.observed)}"
        + (f"; _what to do:_ {markdown_text(c.advice)}" if _advised(c) else "")
        for c in health.checks
        if c.level != OK
    ]
    if items:
        lines += [""] + items
    ok = _ok_names(health)
    if ok:
        lines += ["", f"ok: {markdown_text(', '.join(ok))}"]
    return "\n".join(lines)
