"""``render.html(value)``, ``render.text(value)``, ``render.markdown(value)``: find the value's
renderer by its type (its class or, most-derived first, a base class, by module and name) and call
it. The one way to draw a value below the face: they have no ``_repr_html_`` / ``to_markdown``."""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from workbench.errors import InvalidArgumentError
from workbench.render.base import RENDERERS, Renderer


class UnknownResultError(InvalidArgumentError):
    """``render.html`` / ``text`` / ``markdown`` of a value no renderer draws."""


def _type_names(value: Any) -> list[tuple[str, str]]:
    return [(cls.__module__, cls.__qualname__) for cls in type(value).__mro__]


def renderer_for(value: Any) -> Renderer:
    """The renderer module of ``value``'s type (or of its nearest base class that has one)."""
    for name in _type_names(value):
        module = RENDERERS.get(name)
        if module is not None and importlib.util.find_spec(module) is not None:
            renderer: Renderer = importlib.import_module(module)
            return renderer
    known = sorted({cls for _, cls in RENDERERS})
    raise UnknownResultError(
        f"workbench.render has no rendering for a {type(value).__module__}.{type(value).__qualname__}; it "
        f"renders {', '.join(known)}. Pass one of those (a ProfileRun, a Trace, a Diagnosis or "
        "run.hypotheses, run.health, run.fixes, a Comparison, a DecisionRecord, run.attribution, an "
        "analysis result), or display the value itself"
    )


def html(value: Any, **options: Any) -> str:
    """The HTML rendering of ``value`` (for a notebook output or a report section)."""
    return renderer_for(value).html(value, **options)


def notebook_html(value: Any, **options: Any) -> str:
    """``html(value)`` as a notebook output shows it: with the one table style (text left, numbers right;
    ``workbench.render.tables.NOTEBOOK_CSS``), which a notebook's own stylesheet would otherwise override."""
    from workbench.render.tables import NOTEBOOK_CSS

    return NOTEBOOK_CSS + html(value, **options)


def text(value: Any, **options: Any) -> str:
    """The plain-text rendering of ``value`` (for a terminal)."""
    return renderer_for(value).text(value, **options)


def markdown(value: Any, **options: Any) -> str:
    """The Markdown rendering of ``value``."""
    return renderer_for(value).markdown(value, **options)
