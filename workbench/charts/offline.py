"""Show altair charts with no network: inline vega JS once per page, then a div per chart.

altair's default renderer fetches vega from a CDN (a blank chart offline) and its ``mimetype``
renderer breaks nbformat (see ENVIRONMENT.md). Here a chart becomes HTML that carries its own
vega: ``vl_convert.javascript_bundle()`` (vega + vega-lite + vega-embed, ~0.9 MB) is inlined
once per page and each chart is a ``<div>`` plus a ``vegaEmbed`` call. An exported page keeps
the first copy only (:func:`dedupe_bundles`). Static SVG/PNG come from vl-convert.

In a notebook, a chart reaches the page however it is shown: altair charts returned by the
builders display through the ``workbench`` altair renderer, enabled when this package is
imported (or the extension loaded) unless the user chose another renderer.

One copy of vega per notebook, still drawing after a reload: in a kernel, only the outputs of the
first cell that showed a chart in this kernel session carry the bundle (that cell again when re-run);
a cell is known by the id the front end sends (JupyterLab), else by its code (nbclient and papermill
name no cells). The bundle's output also stores it in the browser's ``localStorage``.  Every chart's
script draws with ``window.vegaEmbed`` if the page has it, else loads the stored copy, else waits
(15 s) for an output above to define it, and only then says what is missing.  Outside a kernel (a
plain script writing ``_repr_html_``) every output carries its own bundle, so it draws on its own.
A saved notebook of N chart outputs is ~0.9 MB, not N x 0.9 MB.
"""

from __future__ import annotations

import functools
import html
import itertools
import json
import re
import uuid
from pathlib import Path
from typing import Any, Protocol, Union

from workbench.errors import InvalidArgumentError


class Drawable(Protocol):
    """What draws: an altair chart (any kind, layered or concatenated) or an ``OfflineChart``."""

    def to_dict(self) -> dict[str, Any]: ...


# A chart, or its vega-lite spec as a dict.
ChartLike = Union[Drawable, dict[str, Any]]

_ids = itertools.count()
_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _vl_version() -> str | None:
    """The vega-lite version of altair's schema, if vl-convert bundles it (e.g. ``"6.4"``)."""
    import altair as alt
    import vl_convert as vlc

    major_minor = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    return major_minor if major_minor in vlc.get_vegalite_versions() else None


@functools.lru_cache(maxsize=1)
def vega_bundle_js() -> str:
    """vega + vega-lite + vega-embed as one classic script that sets ``window.vegaEmbed``.

    Wrapped in a function so that its top-level names cannot clash with the page's.
    """
    import vl_convert as vlc

    js = vlc.javascript_bundle(vl_version=_vl_version())  # type: ignore[call-arg]  # the stub requires the optional snippet
    return "if (!window.vegaEmbed) { (function () {\n" + js + "\n})(); }"


BUNDLE_OPEN = '<script type="text/javascript">if (!window.vegaEmbed) { (function () {\n'
BUNDLE_CLOSE = "\n})(); }</script>"
_BUNDLE_TAG = re.compile(re.escape(BUNDLE_OPEN) + ".*?" + re.escape(BUNDLE_CLOSE), re.S)


def bundle_script_tag() -> str:
    return '<script type="text/javascript">' + vega_bundle_js() + "</script>"


@functools.lru_cache(maxsize=1)
def bundle_storage_key() -> str:
    """The ``localStorage`` key of this bundle's stored copy (changes with the bundle)."""
    import hashlib

    return "workbench-vega-bundle-" + hashlib.sha1(vega_bundle_js().encode()).hexdigest()[:16]


_bundle_cells: set[str] = set()  # cells whose outputs carry the bundle in this kernel session


def _current_cell_id() -> str | None:
    """The id of the cell now executing: the front end's (JupyterLab sends one with each execution), else,
    in a kernel whose client names no cells (nbclient, papermill), one made from the cell's code (a re-run
    of the same cell has the same id); None outside a kernel (a script, a terminal IPython)."""
    try:
        from IPython import get_ipython

        kernel = getattr(get_ipython(), "kernel", None)
        parent = kernel.get_parent("shell") if kernel is not None else None
    except Exception:  # noqa: BLE001 - no kernel, an old kernel: no id
        return None
    parent = parent or {}
    cell = (parent.get("metadata") or {}).get("cellId")
    if cell:
        return str(cell)
    code = (parent.get("content") or {}).get("code")
    if isinstance(code, str) and (parent.get("header") or {}).get("msg_type") == "execute_request":
        import hashlib

        return "code-" + hashlib.sha1(code.encode("utf-8", "replace")).hexdigest()[:16]
    return None


