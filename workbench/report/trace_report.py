"""``workbench report --trace``: an offline HTML report of a saved trace (a file, a ``.json.gz``,
a folder of rank files, several paths), and the sections its template shows.

There is no workload and no clean timing here, only what the trace recorded, so there is nothing
for the CI gate to compare: ``--compare-to`` is refused. Bad input (a path that does not exist,
a file that is not a trace) is found by loading the trace here, before any notebook runs.

This module decides what each section holds: which analyses run, what is computed from them and
in which order the rows come. Many ranks are summarised, not listed one table per rank: a per-rank
table is one table with a ``rank`` column, the worst ranks first (by the section's own measure of
"worst"), capped at ``MAX_ROWS`` rows with the number of hidden rows said. The HTML is drawn by
``workbench.render.trace_report`` (every text from the trace escaped there); results that have a
rendering of their own (the diagnosis, the time by module and source line, the critical path, the
memory) are drawn by ``workbench.render``, as the notebook and the CLI draw them.
"""

from __future__ import annotations

import json
import math
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import pandas as pd

import workbench.render.trace_report as draw
from workbench.errors import InvalidArgumentError, ReportError
from workbench.report.files import ReportFiles, find_template
from workbench.units import format_ms

if TYPE_CHECKING:
    from workbench.api.trace import Trace

# drawn by workbench.render.trace_report (the template and the tests reach them here too)
MAX_ROWS = draw.MAX_ROWS  # rows a folded table shows; the rest are counted, not listed
MAX_TEXT = draw.MAX_TEXT  # characters of a name a cell shows (the whole name is its tooltip)
page_style = draw.page_style  # the report's table styles
table_html = draw.table_html  # a table of the first MAX_ROWS rows, and how many more there are

MAX_CHART_RANKS = 8  # a per-rank-and-stream chart draws the worst ranks only (the table lists the rest)
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


# --- ordering ---------------------------------------------------------------------------------
_ranks_text = draw.ranks_text  # "0-7" / "0, 2, 5-6"


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
            return [] if section.__name__.endswith("_charts") else draw.not_available_html(exc)

    return guarded


def fidelity_html(trace: Any) -> str:
    """The format the trace was read from and what that format does not provide ("" for Kineto)."""
    return draw.fidelity_html(getattr(trace.meta, "source", "kineto"), getattr(trace.meta, "fidelity", None) or {})


def device_names(trace: Any) -> list[str]:
    return sorted(
        {
            str(d.get("name"))
            for props in trace.device_properties.values()
            for d in props
            if isinstance(d, dict) and d.get("name")
        }
    )


def summary_rows(trace: Any, paths: Sequence[str] = ()) -> list[tuple[str, str]]:
    """The trace summary as (label, value): ranks, devices, span, events, files, format, backend, paths."""
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
    return rows


def summary_html(trace: Any, paths: Sequence[str] = ()) -> str:
    """Ranks, devices, span, events, the files read and the loader's warnings."""
    return draw.summary_html(
        summary_rows(trace, paths),
        list(trace.warnings),
        source=getattr(trace.meta, "source", "kineto"),
        fidelity=getattr(trace.meta, "fidelity", None) or {},
        max_warnings=MAX_ROWS,
    )


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
        return draw.kernels_html(None)
    return draw.kernels_html(kernel_table(trace), kernel_types_table(trace), n_ranks=len(trace.ranks))


OP_COLUMNS = draw.OP_COLUMNS


@_where_available
def ops_html(trace: Any) -> str:
    return draw.ops_html(trace.op_breakdown().table, n_ranks=len(trace.ranks))


@_where_available
def temporal_html(trace: Any) -> str:
    t = trace.temporal_breakdown().table
    return draw.temporal_html(t if t.empty else worst_ranks_first(t, "idle_pct"))


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
    n_ranks = int(t["rank"].nunique()) if "rank" in t.columns else 1
    return draw.idle_html(t, n_ranks=n_ranks, charted_ranks=MAX_CHART_RANKS)


@_where_available
def overlap_html(trace: Any) -> str:
    t = trace.comm_overlap().table
    if t.empty or not (t["comm_us"] > 0).any():
        return draw.overlap_html(None)
    return draw.overlap_html(worst_ranks_first(t, "exposed_comm_us"))


