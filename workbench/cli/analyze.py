"""``workbench analyze TRACE``: load a saved trace, print its breakdowns and the diagnosis."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from workbench import render
from workbench.analysis.attribution import Attribution
from workbench.analysis.labels import unique_labels
from workbench.analysis.result import AnalysisResult
from workbench.api.rank_folder import connect
from workbench.api.trace import Trace, load_trace
from workbench.errors import InvalidArgumentError, WorkbenchError
from workbench.hypotheses import Hypothesis, HypothesisList
from workbench.trace.fidelity import NotAvailableError
from workbench.units import format_table

if TYPE_CHECKING:
    from distributed import Client

# the analyses printed, in order: name -> the Trace method that runs it
ANALYSES: dict[str, Callable[[Trace, str], AnalysisResult]] = {
    "op_breakdown": Trace.op_breakdown,
    "kernel_breakdown": Trace.kernel_breakdown,
    "temporal_breakdown": Trace.temporal_breakdown,
    "idle_breakdown": Trace.idle_breakdown,
    "launch_stats": Trace.launch_stats,
    "comm_overlap": Trace.comm_overlap,
    "copy_stats": Trace.copy_stats,
    "sync_audit": Trace.sync_audit,
    "stragglers": Trace.stragglers,
    "step_breakdown": Trace.step_breakdown,
}


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "analyze",
        help="print the breakdowns and ranked hypotheses of a saved trace",
        description="Load a trace (a Kineto/Chrome .json or .json.gz, a folder of rank files, an Nsight Systems "
        "SQLite export, a rocprofv3 JSON; the format is recognised by content) and print its breakdowns "
        "as text tables, then the ranked hypotheses. For another tool's format, what it does not "
        "provide is listed first, and an analysis that needs it says 'not available from <format>'.",
    )
    p.add_argument(
        "trace",
        nargs="+",
        help="trace file(s) or a folder of per-rank trace files (Kineto JSON, "
        "Nsight Systems .sqlite or rocprofv3 JSON: one such file at a time)",
    )
    p.add_argument("--rank", type=int, default=None, help="analyse only this rank (default: all ranks)")
    p.add_argument("--top", type=int, default=10, help="rows shown per table (default: 10)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text tables")
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="decode the trace files even if the columnar cache holds their tables (the cache is in "
        "$WORKBENCH_CACHE_DIR, else ~/.cache/workbench; entries of changed files are never used)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="worker processes reading a folder's rank files, each rank analysed where it is read "
        "(default: one per core, at most one per rank, bounded by free memory); for one large "
        "file, processes decoding it in byte ranges (default: one per core for a plain JSON file "
        "of 96 MB or more); 1: one process",
    )
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        default=None,
        help="run the per-rank map on the Dask cluster whose scheduler is at ADDRESS "
        "(tcp://HOST:8786; needs pip install 'workbench[dask]')",
    )
    p.add_argument(
        "--hta-compat",
        action="store_true",
        help="count as Holistic Trace Analysis 0.5 does (sub-µs rounding, last "
        "ProfilerStep dropped, nccl*Kernel-only communication) to hold numbers against it",
    )
    p.add_argument(
        "--charts",
        metavar="DIR",
        default=None,
        help="also write the trace's charts (top ops/kernels, idle, roofline, timeline) to DIR",
    )
    p.add_argument(
        "--chart-format",
        default="svg",
        metavar="FMT",
        help="comma-separated chart formats for --charts: svg, png, html, json (default: svg)",
    )
    p.add_argument(
        "--critical-path",
        nargs="?",
        const="ProfilerStep",
        default=None,
        metavar="ANNOTATION",
        help="also print the critical path of one step (HTA's dependency model): its length, what it is "
        "bound by and its longest edges; ANNOTATION is the range to follow (default ProfilerStep; "
        "'' for the whole trace), --step the instance",
    )
    p.add_argument(
        "--memory",
        action="store_true",
        help="also print memory: the peak per device (the recorded totals where the trace has them), the "
        "largest blocks live at it with their op, module and source line, the category split, growth "
        "across steps and the memory hypotheses; with --charts, the memory chart too",
    )
    p.add_argument(
        "--step",
        type=int,
        default=0,
        metavar="N",
        help="with --critical-path: which instance of the annotation (default 0, the first)",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    client = connect(args.scheduler) if args.scheduler else None  # --scheduler: the map runs on that Dask cluster
    try:
        return _run(args, client)
    finally:
        if client is not None:
            client.close()


def _run(args: argparse.Namespace, client: Client | None) -> int:
    if args.top <= 0:
        raise InvalidArgumentError(f"--top must be a positive number of rows, got {args.top}")
    source = args.trace[0] if len(args.trace) == 1 else args.trace
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trace = load_trace(source, cache=not getattr(args, "no_cache", False), workers=args.workers, client=client)
    if args.rank is not None:
        trace = trace.rank(args.rank)
    results = _analyses(trace, "hta" if args.hta_compat else "workbench")
    hypotheses = trace.hypotheses()
    if args.json:
        out = _as_json(trace, results, hypotheses)
        if getattr(args, "critical_path", None) is not None:
            out["critical_path"] = _critical_path_result(
                trace, args.critical_path, args.step, args.rank, "hta" if args.hta_compat else "workbench"
            )
        print(json.dumps(out, default=str, indent=1))
    else:
        # one folder's warning can be raised by more than one reader of it: each is said once
        warned = list(dict.fromkeys(str(w.message) for w in caught))
        print(_as_text(trace, results, hypotheses, args.top, warned))
    if getattr(args, "critical_path", None) is not None and not args.json:
        print(
            _critical_path_text(
                trace, args.critical_path, args.step, args.rank, args.top, "hta" if args.hta_compat else "workbench"
            )
        )
    if getattr(args, "memory", False):
        _memory_out(trace, args)
    if args.charts:
        _write_charts(trace, args.charts, args.chart_format, quiet=args.json)
    return 0


def _memory_out(trace: Trace, args: argparse.Namespace) -> None:
    """``--memory``: the memory section (``workbench.render.memory``); its chart into --charts."""
    import workbench.render.memory as memory_render

    subject = trace  # a rank folder's tables are read here on first use
    if args.json:
        peak = subject.memory_peak()
        print(
            json.dumps(
                {
                    "memory_peak": {
                        "devices": peak.devices.to_dict("records"),
                        "notes": list(peak.notes),
                        "categories": peak.category_bytes(),
                    }
                },
                default=str,
            )
        )
    else:
        print("\n".join(["", *(memory_render.text_lines(subject) or ["Memory: the trace has no memory events"])]))
    if args.charts:
        from pathlib import Path

        from workbench.charts.memory import memory_chart
        from workbench.charts.offline import page_html

        Path(args.charts).mkdir(parents=True, exist_ok=True)
        (Path(args.charts) / "memory.html").write_text(page_html([memory_chart(subject)], title="memory"))


def _critical_path_result(trace: Trace, annotation: str, step: int, rank: int | None, semantics: str) -> dict | str:
    """``--critical-path --json``: the path's result as a dict, or why there is none."""
    try:
        return _critical_path(trace, annotation, step, rank, semantics).to_dict()
    except WorkbenchError as exc:
        return f"not available: {exc}"


