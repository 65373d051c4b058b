"""Names made safe before any chart export: a trace's kernel and op names hold anything (a NUL too),
and vl-convert aborts the whole process on a character XML cannot hold ("Failed to parse text SVG:
NonXmlChar"). ``offline.save`` (every SVG / PNG / HTML / JSON file) and ``export.save_charts`` pass each
spec through :func:`xml_safe`.
"""

from __future__ import annotations

import re
from typing import Any

# characters XML 1.0 does not allow (C0 controls but tab, newline and carriage return; lone surrogates;
# U+FFFE, U+FFFF): vl-convert aborts the whole process on one of them in an SVG text
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
REPLACEMENT = "\ufffd"


def xml_safe(value: Any) -> Any:
    """``value`` (a vega-lite spec: dicts, lists, texts) with every character XML cannot hold replaced
    by U+FFFD, in keys and values: the one cleaning every chart export goes through (names from a
    trace hold anything, a NUL too). Returns ``value`` itself where there was nothing to replace."""
    if isinstance(value, str):
        return _NOT_XML.sub(REPLACEMENT, value) if _NOT_XML.search(value) else value
    if isinstance(value, dict):
        return {xml_safe(k): xml_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [xml_safe(v) for v in value]
    return value


__all__ = ["REPLACEMENT", "xml_safe"]
