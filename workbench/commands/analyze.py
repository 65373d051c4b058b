"""``workbench analyze TRACE``: load a saved trace, print its breakdowns and the diagnosis."""
from __future__ import annotations

import argparse
import importlib
import json
import warnings
from typing import Any

ANALYSES = ("op_breakdown", "kernel_breakdown", "temporal_breakdown", "idle_breakdown", "launch_stats",
            "comm_overlap", "copy_stats", "sync_audit", "stragglers", "step_breakdown")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "analyze", help="print the breakdowns and ranked hypotheses of a saved trace",
        description="Load a Kineto/Chrome trace (.json, .json.gz, a folder of rank files) and print "
                    "its breakdowns as text tables, then the ranked hypotheses.")
    p.add_argument("trace", nargs="+", help="trace file(s) or a folder of per-rank trace files")
    p.add_argument("--rank", type=int, default=None, help="analyse only this rank (default: all ranks)")
    p.add_argument("--top", type=int, default=10, help="rows shown per table (default: 10)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text tables")
    p.add_argument("--hta-compat", action="store_true",
                   help="count as Holistic Trace Analysis 0.5 does (sub-µs rounding, last "
                        "ProfilerStep dropped, nccl*Kernel-only communication) to hold numbers against it")
    p.add_argument("--charts", metavar="DIR", default=None,
                   help="also write the trace's charts (top ops/kernels, idle, roofline, timeline) to DIR")
    p.add_argument("--chart-format", default="svg", metavar="FMT",
                   help="comma-separated chart formats for --charts: svg, png, html, json (default: svg)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from workbench.errors import InvalidArgumentError
    from workbench.trace import load_trace

    if args.top <= 0:
        raise InvalidArgumentError(f"--top must be a positive number of rows, got {args.top}")
    source = args.trace[0] if len(args.trace) == 1 else args.trace
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trace = load_trace(source)
    if args.rank is not None:
        trace = trace.rank(args.rank)
    results = _analyses(trace, "hta" if args.hta_compat else None)
    hypotheses = _hypotheses(trace)
    if args.json:
        print(json.dumps(_as_json(trace, results, hypotheses), default=str, indent=1))
    else:
        print(_as_text(trace, results, hypotheses, args.top, [str(w.message) for w in caught]))
    if args.charts:
        _write_charts(trace, args.charts, args.chart_format, quiet=args.json)
    return 0


def _write_charts(trace: Any, folder: str, chart_format: str, *, quiet: bool) -> None:
    import sys

    from workbench.charts.export import save_charts

    paths = save_charts(trace, folder, formats=[f.strip() for f in chart_format.split(",") if f.strip()])
    if not quiet:
        print(f"\nwrote {len(paths)} chart file(s) to {folder}")
    else:
        print(f"wrote {len(paths)} chart file(s) to {folder}", file=sys.stderr)


def _analyses(trace: Any, semantics: str | None) -> dict[str, Any]:
    """Each analysis that exists in this installation: its result, or why it could not run."""
    try:
        module = importlib.import_module("workbench.analysis")
    except ModuleNotFoundError:
        return {}
    from workbench.errors import WorkbenchError

    out: dict[str, Any] = {}
    for name in ANALYSES:
        fn = getattr(module, name, None)
        if fn is None:
            continue
        try:
            out[name] = fn(trace, semantics=semantics) if semantics else fn(trace)
        except WorkbenchError as exc:
            out[name] = f"not available: {exc}"
    return out


def _hypotheses(trace: Any) -> Any:
    try:
        module = importlib.import_module("workbench.hypotheses")
    except ModuleNotFoundError:
        return None
    return module.diagnose_trace(trace) if hasattr(module, "diagnose_trace") else None


def _as_json(trace: Any, results: dict[str, Any], hypotheses: Any) -> dict:
    return {
        "trace": {"summary": trace.summary(), "files": list(trace.meta.files), "ranks": trace.ranks,
                  "warnings": list(trace.meta.warnings)},
        "analyses": {k: (v if isinstance(v, str) else v.to_dict()) for k, v in results.items()},
        "hypotheses": None if hypotheses is None else [h.to_dict() for h in hypotheses],
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


def _as_text(trace: Any, results: dict[str, Any], hypotheses: Any, top: int, warned: list[str]) -> str:
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
    if hypotheses is not None:
        lines += ["", "== hypotheses (ranked) =="]
        lines.append(_render_hypotheses(hypotheses, top))
    return "\n".join(lines)


def _render_hypotheses(hypotheses: Any, top: int) -> str:
    try:
        from workbench.hypotheses.render import render_text
    except ImportError:
        return "\n".join(f"{i + 1}. {h.title}" for i, h in enumerate(list(hypotheses)[:top])) or "(none)"
    return render_text(hypotheses, limit=top) or "(no hypothesis has evidence)"