def bundle_wanted() -> bool:
    """Whether the output being made now should carry the vega bundle (see the module docstring)."""
    cell = _current_cell_id()
    if cell is None:
        return True
    if not _bundle_cells or cell in _bundle_cells:
        _bundle_cells.add(cell)
        return True
    return False


def dedupe_bundles(page: str) -> tuple[str, int]:
    """``page`` with every vega bundle script after the first removed, and how many were removed.

    Notebook outputs each carry the bundle; a page that holds several needs only the first (the
    later ones would not run anyway: they are guarded by ``window.vegaEmbed``).
    """
    seen = {"first": False}

    def keep_first(match: re.Match) -> str:
        if seen["first"]:
            return ""
        seen["first"] = True
        return match.group(0)

    deduped, n_found = _BUNDLE_TAG.subn(keep_first, page)
    return deduped, max(n_found - 1, 0)


def script_safe_json(value: Any) -> str:
    """A JS literal that can sit inside ``<script>``: ``</script>``, ``<!--``, U+2028 escaped (NaN stays NaN)."""
    text = json.dumps(value, allow_nan=True, ensure_ascii=False, default=str)
    return "".join(_JSON_ESCAPES.get(ch, ch) for ch in text)


def chart_spec(chart: ChartLike) -> dict[str, Any]:
    """The vega-lite spec of an altair chart (or a spec dict passed through), NaN-free."""
    if isinstance(chart, dict):
        return chart
    if not hasattr(chart, "to_dict"):
        raise InvalidArgumentError(f"expected an altair chart or a vega-lite dict; got {type(chart).__name__}")
    return chart.to_dict()


def to_offline_html(chart: ChartLike, *, include_bundle: bool = True, renderer: str = "svg") -> str:
    """An HTML fragment that draws ``chart`` with no network access.

    ``include_bundle=False`` leaves out the vega JS: use it when the page already has it
    (``bundle_script_tag()``); without it the div says so plainly instead of staying blank.
    """
    if renderer not in ("svg", "canvas"):
        raise InvalidArgumentError(f"renderer must be 'svg' or 'canvas'; got {renderer!r}")
    spec = script_safe_json(chart_spec(chart))
    div_id = f"wb-chart-{next(_ids)}-{uuid.uuid4().hex[:8]}"
    missing = (
        "vega JavaScript is not loaded on this page: display the chart with "
        "workbench.charts.display(chart, include_bundle=True), or run the notebook's first "
        "chart cell again"
    )
    key = json.dumps(bundle_storage_key())
    store = (
        (  # the output that carries the bundle keeps a copy in the browser for later outputs
            "  if (window.vegaEmbed) { try { var s = el.previousElementSibling;\n"
            "    while (s && !(s.tagName === 'SCRIPT' && s.text.indexOf('if (!window.vegaEmbed)') === 0))"
            " s = s.previousElementSibling;\n"
            f"    if (s && window.localStorage && localStorage.getItem({key}) === null)"
            f" localStorage.setItem({key}, s.text); }} catch (e) {{}} }}\n"
        )
        if include_bundle
        else ""
    )
    embed = (
        "(function () {\n"
        f"  var el = document.getElementById({json.dumps(div_id)});\n"
        f"  var spec = {spec};\n" + store + "  function draw() {\n"
        f"    window.vegaEmbed(el, spec, {{actions: false, renderer: {json.dumps(renderer)}}})\n"
        "      .catch(function (err) { el.textContent = 'chart could not be drawn: ' + err; });\n"
        "  }\n"
        "  if (window.vegaEmbed) { draw(); return; }\n"
        f"  try {{ var code = window.localStorage && localStorage.getItem({key});"
        " if (code) { (0, eval)(code); } } catch (e) {}\n"
        "  if (window.vegaEmbed) { draw(); return; }\n"
        "  var waited = 0, timer = setInterval(function () {\n"
        "    if (window.vegaEmbed) { clearInterval(timer); draw(); }\n"
        f"    else if ((waited += 200) >= 15000) {{ clearInterval(timer); el.textContent = {json.dumps(missing)}; }}\n"
        "  }, 200);\n"
        "})();"
    )
    parts = [bundle_script_tag()] if include_bundle else []
    parts.append(f'<div id="{div_id}" class="workbench-chart"></div>')
    parts.append(f'<script type="text/javascript">\n{embed}\n</script>')
    return "\n".join(parts)


