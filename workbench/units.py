"""Times for people: one formatter for every view (notebook HTML, report, CLI text).

Tables keep one unit inside (``*_us``, ``*_ms``); only display converts. Times a person reads are
per call in adaptive units, the way ``%timeit`` and torch.profiler's tables print them
(``12.3 µs``, ``4.56 ms``, ``1.23 s``); a total over several calls says so (``"2.21 s total"``).

    >>> format_ms(0.0123)
    '12.3 µs'
    >>> format_ms(2209.0, total=True)
    '2.21 s total'
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

MICRO = "µs"
# (upper bound in ms, divisor from ms, unit): the first row whose bound the value is under
_SCALES = ((1e-3, 1e-6, "ns"), (1.0, 1e-3, MICRO), (1e3, 1.0, "ms"), (math.inf, 1e3, "s"))


def _number(value: float, digits: int) -> str:
    text = f"{value:.{digits}g}"
    if "e" in text:  # 1000 after rounding: never scientific notation
        text = f"{value:.0f}"
    return text


def format_ms(ms: Any, *, total: bool = False, digits: int = 3) -> str:
    """A time in milliseconds as ``digits`` significant figures in ns / µs / ms / s.

    ``total=True`` marks a sum over several calls (``"… total"``); ``None`` / NaN read ``"n/a"``.
    """
    try:
        value = float(ms)
    except (TypeError, ValueError):
        return "n/a"
    if not math.isfinite(value):
        return "n/a" if math.isnan(value) else ("∞" if value > 0 else "-∞")
    magnitude = abs(value)
    if magnitude == 0:
        return "0 ms total" if total else "0 ms"
    for bound, divisor, unit in _SCALES:
        scaled = magnitude / divisor
        # a value that rounds up to the next unit's 1000 moves to that unit
        if magnitude < bound and float(_number(scaled, digits)) < 1000:
            break
    else:  # pragma: no cover - the last bound is infinite
        divisor, unit = 1e3, "s"
    text = f"{'-' if value < 0 else ''}{_number(magnitude / divisor, digits)} {unit}"
    return f"{text} total" if total else text


def format_us(us: Any, *, total: bool = False, digits: int = 3) -> str:
    """``format_ms`` for a value in microseconds (the trace tables' unit)."""
    try:
        return format_ms(float(us) / 1e3, total=total, digits=digits)
    except (TypeError, ValueError):
        return "n/a"


def format_per_call(ms: Any, *, digits: int = 3) -> str:
    """A per-call time, said as such: ``"3.9 ms per call"``."""
    text = format_ms(ms, digits=digits)
    return text if text == "n/a" else f"{text} per call"


def format_pct(fraction: Any, *, digits: int = 1) -> str:
    """A fraction of a stated whole as a percentage (``0.123 -> "12.3 %"``)."""
    try:
        value = float(fraction)
    except (TypeError, ValueError):
        return "n/a"
    if not math.isfinite(value):
        return "n/a"
    return f"{value * 100:.{digits}f} %"


def format_ratio(ratio: Any, *, digits: int = 2) -> str:
    """A ratio of two times (``1.234 -> "1.23x"``)."""
    try:
        value = float(ratio)
    except (TypeError, ValueError):
        return "n/a"
    return "n/a" if not math.isfinite(value) else f"{value:.{digits}g}x"


# --- breakdown tables as text (the CLI's `workbench analyze`, any text view) -----------------------------------

# ``*_us`` columns of the analysis tables: per call (one event) or a total over the traced calls
PER_CALL_COLUMNS = frozenset(
    {"mean_us", "min_us", "max_us", "std_us", "mean_self_us", "runtime_us", "gpu_us", "launch_delay_us", "blocked_us"}
)
TOTAL_COLUMNS = frozenset(
    {
        "sum_us",
        "self_us",
        "total_us",
        "idle_us",
        "compute_us",
        "non_compute_us",
        "kernel_time_us",
        "gpu_busy_us",
        "gpu_idle_us",
        "comm_us",
        "memory_us",
        "overlap_us",
        "exposed_comm_us",
    }
)
TIMESTAMP_COLUMNS = frozenset({"ts_us", "launch_ts_us", "gpu_start_us", "gpu_end_us"})
MAX_TEXT_CELL = 72  # characters of a text cell shown (C++ template names run to 1,000+)


def time_column_kind(column: str, columns: Iterable[str] = ()) -> str | None:
    """``"per call"``, ``"total"``, ``"at"`` (a timestamp), ``"time"`` (a time of neither kind) or None
    (not a time) for a table column.
    ``dur_us`` is a total where the table counts events per row (``count``), else one event's."""
    if not column.endswith("_us"):
        return None
    if column in TIMESTAMP_COLUMNS:
        return "at"
    if column in TOTAL_COLUMNS or (column == "dur_us" and "count" in set(columns)):
        return "total"
    return "per call" if column in PER_CALL_COLUMNS else "time"


def column_header(column: str, columns: Iterable[str] = ()) -> str:
    """A table column's header for people: ``sum_us`` -> ``sum (total)``, ``mean_us`` -> ``mean (per call)``."""
    kind = time_column_kind(column, columns)
    if kind is None:
        return "%" if column == "pct" else (column[:-4] + " %" if column.endswith("_pct") else column)
    base = {"total_us": "inclusive"}.get(column, column[:-3])
    return {"total": f"{base} (total)", "per call": f"{base} (per call)", "at": f"{base} (from start)", "time": base}[
        kind
    ]


def _cell(value: Any, kind: str | None, column: str, max_cell: int) -> str:
    if kind is not None:
        return format_us(value)
    if column == "pct" or column.endswith("_pct"):
        try:
            number = float(value)
        except (TypeError, ValueError):
            return "n/a"
        return "n/a" if not math.isfinite(number) else f"{number:.1f} %"
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return _number(value, 4) if abs(value) < 1e15 else f"{value:.3g}"
    text = str(value).replace("\n", " ")
    return text if len(text) <= max_cell else text[: max_cell - 1] + "…"


def format_table(
    table: "pd.DataFrame", *, names: Callable[[Iterable[Any]], list[str]] | None = None, max_cell: int = MAX_TEXT_CELL
) -> str:
    """A breakdown table as aligned text: times in adaptive units (``format_us``), headers that say
    which are per call and which are totals over the traced calls, ``pct`` as percentages, long texts
    cut. ``names`` (e.g. ``workbench.analysis.labels.unique_labels``) turns the ``name`` column into the
    labels every view shows."""
    columns = [str(c) for c in table.columns]
    records = table.to_dict("records")
    if names is not None and "name" in columns:
        for record, label in zip(records, names([r["name"] for r in records])):
            record["name"] = label
    kinds = {c: time_column_kind(c, columns) for c in columns}
    header = [column_header(c, columns) for c in columns]
    body = [[_cell(r[c], kinds[c], c, max_cell) for c in columns] for r in records]
    widths = [max([len(h)] + [len(row[i]) for row in body]) for i, h in enumerate(header)]
    left = [
        c in ("name", "kernel_type", "kind", "api", "op", "cause_op", "top_op")
        or not body
        or not any(ch.isdigit() for row in body for ch in row[i][:1])
        for i, c in enumerate(columns)
    ]

    def line(cells: list[str]) -> str:
        return "  ".join(
            cell.ljust(w) if is_left else cell.rjust(w) for cell, w, is_left in zip(cells, widths, left)
        ).rstrip()

    return "\n".join([line(header)] + [line(row) for row in body])
