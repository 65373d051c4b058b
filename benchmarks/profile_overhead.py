"""What does wb.profile add over timing or profiling by hand?

Two comparisons, each interleaved in rounds (A, B, B, A, ...) so drift hits both sides alike:

1. ``wb.profile(fn, trace=False)`` against a bare ``perf_counter_ns`` loop over the same
   function: medians of the per-call samples (goal: within 3%).
2. ``wb.profile(fn, trace=True)`` against torch.profiler used directly (same activities,
   record_shapes and profile_memory on, one ``ProfilerStep#i`` annotation per call, trace
   exported): per-call medians (goal: within 10%), and the wall time of the whole call, where
   wb.profile also parses the trace into tables.

Run:  .venv/bin/python benchmarks/profile_overhead.py [--rounds 15] [--repeat 50]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

import workbench as wb  # noqa: E402


def make_workload():
    torch.manual_seed(0)
    w1, w2, w3 = (torch.randn(256, 256) for _ in range(3))
    x = torch.randn(64, 256)

    def mlp():
        return ((x @ w1).relu() @ w2).relu() @ w3
    return mlp


def bare_loop_ms(fn, warmup: int, repeat: int) -> list[float]:
    fn()
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - start) / 1e6)
    return samples


def direct_profiler_ms(fn, warmup: int, repeat: int, folder: str) -> tuple[list[float], float]:
    wall = time.perf_counter_ns()
    fn()
    for _ in range(warmup):
        fn()
    samples = []
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                record_shapes=True, profile_memory=True) as prof:
        for i in range(repeat):
            with torch.profiler.record_function(f"ProfilerStep#{i}"):
                start = time.perf_counter_ns()
                fn()
                samples.append((time.perf_counter_ns() - start) / 1e6)
    prof.export_chrome_trace(os.path.join(folder, "trace.json.gz"))
    return samples, (time.perf_counter_ns() - wall) / 1e6


def wb_profile_ms(fn, warmup: int, repeat: int, trace: bool) -> tuple[list[float], float]:
    wall = time.perf_counter_ns()
    run = wb.profile(fn, warmup=warmup, repeat=repeat, trace=trace)
    return list(run.timing.samples_ms), (time.perf_counter_ns() - wall) / 1e6


def interleave(rounds: int, side_a, side_b) -> tuple[list[float], list[float], list[float], list[float]]:
    """Per-round medians and wall times of both sides, order alternating each round."""
    med_a, med_b, wall_a, wall_b = [], [], [], []
    for r in range(rounds):
        order = [(side_a, med_a, wall_a), (side_b, med_b, wall_b)]
        for side, meds, walls in (order if r % 2 == 0 else order[::-1]):
            samples, wall = side()
            meds.append(statistics.median(samples))
            walls.append(wall)
    return med_a, med_b, wall_a, wall_b


def report(title: str, name_a: str, a: list[float], name_b: str, b: list[float], goal: float | None) -> None:
    ma, mb = statistics.median(a), statistics.median(b)
    ratio = mb / ma
    verdict = "" if goal is None else (f"  (goal within {goal:.0%}: "
                                       f"{'met' if abs(ratio - 1) <= goal else 'NOT met'})")
    print(f"{title}\n  {name_a:<28} median {ma:9.4f} ms\n  {name_b:<28} median {mb:9.4f} ms\n"
          f"  ratio {name_b} / {name_a} = {ratio:.3f}{verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    fn = make_workload()
    wb.profile(fn, warmup=1, repeat=2)  # one-time costs (profiler init, trace reader import)
    print(f"workload: 3-layer MLP 64x256, {args.rounds} rounds x {args.repeat} timed calls, "
          f"{torch.get_num_threads()} thread(s), torch {torch.__version__}")

    def bare():
        return bare_loop_ms(fn, args.warmup, args.repeat), 0.0
    a, b, _, _ = interleave(args.rounds, bare, lambda: wb_profile_ms(fn, args.warmup, args.repeat, False))
    report("1. timing only (per-call median of each round, then median over rounds)",
           "bare perf_counter_ns loop", a, "wb.profile(trace=False)", b, 0.03)

    with tempfile.TemporaryDirectory() as folder:
        c, d, wall_c, wall_d = interleave(
            args.rounds, lambda: direct_profiler_ms(fn, args.warmup, args.repeat, folder),
            lambda: wb_profile_ms(fn, args.warmup, args.repeat, True))
    report("2. traced (per-call median under the profiler)",
           "torch.profiler directly", c, "wb.profile(trace=True)", d, 0.10)
    report("   whole call wall time (wb.profile also parses the trace into tables)",
           "torch.profiler + export", wall_c, "wb.profile(trace=True)", wall_d, None)


if __name__ == "__main__":
    main()
