"""One formatter for every view: per-call times in adaptive units, totals marked."""

from __future__ import annotations

import math

import pytest

from workbench.units import format_ms, format_pct, format_per_call, format_ratio, format_us


@pytest.mark.parametrize(
    "ms, text",
    [
        (0.0123, "12.3 µs"),
        (0.000_45, "450 ns"),
        (3.862, "3.86 ms"),
        (45.7, "45.7 ms"),
        (247.0, "247 ms"),
        (2209.0, "2.21 s"),
        (0.0, "0 ms"),
        (-0.5, "-500 µs"),
        (0.99996, "1 ms"),  # rounds into the next unit instead of "1e+03 µs"
        (999.96, "1 s"),
        (1_234_567.0, "1235 s"),
    ],
)
def test_adaptive_units(ms, text):
    assert format_ms(ms) == text


def test_totals_are_marked_and_bad_values_read_na():
    assert format_ms(2209.0, total=True) == "2.21 s total"
    assert format_us(2.209e6, total=True) == "2.21 s total"  # a trace total in µs
    assert format_us(12.3) == "12.3 µs"
    assert format_ms(None) == format_ms(math.nan) == format_ms("x") == "n/a"
    assert format_ms(math.inf) == "∞"


def test_per_call_percent_and_ratio():
    assert format_per_call(3.9) == "3.9 ms per call"
    assert format_pct(0.123) == "12.3 %" and format_pct(None) == "n/a"
    assert format_ratio(1.2345) == "1.2x" and format_ratio(math.nan) == "n/a"


def test_never_scientific_notation():
    for exponent in range(-7, 8):
        text = format_ms(1.234 * 10**exponent)
        assert "e" not in text.split()[0], text
