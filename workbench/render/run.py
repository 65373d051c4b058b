"""The ProfileRun rendering, in HTML (the notebook card and the report's sections), text and Markdown.

One set of sections, each built once as rows (``workbench.render.tables``) and laid out per format:
the clean timing with its health check and notes, torch.compile's diagnostics, the top CPU ops and
GPU kernels per clean call, the ranked hypotheses, the attribution to the user's code
(``run.attribution``: time by module and by source line, ``workbench.render.run_attribution``), the
cell's history (``run.history`` with 2+ runs: its trend chart, ``workbench.charts.history``, and
change points, ``workbench.render.history``), the environment and, in HTML, the charts (offline,
``workbench.charts.notebook``). The notebook card (``ProfileRun._repr_html_``) and the report
template call the same section functions, so they show the same tables with the same columns; the
text and Markdown renderings hold the same sections, compact.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import workbench.render.health as health_render
import workbench.render.history as history_render
import workbench.render.run_attribution as run_attribution
from workbench.render.escape import html_text, markdown_text, plain
from workbench.render.tables import (
    Cell,
    html_pairs,
    html_table,
    markdown_pairs,
    markdown_table,
    text_table,
)
from workbench.units import format_ms

if TYPE_CHECKING:
    import pandas as pd

    from workbench.api.run import ProfileRun
    from workbench.capture.compile_diag import CompileDiagnostics
    from workbench.capture.run import RunRecord
    from workbench.hypotheses import Hypothesis

CARD_TOP_ROWS = 10  # rows of the op and kernel tables in the notebook card
CARD_HYPOTHESES = 5  # hypotheses listed in the card (all of them: run.hypotheses)

Formatter = Callable[[Any], str]
# per clean call: (column of ProfileRun.per_call_ops / per_call_kernels, header, formatter)
OP_COLUMNS: tuple[tuple[str, str, Formatter], ...] = (
    ("name", "op", str),
    ("calls_per_call", "calls / call", lambda v: f"{v:.3g}"),
    ("self_ms_per_call", "self / call", format_ms),
    ("total_ms_per_call", "total / call", format_ms),
    ("pct", "% of self time", lambda v: f"{v:.1f} %"),
    ("top_input_dims", "input dims", str),
    ("top_input_types", "input types", str),
)
KERNEL_COLUMNS: tuple[tuple[str, str, Formatter], ...] = (
    ("rank", "rank", str),
    ("name", "kernel", str),
    ("kernel_type", "type", str),
    ("calls_per_call", "launches / call", lambda v: f"{v:.3g}"),
    ("sum_ms_per_call", "time / call", format_ms),
    ("pct", "% of kernel time", lambda v: f"{v:.1f} %"),
)


# --- rows (shared by every format) ---------------------------------------------------------------


def _ms(value: float, suffix: str = "") -> Cell:
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return Cell("n/a", numeric=True)
    return Cell(format_ms(value) + suffix, title=f"{value:.3f} ms", numeric=True)


def timing_rows(run: ProfileRun) -> list[tuple[str, Cell]]:
    """The clean timing (no profiler running), the cold call and the traced pass, per call; each
    rounded time carries its exact millisecond figure as the tooltip."""
    t = run.timing
    lo, hi = t.median_ci_ms()
    rows = [
        ("clean median (per call)", _ms(t.median_ms, ", no profiler running")),
        (
            "95% CI of the median",
            Cell(f"{format_ms(lo)} – {format_ms(hi)}", title=f"{lo:.3f} ms – {hi:.3f} ms", numeric=True),
        ),
        ("p95", _ms(t.p95_ms)),
        (
            "IQR",
            Cell(
                f"{format_ms(t.iqr_ms)} ({t.relative_iqr:.1%} of the median)", title=f"{t.iqr_ms:.3f} ms", numeric=True
            ),
        ),
        ("min / max", Cell(f"{format_ms(t.min_ms)} / {format_ms(t.max_ms)}", numeric=True)),
        ("samples", Cell(f"{t.n} timed calls after {run.warmup} warm-up calls, timer {t.timer}")),
        ("cold (first call)", _ms(run.cold_ms, f" once = {run.cold_over_warm:.1f}× the clean median")),
    ]
    traced = run.traced_timing
    overhead = run.profiler_overhead
    if traced is not None:
        rows.append(
            ("traced pass (per call)", _ms(traced.median_ms, f" over {traced.n} traced calls under torch.profiler"))
        )
        rows.append(
            (
                "profiler overhead",
                Cell(
                    f"{overhead:.2f}× the clean call; trace times are scaled to the clean call" if overhead else "n/a"
                ),
            )
        )
    elif run.timed_under_profiler:
        rows.append(
            ("timed under the profiler", Cell("yes (an older run): the samples include the profiler's overhead"))
        )
    return rows


def _table_rows(
    table: pd.DataFrame, columns: tuple[tuple[str, str, Formatter], ...]
) -> tuple[list[str], list[list[Cell]]]:
    present = [(col, header, fmt) for col, header, fmt in columns if col in table.columns]
    rows = []
    for record in table.to_dict("records"):
        row = []
        for col, _, fmt in present:
            value = record[col]
            shown = "" if value is None or (isinstance(value, float) and math.isnan(value)) else fmt(value)
            title = f"{value:.4f} ms" if col.endswith("_ms_per_call") and isinstance(value, (int, float)) else None
            row.append(Cell(shown, title=title, numeric=isinstance(value, (int, float))))
        rows.append(row)
    return [header for _, header, _ in present], rows


def ops_rows(run: ProfileRun, top: int = CARD_TOP_ROWS) -> tuple[list[str], list[list[Cell]]]:
    """The ``top`` CPU ops by self time, per clean call (``ProfileRun.per_call_ops``)."""
    return _table_rows(run.per_call_ops(top), OP_COLUMNS)


def kernels_rows(run: ProfileRun, top: int = CARD_TOP_ROWS) -> tuple[list[str], list[list[Cell]]]:
    """The ``top`` GPU kernels by time, per clean call (``ProfileRun.per_call_kernels``)."""
    return _table_rows(run.per_call_kernels(top), KERNEL_COLUMNS)


def _evidence_value(h: Hypothesis, key: str) -> Any:
    return next((r[key] for e in h.evidence for r in e.rows if isinstance(r, Mapping) and key in r), None)


def stake_text(h: Hypothesis) -> str:
    """A hypothesis's stake as a person reads it: per clean call, or once for a one-time cost."""
    stake = h.time_at_stake_ms
    if h.category == "cold_start":
        once = _evidence_value(h, "one_time_ms")
        if once is not None:
            return (
                f"{format_ms(once)} once; ranked as {format_ms(stake)} a call over "
                f"{_evidence_value(h, 'spread_over_calls')} calls"
            )
    if h.rule == "recompiles":
        return f"{format_ms(stake)} a call: repeated compile time spread over the profiled calls"
    if h.rule == "graph_breaks":
        return (
            f"{format_ms(stake)} a call: eager time between the graphs plus the extra graphs' "
            "compile time spread over the profiled calls"
        )
    if h.category == "measurement":
        return f"uncertainty up to {format_ms(stake)} per call"
    return f"up to {format_ms(stake)} per call at stake"


