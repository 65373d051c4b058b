"""Roofline: memory and compute ceilings, one point per op, ridge points, variant arrows.

Inputs are plain: ``memory_gbps`` (peak bandwidth), ``peak_flops`` ({dtype: FLOP/s}) and points
with analytic work (``name, flops, bytes, dur_us`` and optionally ``dtype``, ``variant``). The
devices and analysis layers compute them; this module only places and draws.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from workbench.charts.common import as_table, finite_rows, message_chart, require_columns, shorten
from workbench.errors import InvalidArgumentError

POINT_COLUMNS = ("name", "flops", "bytes", "dur_us")


def roofline_points(points: Any) -> pd.DataFrame:
    """Arithmetic intensity (FLOP/byte) and achieved FLOP/s per point; unplaceable rows dropped."""
    table = as_table(points, "roofline points")
    require_columns(table, POINT_COLUMNS, "roofline points")
    table, _ = finite_rows(table, ["flops", "bytes", "dur_us"])
    table = table[(table["flops"] > 0) & (table["bytes"] > 0) & (table["dur_us"] > 0)].copy()
    table["intensity"] = table["flops"] / table["bytes"]
    table["achieved_flops"] = table["flops"] / (table["dur_us"] * 1e-6)
    table["achieved_tflops"] = table["achieved_flops"] / 1e12
    table["label"] = [shorten(n, 50) for n in table["name"]]
    if "variant" not in table.columns:
        table["variant"] = "baseline"
    return table


def roof_lines(memory_gbps: float, peak_flops: Mapping[str, float],
               intensity_range: tuple[float, float]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Sampled ceilings (one line per dtype) and the ridge points (intensity = peak / bandwidth)."""
    if not memory_gbps or memory_gbps <= 0 or not peak_flops:
        raise InvalidArgumentError(
            f"roofline needs memory_gbps > 0 and at least one peak FLOP/s; got {memory_gbps}, {dict(peak_flops)}"
        )
    bytes_per_s = memory_gbps * 1e9
    lo, hi = intensity_range
    xs = np.geomspace(lo, hi, 64)
    lines, ridges = [], []
    for dtype, peak in peak_flops.items():
        ridge = peak / bytes_per_s
        grid = np.unique(np.clip(np.r_[xs, ridge], lo, hi))
        lines.append(pd.DataFrame({"dtype": dtype, "intensity": grid,
                                   "ceiling_flops": np.minimum(peak, bytes_per_s * grid)}))
        ridges.append({"dtype": dtype, "intensity": ridge, "ceiling_flops": peak,
                       "text": f"ridge {dtype}: {ridge:.3g} FLOP/B"})
    return pd.concat(lines, ignore_index=True), pd.DataFrame(ridges)


def _arrows(placed: pd.DataFrame) -> pd.DataFrame:
    """From each baseline point to the same-named point of every other variant."""
    base = placed[placed["variant"] == "baseline"].set_index("name")
    rows = []
    for _, r in placed[placed["variant"] != "baseline"].iterrows():
        if r["name"] in base.index:
            b = base.loc[r["name"]]
            b = b.iloc[0] if isinstance(b, pd.DataFrame) else b
            rows.append({"name": r["name"], "variant": r["variant"], "x": b["intensity"],
                         "y": b["achieved_flops"], "x2": r["intensity"], "y2": r["achieved_flops"]})
    return pd.DataFrame(rows, columns=["name", "variant", "x", "y", "x2", "y2"])


def roofline_chart(points: Any, *, memory_gbps: float, peak_flops: Mapping[str, float],
                   title: str = "Roofline", device: str = "") -> Any:
    """Log-log roofline; points with ``variant`` other than ``baseline`` get an arrow from it."""
    import altair as alt

    placed = roofline_points(points)
    if placed.empty:
        return message_chart("no roofline point: no op with positive FLOPs, bytes and duration",
                             title=title)
    lo = float(min(placed["intensity"].min(), *[p / (memory_gbps * 1e9) for p in peak_flops.values()]))
    hi = float(max(placed["intensity"].max(), *[p / (memory_gbps * 1e9) for p in peak_flops.values()]))
    lines, ridges = roof_lines(memory_gbps, peak_flops, (lo / 4, hi * 4))
    x = alt.X("intensity:Q", scale=alt.Scale(type="log"), title="arithmetic intensity (FLOP/byte)")
    y = alt.Y("ceiling_flops:Q", scale=alt.Scale(type="log"), title="FLOP/s")
    roof = alt.Chart(lines).mark_line(color="#444").encode(x=x, y=y, strokeDash="dtype:N")
    ridge = alt.Chart(ridges).mark_point(shape="diamond", size=80, color="#444", filled=True).encode(
        x="intensity:Q", y="ceiling_flops:Q", tooltip=["text:N"])
    ridge_text = ridge.mark_text(align="left", dx=6, dy=-6, fontSize=10).encode(text="text:N")
    dots = alt.Chart(placed[["label", "variant", "intensity", "achieved_flops", "achieved_tflops",
                             "dur_us", "flops", "bytes"]]).mark_circle(size=70).encode(
        x="intensity:Q", y=alt.Y("achieved_flops:Q"), color="variant:N",
        tooltip=["label:N", "variant:N", alt.Tooltip("intensity:Q", format=".3g"),
                 alt.Tooltip("achieved_tflops:Q", format=".3g"), alt.Tooltip("dur_us:Q", format=",.1f")])
    layers = [roof, ridge, ridge_text, dots]
    arrows = _arrows(placed)
    if len(arrows):
        layers.append(alt.Chart(arrows).mark_rule(strokeWidth=1.5, color="#d62728").encode(
            x="x:Q", y="y:Q", x2="x2:Q", y2="y2:Q", tooltip=["name:N", "variant:N"]))
    full_title = alt.TitleParams(title, subtitle=f"{device} · {memory_gbps:g} GB/s".strip(" ·"))
    return alt.layer(*layers, title=full_title).properties(width=480, height=320)


def ceilings_from_spec(spec: Mapping[str, Any]) -> tuple[float, dict[str, float]]:
    """``(memory_gbps, {dtype: FLOP/s})`` from a dict with ``memory_gbps`` and ``peak_tflops``/``peak_flops``."""
    if "peak_flops" in spec:
        peaks = {k: float(v) for k, v in spec["peak_flops"].items()}
    elif "peak_tflops" in spec:
        peaks = {k: float(v) * 1e12 for k, v in spec["peak_tflops"].items()}
    else:
        raise InvalidArgumentError(f"a device spec needs peak_flops or peak_tflops; got keys {sorted(spec)}")
    return float(spec["memory_gbps"]), peaks


__all__: Sequence[str] = ["roofline_chart", "roofline_points", "roof_lines", "ceilings_from_spec"]
