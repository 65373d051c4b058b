"""Breakdown tables as text (workbench.units.format_table): per-call times in adaptive units, totals
marked as totals, names as every view shows them (issue 10's leftovers)."""

from __future__ import annotations

import pandas as pd

from workbench.analysis.labels import unique_labels
from workbench.units import column_header, format_table, time_column_kind

SIGNATURE = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)"
)


def _kernels():
    return pd.DataFrame(
        {
            "rank": [0, 0],
            "kernel_type": ["computation", "memory"],
            "name": [SIGNATURE, "Memcpy DtoH (Device -> Pinned)"],
            "count": [1000, 2],
            "sum_us": [2_209_000.0, 12.3],
            "mean_us": [2209.0, 6.15],
            "pct": [99.4, 0.6],
        }
    )


def test_headers_say_per_call_or_total():
    assert column_header("sum_us") == "sum (total)" and column_header("mean_us") == "mean (per call)"
    assert column_header("total_us") == "inclusive (total)" and column_header("ts_us") == "ts (from start)"
    assert time_column_kind("dur_us", ["count", "dur_us"]) == "total"
    assert time_column_kind("dur_us", ["dur_us"]) == "time" and time_column_kind("count") is None


def test_kernel_table_reads_in_adaptive_units_with_short_unique_names():
    text = format_table(_kernels(), names=unique_labels)
    header, first, second = text.splitlines()
    assert "sum (total)" in header and "mean (per call)" in header and "sum_us" not in header
    assert "2.21 s" in first and "2.21 ms" in first and "99.4 %" in first
    assert "vectorized_elementwise_kernel<CUDAFunctor_add>" in first and "void" not in first
    assert "12.3 µs" in second and "6.15 µs" in second and "Memcpy DtoH (Device -> Pinned)" in second
    assert "2209000" not in text and "e+" not in text
    assert header.index("sum (total)") + len("sum (total)") == first.index("2.21 s") + len("2.21 s")  # right-aligned


def test_long_texts_are_cut_and_missing_values_are_blank():
    table = pd.DataFrame({"op": ["x" * 200, None], "blocked_us": [float("nan"), 3.0]})
    lines = format_table(table, max_cell=20).splitlines()
    assert lines[1].startswith("x" * 19 + "…") and "n/a" in lines[1]
    assert lines[2].split() == ["3", "µs"]