def _recompiles_item(c: CompileDiagnostics) -> str:
    """Recompiles in the steady state, and those within the first call apart (resume functions
    after a graph break meeting a new stack shape: one-time, like the first compile)."""
    first = sum(1 for r in c.recompiles if r.on_first_call)
    steady = c.steady_recompile_count
    return f"recompiles in the steady state: {steady}" + (f" (and {first} within the first call)" if first > 0 else "")


def compile_rows(run: ProfileRun) -> list[tuple[str, list[str]]]:
    """torch.compile's diagnostics as (heading, items); empty when nothing was compiled."""
    c = run.compile
    if not c.compiled_anything and not c.graph_breaks and not c.recompiles:
        return []
    counts = [f"graphs compiled: {c.graph_count}", f"graph breaks: {c.graph_break_count}", _recompiles_item(c)]
    if c.graphs_per_call:  # found whenever it was compiled (the trace's compiled regions, or dynamo's cache)
        per_call = f"runs as {c.graphs_per_call:g} graph(s) per call"
        if c.breaks_per_call:
            per_call += f", {c.breaks_per_call:g} break(s)"
        counts.append(per_call + (f" (from {c.structure_source})" if c.structure_source else ""))
    out = [("counts", counts)]
    if c.graph_breaks:
        out.append(("Graph breaks:", [f"{b.reason} at {b.location} ×{b.count}" for b in c.graph_breaks]))
    if c.recompiles:
        out.append(
            (
                "Recompiles:",
                [
                    f"{r.function}: {'; '.join(r.guard_failures)}"
                    f"{' (within the first call: one-time)' if r.on_first_call else ''}"
                    for r in c.recompiles
                ],
            )
        )
    if c.cudagraph_skip_reasons:
        out.append(
            (
                f"CUDA graphs skipped ×{len(c.cudagraph_skip_reasons)}:",
                [r[:300] for r in dict.fromkeys(c.cudagraph_skip_reasons)],
            )
        )
    if c.fallback_kernels:
        out.append(("Inductor fallback kernels:", [", ".join(c.fallback_kernels)]))
    return out


