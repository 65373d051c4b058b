"""Escaping, in one place, for every rendering: HTML, Markdown and plain text.

Every string that comes from a run, a trace or a user (op and kernel names, record_function
labels, variant names, reasons) passes through one of these before it reaches a view: a name
such as ``<script>`` or ``attn "qkv"`` shows as text and runs nothing. NUL and other control
characters (which break SVG export and terminals) become U+FFFD.
"""
from __future__ import annotations

import html
import re

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_MARKDOWN_SPECIAL = "\\`*_[]|#<>"


def plain(value: object) -> str:
    """``value`` as text, control characters replaced (tabs and newlines kept)."""
    return _CONTROL.sub("\ufffd", str(value))


def html_text(value: object) -> str:
    """``value`` as HTML text or attribute content: ``& < > " '`` escaped."""
    return html.escape(plain(value), quote=True)


def markdown_text(value: object) -> str:
    """``value`` as Markdown inline text: HTML and Markdown's own markup characters escaped,
    newlines folded (a table cell stays one cell)."""
    text = html.escape(plain(value), quote=False).replace("\n", " ")
    for ch in "\\`*_[]|#":
        text = text.replace(ch, "\\" + ch)
    return text
