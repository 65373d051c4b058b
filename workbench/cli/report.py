"""``workbench report``: profile a workload (the demo by default) and publish an offline HTML report."""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from workbench.report.regression import GATE_QUANTILE
from workbench.report.workload import DEFAULT_WORKLOAD, EXIT_TIME_LIMIT, EXIT_WORKLOAD_FAILED

EXIT_REGRESSION = 1
EXIT_BAD_INPUT = 2
EXIT_WORKLOAD, EXIT_TIMEOUT = EXIT_WORKLOAD_FAILED, EXIT_TIME_LIMIT  # 3, 4

DESCRIPTION = """\
Profile a workload, execute a report template notebook with papermill and render it to one
HTML file that needs no network (timing, top ops, charts, hypotheses, environment).

With no arguments it profiles the built-in demo workload (workbench.workloads.demo:workload) and writes
reports/report-<time>/: run/ (the run bundle), experiments.json (the suggested variants compared
with the workload, and the decision), report.ipynb, report.html and summary.json.

The CI gate: a report times the workload's clean calls (no profiler) in --processes fresh
interpreter processes and keeps every sample in summary.json, with the environment (CPU/GPU
model, torch version, threads). --compare-to OLD compares the two sample sets: each process is
represented by the 10th percentile of its calls (other work on the machine only adds time, so a
low quantile is what the code costs; --gate-quantile 0.5 judges medians), and the ratio new/old
gets a 95 % interval from a seeded hierarchical bootstrap (processes, then samples), widened for
few processes. REGRESSION only when the whole interval lies beyond --fail-on-regression;
INCONCLUSIVE (exit 0) when the noise is too large to tell; ok otherwise. A busy machine (a
process's threads waited for a CPU over 10 % of the time) is said with the verdict. Each verdict states the
smallest change the pair of reports could have detected. Reports from another environment are
refused unless --allow-environment-change. The earlier report is checked before anything runs.
The workload module is imported from the current folder too (no PYTHONPATH=. needed).
"""