def _critical_path(trace: Trace, annotation: str, step: int, rank: int | None, semantics: str):
    return trace.critical_path(annotation, step, rank, semantics=semantics)  # a rank folder reads one rank


def _critical_path_text(trace: Trace, annotation: str, step: int, rank: int | None, top: int, semantics: str) -> str:
    """``--critical-path``: the path's summary and its longest edges (``workbench.render.critical_path``)."""
    try:
        cp = _critical_path(trace, annotation, step, rank, semantics)
    except WorkbenchError as exc:
        return "\n".join(["", "== critical path ==", f"not available: {exc}"])
    return "\n".join(["", "== critical path ==", render.text(cp, limit=top)])


def _write_charts(trace: Trace, folder: str, chart_format: str, *, quiet: bool) -> None:
    paths = trace.save_charts(folder, formats=[f.strip() for f in chart_format.split(",") if f.strip()])
    if not quiet:
        print(f"\nwrote {len(paths)} chart file(s) to {folder}")
    else:
        print(f"wrote {len(paths)} chart file(s) to {folder}", file=sys.stderr)


def _analyses(trace: Trace, semantics: str) -> dict[str, AnalysisResult | str]:
    """Each analysis: its result, or why it could not run on this trace."""
    out: dict[str, AnalysisResult | str] = {}
    for name, method in ANALYSES.items():
        try:
            out[name] = method(trace, semantics)
        except NotAvailableError as exc:  # a format that lacks what it needs: "not available from <format>: ..."
            out[name] = str(exc)
        except WorkbenchError as exc:
            out[name] = f"not available: {exc}"
    return out


