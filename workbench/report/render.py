"""Render an executed notebook to one HTML file that loads nothing from the network.

nbconvert's lab template links require.js, MathJax and mermaid from CDNs; here each of those
URLs becomes an empty ``data:`` script, widget state is dropped (the report has no widgets),
and the result is checked: any ``http(s)://`` script, link or image source is an error.
Every chart output of the notebook carries its own vega JS (``workbench.charts``); the page keeps
the first copy only.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

from workbench.charts.offline import dedupe_bundles
from workbench.errors import ReportError, require_package

EMPTY_SCRIPT = "data:text/javascript,"
EXTERNAL_SOURCE = re.compile(
    r"""<(script|link|img|iframe)\b[^>]*\b(src|href)\s*=\s*["']?\s*((?:https?:)?//[^"'\s>]+)""", re.I
)


def external_sources(html: str) -> list[str]:
    """Every script/link/img/iframe source that would leave the machine."""
    return [m.group(3) for m in EXTERNAL_SOURCE.finditer(html)]


def render_html(notebook: Path, output: Path, *, hide_code: bool = True) -> Path:
    """nbconvert ``notebook`` to ``output``; raises ReportError if the page would go online."""
    require_package("nbconvert", extra="report", feature="rendering a report to HTML")
    from nbconvert import HTMLExporter

    nb = nbformat.read(notebook, as_version=4)
    nb.metadata.pop("widgets", None)
    exporter = HTMLExporter(
        template_name="lab", exclude_input=hide_code, exclude_input_prompt=True, exclude_output_prompt=True
    )
    for trait in (
        "require_js_url",
        "mathjax_url",
        "mermaid_js_url",
        "mermaid_layout_elk_js_url",
        "widget_renderer_url",
    ):
        setattr(exporter, trait, EMPTY_SCRIPT)
    body, _ = exporter.from_notebook_node(nb)
    body, _ = dedupe_bundles(body)
    leaks = external_sources(body)
    if leaks:
        raise ReportError(
            f"the rendered report would load {len(leaks)} resource(s) from the network "
            f"({leaks[:3]}); it was not written to {output}"
        )
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(body, encoding="utf-8")
    return output
