"""What does wb.profile add over timing or profiling by hand?

Two comparisons, each interleaved in rounds (A, B, B, A, ...) so drift hits both sides alike, on
a CPU workload (a 3-layer MLP; ``device="cpu"`` on both sides, CPU activity only). wb.profile runs
with ``history=False`` (no history file written, no change-point search timed).

1. Timing only: ``wb.profile(fn, trace=False)`` against a bare ``perf_counter_ns`` loop over
   the same function, the same cold call, warm-up and repeats: medians of the per-call samples
   (goal: within 3%). wb.profile takes the thread's run-queue wait out of each CPU sample, so it
   may read slightly lower on a loaded machine.
2. Traced: ``wb.profile(fn, trace=True)`` against the same work done by hand. The by-hand side
   does what wb.profile does: a cold call, the warm-up, the clean timed loop (no profiler), then
   a separate traced pass of ``--trace-repeat`` calls under ``torch.profiler.profile`` with
   **the traced pass's own options** (``workbench.capture.profiler_session``: its activities,
   ``record_shapes`` and ``profile_memory`` on, ``with_stack`` and ``with_modules`` as
   ``RECORD_STACK`` says: the Python stack the attribution needs), one ``ProfilerStep#i``
   annotation per call, the trace exported to ``.json.gz``. Compared: the clean per-call medians
   (goal: within 3%), the traced per-call medians, ``run.traced_timing`` against the calls under
   the hand-run profiler (goal: within 10%: the same profiler options, so the Python tracer's cost
   is on both sides; wb.profile takes the run-queue wait out of these samples too, so on a loaded
   machine it reads lower), and the wall time of the whole call, where wb.profile also warms the profiler
   up, parses the trace into tables and builds the run.

Run:  .venv/bin/python benchmarks/profile_overhead.py [--rounds 15] [--repeat 50] [--trace-repeat 10]
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
from workbench.capture.profiler_session import RECORD_STACK, STEP_NAME, activities  # noqa: E402
from workbench.capture.quiet import captured_native_stderr  # noqa: E402

CUDA = False  # the workload runs on the CPU: CPU activity only, on both sides


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


def profiler_options() -> dict:
    """The options of wb.profile's traced pass (``ProfilerSession._profiler``), for the by-hand side."""
    return {
        "activities": activities(torch, CUDA),
        "record_shapes": True,
        "profile_memory": True,
        "with_stack": RECORD_STACK,
        "with_modules": RECORD_STACK,
    }


def by_hand_ms(fn, warmup: int, repeat: int, trace_repeat: int, folder: str) -> tuple[list[float], list[float], float]:
    """What wb.profile(trace=True) does, by hand: (clean samples, traced samples, wall ms)."""
    wall = time.perf_counter_ns()
    clean = bare_loop_ms(fn, warmup, repeat)
    traced = []
    with captured_native_stderr():  # the profiler's native start/stop lines, held as wb.profile holds them
        with torch.profiler.profile(**profiler_options()) as prof:
            for i in range(trace_repeat):
                with torch.profiler.record_function(STEP_NAME.format(i)):
                    start = time.perf_counter_ns()
                    fn()
                    traced.append((time.perf_counter_ns() - start) / 1e6)
    prof.export_chrome_trace(os.path.join(folder, "trace.json.gz"))
    return clean, traced, (time.perf_counter_ns() - wall) / 1e6


def wb_profile_ms(
    fn, warmup: int, repeat: int, trace: bool, trace_repeat: int | None = None
) -> tuple[list[float], list[float], float]:
    """wb.profile: (clean samples, traced-pass samples or [], wall ms)."""
    wall = time.perf_counter_ns()
    run = wb.profile(
        fn, warmup=warmup, repeat=repeat, trace=trace, trace_repeat=trace_repeat, device="cpu", history=False
    )
    wall_ms = (time.perf_counter_ns() - wall) / 1e6
    if trace and run.traced_timing is None:
        raise SystemExit(f"wb.profile recorded no traced pass: {run.trace_note}")
    traced = list(run.traced_timing.samples_ms) if run.traced_timing is not None else []
    return list(run.timing.samples_ms), traced, wall_ms


def interleave(rounds: int, side_a, side_b) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Per round, each side's clean median, traced median (where it traced) and wall time, the
    order alternating each round. A side returns (clean samples, traced samples, wall ms)."""
    a: dict[str, list[float]] = {"clean": [], "traced": [], "wall": []}
    b: dict[str, list[float]] = {"clean": [], "traced": [], "wall": []}
    for r in range(rounds):
        order = [(side_a, a), (side_b, b)]
        for side, out in order if r % 2 == 0 else order[::-1]:
            clean, traced, wall = side()
            out["clean"].append(statistics.median(clean))
            if traced:
                out["traced"].append(statistics.median(traced))
            out["wall"].append(wall)
    return a, b


def report(title: str, name_a: str, a: list[float], name_b: str, b: list[float], goal: float | None) -> None:
    ma, mb = statistics.median(a), statistics.median(b)
    ratio = mb / ma
    verdict = "" if goal is None else (f"  (goal within {goal:.0%}: {'met' if abs(ratio - 1) <= goal else 'NOT met'})")
    print(
        f"{title}\n  {name_a:<28} median {ma:9.4f} ms\n  {name_b:<28} median {mb:9.4f} ms\n"
        f"  ratio {name_b} / {name_a} = {ratio:.3f}{verdict}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--trace-repeat", type=int, default=10, help="calls in the traced pass (both sides)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    fn = make_workload()
    # one-time costs of the process (profiler init and its warm-up session, trace reader import)
    wb.profile(fn, warmup=1, repeat=2, trace_repeat=2, device="cpu", history=False)
    options = profiler_options()
    print(
        f"workload: 3-layer MLP 64x256, {args.rounds} rounds x {args.repeat} timed calls, "
        f"{args.trace_repeat} traced calls, {torch.get_num_threads()} thread(s), torch {torch.__version__}"
    )
    print(
        f"profiler options on both traced sides: activities {[a.name for a in options['activities']]}, "
        + ", ".join(f"{k}={v}" for k, v in options.items() if k != "activities")
    )

    def bare():
        return bare_loop_ms(fn, args.warmup, args.repeat), [], 0.0

    a, b = interleave(args.rounds, bare, lambda: wb_profile_ms(fn, args.warmup, args.repeat, False))
    report(
        "1. timing only (per-call median of each round, then median over rounds)",
        "bare perf_counter_ns loop",
        a["clean"],
        "wb.profile(trace=False)",
        b["clean"],
        0.03,
    )

    with tempfile.TemporaryDirectory() as folder:
        c, d = interleave(
            args.rounds,
            lambda: by_hand_ms(fn, args.warmup, args.repeat, args.trace_repeat, folder),
            lambda: wb_profile_ms(fn, args.warmup, args.repeat, True, args.trace_repeat),
        )
    report(
        "2. traced: clean per-call median (no profiler running on either side)",
        "by hand: perf_counter_ns loop",
        c["clean"],
        "wb.profile(trace=True)",
        d["clean"],
        0.03,
    )
    report(
        "   traced per-call median (the same profiler options on both sides)",
        "by hand: torch.profiler",
        c["traced"],
        "wb.profile traced pass",
        d["traced"],
        0.10,
    )
    report(
        "   whole call wall time (wb.profile also warms the profiler, parses the trace, builds the run)",
        "by hand: loop + profiler + export",
        c["wall"],
        "wb.profile(trace=True)",
        d["wall"],
        None,
    )


if __name__ == "__main__":
    main()
