"""Write a result's charts to files: SVG, PNG (vl-convert, no browser, no network), HTML or JSON.

``save_charts(result, folder)`` takes what a notebook displays (a ``ProfileRun``, a ``Trace``, a
variant ``Comparison``) or a list of charts, draws the same charts the notebook shows, and
writes one file per chart and format, named ``NN-<title>.<format>`` in display order.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable, Sequence

from workbench.charts.safe_names import xml_safe  # noqa: F401 - every export cleans names with it
from workbench.errors import InvalidArgumentError

FORMATS = ("svg", "png", "html", "json")


def result_charts(result: Any, *, timeline: bool = True) -> list[Any]:
    """The charts a notebook shows for ``result`` (a list of charts passes through)."""
    from workbench.charts.run import comparison_charts, run_charts, trace_charts

    if isinstance(result, (list, tuple)):
        return list(result)
    if hasattr(result, "decision") and hasattr(result, "results"):
        return comparison_charts(result)
    if hasattr(result, "timing") and hasattr(result, "trace"):
        return run_charts(result, timeline=timeline)
    if hasattr(result, "op_breakdown") and hasattr(result, "kernels"):
        return trace_charts(result, timeline=timeline)
    raise InvalidArgumentError(
        f"save_charts takes a ProfileRun, a Trace, a Comparison or a list of charts; got {type(result).__name__}"
    )


def chart_title(spec: dict[str, Any]) -> str:
    """The title text of a vega-lite spec ('' when it has none)."""
    title = spec.get("title", "")
    if isinstance(title, dict):
        title = title.get("text", "")
    if isinstance(title, (list, tuple)):
        title = " ".join(str(t) for t in title)
    return str(title)


def slug(text: str, fallback: str = "chart") -> str:
    """A file-name-safe lower-case slug of ``text`` (ASCII letters, digits and dashes)."""
    out = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60].strip("-")
    return out or fallback


def _formats(formats: str | Iterable[str]) -> list[str]:
    wanted = [formats] if isinstance(formats, str) else list(formats)
    wanted = [f.lower().lstrip(".") for f in wanted]
    unknown = [f for f in wanted if f not in FORMATS]
    if unknown or not wanted:
        raise InvalidArgumentError(f"chart formats must be among {FORMATS}; got {wanted}")
    return wanted


def save_charts(
    result: Any,
    folder: str | Path,
    *,
    formats: str | Sequence[str] = ("svg",),
    scale: float = 1.0,
    timeline: bool = True,
) -> list[Path]:
    """Write every chart of ``result`` to ``folder`` (created) in each format; the paths written."""
    from workbench.charts.offline import chart_spec, save

    wanted = _formats(formats)
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise InvalidArgumentError(f"cannot write charts into {str(folder)!r}: it is a file; give a folder")
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, chart in enumerate(result_charts(result, timeline=timeline), start=1):
        stem = f"{i:02d}-{slug(chart_title(chart_spec(chart)))}"
        for fmt in wanted:
            paths.append(save(chart, folder / f"{stem}.{fmt}", scale=scale))
    return paths
