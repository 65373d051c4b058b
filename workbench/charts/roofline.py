"""Roofline: memory and compute ceilings, one point per op, ridge points, variant arrows.

Inputs are plain: ``memory_gbps`` (peak bandwidth), ``peak_flops`` ({dtype: FLOP/s}) and points
with analytic work (``name, flops, bytes, dur_us`` and optionally ``dtype``, ``variant``). The
devices and analysis layers compute them; this module only places and draws.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import pandas as pd

from workbench.analysis.labels import unique_labels
from workbench.charts.common import TableLike, as_table, finite_rows, message_chart, require_columns, shorten
from workbench.errors import InvalidArgumentError

if TYPE_CHECKING:
    import altair

    from workbench.devices.ceilings import Ceiling

POINT_COLUMNS = ("name", "flops", "bytes", "dur_us")
REFERENCE_COLOR = "#9a9a9a"  # reference roofs (a CPU's datasheet peaks) beside the judged ceilings


def roofline_points(points: TableLike, ceiling: Ceiling | None = None) -> pd.DataFrame:
    """Arithmetic intensity (FLOP/byte) and achieved FLOP/s per point; unplaceable rows dropped. With a
    ``ceiling`` (``workbench.devices.ceilings.Ceiling``), the placement the rules read
    (``workbench.analysis.roofline.place``): bound, above_roof (an anomaly, never a win), work_source."""
    table = as_table(points, "roofline points")
    require_columns(table, POINT_COLUMNS, "roofline points")
    table, _ = finite_rows(table, ["flops", "bytes", "dur_us"])
    table = table[(table["flops"] > 0) & (table["bytes"] > 0) & (table["dur_us"] > 0)].copy()
    if ceiling is not None:
        from workbench.analysis.roofline import place

        placed = place(
            table, ceiling, time_column="dur_us", dtype_column="dtype" if "dtype" in table.columns else None
        ).table
        table = table.assign(**{c: placed[c].to_numpy() for c in ("bound", "above_roof", "work_source")})
    else:
        table = table.assign(bound="", above_roof=False, work_source="")
    table["intensity"] = table["flops"] / table["bytes"]
    table["achieved_flops"] = table["flops"] / (table["dur_us"] * 1e-6)
    table["achieved_tflops"] = table["achieved_flops"] / 1e12
    names = unique_labels(table["name"])  # the function name, two ops never under one label
    if "shapes" in table.columns:
        table["label"] = [shorten(f"{n} {s}".strip(), 80) for n, s in zip(names, table["shapes"].fillna(""))]
    else:
        table["label"] = names
    if "variant" not in table.columns:
        table["variant"] = "baseline"
    table["variant"] = table["variant"].astype(str)
    return table


def roof_lines(
    memory_gbps: float, peak_flops: Mapping[str, float], intensity_range: tuple[float, float]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Sampled ceilings (one line per dtype) and the ridge points (intensity = peak / bandwidth)."""
    peaks_ok = bool(peak_flops) and all(np.isfinite(v) and v > 0 for v in peak_flops.values())
    if not (np.isfinite(memory_gbps) and memory_gbps > 0) or not peaks_ok:
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
        lines.append(
            pd.DataFrame({"dtype": dtype, "intensity": grid, "ceiling_flops": np.minimum(peak, bytes_per_s * grid)})
        )
        ridges.append(
            {"dtype": dtype, "intensity": ridge, "ceiling_flops": peak, "text": f"ridge {dtype}: {ridge:.3g} FLOP/B"}
        )
    return pd.concat(lines, ignore_index=True), pd.DataFrame(ridges)


