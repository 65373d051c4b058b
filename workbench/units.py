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
from typing import Any

MICRO = "µs"
# (upper bound in ms, divisor from ms, unit): the first row whose bound the value is under
_SCALES = ((1e-3, 1e-6, "ns"), (1.0, 1e-3, MICRO), (1e3, 1.0, "ms"), (math.inf, 1e3, "s"))


def _number(value: float, digits: int) -> str:
    text = f"{value:.{digits}g}"
    if "e" in text:                       # 1000 after rounding: never scientific notation
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
