"""How often the CI gate cries wolf, and how often it catches a real slowdown, on this machine.

For each of ``--pairs`` rounds it makes three "reports" of ``benchmarks/gate_workload.py:step``:
A and B of the same code, and C with an injected slowdown (``WB_GATE_SLOWDOWN=0.25``: 25 % more
of the same work), and judges B against A (A/A: any REGRESSION is a false alarm) and C against A
(a REGRESSION is a catch) with ``--fail-on-regression`` ``--threshold``. It also replays the
issue's scenario: one report, then six of identical code compared against it.

A "report" here is what the gate reads from a report: the clean samples of ``--processes`` fresh
processes (``workbench.report.sampler.sample_processes``, the very code ``workbench report``
runs), judged by ``workbench.report.regression.gate``, the function behind ``--compare-to`` (each process
represented by its 10th percentile, as ``workbench report`` does; the same samples are also judged
by medians for contrast).
The notebook execution and HTML rendering of a full report are left out (they do not touch the
samples) so that 3 x 20 reports fit in about ten minutes (17 on a 2-core machine at load average 7). B and C alternate their order each
round, so slow drift of the machine does not favour either.

    .venv/bin/python benchmarks/gate_power.py                 # 20 rounds, 3 processes, +5 % threshold
    .venv/bin/python benchmarks/gate_power.py --pairs 30 --processes 5 --save /tmp/gate.json

Goals (issue 10): A/A false alarms <= 5 %, the 25 % slowdown caught in >= 90 %.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from workbench.report.regression import GATE_QUANTILE, REGRESSION, gate  # noqa: E402
from workbench.report.sampler import sample_processes  # noqa: E402

SPEC = "gate_workload:step"


def report(slowdown: float, args: argparse.Namespace):
    os.environ["WB_GATE_SLOWDOWN"] = str(slowdown)  # read by gate_workload in each fresh process
    return sample_processes(SPEC, processes=args.processes, warmup=args.warmup, repeat=args.repeat)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", type=int, default=20)
    p.add_argument("--processes", type=int, default=3)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threshold", type=float, default=5.0, help="--fail-on-regression PCT")
    p.add_argument("--slowdown", type=float, default=0.25)
    p.add_argument(
        "--quantile",
        type=float,
        default=GATE_QUANTILE,
        help="the gate's per-process quantile (default: %(default)s, as workbench report)",
    )
    p.add_argument("--save", metavar="JSON", help="write every sample set and verdict here")
    args = p.parse_args()
    os.chdir(HERE)  # the workload module is imported from the current folder, as the CLI does
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    started = time.perf_counter()
    rounds = []
    for i in range(args.pairs):
        a = report(0.0, args)
        if i % 2 == 0:
            b, c = report(0.0, args), report(args.slowdown, args)
        else:
            c, b = report(args.slowdown, args), report(0.0, args)
        aa, ac = gate(a, b, args.threshold, quantile=args.quantile), gate(a, c, args.threshold, quantile=args.quantile)
        rounds.append((a, b, c, aa, ac))
        print(
            f"round {i + 1:2d}/{args.pairs}: A/A {aa.status:12s} {aa.change_pct:+6.1f} % "
            f"[{100 * (aa.ratio_low - 1):+.1f}, {100 * (aa.ratio_high - 1):+.1f}]   "
            f"+{100 * args.slowdown:g} %: {ac.status:12s} {ac.change_pct:+6.1f} % "
            f"[{100 * (ac.ratio_low - 1):+.1f}, {100 * (ac.ratio_high - 1):+.1f}]   "
            f"flagged above +{aa.flagged_above_pct:.1f} %",
            flush=True,
        )
    n = len(rounds)
    false_alarms = sum(r[3].status == REGRESSION for r in rounds)
    caught = sum(r[4].status == REGRESSION for r in rounds)
    inconclusive_aa = sum(r[3].status == "inconclusive" for r in rounds)
    inconclusive_ac = sum(r[4].status == "inconclusive" for r in rounds)
    detectable = statistics.median(v.detectable_pct for r in rounds for v in r[3:])
    flagged = statistics.median(v.flagged_above_pct for r in rounds for v in r[3:])
    spread = statistics.median(s.spread_pct for r in rounds for s in r[:3])
    base = rounds[0][0]
    six = [gate(base, r[1], args.threshold, quantile=args.quantile).status for r in rounds[:6]]
    by_median = [
        (gate(r[0], r[1], args.threshold, quantile=0.5).status, gate(r[0], r[2], args.threshold, quantile=0.5).status)
        for r in rounds
    ]
    waits = [w for r in rounds for s in r[:3] for w in s.cpu_wait_pct if w == w]
    print(
        f"\n{n} rounds x 3 reports x {args.processes} processes ({args.repeat} timed calls each), "
        f"threshold +{args.threshold:g} %, {time.perf_counter() - started:.0f} s"
    )
    print(
        f"median of a report: {base.center_ms:.3f} ms; between-process spread of the medians {spread:.1f} % "
        "(median over reports)"
    )
    print(
        f"A/A false alarms:          {false_alarms}/{n} = {100 * false_alarms / n:.0f} % (goal <= 5 %); "
        f"inconclusive {inconclusive_aa}/{n}"
    )
    print(
        f"+{100 * args.slowdown:g} % slowdown caught:    {caught}/{n} = {100 * caught / n:.0f} % "
        f"(goal >= 90 %); inconclusive {inconclusive_ac}/{n}"
    )
    print(
        f"minimum detectable effect: +{detectable:.1f} % (median interval half-width); with the "
        f"+{args.threshold:g} % threshold a slowdown is flagged above +{flagged:.1f} % (median)"
    )
    print(f"one report, six identical ones against it: {six.count(REGRESSION)} REGRESSION ({', '.join(six)})")
    print(
        f"the same samples judged by medians (--gate-quantile 0.5): A/A false alarms "
        f"{sum(x[0] == REGRESSION for x in by_median)}/{n}, slowdown caught {sum(x[1] == REGRESSION for x in by_median)}/{n}"
    )
    if waits:
        print(
            f"machine load: processes waited for a CPU {statistics.median(waits):.0f} % of their time (median), "
            f"up to {max(waits):.0f} %; load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
        )
    if args.save:
        Path(args.save).write_text(
            json.dumps(
                {
                    "threshold_pct": args.threshold,
                    "slowdown": args.slowdown,
                    "rounds": [
                        {"a": a.to_dict(), "b": b.to_dict(), "c": c.to_dict(), "aa": aa.to_dict(), "ac": ac.to_dict()}
                        for a, b, c, aa, ac in rounds
                    ],
                },
                indent=1,
            )
        )
        print(f"saved: {args.save}")
    return 0 if false_alarms <= 0.05 * n and caught >= 0.9 * n else 1


if __name__ == "__main__":
    sys.exit(main())
