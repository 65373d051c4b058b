"""``workbench analyze TRACE``: load a saved trace, print its breakdowns and the diagnosis."""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Callable
from typing import Any

from workbench.analysis.result import AnalysisResult
from workbench.errors import InvalidArgumentError, WorkbenchError
from workbench.facade import Trace, load_trace
from workbench.hypotheses import Hypothesis, render_text

# the analyses printed, in order: name -> the Trace method that runs it
ANALYSES: dict[str, Callable[[Trace, str], AnalysisResult]] = {
    "op_breakdown": Trace.op_breakdown, "kernel_breakdown": Trace.kernel_breakdown,
    "temporal_breakdown": Trace.temporal_breakdown, "idle_breakdown": Trace.idle_breakdown,
    "launch_stats": Trace.launch_stats, "comm_overlap": Trace.comm_overlap, "copy_stats": Trace.copy_stats,
    "sync_audit": Trace.sync_audit, "stragglers": Trace.stragglers, "step_breakdown": Trace.step_breakdown,
}


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "analyze", help="print the breakdowns and ranked hypotheses of a saved trace",
        description="Load a Kineto/Chrome trace (.json, .json.gz, a folder of rank files) and print "
                    "its breakdowns as text tables, then the ranked hypotheses.")
    p.add_argument("trace", nargs="+", help="trace file(s) or a folder of per-rank trace files")
    p.add_argument("--rank", type=int, default=None, help="analyse only this rank (default: all ranks)")
    p.add_argument("--top", type=int, default=10, help="rows shown per table (default: 10)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text tables")
    p.add_argument("--no-cache", action="store_true",
                   help="decode the trace files even if the columnar cache holds their tables (the cache is in "
                        "$WORKBENCH_CACHE_DIR, else ~/.cache/workbench; entries of changed files are never used)")
    p.add_argument("--hta-compat", action="store_true",
                   help="count as Holistic Trace Analysis 0.5 does (sub-µs rounding, last "
                        "ProfilerStep dropped, nccl*Kernel-only communication) to hold numbers against it")
    p.add_argument("--charts", metavar="DIR", default=None,
                   help="also write the trace's charts (top ops/kernels, idle, roofline, timeline) to DIR")
    p.add_argument("--chart-format", default="svg", metavar="FMT",
                   help="comma-separated chart formats for --charts: svg, png, html, json (default: svg)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.top <= 0:
        raise InvalidArgumentError(f"--top must be a positive number of rows, got {args.top}")
    source = args.trace[0] if len(args.trace) == 1 else args.trace
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trace = load_trace(source, cache=not getattr(args, "no_cache", False))
    if args.rank is not None:
        trace = trace.rank(args.rank)
    results = _analyses(trace, "hta" if args.hta_compat else "workbench")
    hypotheses = trace.hypotheses()
    if args.json:
        print(json.dumps(_as_json(trace, results, hypotheses), default=str, indent=1))
    else:
        print(_as_text(trace, results, hypotheses, args.top, [str(w.message) for w in caught]))
    if args.charts:
        _write_charts(trace, args.charts, args.chart_format, quiet=args.json)
    return 0


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
        except WorkbenchError as exc:
            out[name] = f"not available: {exc}"
    return out


def _as_json(trace: Trace, results: dict[str, AnalysisResult | str], hypotheses: list[Hypothesis]) -> dict:
    return {
        "trace": {"summary": trace.summary(), "files": list(trace.meta.files), "ranks": trace.ranks,
                  "warnings": list(trace.meta.warnings)},
        "analyses": {k: (v if isinstance(v, str) else v.to_dict()) for k, v in results.items()},
        "hypotheses": [h.to_dict() for h in hypotheses],
    }


MAX_TEXT_CELL = 72   # characters of a kernel name shown in a text table (C++ template names run to 1,000+)


def _table_text(table: Any) -> str:
    """A text table whose long string cells (kernel signatures) are cut with an ellipsis."""
    def cut(value: Any) -> Any:
        return value if not isinstance(value, str) or len(value) <= MAX_TEXT_CELL \
            else value[:MAX_TEXT_CELL - 1] + "…"
    shown = table.copy()
    for column in shown.columns:
        if shown[column].dtype == object or str(shown[column].dtype) in ("string", "category", "str"):
            shown[column] = shown[column].map(cut)
    return shown.to_string(index=False)


def _as_text(trace: Trace, results: dict[str, AnalysisResult | str], hypotheses: list[Hypothesis], top: int,
             warned: list[str]) -> str:
    lines = [trace.summary()]
    lines += [f"warning: {w}" for w in warned]
    for name, result in results.items():
        lines += ["", f"== {name.replace('_', ' ')} =="]
        if isinstance(result, str):
            lines.append(result)
            continue
        table = result.table
        lines.append(_table_text(table.head(top)) if len(table) else "(no rows)")
        if len(table) > top:
            lines.append(f"... {len(table) - top} more row(s); --top N shows more")
    lines += ["", "== hypotheses (ranked) =="]
    lines.append(render_text(hypotheses, limit=top) or "(no hypothesis has evidence)")
    return "\n".join(lines)
