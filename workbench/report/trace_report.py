"""``workbench report --trace``: an offline HTML report of a saved trace (a file, a ``.json.gz``,
a folder of rank files, several paths), and the HTML sections its template shows.

There is no workload and no clean timing here, only what the trace recorded, so there is nothing
for the CI gate to compare: ``--compare-to`` is refused. Bad input (a path that does not exist,
a file that is not a trace) is found by loading the trace here, before any notebook runs.

Many ranks are summarised, not listed one table per rank: a per-rank table is one table with a
``rank`` column, the worst ranks first (by the section's own measure of "worst"), capped at
``MAX_ROWS`` rows with the number of hidden rows said. Every text from the trace is escaped.
Results that have a rendering (the diagnosis, the time by module and source line) are drawn by
``workbench.render``, as the notebook and the CLI draw them.
"""

from __future__ import annotations

import html
import json
import math
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import pandas as pd

from workbench.analysis.labels import unique_labels
from workbench.errors import InvalidArgumentError, ReportError
from workbench.report.files import ReportFiles, find_template
from workbench.units import format_ms

if TYPE_CHECKING:
    from workbench.api.trace import Trace

MAX_CHART_RANKS = 8  # a per-rank-and-stream chart draws the worst ranks only (the table lists the rest)
MAX_TEXT = 72  # characters of a name a cell shows (the whole name is its tooltip)
MAX_ROWS = 24  # rows a folded table shows; the rest are counted, not listed
TEMPLATE_NAME = "trace_report.ipynb"
NOTEBOOK_FILE = "report.ipynb"
HTML_FILE = "report.html"
SUMMARY_FILE = "summary.json"
NO_GATE = (
    "--compare-to needs clean timing samples from fresh processes, and a report of a saved trace has "
    "none (a trace holds what one traced run did, not a distribution of call times): there is nothing "
    "to gate. Compare traces with `workbench analyze`, or gate a --workload report"
)


# --- the command ------------------------------------------------------------------------------
TraceReportResult = ReportFiles  # the files the report wrote (workbench.report.files)


def default_trace_template() -> Path:
    """The template next to the package (``templates/`` + ``TEMPLATE_NAME``)."""
    return find_template(TEMPLATE_NAME, "trace report")


def _source(paths: Sequence[str | os.PathLike[str]]) -> Any:
    paths = [str(Path(p).resolve()) for p in paths]
    return paths[0] if len(paths) == 1 else paths


def load_checked(paths: Sequence[str | os.PathLike[str]]) -> Any:
    """The trace tables of ``paths`` (``workbench.trace``; the notebook reads them again through
    ``wb.load_trace``, from the cache); a missing path or a file that is not a trace raises (exit 2)."""
    if not paths:
        raise InvalidArgumentError(
            "--trace needs at least one path: a trace file, a .json.gz, or a folder of rank files"
        )
    for p in paths:
        if not Path(p).exists():
            raise InvalidArgumentError(
                f"the trace {str(p)!r} does not exist; pass a trace file (.json or .json.gz) or a folder of rank files"
            )
    from workbench.trace import read_trace

    return read_trace(_source(paths), cache=True)


def trace_summary(trace: Any, paths: Sequence[str | os.PathLike[str]]) -> dict[str, Any]:
    """What summary.json says about the loaded trace (no timing: a trace has no clean samples)."""
    return {
        "kind": "trace",
        "paths": [str(Path(p).resolve()) for p in paths],
        "files": [str(f) for f in trace.meta.files],
        "ranks": [int(r) for r in trace.ranks],
        "devices": device_names(trace),
        "has_gpu": bool(trace.has_gpu),
        "span_us": trace.span_us(),
        "events": trace.event_count(),
        "warnings": list(trace.warnings),
        "distributed_info": {str(r): v for r, v in trace.distributed_info.items()},
        "source": getattr(trace.meta, "source", "kineto"),
        "fidelity": dict(getattr(trace.meta, "fidelity", {}) or {}),
    }


