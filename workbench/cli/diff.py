"""``workbench diff A B [--out DIR]``: what changed between two profiles (``wb.diff``), as text; with --out,
also the diff as JSON, an HTML page with the waterfall, and the chart."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

from workbench.errors import InvalidArgumentError

DESCRIPTION = """\
Compare two profiles: A (before) and B (after). Each is a trace of any supported format (a Kineto
.json / .json.gz, an Nsight Systems SQLite export, a rocprofv3 JSON), recognised by content.

Both are brought to one basis first: per step when both have steps (ProfilerStep#N, or NVTX ranges
named like steps), else per run (each trace's whole window once, said so). Kernels are matched by
name, ops by their place in the call tree; each is appeared / disappeared / changed / unchanged, with
its change per step and its share of the total change. The change by kernel family (or op) is the
waterfall; the two temporal and idle breakdowns are shown side by side.
"""

EPILOG = """\
examples:
  workbench diff before.sqlite after.sqlite
  workbench diff eager.json.gz compiled.json.gz --out diff/ --top 30
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "diff",
        help="what changed between two profiles (any supported format)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("a", help="the first (before) profile: a trace file of any supported format")
    p.add_argument("b", help="the second (after) profile")
    p.add_argument(
        "--out",
        metavar="DIR",
        default=None,
        help="also write diff.json (the whole result), diff.html (tables and waterfall, offline) and "
        "waterfall.svg to DIR",
    )
    p.add_argument("--top", type=int, default=15, help="rows of the largest changes shown (default: 15)")
    p.add_argument("--label-a", default=None, help="name of the first side (default: its file name)")
    p.add_argument("--label-b", default=None, help="name of the second side (default: its file name)")
    p.add_argument("--json", action="store_true", help="print the diff as one JSON object instead of text")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from workbench import render
    from workbench.api.trace import diff

    if args.top <= 0:
        raise InvalidArgumentError(f"--top must be a positive number of rows, got {args.top}")
    for path in (args.a, args.b):
        if not Path(path).exists():
            raise InvalidArgumentError(f"the profile {path!r} does not exist; pass two trace files")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = diff(args.a, args.b, label_a=args.label_a, label_b=args.label_b)
    if args.json:
        print(json.dumps(result.to_dict(), default=str))
    else:
        for message in dict.fromkeys(str(w.message) for w in caught):
            print(f"warning: {message}")
        print(render.text(result, limit=args.top))
    if args.out:
        _write(result, Path(args.out), quiet=args.json)
    return 0


def _write(result, out: Path, *, quiet: bool) -> None:
    from workbench import render

    out.mkdir(parents=True, exist_ok=True)
    (out / "diff.json").write_text(json.dumps(result.to_dict(), default=str), encoding="utf-8")
    written = [out / "diff.json"]
    try:
        from workbench.charts import save
        from workbench.charts.diff import diff_waterfall_chart
        from workbench.charts.offline import bundle_script_tag

        chart = diff_waterfall_chart(result)
        save(chart, str(out / "waterfall.svg"))
        written.append(out / "waterfall.svg")
        page = (
            f"<!doctype html><html><head><meta charset='utf-8'><title>{result.label_a} vs {result.label_b}</title>"
            f"{bundle_script_tag()}</head><body>{render.html(result)}</body></html>"
        )
    except ImportError:  # no altair: the page has the tables only
        page = f"<!doctype html><html><head><meta charset='utf-8'></head><body>{render.html(result, chart=False)}</body></html>"
    (out / "diff.html").write_text(page, encoding="utf-8")
    written.append(out / "diff.html")
    print(f"\nwrote {', '.join(str(p) for p in written)}", file=sys.stderr if quiet else sys.stdout)