def notebook_html(chart: ChartLike, *, include_bundle: bool | None = True, renderer: str = "svg") -> str:
    """Offline HTML for one notebook output.  ``include_bundle=None``: as :func:`bundle_wanted`
    decides (one copy per notebook where the front end names cells, else one per output)."""
    if include_bundle is None:
        include_bundle = bundle_wanted()
    return to_offline_html(chart, include_bundle=include_bundle, renderer=renderer)


RENDERER_NAME = "workbench"


def _render_offline(spec: dict[str, Any], **_: Any) -> dict[str, str]:
    """altair renderer: the chart as offline HTML (see the module docstring)."""
    return {
        "text/html": notebook_html(spec, include_bundle=None),
        "text/plain": "<altair chart: drawn as offline HTML by workbench>",
    }


def enable_offline_renderer(*, force: bool = False) -> bool:
    """Register the ``workbench`` altair renderer and enable it where altair would load vega from
    a CDN (its ``default`` / ``html`` renderers); a renderer the user chose is kept unless
    ``force``.  Returns whether it is now active."""
    import altair as alt

    if RENDERER_NAME not in alt.renderers.names():
        alt.renderers.register(RENDERER_NAME, _render_offline)
    if force or alt.renderers.active in ("default", "html", RENDERER_NAME):
        alt.renderers.enable(RENDERER_NAME)
    return alt.renderers.active == RENDERER_NAME


class OfflineChart:
    """Wraps an altair chart so that notebooks (and nbconvert) show it offline."""

    def __init__(self, chart: ChartLike, *, renderer: str = "svg"):
        self.chart = chart
        self.renderer = renderer

    def _repr_html_(self) -> str:
        return notebook_html(self.chart, include_bundle=None, renderer=self.renderer)

    def to_dict(self) -> dict[str, Any]:
        return chart_spec(self.chart)


def display(chart: ChartLike, *, include_bundle: bool | None = None, renderer: str = "svg") -> None:
    """Show a chart, or a list of charts as one output, in the running notebook with no network
    (vega goes with the output once, or once per notebook: see the module docstring;
    ``include_bundle=True`` forces a copy into this output)."""
    from IPython.display import HTML
    from IPython.display import display as ipy_display

    charts = list(chart) if isinstance(chart, (list, tuple)) else [chart]
    ipy_display(
        HTML(
            "\n".join(
                notebook_html(c, include_bundle=include_bundle if i == 0 else False, renderer=renderer)
                for i, c in enumerate(charts)
            )
        )
    )


def page_html(charts: list[ChartLike], *, title: str = "workbench charts", renderer: str = "svg") -> str:
    """A whole standalone HTML page: the vega bundle once, then every chart."""
    body = "\n".join(to_offline_html(c, include_bundle=False, renderer=renderer) for c in charts)
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title>\n{bundle_script_tag()}\n</head>\n"
        f"<body>\n{body}\n</body></html>\n"
    )


def save(chart: ChartLike, path: str | Path, *, scale: float = 1.0) -> Path:
    """Write ``chart`` as ``.svg``, ``.png`` (vl-convert), ``.html`` (offline page) or ``.json``."""
    import vl_convert as vlc

    from workbench.charts.safe_names import xml_safe

    path = Path(path)
    suffix = path.suffix.lower()
    spec = xml_safe(chart_spec(chart))  # a NUL in a name would abort vl-convert (and the process)
    version = _vl_version()
    if suffix == ".svg":
        path.write_text(vlc.vegalite_to_svg(spec, vl_version=version), encoding="utf-8")
    elif suffix == ".png":
        path.write_bytes(vlc.vegalite_to_png(spec, vl_version=version, scale=scale))
    elif suffix in (".html", ".htm"):
        path.write_text(page_html([spec], title=path.stem), encoding="utf-8")
    elif suffix == ".json":
        path.write_text(json.dumps(spec, indent=1), encoding="utf-8")
    else:
        raise InvalidArgumentError(
            f"cannot save a chart as {suffix or 'a file without suffix'!r} ({path}); use .svg, .png, .html or .json"
        )
    return path
