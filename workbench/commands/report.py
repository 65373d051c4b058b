"""``workbench report``: profile a workload (the demo by default) and publish an offline HTML report."""
from __future__ import annotations

import argparse
import math
import os
from typing import Any

from workbench.report.workload import DEFAULT_WORKLOAD

EXIT_REGRESSION = 1

DESCRIPTION = """\
Profile a workload, execute a report template notebook with papermill and render it to one
HTML file that needs no network (timing, top ops, charts, hypotheses, environment).

With no arguments it profiles the built-in demo workload (workbench.demo:workload) and writes
reports/report-<time>/: run/ (the run bundle), experiments.json (the suggested variants compared
with the workload, and the decision), report.ipynb, report.html and summary.json.
"""

EPILOG = """\
examples:
  workbench report --out reports/demo
  workbench report --workload mypkg.bench:step --repeat 50
  workbench report --bundle reports/demo/run --out reports/again
  workbench report --out reports/new --compare-to reports/main --fail-on-regression 5

exit status: 0 written; 1 median regressed beyond --fail-on-regression; 2 bad input
(missing bundle, unknown workload, bad template).
"""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("report", help="profile a workload and render an offline HTML report",
                              description=DESCRIPTION, epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", metavar="DIR", help="folder to write the report into "
                   "(default: reports/report-<UTC time>)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--workload", metavar="MODULE:FUNCTION", default=DEFAULT_WORKLOAD,
                     help="the callable to profile (default: %(default)s); it is called with "
                          "*MODULE.make_inputs() when the module defines make_inputs and the function "
                          "takes arguments, else with none")
    src.add_argument("--bundle", metavar="PATH", help="report on a saved run bundle (a folder written by "
                     "ProfileRun.save or an earlier report's run/) instead of profiling")
    p.add_argument("--template", metavar="NOTEBOOK", help="parameterised template notebook "
                   "(default: templates/report.ipynb; it receives the parameters bundle and title)")
    p.add_argument("--repeat", type=int, default=20, help="timed calls (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=3, help="untimed calls before timing (default: %(default)s)")
    p.add_argument("--title", help="report title (default: 'workbench report: <workload>')")
    p.add_argument("--compare-to", metavar="OLD_REPORT_DIR",
                   help="an earlier report folder; prints the median change against it")
    p.add_argument("--fail-on-regression", metavar="PCT", type=float, default=math.inf,
                   help="with --compare-to: exit 1 when the median is more than PCT %% slower")
    p.add_argument("--no-experiments", action="store_true",
                   help="do not compare the variants the hypotheses suggest (torch.compile, CUDA graphs) "
                        "with the workload; by default the report shows that comparison and its decision")
    p.set_defaults(handler=run)


def _default_out() -> str:
    from datetime import datetime, timezone

    return os.path.join("reports", "report-" + datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S"))


def run(args: argparse.Namespace) -> int:
    from workbench.errors import InvalidArgumentError
    from workbench.report.pipeline import build_report

    if args.repeat < 1 or args.warmup < 0:
        raise InvalidArgumentError(f"--repeat must be >= 1 and --warmup >= 0; got {args.repeat}, {args.warmup}")
    if math.isfinite(args.fail_on_regression) and not args.compare_to:
        raise InvalidArgumentError("--fail-on-regression needs --compare-to OLD_REPORT_DIR")
    result = build_report(args.out or _default_out(), workload=args.workload, bundle=args.bundle,
                          template=args.template, warmup=args.warmup, repeat=args.repeat,
                          compare_to=args.compare_to, fail_on_regression_pct=args.fail_on_regression,
                          title=args.title, experiments=not args.no_experiments)
    t = result.summary["timing"]
    print(f"median {t['median_ms']:.3f} ms (p95 {t['p95_ms']:.3f} ms, n={t['n']}, "
          f"first call {t['cold_ms']:.3f} ms)")
    print(f"report: {result.html_path}")
    if result.regression is not None:
        print(result.regression.message())
        if result.regression.regressed:
            return EXIT_REGRESSION
    return 0