def flatten_environment(env: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Nested environment dicts as ("torch.math_mode.float32_matmul_precision", value) rows."""
    rows: list[tuple[str, Any]] = []
    for key, value in sorted(dict(env).items(), key=lambda kv: str(kv[0])):
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            rows += flatten_environment(value, prefix=f"{name}.")
        else:
            rows.append((name, value))
    return rows


def _per_call_note(run: ProfileRun) -> str:
    return (
        f"per clean call: the trace's totals over {run.traced_calls or 1} traced call(s), scaled by the "
        f"clean / traced time ({run.trace_scale:.2f})"
    )


# --- HTML ----------------------------------------------------------------------------------------


def _section(title: str, body: str) -> str:
    return f"<h4>{html_text(title)}</h4>{body}"


def timing_html(run: ProfileRun) -> str:
    """The timing table, the health check and the run's notes (the card and the report's Timing)."""
    notes = "".join(f"<li>{html_text(n)}</li>" for n in run.notes)
    return (
        html_pairs(timing_rows(run), "wb-timing")
        + health_render.html(run.health)
        + (f"<p><b>Notes</b></p><ul class='wb-notes'>{notes}</ul>" if notes else "")
    )


def _rows_html(
    title: str,
    run: ProfileRun,
    rows: Callable[[ProfileRun, int], tuple[list[str], list[list[Cell]]]],
    top: int,
    css_class: str,
) -> str:
    try:
        headers, body = rows(run, top)
    except Exception as exc:  # show the gap, not a fake table
        return _section(title, f"<p>not available: {html_text(type(exc).__name__)}: {html_text(exc)}</p>")
    if not body:
        return _section(title, "<p>none recorded</p>")
    return _section(
        title,
        f"<p class='wb-note' style='font-size:smaller'>{html_text(_per_call_note(run))}</p>"
        + html_table(headers, body, css_class),
    )


def ops_html(run: ProfileRun, top: int = CARD_TOP_ROWS) -> str:
    """The top CPU ops by self time, per clean call; a sentence where the run has no trace."""
    if run.trace is None:
        return f"<p>No op table: {html_text(run.trace_note or 'the run has no trace')}.</p>"
    return _rows_html(f"Top {top} CPU ops by self time", run, ops_rows, top, "wb-top-ops")


def kernels_html(run: ProfileRun, top: int = CARD_TOP_ROWS) -> str:
    """The top GPU kernels by time, per clean call; "" without GPU activity."""
    if run.trace is None or not run.trace.has_gpu:
        return ""
    return _rows_html(f"Top {top} GPU kernels by time", run, kernels_rows, top, "wb-top-kernels")


def hypotheses_html(run: ProfileRun, limit: int | None = None) -> str:
    """The ranked hypotheses: title, category, stake, what was observed, the falsifier."""
    try:
        hyps = list(run.hypotheses)
    except Exception as exc:
        return f"<p>Hypotheses not available: {html_text(type(exc).__name__)}: {html_text(exc)}</p>"
    if not hyps:
        return "<p>No hypothesis fired: no rule found evidence in this run.</p>"
    items = "".join(
        f"<li><b>{html_text(h.title)}</b> <code>{html_text(h.category)}</code> — "
        f"{html_text(stake_text(h))}<br>{html_text(h.observed)}<br><i>falsifier:</i> "
        f"{html_text(h.falsifier)}</li>"
        for h in hyps[:limit]
    )
    more = f"<p>… and {len(hyps) - limit} more (run.hypotheses)</p>" if limit and len(hyps) > limit else ""
    return f"<ol class='wb-hypotheses'>{items}</ol>{more}"


def compile_html(run: ProfileRun) -> str:
    sections = compile_rows(run)
    if not sections:
        return ""
    parts = []
    for heading, items in sections:
        lis = "".join(f"<li>{html_text(i)}</li>" for i in items)
        parts.append((f"<p>{html_text(heading)}</p>" if heading != "counts" else "") + f"<ul>{lis}</ul>")
    return _section("torch.compile", "".join(parts))


def environment_html(run: RunRecord) -> str:
    """The environment, one row per leaf setting."""
    if not run.environment:
        return "<p>No environment recorded.</p>"
    rows = "".join(
        f"<tr><th>{html_text(k)}</th><td>{html_text(v)}</td></tr>" for k, v in flatten_environment(run.environment)
    )
    return f"<table class='wb-environment'>{rows}</table>"


def history_html(run: ProfileRun, *, charts: bool = True) -> str:
    """The cell's history (``run.history``): with 2+ runs its summary, trend chart (offline, the
    change points marked) and latest runs; one line for a first run; "" without a history."""
    if run.history is None:
        return ""
    return _section("History of this cell", history_render.html(run.history, charts=charts))


def attribution_html(run: ProfileRun) -> str:
    """Time by module and by source line (``run.attribution``); why not, where it was not
    recorded; "" for a run without a trace."""
    body = run_attribution.html(run)
    return _section(run_attribution.TITLE, body) if body else ""


def memory_html(run: ProfileRun, *, charts: bool = True) -> str:
    """The memory section (``workbench.render.memory``) of a run profiled with ``memory=True``; "" otherwise."""
    if not getattr(run.memory, "recorded", False) or run.trace is None:
        return ""
    import workbench.render.memory as memory_render

    return memory_render.html(run, chart=charts)


def charts_html(run: ProfileRun) -> str:
    """Timing, breakdown, roofline and timeline charts, drawn offline (``workbench.charts``)."""
    try:
        from workbench.render.charts import run_charts_html
    except ImportError as exc:  # altair / vl-convert missing: say so instead of a blank
        return _section("Charts", f"<p>not available: {html_text(exc)}</p>")
    return run_charts_html(run)


def html(run: ProfileRun, *, charts: bool = True) -> str:
    """The notebook card: every section above, the charts last."""
    settings = ", ".join(f"{k}={v}" for k, v in run.settings.items())
    return (
        f"<div class='workbench-run'><h3>{html_text(run.name)} — {html_text(run.device)}</h3>"
        + timing_html(run)
        + compile_html(run)
        + ops_html(run)
        + kernels_html(run)
        + _section("Hypotheses (ranked)", hypotheses_html(run, CARD_HYPOTHESES))
        + attribution_html(run)
        + memory_html(run, charts=charts)
        + history_html(run, charts=charts)
        + (charts_html(run) if charts else "")
        + f"<p style='font-size:smaller'>settings: {html_text(settings)}; profiler warm-up: "
        f"{html_text(run.profiler_warmup)}; recorded {html_text(run.created_at)}</p></div>"
    )


# --- text ----------------------------------------------------------------------------------------


def _hypothesis_lines(hyps: Iterable[Hypothesis], limit: int | None) -> list[str]:
    hyps = list(hyps)
    lines = [f"  {i}. [{h.category}] {h.title} ({stake_text(h)})" for i, h in enumerate(hyps[:limit], 1)]
    return lines or ["  none: no rule found evidence in this run"]


def timing_lines(run: ProfileRun) -> list[str]:
    """The timing as a terminal reads it: clean median with its interval, the first call, the
    traced pass and the profiler's overhead, one line each."""
    t = run.timing
    lo, hi = t.median_ci_ms()
    lines = [
        f"  clean median  {format_ms(t.median_ms)} per call (95% CI {format_ms(lo)}-{format_ms(hi)}), "
        f"p95 {format_ms(t.p95_ms)}, IQR {format_ms(t.iqr_ms)}, {t.n} calls after {run.warmup} warm-up, "
        "no profiler running",
        f"  first call    {format_ms(run.cold_ms)} once ({run.cold_over_warm:.1f}x the clean median)",
    ]
    traced, overhead = run.traced_timing, run.profiler_overhead
    if traced is not None and overhead is not None:
        lines.append(
            f"  traced pass   {format_ms(traced.median_ms)} per call over {traced.n} calls under "
            f"torch.profiler: overhead {overhead:.2f}x; trace times below are scaled to the clean call"
        )
    elif run.timed_under_profiler:
        lines.append("  timed under the profiler (an older run): the samples include its overhead")
    return lines