EPILOG = """\
examples:
  workbench report --out reports/demo
  workbench report --workload mypkg.bench:step --repeat 50
  workbench report --bundle reports/demo/run --out reports/again
  workbench report --trace traces/ --out reports/cluster-job     # a folder of rank files
  workbench report --trace trace.json.gz --out reports/one-trace
  workbench report --study studies/chain --out reports/chain-study
  workbench report --out reports/new --compare-to reports/main --fail-on-regression 5
  workbench report --workload bench:step --time-limit 300 --processes 5

exit status:
  0  report written (with --compare-to: ok, or INCONCLUSIVE: too noisy to tell; not a failure)
  1  REGRESSION: the whole interval of the change lies beyond --fail-on-regression PCT
  2  bad input, found before anything ran; nothing was written or overwritten (unknown workload,
     missing or corrupt bundle, an earlier report without per-process samples or with a corrupt
     summary.json, a negative or NaN threshold, an earlier report from another environment)
  3  the workload failed: it raised, called sys.exit(), or its process died
  4  the workload ran past --time-limit and was stopped
  130  interrupted (Ctrl-C): one line says during which step, and what the output folder holds
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "report",
        help="profile a workload and render an offline HTML report",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", metavar="DIR", help="folder to write the report into (default: reports/report-<UTC time>)")
    src = p.add_mutually_exclusive_group()
    src.add_argument(
        "--workload",
        metavar="MODULE:FUNCTION",
        default=DEFAULT_WORKLOAD,
        help="the callable to profile (default: %(default)s); it is called with "
        "*MODULE.make_inputs() when the module defines make_inputs and the function "
        "takes arguments, else with none",
    )
    src.add_argument(
        "--bundle",
        metavar="PATH",
        help="report on a saved run bundle (a folder written by "
        "ProfileRun.save or an earlier report's run/) instead of profiling",
    )
    src.add_argument(
        "--trace",
        metavar="PATH",
        nargs="+",
        help="report on a saved trace instead of profiling: "
        "a trace file (.json, .json.gz, an Nsight Systems .sqlite export, a rocprofv3 JSON: judged "
        "by content), a folder of rank files, or several paths (one rank each); writes report.ipynb, report.html and summary.json (what was loaded, the "
        "hypotheses' categories) with its own template, templates/trace_report.ipynb. "
        "No timing: --compare-to is refused",
    )
    src.add_argument(
        "--study",
        metavar="FOLDER",
        help="report on an optimization study (a folder written by "
        "wb.Study) instead of profiling: its baselines in order, the bottleneck after each accepted "
        "change, every round with its summary and decision records, and the ledger; writes "
        "report.ipynb, report.html and summary.json with templates/study_report.ipynb. Nothing in "
        "the study folder is written; --compare-to is refused",
    )
    p.add_argument(
        "--template",
        metavar="NOTEBOOK",
        help="parameterised template notebook "
        "(default: templates/report.ipynb; it receives the parameters bundle and title)",
    )
    p.add_argument("--repeat", type=int, default=20, help="timed calls (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=3, help="untimed calls before timing (default: %(default)s)")
    p.add_argument("--title", help="report title (default: 'workbench report: <workload>')")
    p.add_argument(
        "--processes",
        type=int,
        default=3,
        metavar="N",
        help="fresh processes that time the workload's clean calls for the CI gate, one "
        "after another (default: %(default)s; 0: none, and the report cannot be a "
        "--compare-to baseline; --compare-to needs 2 or more)",
    )
    p.add_argument(
        "--time-limit",
        type=float,
        metavar="SECONDS",
        default=None,
        help="stop a workload that runs longer than this, per process and for the traced "
        "run (exit 4; default: no limit)",
    )
    p.add_argument(
        "--compare-to",
        metavar="OLD_REPORT_DIR",
        help="an earlier report folder (made with --processes >= 2): compare the two sample "
        "sets and print the change with its interval and the smallest detectable change",
    )
    p.add_argument(
        "--fail-on-regression",
        metavar="PCT",
        type=float,
        default=math.inf,
        help="with --compare-to: exit 1 when the whole interval of the change is more than "
        "PCT %% slower (a number >= 0)",
    )
    p.add_argument(
        "--gate-quantile",
        type=float,
        default=GATE_QUANTILE,
        metavar="Q",
        help="with --compare-to: the quantile of each process's calls the gate compares "
        "(default: %(default)s, robust to other work on the machine; 0.5: medians, which "
        "also see a slowdown of the slowest calls but move with load)",
    )
    p.add_argument(
        "--allow-environment-change",
        action="store_true",
        help="with --compare-to: compare reports from different environments (CPU/GPU model, "
        "torch version, threads...) anyway, printing the differences; refused by default",
    )
    p.add_argument(
        "--allocator",
        choices=("steady", "default"),
        default=None,
        help="malloc mode of every timed process: steady pins glibc's thresholds so the "
        "headline, the gate's processes and the experiments time the same steady state "
        "(freed buffers up to 32 MiB reused); default leaves them adaptive, as in a plain "
        "Python process, where the same code can run at two speeds (default: "
        "$WORKBENCH_ALLOCATOR, else steady)",
    )
    p.add_argument(
        "--no-experiments",
        action="store_true",
        help="do not compare the variants the hypotheses suggest (torch.compile, CUDA graphs) "
        "with the workload; by default the report shows that comparison and its decision",
    )
    p.set_defaults(handler=run)


def _default_out() -> str:
    from datetime import datetime, timezone

    return os.path.join("reports", "report-" + datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S"))


_last_phase = ["starting"]


def _phase(line: str) -> None:
    if not line.startswith("  ..."):
        _last_phase[0] = line.rstrip(".")
    print(f"workbench report: {line}", file=sys.stderr, flush=True)


def _interrupted(out: str) -> int:
    """Ctrl-C: one line saying where it stopped and what the output folder holds (nothing half-rendered is
    passed off as a report: summary.json is written last)."""
    kept = sorted(p.name for p in Path(out).iterdir()) if Path(out).is_dir() else []
    what = f"{out} holds {', '.join(kept)} (no summary.json: not a report)" if kept else f"nothing was written to {out}"
    print(f"workbench report: interrupted while {_last_phase[0]}; {what}", file=sys.stderr, flush=True)
    return 130


def run(args: argparse.Namespace) -> int:
    from workbench.report import pipeline
    from workbench.report.request import ReportRequest
    from workbench.report.workload import WorkloadError

    if getattr(args, "trace", None):
        return _run_trace(args)
    if getattr(args, "study", None):
        return _run_study(args)
    out = args.out or _default_out()
    request = ReportRequest(  # checks every option (InvalidArgumentError: exit 2) before anything runs
        out,
        workload=args.workload,
        bundle=args.bundle,
        template=args.template,
        warmup=args.warmup,
        repeat=args.repeat,
        compare_to=args.compare_to,
        fail_on_regression_pct=args.fail_on_regression,
        title=args.title,
        experiments=not args.no_experiments,
        processes=args.processes,
        time_limit_s=args.time_limit,
        allow_environment_change=args.allow_environment_change,
        gate_quantile=args.gate_quantile,
        allocator_mode=args.allocator,
    )
    try:
        result = pipeline.build_report(request, progress=_phase)
    except WorkloadError as exc:
        print(f"workbench report: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return _interrupted(out)
    t = result.summary["timing"]
    print(f"median {t['median_ms']:.3f} ms (p95 {t['p95_ms']:.3f} ms, n={t['n']}, first call {t['cold_ms']:.3f} ms)")
    samples = result.summary.get("samples")
    if samples:
        medians = ", ".join(f"{p['median_ms']:.4g}" for p in samples["processes"])
        print(f"clean samples from {len(samples['processes'])} fresh processes (medians {medians} ms)")
    agreement = (result.summary.get("experiments") or {}).get("agreement") or {}
    if agreement.get("agree") is False:
        print(f"caution: {agreement['note']}")
    print(f"report: {result.html_path}")
    if result.regression is not None:
        print(result.regression.message())
        return result.regression.exit_code
    return 0


def _run_trace(args: argparse.Namespace) -> int:
    """``--trace PATH...``: the trace report; options that only mean something for a workload are refused."""
    from workbench.errors import InvalidArgumentError
    from workbench.report.trace_report import NO_GATE, build_trace_report

    if args.compare_to:
        raise InvalidArgumentError(f"--trace cannot be used with --compare-to: {NO_GATE}")
    if math.isfinite(args.fail_on_regression) or args.allow_environment_change:
        raise InvalidArgumentError(
            "--fail-on-regression and --allow-environment-change need --compare-to, "
            "which a --trace report cannot use (there is no timing to gate)"
        )
    result = build_trace_report(
        args.out or _default_out(), args.trace, template=args.template, title=args.title, progress=_phase
    )
    s = result.summary
    print(
        f"trace: {len(s['ranks'])} rank(s), {', '.join(s['devices']) or ('GPU' if s['has_gpu'] else 'CPU only')}, "
        f"span {s['span_us'] / 1000:.3f} ms, {len(s['hypotheses'])} hypothes"
        f"{'is' if len(s['hypotheses']) == 1 else 'es'}"
        + (f" ({', '.join(s['categories'])})" if s["categories"] else "")
    )
    print(f"report: {result.html_path}")
    return 0


def _run_study(args: argparse.Namespace) -> int:
    """``--study FOLDER``: the study report; options that only mean something for a workload are refused."""
    from workbench.errors import InvalidArgumentError
    from workbench.report.study_report import build_study_report

    if args.compare_to or math.isfinite(args.fail_on_regression) or args.allow_environment_change:
        raise InvalidArgumentError(
            "--study cannot be used with --compare-to, --fail-on-regression or "
            "--allow-environment-change: a study report gates nothing (its rounds hold "
            "their own decisions)"
        )
    result = build_study_report(
        args.out or _default_out(), args.study, template=args.template, title=args.title, progress=_phase
    )
    s = result.summary
    kept = sum(1 for r in s["rounds"] for d in r["decisions"].values() if d in ("keep", "keep_guarded"))
    print(
        f"study {s['study']!r}: {len(s['baselines'])} baseline(s), {len(s['rounds'])} round(s), {kept} kept "
        f"variant(s), {len(s['ledger'])} ledger entr{'y' if len(s['ledger']) == 1 else 'ies'}"
    )
    for warning in s.get("warnings", ()):
        print(f"workbench report: warning: {warning}", file=sys.stderr)
    print(f"report: {result.html_path}")
    return 0
