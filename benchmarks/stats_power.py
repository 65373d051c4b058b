"""Statistical power of ``wb.compare`` on CPU workloads.

Two experiments, each ``--trials`` comparisons through the full pipeline (correctness, then
interleaved timing with the paired speedup interval):

* identical: two copies of the same function; "called different" when the speedup's 95%
  interval excludes 1.  Goal: at most 5% of trials.
* slowdown: the candidate does 10% more of the same work; "detected" when the interval lies
  wholly below 1.  Goal: at least 90% of trials.

Each comparison is also timed (goal: within about 10 s).  Prints both rates, the median
measured ratio, the comparison times, how often the rounds were extended and the smallest effect
the comparisons could have seen.  ``--busy 1`` starts one process that keeps a core busy for the
whole run (and stops it at the end): the "under load" condition.   Usage:
    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/stats_power.py [--trials 40] [--budget 3.0] [--busy 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402

import workbench as wb  # noqa: E402

N = 200_000  # elements the baseline processes


def work(x: torch.Tensor) -> torch.Tensor:
    return (x.sin() * 2 + 1).relu().sqrt()


def baseline(x: torch.Tensor) -> torch.Tensor:
    return work(x[:N])


def twin(x: torch.Tensor) -> torch.Tensor:  # the same computation, another function object
    return work(x[:N])


def ten_percent_slower(x: torch.Tensor) -> torch.Tensor:
    return work(x)[:N]  # x has 1.1 N elements: 10% more work


def make_inputs() -> tuple[torch.Tensor]:
    return (torch.randn(int(N * 1.1)),)


def trial(candidate, budget_s: float, seed: int):
    start = time.perf_counter()
    cmp = wb.compare(
        {"eager": baseline, "candidate": candidate},
        inputs=make_inputs,
        checks=1,
        budget_s=budget_s,
        min_rounds=15,
        profile=False,
        seed=seed,
    )
    row = cmp["candidate"]
    if row.speedup is None:
        print(f"  trial {seed}: candidate not timed ({row.status}: {row.reason}; {row.flags})", flush=True)
    EXTENDED.append(bool(cmp.settings["timing"]["extensions"]))
    return row.speedup, time.perf_counter() - start


EXTENDED: list[bool] = []


def experiment(candidate, trials: int, budget_s: float):
    speedups, seconds = [], []
    for i in range(trials):
        s, sec = trial(candidate, budget_s, seed=i)
        speedups.append(s)
        seconds.append(sec)
    return speedups, seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument(
        "--budget", type=float, default=3.0, help="timing seconds per comparison (extended up to 3x while undecided)"
    )
    ap.add_argument("--busy", type=int, default=0, help="processes that keep a core busy during the run")
    args = ap.parse_args()
    torch.set_num_threads(1)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    try:
        print(
            f"load: {args.busy} busy process(es); os.getloadavg() {os.getloadavg()} on {os.cpu_count()} cores",
            flush=True,
        )
        same, same_s = experiment(twin, args.trials, args.budget)
        slow, slow_s = experiment(ten_percent_slower, args.trials, args.budget)
    finally:
        for p in busy:
            p.kill()
            p.wait()
    untimed = sum(s is None for s in same + slow)
    same = [s for s in same if s is not None]
    slow = [s for s in slow if s is not None]
    if untimed:
        print(f"{untimed} trial(s) not timed (see above); rates are over the timed ones")
    false_pos = sum(s.significant for s in same) / len(same)
    for s in same:
        if s.significant:
            print(
                f"  identical called different: x{s.point:.4f} (CI {s.ci_low:.4f}-{s.ci_high:.4f}, {s.n_pairs} rounds)"
            )
    power = sum(s.slower for s in slow) / len(slow)
    print(
        f"identical variants: called different in {false_pos:.1%} of {len(same)} trials (goal <= 5%); "
        f"median speedup {statistics.median(s.point for s in same):.3f}"
    )
    print(
        f"10% slowdown: detected in {power:.1%} of {len(slow)} trials (goal >= 90%); "
        f"median measured ratio {statistics.median(1 / s.point for s in slow):.3f}"
    )
    all_s = same_s + slow_s
    print(f"seconds per comparison: median {statistics.median(all_s):.2f}, max {max(all_s):.2f} (goal ~10)")
    print(
        f"median rounds per comparison: {statistics.median(s.n_pairs for s in same + slow):.0f}; "
        f"rounds extended in {sum(EXTENDED)} of {len(EXTENDED)} comparisons"
    )
    print(
        f"smallest detectable change (80% power), median over the identical pairs: "
        f"{statistics.median(s.min_detectable for s in same):.1%}"
    )


if __name__ == "__main__":
    main()