@_where_available
def stragglers_html(trace: Any) -> str:
    if len(trace.ranks) < 2:
        return draw.stragglers_html(None)
    s = trace.stragglers()
    t = s.table
    if not t.empty:  # the stragglers first, then the largest communication deficit
        t = (
            t.assign(_s=~t["is_straggler"].astype(bool))
            .sort_values(["_s", "comm_deficit_us"], ascending=[True, False])
            .drop(columns="_s")
        )
    return draw.stragglers_html(t, stragglers=s.stragglers, wait_caused_us=s.wait_caused_us, reason=s.reason)


@_where_available
def launch_html(trace: Any) -> str:
    ls = trace.launch_stats()
    if ls.table.empty:
        return draw.launch_html(None)
    per_rank = None
    if len(trace.ranks) > 1:
        per_rank = (
            ls.table.groupby("rank")
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
    return draw.launch_html(
        ls.by_api, per_rank, n_launches=ls.n_launches, n_shorter_than_launch=ls.n_shorter_than_launch
    )


@_where_available
def copies_html(trace: Any) -> str:
    c = trace.copy_stats()
    t = c.table if c.table.empty else worst_ranks_first(c.table, "dur_us")
    return draw.copies_html(t, total_copy_us=c.total_copy_us, pageable_bytes=c.pageable_bytes)


@_where_available
def syncs_html(trace: Any) -> str:
    s = trace.sync_audit()
    if s.table.empty:
        return draw.syncs_html(None)
    per_rank = None
    if len(trace.ranks) > 1:
        per_rank = s.table.groupby("rank").agg(calls=("api", "size"), blocked_us=("blocked_us", "sum")).reset_index()
        per_rank = worst_ranks_first(per_rank, "blocked_us")
    return draw.syncs_html(s.by_cause, per_rank, blocked_us=s.blocked_us, calls=len(s.table))


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
        return draw.note_html(f"no critical path: {exc}")
    return render.html(cp)


@_where_available
def steps_html(trace: Any) -> str:
    s = trace.step_breakdown()
    t = s.table if s.table.empty else worst_ranks_first(s.table, "dur_us")
    return draw.steps_html(t, median_step_us=s.median_step_us)


def hypotheses_html(trace: Trace) -> str:
    """The ranked hypotheses and the rules that could not judge the trace (``workbench.render``)."""
    from workbench import render

    return render.html(trace.diagnosis())


NO_RANK_ATTRIBUTION = (
    "The rank files were read by worker processes, which keep per-rank summaries, not the "
    "Python events: for the time by module and source line of one rank, report on its file "
    "alone (or trace.rank(r).module_breakdown() in a notebook)."
)
NO_MEMORY = (
    "The trace has no allocator events ([memory]): record it with profile_memory=True "
    "(wb.profile(fn, memory=True)) for the memory section."
)


def attribution_html(trace: Trace) -> str:
    """Time by nn.Module and by the user's source line (``Trace.module_breakdown`` /
    ``source_breakdown``, one pass over the Python events), drawn by ``workbench.render``, where
    the trace recorded Python events; else one sentence saying why not."""
    from workbench import render
    from workbench.analysis.attribution import attribution

    if trace.rank_folder is not None and not trace.rank_folder.read_all:  # per-rank summaries, no Python events here
        return draw.note_html(NO_RANK_ATTRIBUTION)
    result = attribution(trace)
    if not result.recorded:
        return draw.attribution_reasons_html([part.not_recorded for part in (result.modules, result.sources)])
    return render.html(result)


def memory_html(trace: Trace) -> str:
    """The memory section (``workbench.render.memory``): the peak per device, the largest live blocks at it,
    the categories, growth, the memory hypotheses and the memory chart; a sentence without allocator events."""
    import workbench.render.memory as memory_render

    if not len(getattr(trace, "memory", ())):
        return draw.note_html(NO_MEMORY)
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
        columns[label] = {
            k: (draw.format_bytes(v) if k.lower().endswith("mem") and draw.finite(v) else v) for k, v in entry.items()
        }
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
    """Device properties and distributedInfo, each folded over ranks."""
    return draw.environment_html(devices_table(trace), distributed_table(trace))


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


ROOF_COLUMNS = draw.ROOF_COLUMNS


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
        return draw.kernel_roofline_html(None)
    by_family, per_name = kernel_roofline_table(trace)
    return draw.kernel_roofline_html(by_family, per_name)
