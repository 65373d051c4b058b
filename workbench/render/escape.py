"""Escaping, in one place, for every rendering: HTML, Markdown and plain text.

Every string that comes from a run, a trace or a user (op and kernel names, record_function
labels, variant names, reasons) passes through one of these before it reaches a view: a name
such as ``<script>`` or ``attn "qkv"`` shows as text and runs nothing. NUL and other control
characters (which break SVG export and terminals) become U+FFFD.

Markdown is escaped for Markdown alone, with backslashes (CommonMark lets any ASCII punctuation
be backslash-escaped): ``<script>`` becomes ``\\<script\\>``, which a Markdown renderer shows as the
text ``<script>`` and never as a tag, and ``'`` or ``"`` stay as they are. HTML entities are not
used there: Markdown is read raw as often as rendered, and an entity escaped again for Markdown
(``&\\#x27;``) would show literally.
"""

from __future__ import annotations

import html
import re

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# backslash-escaped in Markdown text: markup (emphasis, code, links, headings, table cells, raw
# HTML, entities, strikethrough) and the dollar sign (Jupyter's Markdown reads $...$ as maths)
_MARKDOWN_SPECIAL = frozenset("\\`*_[]<>|#&~$")
_NEWLINES = re.compile(r"\r\n|[\r\n]")


def plain(value: object) -> str:
    """``value`` as text, control characters replaced (tabs and newlines kept)."""
    return _CONTROL.sub("\ufffd", str(value))


def html_text(value: object) -> str:
    """``value`` as HTML text or attribute content: ``& < > " '`` escaped."""
    return html.escape(plain(value), quote=True)


def markdown_text(value: object) -> str:
    """``value`` as Markdown inline text that a Markdown renderer shows as the original characters:
    control characters replaced, Markdown's markup characters (and ``<``, ``>``, ``&``) escaped
    with a backslash, newlines folded (a table cell stays one cell)."""
    text = _NEWLINES.sub(" ", plain(value))
    return "".join("\\" + ch if ch in _MARKDOWN_SPECIAL else ch for ch in text)


def markdown_code(value: object) -> str:
    """``value`` as a Markdown code span, shown verbatim (a code span takes no escapes): fenced
    with one more backtick than the longest run of backticks inside it, newlines folded. Not for
    a table cell (a ``|`` there still ends the cell): use ``markdown_text``."""
    text = _NEWLINES.sub(" ", plain(value))
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    # a space inside each fence where the text touches a backtick, or where CommonMark would
    # strip one from a text that starts and ends with a space
    padded = text.startswith("`") or text.endswith("`") or (text[:1] == text[-1:] == " " and text.strip())
    pad = " " if padded else ""
    return f"{fence}{pad}{text}{pad}{fence}"