def text(run: ProfileRun, *, top: int = CARD_TOP_ROWS) -> str:
    """The run as plain text: timing, health, notes, top ops and kernels, hypotheses, time by module
    and source line (compact), history."""
    lines = [plain(f"{run.name} on {run.device}"), *timing_lines(run)]
    lines += ["  " + plain(line) for line in run.health.lines()]
    lines += ["  note: " + plain(n) for n in run.notes]
    for title, rows, wanted in (
        ("CPU ops by self time", ops_rows, run.trace is not None),
        ("GPU kernels by time", kernels_rows, run.trace is not None and run.trace.has_gpu),
    ):
        if wanted:
            headers, body = rows(run, top)
            if body:
                lines += ["", f"top {top} {title} ({_per_call_note(run)})", text_table(headers, body)]
    lines += ["", "hypotheses (ranked):"] + _hypothesis_lines(run.hypotheses, CARD_HYPOTHESES)
    attribution = run_attribution.text_lines(run)
    if attribution:
        lines += ["", *attribution]
    if getattr(run.memory, "recorded", False) and run.trace is not None:
        import workbench.render.memory as memory_render

        lines += ["", *memory_render.text_lines(run)]
    if run.history is not None:
        lines += ["", "history of this cell:", history_render.text(run.history)]
    return "\n".join(lines)


