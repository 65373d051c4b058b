"""Write a result's charts to files: SVG, PNG (vl-convert, no browser, no network), HTML or JSON.

``save_charts(result, folder)`` takes what a notebook displays (a ``ProfileRun``, a ``Trace``, a
variant ``Comparison``) or a list of charts, draws the same charts the notebook shows, and
writes one file per chart and format, named ``NN-<title>.<format>`` in display order. A run or trace with
allocator events (a non-empty ``memory`` table) gets the memory chart too (``workbench.charts.memory``, the
chart the notebook's memory section shows), after the others, as ``NN-memory.<format>``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable, Sequence

from workbench.charts.safe_names import xml_safe  # noqa: F401 - every export cleans names with it
from workbench.errors import InvalidArgumentError

FORMATS = ("svg", "png", "html", "json")
MEMORY_CHART = "memory"  # the memory chart's usermeta ``workbench_chart`` and file stem


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


def memory_charts(result: Any) -> list[Any]:
    """The memory chart of a ProfileRun's trace or of a Trace with allocator events; [] for anything else."""
    from workbench.charts.common import guarded_chart

    if hasattr(result, "decision") and hasattr(result, "results"):  # a Comparison: timings only
        return []
    if hasattr(result, "timing") and hasattr(result, "trace"):
        result = result.trace
    if result is None or isinstance(result, (list, tuple)) or not hasattr(result, "op_breakdown"):
        return []
    events = getattr(result, "memory", None)
    if events is None or not len(events):
        return []

    def build() -> Any:
        from workbench.charts.memory import memory_chart

        return memory_chart(result)

    chart = guarded_chart(build, "Memory")
    meta = getattr(chart, "usermeta", None)  # a chart saying why it cannot draw keeps its own usermeta too
    return [chart.properties(usermeta={**(meta if isinstance(meta, dict) else {}), "workbench_chart": MEMORY_CHART})]


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
    shown = result_charts(result, timeline=timeline)
    for i, chart in enumerate(shown, start=1):
        stem = f"{i:02d}-{slug(chart_title(chart_spec(chart)))}"
        for fmt in wanted:
            paths.append(save(chart, folder / f"{stem}.{fmt}", scale=scale))
    for i, chart in enumerate(memory_charts(result), start=len(shown) + 1):  # its vconcat has no title: named
        for fmt in wanted:
            paths.append(save(chart, folder / f"{i:02d}-{MEMORY_CHART}.{fmt}", scale=scale))
    return paths
