"""Render is the only place that draws (issue 23): HTML markup and HTML escaping appear in
``workbench/render/`` and nowhere else in the package, bar the chart embedding (the vega specs'
offline ``<script>``/``<div>`` wrapper, ``workbench/charts/offline.py``). Every other layer returns
values; the notebook card, the reports, the CLI and the widgets draw them through render.

The check reads each module's syntax tree: a string literal (f-strings' literal parts included,
docstrings not: they describe, they do not draw) holding an HTML tag, and an import of the standard
library's ``html`` module, are drawing."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "workbench"
DRAWS = ("render",)  # the package folders that may write HTML
CHART_SPECS = ("charts/offline.py",)  # the chart embedding: vega's script and its div, nothing else
TAG = re.compile(
    r"</?(table|thead|tbody|tr|td|th|div|span|p|ul|ol|li|h[1-6]|pre|code|b|i|em|strong|br|hr|details|"
    r"summary|style|script|a|img|small|sup|sub|section|button|label|input|select|option)\b[^<>]*>",
    re.IGNORECASE,
)


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring constants of a module, its classes and functions."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def drawing(source: str, name: str) -> list[str]:
    """Where ``source`` writes HTML markup or escapes HTML: ``name:line: what``."""
    tree = ast.parse(source, filename=name)
    skip = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            tag = TAG.search(node.value)
            if tag:
                found.append(f"{name}:{node.lineno}: HTML markup {tag.group(0)!r}")
        elif isinstance(node, ast.Import) and any(a.name == "html" or a.name.startswith("html.") for a in node.names):
            found.append(f"{name}:{node.lineno}: import html (escaping)")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "html":
            found.append(f"{name}:{node.lineno}: from {node.module} import ... (escaping)")
    return found


def package_drawing(root: Path = PACKAGE) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.split("/")[0] in DRAWS or rel in CHART_SPECS:
            continue
        out.extend(drawing(path.read_text(encoding="utf-8"), rel))
    return out


def test_only_render_draws_html() -> None:
    found = package_drawing()
    assert found == [], "HTML outside workbench/render/ (move it to a renderer):\n" + "\n".join(found)


def test_the_check_sees_markup_and_escaping_and_lets_docstrings_and_angle_brackets_be() -> None:
    drawn = drawing(
        '"""A <table> docstring."""\nimport html\nfrom html import escape\n'
        'x = f"<td class=\'n\'>{v}</td>"\ny = "<lambda> and <stdin> and a < b > c"\n',
        "m.py",
    )
    assert drawn == [
        "m.py:2: import html (escaping)",
        "m.py:3: from html import ... (escaping)",
        "m.py:4: HTML markup \"<td class='n'>\"",
        "m.py:4: HTML markup '</td>'",
    ], drawn