def build_trace_report(
    out_dir: str | Path,
    paths: Sequence[str | os.PathLike[str]],
    *,
    template: str | Path | None = None,
    title: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> TraceReportResult:
    """Write ``report.ipynb``, ``report.html`` and ``summary.json`` (what was loaded, the hypotheses'
    categories) for the trace at ``paths``. Bad input raises before any notebook runs."""
    from workbench.report.execute import check_template, execute_template
    from workbench.report.render import render_html

    say = progress or (lambda _: None)
    out = Path(out_dir).resolve()
    if out.exists() and not out.is_dir():
        raise ReportError(f"the report folder {str(out)!r} is a file; pass --out a folder")
    template_path = Path(template).resolve() if template else default_trace_template()
    check_template(template_path)
    say("loading the trace...")
    trace = load_checked(paths)
    summary = trace_summary(trace, paths)
    from workbench.hypotheses import diagnose

    diag = diagnose(trace)
    summary["hypotheses"] = [
        {"category": h.category, "rule": h.rule, "title": h.title, "time_at_stake_ms": h.time_at_stake_ms}
        for h in diag.hypotheses
    ]
    summary["categories"] = sorted({h.category for h in diag.hypotheses})
    summary["template"] = str(template_path)
    summary["created_at"] = datetime.now(timezone.utc).isoformat()
    out.mkdir(parents=True, exist_ok=True)
    params = {
        "trace_paths": json.dumps(summary["paths"]),
        "title": title or f"workbench trace report: {_title_name(paths)}",
    }
    say("executing the trace report notebook...")
    notebook = execute_template(template_path, out / NOTEBOOK_FILE, params)
    say("rendering the HTML page...")
    html_path = render_html(notebook, out / HTML_FILE)
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=1, default=str), encoding="utf-8")
    return TraceReportResult(out_dir=str(out), html_path=str(html_path), notebook_path=str(notebook), summary=summary)


def _title_name(paths: Sequence[str | os.PathLike[str]]) -> str:
    names = [Path(p).name for p in paths]
    return names[0] if len(names) == 1 else f"{names[0]} and {len(names) - 1} more"


# --- formatting -------------------------------------------------------------------------------
def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _bytes(value: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.3g} {unit}"
    return f"{value:.0f} B"


def _cell(column: str, value: Any) -> str:
    """One table cell, in the unit its column name says (``*_us`` a time, ``*_pct`` a share...)."""
    if isinstance(value, (bool,)) or (hasattr(value, "dtype") and str(getattr(value, "dtype", "")) == "bool"):
        return f"<td>{'yes' if bool(value) else 'no'}</td>"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        v = float(value)
        if not math.isfinite(v):
            return "<td class='wb-num'>n/a</td>"
        if column.endswith("_us"):
            return f"<td class='wb-num' title='{v:,.1f} µs'>{_esc(format_ms(v / 1000))}</td>"
        if column.endswith("_pct") or column == "pct":
            return f"<td class='wb-num'>{v:.1f} %</td>"
        if column == "bytes":
            return f"<td class='wb-num' title='{v:,.0f} B'>{_esc(_bytes(v))}</td>"
        if column.endswith("gbps"):
            return f"<td class='wb-num'>{v:.3g} GB/s</td>"
        if column == "ratio":
            return f"<td class='wb-num'>{100 * v:.1f} %</td>"
        return f"<td class='wb-num'>{int(v):,}</td>" if v.is_integer() else f"<td class='wb-num'>{v:.3g}</td>"
    text = str(value) if value is not None else ""
    short = text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"
    return f"<td title='{_esc(text)}'>{_esc(short)}</td>" if short != text else f"<td>{_esc(text)}</td>"


def _name_cell(name: Any, label: str) -> str:
    text = str(name) if name is not None else ""
    return f"<td title='{_esc(text)}'>{_esc(label)}</td>" if label != text else f"<td>{_esc(text)}</td>"


def _header(column: str) -> str:
    name = column
    for suffix, unit in (("_us", ""), ("_pct", " %")):
        if name.endswith(suffix):
            name = name[: -len(suffix)] + unit
    return name.replace("_", " ")


def table_html(
    table: pd.DataFrame,
    *,
    columns: Sequence[str] | None = None,
    max_rows: int = MAX_ROWS,
    css: str = "wb-trace-table",
    hidden_what: str = "rows",
) -> str:
    """An HTML table of the first ``max_rows`` rows (in the given order) and, below it, how many more
    there are."""
    cols = [c for c in (columns or list(table.columns)) if c in table.columns]
    shown = table.head(max_rows)
    head = "".join(f"<th>{_esc(_header(c))}</th>" for c in cols)
    rows = shown[cols].to_dict("records")
    if "name" in cols:  # kernel and op names as the charts and the CLI show them (the full name on hover)
        labels = unique_labels([row["name"] for row in rows], MAX_TEXT)
        body = "".join(
            "<tr>" + "".join(_name_cell(row[c], label) if c == "name" else _cell(c, row[c]) for c in cols) + "</tr>"
            for row, label in zip(rows, labels)
        )
    else:
        body = "".join("<tr>" + "".join(_cell(c, row[c]) for c in cols) + "</tr>" for row in rows)
    hidden = len(table) - len(shown)
    note = (
        f"<p class='wb-hidden'>{hidden:,} more {hidden_what} not shown (of {len(table):,}).</p>" if hidden > 0 else ""
    )
    return f"<table class='{css}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{note}"