# --- Markdown ------------------------------------------------------------------------------------


def markdown(run: ProfileRun, *, top: int = CARD_TOP_ROWS) -> str:
    """The run as Markdown: the same sections as the text, as tables."""
    out = [
        f"### {markdown_text(run.name)} — {markdown_text(run.device)}",
        "",
        markdown_pairs(timing_rows(run)),
        "",
        f"**{markdown_text(run.health.headline())}**",
    ]
    out += [f"- {markdown_text(n)}" for n in run.notes]
    for title, rows, wanted in (
        ("CPU ops by self time", ops_rows, run.trace is not None),
        ("GPU kernels by time", kernels_rows, run.trace is not None and run.trace.has_gpu),
    ):
        if wanted:
            headers, body = rows(run, top)
            if body:
                out += [
                    "",
                    f"#### Top {top} {title}",
                    "",
                    f"_{markdown_text(_per_call_note(run))}_",
                    "",
                    markdown_table(headers, body),
                ]
    out += ["", "#### Hypotheses (ranked)", ""]
    hyps = list(run.hypotheses)
    out += [
        f"{i}. [{markdown_text(h.category)}] {markdown_text(h.title)} ({markdown_text(stake_text(h))})"
        for i, h in enumerate(hyps[:CARD_HYPOTHESES], 1)
    ] or ["_none: no rule found evidence in this run_"]
    attribution = run_attribution.markdown_lines(run)
    if attribution:
        out += ["", f"#### {run_attribution.TITLE}", "", *attribution]
    if getattr(run.memory, "recorded", False) and run.trace is not None:
        import workbench.render.memory as memory_render

        out += ["", f"#### {memory_render.TITLE}", "", *memory_render.markdown_lines(run)]
    if run.history is not None:
        out += ["", "#### History of this cell", "", history_render.markdown(run.history).rstrip("\n")]
    return "\n".join(out) + "\n"