def _as_json(trace: Trace, results: dict[str, AnalysisResult | str], hypotheses: list[Hypothesis]) -> dict:
    return {
        "trace": {
            "summary": trace.summary(),
            "files": list(trace.meta.files),
            "ranks": trace.ranks,
            "warnings": list(trace.meta.warnings),
            "source": getattr(trace.meta, "source", "kineto"),
            "fidelity": dict(getattr(trace.meta, "fidelity", {}) or {}),
        },
        "analyses": {k: (v if isinstance(v, str) else v.to_dict()) for k, v in results.items()},
        "hypotheses": [h.to_dict() for h in hypotheses],
    }


def fidelity_lines(trace: Trace) -> list[str]:
    """The format the trace was read from and, for another tool's format, what it lacks (one line each)."""
    source = getattr(trace.meta, "source", "kineto")
    fidelity = getattr(trace.meta, "fidelity", None) or {}
    if source == "kineto" and not fidelity:
        return []
    return [f"read from {source}; what this format does not provide:"] + [f"  - {k}: {v}" for k, v in fidelity.items()]


def _table_text(table: Any) -> str:
    """A breakdown table as text: per-call times and totals in adaptive units, each header saying which
    (``workbench.units.format_table``), kernel and op names as every view shows them."""
    return format_table(table, names=unique_labels)


def _as_text(
    trace: Trace,
    results: dict[str, AnalysisResult | str],
    hypotheses: list[Hypothesis],
    top: int,
    warned: list[str],
) -> str:
    lines = [trace.summary() + (f"; {len(warned)} more from loading, below" if warned else "")]
    lines += [f"warning: {w}" for w in warned]
    lines += fidelity_lines(trace)
    for name, result in results.items():
        lines += ["", f"== {name.replace('_', ' ')} =="]
        if isinstance(result, str):
            lines.append(result)
            continue
        table = result.table
        lines.append(_table_text(table.head(top)) if len(table) else "(no rows)")
        if len(table) > top:
            lines.append(f"... {len(table) - top} more row(s); --top N shows more")
    lines += _attribution_text(trace)
    lines += ["", "== hypotheses (ranked) =="]
    lines.append(render.text(HypothesisList(hypotheses), limit=top) or "(no hypothesis has evidence)")
    return "\n".join(lines)


def _attribution_text(trace: Trace) -> list[str]:
    """Time by nn.Module and by source line (``workbench.render``), where the trace recorded the
    Python events they need; [] otherwise, and for rank files read by workers (per-rank summaries
    hold no Python events: analyze one rank's file for its attribution)."""
    if trace.rank_folder is not None and not trace.rank_folder.read_all:
        return []
    try:
        result = Attribution(trace.module_breakdown(), trace.source_breakdown())
    except WorkbenchError:  # a format without Python events (workbench.trace.fidelity): said in the header
        return []
    return ["", "== time by module and source line ==", render.text(result)] if result.recorded else []