def worst_ranks_first(
    table: pd.DataFrame, by: str, *, ascending: bool = False, rank_score: pd.Series | None = None
) -> pd.DataFrame:
    """``table`` with its ranks ordered worst first: by each rank's total of ``by`` (or by
    ``rank_score``, one value per rank), and within a rank by ``by`` itself."""
    if table.empty or "rank" not in table.columns:
        return table.sort_values(by, ascending=ascending) if by in table.columns else table
    score = rank_score if rank_score is not None else table.groupby("rank")[by].sum()
    order = score.sort_values(ascending=ascending, kind="stable")
    position = {r: i for i, r in enumerate(order.index)}
    keyed = table.assign(_rank_order=table["rank"].map(position))
    return (
        keyed.sort_values(["_rank_order", by], ascending=[True, ascending], kind="stable")
        .drop(columns="_rank_order")
        .reset_index(drop=True)
    )


def _ranks_text(ranks: Sequence[Any]) -> str:
    """``0-7`` / ``0, 2, 5-6``: a compact list of rank numbers."""
    values = sorted({int(r) for r in ranks})
    runs: list[str] = []
    start = prev = None
    for v in values + [None]:
        if start is None:
            start = prev = v
        elif v is not None and prev is not None and v == prev + 1:
            prev = v
        else:
            runs.append(str(start) if start == prev else f"{start}-{prev}")
            start = prev = v
    return ", ".join(runs)


def _note(text: str) -> str:
    return f"<p class='wb-note'>{_esc(text)}</p>"