def _arrows(placed: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """From each baseline point to the same op (name and shapes) of every other variant."""
    key = (
        placed["name"].astype(str)
        + "\x00"
        + (placed["shapes"].fillna("").astype(str) if "shapes" in placed.columns else "")
    )
    placed = placed.assign(key=key)
    base = placed[placed["variant"] == baseline].drop_duplicates("key").set_index("key")
    rows = []
    for _, r in placed[placed["variant"] != baseline].iterrows():
        if r["key"] in base.index:
            b = base.loc[r["key"]]
            rows.append(
                {
                    "name": r["label"],
                    "variant": r["variant"],
                    "x": b["intensity"],
                    "y": b["achieved_flops"],
                    "x2": r["intensity"],
                    "y2": r["achieved_flops"],
                }
            )
    return pd.DataFrame(rows, columns=["name", "variant", "x", "y", "x2", "y2"])


def _ridges(memory_gbps: float, peak_flops: Mapping[str, float]) -> list[float]:
    return [p / (memory_gbps * 1e9) for p in peak_flops.values()]


def _intensity_span(placed: pd.DataFrame, ridges_at: list[float]) -> tuple[float, float]:
    return (float(min(placed["intensity"].min(), *ridges_at)), float(max(placed["intensity"].max(), *ridges_at)))


def _reference_layers(alt: ModuleType, reference: Ceiling, intensity_range: tuple[float, float]) -> list[Any]:
    """Grey roofs (and hollow ridge marks) of a reference ceiling, e.g. a CPU's datasheet peaks."""
    lines, ridges = roof_lines(reference.memory_gbps, reference.peak_flops, intensity_range)
    ridges["text"] = ridges["text"].map(lambda t: f"{t} (reference, not used for judging)")
    roof = (
        alt.Chart(lines)
        .mark_line(color=REFERENCE_COLOR)
        .encode(
            x="intensity:Q",
            y="ceiling_flops:Q",
            tooltip=["dtype:N"],
            strokeDash=alt.StrokeDash("dtype:N", legend=alt.Legend(orient="bottom", title="roof")),
        )
    )
    ridge = (
        alt.Chart(ridges)
        .mark_point(shape="diamond", size=60, color=REFERENCE_COLOR, filled=False)
        .encode(x="intensity:Q", y="ceiling_flops:Q", tooltip=["text:N"])
    )
    return [roof, ridge]


def roofline_chart(
    points: TableLike,
    *,
    memory_gbps: float,
    peak_flops: Mapping[str, float],
    title: str = "Roofline",
    device: str = "",
    baseline: str = "baseline",
    note: str = "",
    reference: Ceiling | None = None,
) -> altair.TopLevelMixin:
    """Log-log roofline; points of a ``variant`` other than ``baseline`` get an arrow from the
    baseline's point of the same op. ``note`` is added to the subtitle, one line per "\\n" (ceiling
    source, left out).
    ``reference`` (a ``Ceiling``, e.g. a CPU's datasheet
    ceilings) is drawn as grey roofs beside the ceilings."""
    import altair as alt

    roof_lines(memory_gbps, peak_flops, (1.0, 2.0))  # validates the ceilings before anything else
    if reference is not None:
        roof_lines(reference.memory_gbps, reference.peak_flops, (1.0, 2.0))
    from workbench.devices.ceilings import Ceiling

    # anomalies are judged against the roof of the point's dtype where its points say (``dtype``), else
    # against the highest roof drawn: a point above it beats every ceiling
    top = max(peak_flops, key=lambda k: peak_flops[k])
    judged = Ceiling(memory_gbps, {top: peak_flops[top], **peak_flops}, device, "drawn", True)
    placed = roofline_points(points, judged)
    if placed.empty:
        return message_chart("no roofline point: no op with positive FLOPs, bytes and duration", title=title)
    lo, hi = _intensity_span(
        placed,
        _ridges(memory_gbps, peak_flops)
        + (_ridges(reference.memory_gbps, reference.peak_flops) if reference is not None else []),
    )
    lines, ridges = roof_lines(memory_gbps, peak_flops, (lo / 4, hi * 4))
    x = alt.X("intensity:Q", scale=alt.Scale(type="log"), title="arithmetic intensity (FLOP/byte)")
    y = alt.Y("ceiling_flops:Q", scale=alt.Scale(type="log"), title="FLOP/s", axis=alt.Axis(format="~s"))
    roof = (
        alt.Chart(lines)
        .mark_line(color="#444")
        .encode(x=x, y=y, strokeDash=alt.StrokeDash("dtype:N", legend=alt.Legend(orient="bottom", title="roof")))
    )
    ridge = (
        alt.Chart(ridges)
        .mark_point(shape="diamond", size=80, color="#444", filled=True)
        .encode(x="intensity:Q", y="ceiling_flops:Q", tooltip=["text:N"])
    )
    # the ridge's label sits left of and above its diamond, inside the plot (the ridge is the roof's corner,
    # often the chart's right edge), and the legends go below the plot: a label never runs into a legend
    ridge_text = ridge.mark_text(align="right", baseline="bottom", dx=-8, dy=-6, fontSize=10).encode(text="text:N")
    placed = placed.assign(
        flag=np.where(
            placed["above_roof"],
            "ABOVE THE ROOF: an anomaly (wrong counts, caches, or a measurement fault), not a win",
            "",
        )
    )
    dots = (
        alt.Chart(
            placed[
                [
                    "label",
                    "name",
                    "variant",
                    "intensity",
                    "achieved_flops",
                    "achieved_tflops",
                    "dur_us",
                    "flops",
                    "bytes",
                    "bound",
                    "work_source",
                    "flag",
                ]
            ]
        )
        .mark_circle(size=70)
        .encode(
            x="intensity:Q",
            y=alt.Y("achieved_flops:Q"),
            color=alt.Color("variant:N", legend=alt.Legend(orient="bottom", columns=4)),
            tooltip=[
                "label:N",
                alt.Tooltip("name:N", title="full name"),
                "variant:N",
                alt.Tooltip("intensity:Q", format=".3g"),
                alt.Tooltip("achieved_tflops:Q", format=".3g"),
                alt.Tooltip("dur_us:Q", format=",.1f"),
                "bound:N",
                "work_source:N",
                "flag:N",
            ],
        )
    )
    layers = [roof, ridge, ridge_text, dots]
    anomalies = placed[placed["above_roof"]]
    if len(anomalies):
        layers.append(
            alt.Chart(anomalies[["label", "intensity", "achieved_flops", "flag"]])
            .mark_point(shape="cross", size=160, color="#d62728", strokeWidth=2)
            .encode(x="intensity:Q", y="achieved_flops:Q", tooltip=["label:N", "flag:N"])
        )
        note = "\n".join(
            filter(
                None,
                [
                    note,
                    f"{len(anomalies)} point(s) above the roof (red cross): anomalies to "
                    "check (work counts, caches, timing), not wins",
                ],
            )
        )
    if reference is not None:
        layers[1:1] = _reference_layers(alt, reference, (lo / 4, hi * 4))
    arrows = _arrows(placed, baseline)
    if len(arrows):
        layers.append(
            alt.Chart(arrows)
            .mark_rule(strokeWidth=1.5, color="#d62728")
            .encode(x="x:Q", y="y:Q", x2="x2:Q", y2="y2:Q", tooltip=["name:N", "variant:N"])
        )
    gbps = f"{memory_gbps:,.0f}" if memory_gbps >= 100 else f"{memory_gbps:.3g}"
    subtitle = [f"{shorten(device, 80)} · {gbps} GB/s".strip(" ·")] + (note.split("\n") if note else [])
    full_title = alt.TitleParams(title, subtitle=subtitle)
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


def _ceiling_note(ceilings: Ceiling, info: dict[str, Any]) -> str:
    kind = "ceiling" if ceilings.measured else "NOT MEASURED: documented default ceiling"
    parts = [f"{kind}: {ceilings.source.split(', http')[0]}"]
    if info.get("left_out"):
        parts.append(f"{info['left_out']} smaller ops left out ({info['time_shown_pct']:.0f}% of op time shown)")
    lines = ["; ".join(shorten(p, 160) for p in parts)]
    reference = ceilings.reference
    if reference is not None:  # one subtitle line per clause of its description
        clauses = str(reference.device).split("; ")
        lines += [shorten(f"grey roofs, not used for judging: {clauses[0]}", 160)]
        lines += [shorten(c, 160) for c in clauses[1:]]
    return "\n".join(lines)


def trace_roofline_chart(
    trace: Any,
    *,
    ceilings: Ceiling | None = None,
    environment: Mapping[str, Any] | None = None,
    measure: bool = False,
    max_points: int = 40,
    title: str = "Roofline",
) -> altair.TopLevelMixin:
    """One point per (op, input shapes) with known work, against the trace's device ceilings
    (``roofline_data.ceilings_for``: GPU vendor peaks, measured or cached CPU ceilings, else a default)."""
    from workbench.charts.roofline_data import ceilings_for, op_roofline_points

    ceilings = ceilings or ceilings_for(trace, environment, measure=measure)
    points, info = op_roofline_points(trace, max_points=max_points)
    if points.empty:
        why = (
            "no op has input shapes from which its work is known (profile with record_shapes=True)"
            if info["ops"]
            else "the trace has no CPU ops"
        )
        return message_chart(f"no roofline point: {why}", title=title)
    return roofline_chart(
        points,
        memory_gbps=ceilings.memory_gbps,
        peak_flops=ceilings.peak_flops,
        title=title,
        device=ceilings.device,
        note=_ceiling_note(ceilings, info),
        reference=ceilings.reference,
    )


def variants_roofline_chart(
    traces: Mapping[str, Any],
    *,
    ceilings: Ceiling | None = None,
    max_points: int = 25,
    title: str = "Roofline: variants against the baseline",
) -> altair.TopLevelMixin:
    """Points of several traces (or runs with ``.trace``), the first one the baseline; an arrow
    from each baseline op to the same op (name and shapes) in every other variant."""
    from workbench.charts.roofline_data import ceilings_for, op_roofline_points

    if not traces:
        raise InvalidArgumentError("variants_roofline_chart needs {variant name: trace or run}, got nothing")
    resolved = {name: getattr(t, "trace", t) for name, t in traces.items()}
    missing = [name for name, t in resolved.items() if t is None]
    if missing:
        return message_chart(f"no roofline: {missing} have no trace (profile with trace=True)", title=title)
    baseline = next(iter(resolved))
    ceilings = ceilings or ceilings_for(resolved[baseline], getattr(traces[baseline], "environment", None))
    parts = [op_roofline_points(t, variant=str(name), max_points=max_points) for name, t in resolved.items()]
    points = pd.concat([p for p, _ in parts], ignore_index=True)
    return roofline_chart(
        points,
        memory_gbps=ceilings.memory_gbps,
        peak_flops=ceilings.peak_flops,
        title=title,
        device=ceilings.device,
        baseline=str(baseline),
        note=_ceiling_note(ceilings, parts[0][1]),
        reference=ceilings.reference,
    )


__all__: Sequence[str] = [
    "roofline_chart",
    "roofline_points",
    "roof_lines",
    "ceilings_from_spec",
    "trace_roofline_chart",
    "variants_roofline_chart",
]
