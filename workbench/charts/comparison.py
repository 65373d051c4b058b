"""Variant comparison: each variant's raw timing samples, and its speedup with an interval."""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np
import pandas as pd

from workbench.charts.common import message_chart
from workbench.errors import InvalidArgumentError
from workbench.measurement import ratio_ci

if TYPE_CHECKING:
    import altair


def samples_table(samples_ms: Mapping[str, Sequence[float]]) -> pd.DataFrame:
    """Long table ``variant, sample_ms`` of the finite samples."""
    rows = [(name, float(s)) for name, xs in samples_ms.items() for s in xs]
    table = pd.DataFrame(rows, columns=["variant", "sample_ms"])
    return table[np.isfinite(table["sample_ms"])]


def speedup_table(samples_ms: Mapping[str, Sequence[float]], baseline: str) -> pd.DataFrame:
    """Speedup of each variant over ``baseline`` (baseline median / variant median), bootstrap CI."""
    if baseline not in samples_ms:
        raise InvalidArgumentError(f"baseline {baseline!r} is not among the variants {sorted(samples_ms)}")
    rows = []
    for name, xs in samples_ms.items():
        point, lo, hi = ratio_ci(samples_ms[baseline], xs)
        rows.append({"variant": name, "speedup": point, "ci_low": lo, "ci_high": hi, "median_ms": float(np.median(xs))})
    return pd.DataFrame(rows)


def _distribution(table: pd.DataFrame, order: list[str]) -> altair.LayerChart | altair.FacetChart:
    import altair as alt

    y = alt.Y("variant:N", sort=order, title=None)
    box = (
        alt.Chart(table)
        .mark_boxplot(extent=1.5, opacity=0.5)
        .encode(x=alt.X("sample_ms:Q", title="time per call (ms)", scale=alt.Scale(zero=False)), y=y)
    )
    ticks = (
        alt.Chart(table)
        .mark_tick(opacity=0.6)
        .encode(x="sample_ms:Q", y=y, tooltip=["variant:N", alt.Tooltip("sample_ms:Q", format=".4g")])
    )
    return alt.layer(box, ticks, title="Samples").properties(width=340)


def comparison_chart(samples_ms: Mapping[str, Sequence[float]], *, baseline: str | None = None) -> altair.TopLevelMixin:
    """Left: sample distributions per variant. Right: speedup over ``baseline`` with its 95% CI."""
    import altair as alt

    if not samples_ms:
        return message_chart("no variants to compare", title="Comparison")
    table = samples_table(samples_ms)
    order = list(samples_ms)
    empty = [n for n in order if not (table["variant"] == n).any()]
    if empty:
        return message_chart(f"no finite samples for {empty}: nothing to compare", title="Comparison")
    dist = _distribution(table, order)
    if len(order) < 2:
        return dist
    baseline = baseline or order[0]
    speed = speedup_table({n: table.loc[table["variant"] == n, "sample_ms"].tolist() for n in order}, baseline)
    y = alt.Y("variant:N", sort=order, title=None)
    bars = (
        alt.Chart(speed)
        .mark_rule(strokeWidth=2)
        .encode(x=alt.X("ci_low:Q", title=f"speedup over {baseline} (x)"), x2="ci_high:Q", y=y)
    )
    dots = (
        alt.Chart(speed)
        .mark_point(filled=True, size=60)
        .encode(
            x="speedup:Q",
            y=y,
            tooltip=[
                "variant:N",
                alt.Tooltip("speedup:Q", format=".3f"),
                alt.Tooltip("ci_low:Q", format=".3f"),
                alt.Tooltip("ci_high:Q", format=".3f"),
            ],
        )
    )
    one = alt.Chart(pd.DataFrame({"x": [1.0]})).mark_rule(strokeDash=[4, 3], color="#888").encode(x="x:Q")
    return alt.hconcat(dist, alt.layer(one, bars, dots, title="Speedup (95% CI)").properties(width=240))