# --- sections ---------------------------------------------------------------------------------
def _where_available(section: Callable[..., Any]) -> Callable[..., Any]:
    """A section (or its charts) of a trace whose format lacks what it needs says so, in one sentence
    ("not available from nsys-sqlite 3.25.0: ..."), instead of failing the report."""
    import functools

    from workbench.trace.fidelity import NotAvailableError

    @functools.wraps(section)
    def guarded(trace: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return section(trace, *args, **kwargs)
        except NotAvailableError as exc:
            return [] if section.__name__.endswith("_charts") else f"<p class='wb-note'>{_esc(exc)}.</p>"

    return guarded


def fidelity_html(trace: Any) -> str:
    """The format the trace was read from and what that format does not provide ("" for Kineto)."""
    source = getattr(trace.meta, "source", "kineto")
    fidelity = getattr(trace.meta, "fidelity", None) or {}
    if source == "kineto" and not fidelity:
        return ""
    items = "".join(f"<li><code>{_esc(k)}</code>: {_esc(v)}</li>" for k, v in fidelity.items())
    return (
        f"<p><b>Read from {_esc(source)}.</b> What this format does not provide (the sections that need it say "
        f"so):</p><ul class='wb-warnings'>{items}</ul>"
    )


def device_names(trace: Any) -> list[str]:
    return sorted(
        {
            str(d.get("name"))
            for props in trace.device_properties.values()
            for d in props
            if isinstance(d, dict) and d.get("name")
        }
    )


def summary_html(trace: Any, paths: Sequence[str] = ()) -> str:
    """Ranks, devices, span, events, the files read and the loader's warnings."""
    ranks = list(trace.ranks)
    devices = device_names(trace) or (["GPU (no device properties in the trace)"] if trace.has_gpu else ["CPU only"])
    backends = sorted({str(v.get("backend")) for v in trace.distributed_info.values() if v.get("backend")})
    rows = [
        ("ranks", f"{len(ranks)} ({_ranks_text(ranks)})" if ranks else "none"),
        ("devices", ", ".join(devices)),
        ("span", format_ms(trace.span_us() / 1000) + " (earliest start to latest end, all ranks)"),
        (
            "events",
            f"{trace.event_count():,}: {len(trace.cpu_ops):,} CPU ops, {len(trace.runtime):,} runtime "
            f"calls, {len(trace.kernels):,} GPU events",
        ),
        ("files", f"{len(trace.meta.files)} trace file(s)"),
        ("format", getattr(trace.meta, "source", "kineto")),
    ]
    if backends:
        rows.append(("distributed backend", ", ".join(backends)))
    if paths:
        rows.append(("loaded from", "; ".join(str(p) for p in paths)))
    body = "".join(f"<tr><th>{_esc(k)}</th><td>{_esc(v)}</td></tr>" for k, v in rows)
    warnings = list(trace.warnings)
    shown = "".join(f"<li>{_esc(w)}</li>" for w in warnings[:MAX_ROWS])
    more = len(warnings) - MAX_ROWS
    warn = (
        f"<p><b>Loader warnings ({len(warnings)})</b></p><ul class='wb-warnings'>{shown}</ul>"
        + (f"<p class='wb-hidden'>{more} more warnings not shown.</p>" if more > 0 else "")
        if warnings
        else "<p>No loader warning: every event was read as recorded.</p>"
    )
    return f"<table class='wb-trace-summary'>{body}</table>{fidelity_html(trace)}{warn}"


KERNEL_COLUMNS = (
    "kernel_type",
    "name",
    "ranks",
    "count",
    "sum_us",
    "mean_us",
    "max_us",
    "pct",
    "worst_rank",
    "worst_rank_sum_us",
)


def kernel_table(trace: Any) -> pd.DataFrame:
    """Kernels folded over ranks: one row per (type, name) with the ranks that ran it, the total,
    the share of all kernel time and the rank that spent the most on it; most time first."""
    t = trace.kernel_breakdown().table
    if t.empty:
        return pd.DataFrame(columns=list(KERNEL_COLUMNS))
    worst = t.loc[t.groupby(["kernel_type", "name"])["sum_us"].idxmax(), ["kernel_type", "name", "rank", "sum_us"]]
    g = (
        t.groupby(["kernel_type", "name"])
        .agg(ranks=("rank", "nunique"), count=("count", "sum"), sum_us=("sum_us", "sum"), max_us=("max_us", "max"))
        .reset_index()
    )
    g["mean_us"] = g["sum_us"] / g["count"].where(g["count"] > 0)
    total = g["sum_us"].sum()
    g["pct"] = 100 * g["sum_us"] / total if total > 0 else math.nan
    g = g.merge(
        worst.rename(columns={"rank": "worst_rank", "sum_us": "worst_rank_sum_us"}),
        on=["kernel_type", "name"],
        how="left",
    )
    return g.sort_values("sum_us", ascending=False, kind="stable").reset_index(drop=True)[list(KERNEL_COLUMNS)]


def kernel_types_table(trace: Any) -> pd.DataFrame:
    """Time per kernel type, one row per rank (columns: the types, in µs), busiest rank first."""
    types = trace.kernel_breakdown().types
    if types is None or types.empty:
        return pd.DataFrame()
    wide = types.pivot_table(index="rank", columns="kernel_type", values="dur_us", aggfunc="sum", fill_value=0.0)
    wide.columns = [f"{str(c).lower().replace(' ', '_')}_us" for c in wide.columns]
    wide["total_us"] = wide.sum(axis=1)
    return wide.sort_values("total_us", ascending=False).reset_index()


@_where_available
def kernels_html(trace: Any) -> str:
    if not len(trace.kernels):
        return "<p>No GPU kernels in this trace (a CPU-only trace): the op breakdown below is where the time is.</p>"
    n_ranks = len(trace.ranks)
    parts = [
        _note(
            f"Kernels summed over {n_ranks} rank(s); 'worst rank' is the rank that spent the most time in the kernel."
            if n_ranks > 1
            else "Time per kernel name, most first."
        ),
        table_html(
            kernel_table(trace),
            columns=KERNEL_COLUMNS
            if n_ranks > 1
            else [c for c in KERNEL_COLUMNS if c not in ("ranks", "worst_rank", "worst_rank_sum_us")],
            hidden_what="kernels",
        ),
    ]
    types = kernel_types_table(trace)
    if not types.empty:
        parts.append("<h4>Kernel time by type, per rank (busiest first)</h4>" + table_html(types, hidden_what="ranks"))
    return "".join(parts)


OP_COLUMNS = ("name", "count", "self_us", "total_us", "mean_self_us", "pct", "top_input_dims")


@_where_available
def ops_html(trace: Any) -> str:
    ops = trace.op_breakdown().table
    if ops.empty:
        return "<p>No CPU ops in this trace.</p>"
    return _note(
        f"CPU ops by self time, over all {len(trace.ranks)} rank(s)."
        if len(trace.ranks) > 1
        else "CPU ops by self time."
    ) + table_html(ops, columns=OP_COLUMNS, hidden_what="ops")


@_where_available
def temporal_html(trace: Any) -> str:
    t = trace.temporal_breakdown().table
    if t.empty:
        return "<p>No GPU activity: no temporal breakdown.</p>"
    t = worst_ranks_first(t, "idle_pct")
    return _note("Per rank over its span of GPU activity, the most idle rank first.") + table_html(
        t,
        columns=[
            "rank",
            "kernel_time_us",
            "idle_us",
            "idle_pct",
            "compute_us",
            "compute_pct",
            "non_compute_us",
            "non_compute_pct",
        ],
        hidden_what="ranks",
    )


def idle_table(trace: Any) -> pd.DataFrame:
    """Idle per (rank, stream), one column per cause, the ranks with the most idle time first."""
    t = trace.idle_breakdown().table
    if t.empty:
        return t
    wide = t.pivot_table(
        index=["rank", "stream"], columns="idle_category", values="idle_us", aggfunc="sum", fill_value=0.0
    )
    wide.columns = [f"{c}_us" for c in wide.columns]
    wide["idle_us"] = wide.sum(axis=1)
    gaps = t.groupby(["rank", "stream"])["count"].sum().rename("gaps")
    wide = wide.join(gaps).reset_index()
    wide = wide[wide["idle_us"] > 0]
    return worst_ranks_first(wide, "idle_us")


@_where_available
def idle_html(trace: Any) -> str:
    t = idle_table(trace)
    if t.empty:
        return "<p>No idle gaps between kernels.</p>"
    n_ranks = int(t["rank"].nunique()) if "rank" in t.columns else 1
    charted = (
        f" The chart above draws the {MAX_CHART_RANKS} most idle of the {n_ranks} ranks; this table lists them all."
        if n_ranks > MAX_CHART_RANKS
        else ""
    )
    return _note(
        "Idle time between kernels on each stream, split by cause (host wait: the next launch had not "
        "been issued; kernel wait: back-to-back launch latency), the most idle rank first." + charted
    ) + table_html(t, hidden_what="streams")


@_where_available
def overlap_html(trace: Any) -> str:
    t = trace.comm_overlap().table
    if t.empty or not (t["comm_us"] > 0).any():
        return "<p>No communication kernels in this trace: nothing to overlap.</p>"
    t = worst_ranks_first(t, "exposed_comm_us")
    return _note(
        "Per rank: communication kernel time, how much of it runs under computation, and what is "
        "exposed (on the critical path); the most exposed rank first."
    ) + table_html(
        t,
        columns=["rank", "comm_us", "compute_us", "overlap_us", "overlap_pct", "exposed_comm_us"]
        + (["reason"] if "reason" in t.columns and t["reason"].astype(str).str.strip().any() else []),
        hidden_what="ranks",
    )


@_where_available
def stragglers_html(trace: Any) -> str:
    if len(trace.ranks) < 2:
        return "<p>One rank: no rank to wait for.</p>"
    s = trace.stragglers()
    t = s.table
    if t.empty:
        return f"<p>No straggler analysis: {_esc(s.reason or 'no communication')}.</p>"
    t = (
        t.assign(_s=~t["is_straggler"].astype(bool))
        .sort_values(["_s", "comm_deficit_us"], ascending=[True, False])
        .drop(columns="_s")
    )
    if s.stragglers:
        head = (
            f"<p><b>Straggler rank(s): {_esc(_ranks_text(s.stragglers))}</b>: the others wait for them in "
            f"collectives"
            + (f" ({_esc(format_ms(s.wait_caused_us / 1000))} of waiting caused)" if _finite(s.wait_caused_us) else "")
            + ".</p>"
        )
    else:
        head = f"<p>No straggler{': ' + _esc(s.reason) if s.reason else ''}.</p>"
    return (
        head
        + _note(
            "comm deficit: how much less communication time the rank has than the others' median "
            "(a rank that arrives last at a collective waits least); stragglers first."
        )
        + table_html(
            t,
            columns=["rank", "is_straggler", "comm_deficit_us", "busy_us", "compute_us", "comm_us", "kernel_time_us"],
            hidden_what="ranks",
        )
    )


@_where_available
def launch_html(trace: Any) -> str:
    ls = trace.launch_stats()
    if ls.table.empty:
        return "<p>No launches in this trace (no runtime call that put work on a GPU).</p>"
    t = ls.table
    per_rank = (
        t.groupby("rank")
        .agg(
            launches=("api", "size"),
            runtime_us=("runtime_us", "sum"),
            gpu_us=("gpu_us", "sum"),
            median_delay_us=("launch_delay_us", "median"),
            p95_delay_us=("launch_delay_us", lambda s: s.quantile(0.95)),
            shorter_than_launch=("shorter_than_launch", "sum"),
        )
        .reset_index()
    )
    per_rank = worst_ranks_first(per_rank, "p95_delay_us")
    return (
        f"<p>{ls.n_launches:,} launches, {ls.n_shorter_than_launch:,} of them ran on the GPU for less time "
        "than their launch call took on the CPU.</p>"
        + table_html(ls.by_api, hidden_what="APIs")
        + (
            "<h4>Per rank (longest launch delays first)</h4>" + table_html(per_rank, hidden_what="ranks")
            if len(trace.ranks) > 1
            else ""
        )
    )


@_where_available
def copies_html(trace: Any) -> str:
    c = trace.copy_stats()
    if c.table.empty:
        return "<p>No memory copies or sets in this trace.</p>"
    t = worst_ranks_first(c.table, "dur_us")
    return (
        f"<p>{_esc(format_ms(c.total_copy_us / 1000))} in copies; {_esc(_bytes(c.pageable_bytes))} from or to "
        "pageable host memory (a copy from pageable memory cannot overlap compute).</p>"
        + table_html(t, hidden_what="rows")
    )


@_where_available
def syncs_html(trace: Any) -> str:
    s = trace.sync_audit()
    if s.table.empty:
        return "<p>No host-device synchronisation in this trace.</p>"
    parts = [
        f"<p>The host blocked on the device for {_esc(format_ms(s.blocked_us / 1000))} in "
        f"{len(s.table):,} calls (all ranks).</p>",
        "<h4>By cause</h4>",
        table_html(s.by_cause, hidden_what="causes"),
    ]
    if len(trace.ranks) > 1:
        per_rank = s.table.groupby("rank").agg(calls=("api", "size"), blocked_us=("blocked_us", "sum")).reset_index()
        parts += [
            "<h4>Per rank (most blocked first)</h4>",
            table_html(worst_ranks_first(per_rank, "blocked_us"), hidden_what="ranks"),
        ]
    return "".join(parts)


@_where_available
@_where_available
def critical_path_html(trace: Trace) -> str:
    """The first step's critical path (the whole trace where it marks no ProfilerStep), drawn by
    ``workbench.render.critical_path``: what bounds it, the bound-by bar, the longest edges; for a folder
    of rank files, the first rank's (``trace.critical_path(rank=r)`` for another)."""
    from workbench import render
    from workbench.errors import WorkbenchError

    try:
        try:
            cp = trace.critical_path()
        except WorkbenchError:  # no ProfilerStep annotation: the whole trace
            cp = trace.critical_path(annotation="")
    except WorkbenchError as exc:
        return _note(f"no critical path: {exc}")
    return render.html(cp)


@_where_available
def steps_html(trace: Any) -> str:
    s = trace.step_breakdown()
    if s.table.empty:
        return "<p>No ProfilerStep# annotations in this trace.</p>"
    t = worst_ranks_first(s.table, "dur_us")
    return _note(
        f"median step {format_ms(s.median_step_us / 1000)}; the ranks with the longest steps first."
    ) + table_html(
        t,
        columns=[
            "rank",
            "step",
            "dur_us",
            "gpu_busy_us",
            "gpu_idle_us",
            "compute_us",
            "comm_us",
            "memory_us",
            "n_kernels",
        ],
        hidden_what="steps",
    )


def hypotheses_html(trace: Trace) -> str:
    """The ranked hypotheses and the rules that could not judge the trace (``workbench.render``)."""
    from workbench import render

    return render.html(trace.diagnosis())


NO_RANK_ATTRIBUTION = (
    "The rank files were read by worker processes, which keep per-rank summaries, not the "
    "Python events: for the time by module and source line of one rank, report on its file "
    "alone (or trace.rank(r).module_breakdown() in a notebook)."
)


def attribution_html(trace: Trace) -> str:
    """Time by nn.Module and by the user's source line (``Trace.module_breakdown`` /
    ``source_breakdown``, one pass over the Python events), drawn by ``workbench.render``, where
    the trace recorded Python events; else one sentence saying why not."""
    from workbench import render
    from workbench.analysis.attribution import attribution

    if trace.rank_folder is not None and not trace.rank_folder.read_all:  # per-rank summaries, no Python events here
        return _note(NO_RANK_ATTRIBUTION)
    result = attribution(trace)
    if not result.recorded:
        reasons = dict.fromkeys(part.not_recorded for part in (result.modules, result.sources))
        return "".join(f"<p>No time by module or source line: {_esc(reason)}.</p>" for reason in reasons)
    return render.html(result)


def memory_html(trace: Trace) -> str:
    """The memory section (``workbench.render.memory``): the peak per device, the largest live blocks at it,
    the categories, growth, the memory hypotheses and the memory chart; a sentence without allocator events."""
    import workbench.render.memory as memory_render

    if not len(getattr(trace, "memory", ())):
        return _note(
            "The trace has no allocator events ([memory]): record it with profile_memory=True "
            "(wb.profile(fn, memory=True)) for the memory section."
        )
    return memory_render.html(trace)


def devices_table(trace: Any) -> pd.DataFrame:
    """Device properties folded over ranks: one row per distinct device description, the ranks that
    report it and the device ids."""
    rows: dict[str, dict[str, Any]] = {}
    for rank, props in sorted(trace.device_properties.items()):
        for d in props:
            if not isinstance(d, dict):
                continue
            desc = {k: v for k, v in d.items() if k != "id"}
            key = json.dumps(desc, sort_keys=True, default=str)
            entry = rows.setdefault(key, {"ranks": set(), "ids": set(), **desc})
            entry["ranks"].add(int(rank))
            if d.get("id") is not None:
                entry["ids"].add(d.get("id"))
    columns = {}
    for entry in rows.values():
        ranks, ids = entry.pop("ranks"), entry.pop("ids")
        ids_text = (
            _ranks_text(ids) if all(isinstance(i, int) for i in ids) else ", ".join(map(str, sorted(ids, key=str)))
        )
        label = f"ranks {_ranks_text(ranks)} · devices {ids_text}" if ids else f"ranks {_ranks_text(ranks)}"
        columns[label] = {k: (_bytes(v) if k.lower().endswith("mem") and _finite(v) else v) for k, v in entry.items()}
    if not columns:
        return pd.DataFrame()
    table = pd.DataFrame(columns)  # one row per property, one column per distinct device
    table.index.name = "property"
    return table.reset_index()


def distributed_table(trace: Any) -> pd.DataFrame:
    """distributedInfo folded over ranks: the ranks with the same entries (but their rank) share a row."""
    groups: dict[str, dict[str, Any]] = {}
    for rank, info in sorted(trace.distributed_info.items()):
        rest = {k: v for k, v in dict(info).items() if k != "rank"}
        key = json.dumps(rest, sort_keys=True, default=str)
        groups.setdefault(
            key, {"ranks": [], **{k: (json.dumps(v) if isinstance(v, (dict, list)) else v) for k, v in rest.items()}}
        )["ranks"].append(rank)
    return pd.DataFrame([{**g, "ranks": _ranks_text(g["ranks"])} for g in groups.values()])


def environment_html(trace: Any) -> str:
    parts = []
    dev = devices_table(trace)
    if dev.empty:
        parts.append("<p>The trace carries no device properties.</p>")
    else:
        parts.append(
            "<h4>Device properties</h4>"
            + _note("One column per distinct device, with the ranks whose trace lists it and its device ids.")
            + table_html(dev, max_rows=60, hidden_what="properties")
        )
    dist = distributed_table(trace)
    if dist.empty:
        parts.append("<p>The trace carries no distributedInfo (a single-process trace).</p>")
    else:
        parts.append("<h4>distributedInfo</h4>" + table_html(dist, hidden_what="groups"))
    return "".join(parts)


# --- charts -----------------------------------------------------------------------------------
def guarded_chart(build: Callable[[], Any], title: str) -> Any:
    """``workbench.charts.common.guarded_chart``, imported when a chart is drawn (altair stays unloaded until then)."""
    from workbench.charts.common import guarded_chart as guard

    return guard(build, title)


@_where_available
def kernel_charts(trace: Any) -> list[Any]:
    from workbench.charts import kernel_types_chart, top_kernels_chart, top_ops_chart

    if not len(trace.kernels):
        return [guarded_chart(lambda: top_ops_chart(trace.op_breakdown()), "Top ops")]
    kb = trace.kernel_breakdown()
    folded = kernel_table(trace)  # one bar per kernel, summed over the ranks
    charts = [guarded_chart(lambda: top_kernels_chart(folded, value="sum_us"), "Top kernels")]
    if kb.types is not None and not kb.types.empty:
        charts.append(guarded_chart(lambda: kernel_types_chart(kb.types), "Kernel types"))
    return charts


@_where_available
def rank_charts(trace: Any) -> list[Any]:
    """Time per rank (compute / non-compute / idle) and the idle split per rank and stream."""
    from workbench.charts import idle_chart, per_rank_chart

    if not trace.has_gpu:
        return []
    charts = []
    if len(trace.ranks) > 1:
        charts.append(
            guarded_chart(
                lambda: per_rank_chart(
                    trace.temporal_breakdown(), parts=("compute", "non_compute", "idle"), title="Time per rank"
                ),
                "Time per rank",
            )
        )
    idle = trace.idle_breakdown().table
    worst = (
        idle.groupby("rank")["idle_us"].sum().sort_values(ascending=False).index[:MAX_CHART_RANKS]
        if "rank" in idle.columns and len(idle)
        else []
    )
    shown = idle[idle["rank"].isin(worst)] if len(worst) else idle
    charts.append(guarded_chart(lambda: idle_chart(shown), "Idle time"))
    return charts


@_where_available
def overlap_charts(trace: Any) -> list[Any]:
    from workbench.charts import per_rank_chart

    t = trace.comm_overlap().table
    if t.empty or not (t["comm_us"] > 0).any():
        return []
    return [
        guarded_chart(
            lambda: per_rank_chart(
                t, parts=("overlap", "exposed_comm"), title="Communication per rank: hidden under compute / exposed"
            ),
            "Communication per rank",
        )
    ]


@_where_available
def roofline_charts(trace: Any) -> list[Any]:
    from workbench.charts import trace_roofline_chart

    return [guarded_chart(lambda: trace_roofline_chart(trace), "Roofline")]


@_where_available
def timeline_charts(trace: Any) -> list[Any]:
    from workbench.charts import timeline_chart

    return [guarded_chart(lambda: timeline_chart(trace), "Timeline")]


PAGE_CSS = """<style>
.wb-trace-table, .wb-trace-summary { border-collapse: collapse; font-size: 12px; margin: 4px 0 8px 0; }
.wb-trace-table th, .wb-trace-table td, .wb-trace-summary th, .wb-trace-summary td {
  padding: 2px 8px; border-bottom: 1px solid #e3e3e3; text-align: left; vertical-align: top; }
.wb-trace-table thead th { background: #f4f4f4; position: sticky; top: 0; }
.wb-trace-table th, .wb-trace-table td, .wb-trace-summary th, .wb-trace-summary td { text-align: left !important; }
.wb-trace-table td.wb-num { text-align: right !important; font-variant-numeric: tabular-nums; white-space: nowrap; }
.wb-trace-table td { max-width: 46em; overflow-wrap: break-word; word-break: normal; }
.wb-note, .wb-hidden { color: #555; font-size: 12px; margin: 2px 0; }
.wb-hidden { font-style: italic; }
.wb-diagnosis table.wb-evidence { font-size: 11px; border-collapse: collapse; }
.wb-diagnosis table.wb-evidence td, .wb-diagnosis table.wb-evidence th { padding: 1px 6px; border-bottom: 1px solid #eee;
  text-align: left !important; max-width: 40em; overflow-wrap: break-word; word-break: normal; }
.wb-diagnosis li.wb-hyp { margin-bottom: 10px; }
.wb-attribution { border-collapse: collapse; font-size: 12px; margin: 4px 0 8px 0; }
.wb-attribution th, .wb-attribution td { padding: 2px 8px; border-bottom: 1px solid #e3e3e3; text-align: left !important; }
.wb-attribution td.wb-num { text-align: right !important; font-variant-numeric: tabular-nums; white-space: nowrap; }
</style>"""


def page_style() -> str:
    """The report's table styles (one ``<style>`` block, no external stylesheet)."""
    return PAGE_CSS


ROOF_COLUMNS = ("name", "kernel_type", "family", "placed_by", "work_op", "count", "dur_us", "roof_us", "roof_pct")


def kernel_roofline_table(trace: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Computation kernels (not collectives, copies or sets) placed against the device's roofline (``hypotheses.gpu_roofline``):
    time per (family, placed_by), and per kernel name its roof time (the least time its work can
    take at the GPU's peaks) as a share of its measured time, most time first."""
    from workbench.hypotheses.gpu_roofline import place_kernels

    k = trace.kernels
    if k.empty:
        return pd.DataFrame(), pd.DataFrame()
    k = k[k["kind"] == "kernel"] if "kind" in k.columns else k
    if "kernel_type" in k.columns:  # collectives are bound by the network, not by this roofline
        k = k[k["kernel_type"] == "computation"]
    placed = place_kernels(k, trace.cpu_ops, trace.device_properties)
    if placed.empty:
        return pd.DataFrame(), pd.DataFrame()
    placed = placed.assign(work_op=placed["work_op"].fillna("").astype(str))
    by_family = (
        placed.groupby(["family", "placed_by"])
        .agg(kernels=("name", "size"), dur_us=("dur_us", "sum"))
        .reset_index()
        .sort_values("dur_us", ascending=False)
    )
    total = by_family["dur_us"].sum()
    by_family["pct"] = 100 * by_family["dur_us"] / total if total > 0 else math.nan
    per_name = (
        placed.groupby(["name", "kernel_type", "family", "placed_by", "work_op"], dropna=False)
        .agg(count=("dur_us", "size"), dur_us=("dur_us", "sum"), roof_us=("roof_us", "sum"))
        .reset_index()
    )
    per_name.loc[per_name["roof_us"] <= 0, "roof_us"] = math.nan
    per_name["roof_pct"] = 100 * per_name["roof_us"] / per_name["dur_us"].where(per_name["dur_us"] > 0)
    return by_family.reset_index(drop=True), per_name.sort_values("dur_us", ascending=False).reset_index(drop=True)


@_where_available
def kernel_roofline_html(trace: Any) -> str:
    if not len(trace.kernels):
        return "<p>No GPU kernels: the roofline above places the CPU ops.</p>"
    by_family, per_name = kernel_roofline_table(trace)
    if by_family.empty:
        return "<p>No kernel to place on the roofline.</p>"
    return (
        "<h4>Kernels against the roofline</h4>"
        + _note(
            "Each kernel is memory- or compute-bound ('memory' / 'matrix') from the analytic work of the op "
            "that launched it where its input shapes are known ('analytic work'), else from its name "
            "('kernel name'); 'uncertain' kernels sit near the ridge. roof %: the least time the work can "
            "take at the device's peaks, as a share of the time the kernel took (100 % is on the roof)."
        )
        + table_html(by_family, hidden_what="groups")
        + table_html(per_name, columns=ROOF_COLUMNS, max_rows=15, hidden_what="kernels")
    )
